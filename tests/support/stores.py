"""A store on a real database for tests, with the hooks a test sets as its story goes; steps as Chainlit sends them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from chainlit.context import init_http_context
from chainlit.user import PersistedUser, User
from sqlalchemy.engine import Engine

from app.history.store import Caller, ChatStore, Route
from app.history.writes import Journal

TIMEOUT_S = 15.0


@dataclass
class Hooks:
    """What a store asks its app, as a test sets it: who writes, what a new chat starts with, what writes wait for."""

    actor: Caller = Route.CHECKED  # Chainlit's REST routes, which check the chat's owner themselves
    new_chat_metadata: dict[str, Any] = field(default_factory=dict)
    before_batch: Callable[[], Awaitable[None]] | None = None
    failures: list[str] = field(default_factory=list)

    def store(self, engine: Engine, timeout_s: float = TIMEOUT_S, journal: Journal | None = None) -> ChatStore:
        """A store built with these hooks, read each time the store asks (and the journal given, if any)."""
        return ChatStore(
            engine,
            open_registration=True,
            timeout_s=timeout_s,
            actor=lambda: self.actor,
            new_chat_metadata=lambda: dict(self.new_chat_metadata),
            on_write_failure=self.report,
            before_batch=self.wait,
            journal=journal,
        )

    async def report(self, what: str) -> None:
        """A write the store could not make."""
        self.failures.append(what)

    async def wait(self) -> None:
        """What the writer waits for before a batch, if the test set anything."""
        if self.before_batch is not None:
            await self.before_batch()


def step(step_id: str, thread_id: str, kind: str, text: str, at: int, **meta: object) -> Any:
    """A step as Chainlit sends it."""
    return {
        "id": step_id,
        "threadId": thread_id,
        "type": kind,
        "name": kind,
        "output": text,
        "createdAt": f"2026-01-01T00:00:{at:02d}.000001Z",
        "metadata": meta,
        "streaming": False,
        "language": None,
    }


async def user_with_chat(store: ChatStore, identifier: str, *, name: str) -> PersistedUser:
    """A user and their chat "t1", named as Chainlit's first message names it."""
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    user = await store.create_user(User(identifier=identifier))
    assert user is not None
    await store.update_thread("t1", name=name, user_id=user.id)
    return user
