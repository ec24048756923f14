"""History and login wired into Chainlit: the data layer, the login callbacks, ownership, notices, export."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import chainlit as cl
from chainlit.context import ChainlitContextException
from chainlit.server import UserParam, delete_feedback, sio, update_feedback
from chainlit.session import WebsocketSession
from chainlit.types import DeleteFeedbackRequest, UpdateFeedbackRequest
from fastapi import FastAPI, HTTPException, Request
from fastapi.routing import APIRoute
from starlette.responses import Response

from app.accounts import LOCAL_USER, Login, auth_secret, startup_login, verify_password
from app.config import Settings
from app.database import create_engine, database_url
from app.starting import Starting
from app.store import STORE_ERRORS, ChatStore, HistoryUnavailable
from app.transcript import PREFERENCES_KEY

logger = logging.getLogger(__name__)
# One notice per chat while writes keep failing: a notice per message would bury the answers.
NOTICE_INTERVAL_S = 60.0
# The longest the history's writes wait for the answers starting around them (under a burst of messages the
# answers get their first tokens sooner; the writes still land a moment later).
ANSWERS_FIRST_S = 0.3


@dataclass
class History:
    """The store (None with history off), which chats were told of failures, and chats being named."""

    store: ChatStore | None
    notice: Callable[[], str] = str
    noticed: dict[str, float] = field(default_factory=dict)
    naming: set[asyncio.Task[None]] = field(default_factory=set)

    async def notify_write_failure(self, _what: str) -> None:
        """Tell the chat whose message could not be saved, at most once a minute (not persisted)."""
        try:
            session = cl.context.session
        except ChainlitContextException:  # a REST call (rename, delete): its caller gets the error
            return
        if not isinstance(session, WebsocketSession):
            return
        now = time.monotonic()
        if now - self.noticed.get(session.id, -NOTICE_INTERVAL_S) < NOTICE_INTERVAL_S:
            return
        self.noticed = {sid: at for sid, at in self.noticed.items() if now - at < NOTICE_INTERVAL_S}
        self.noticed[session.id] = now
        message = cl.ErrorMessage(content=self.notice())
        await cl.context.emitter.send_step(message.to_dict())

    async def save_preferences(self, preferences: dict[str, Any]) -> None:
        """Keep the chat's settings with it (Chainlit itself saves them only on disconnect)."""
        session = cl.context.session
        if self.store is not None and session.has_first_interaction:
            with contextlib.suppress(HistoryUnavailable):  # logged and announced by the store
                await self.store.update_thread(session.thread_id, metadata={PREFERENCES_KEY: preferences})

    def new_chat_metadata(self) -> dict[str, Any]:
        """What a chat is created with at its first message: this session's settings so far."""
        with contextlib.suppress(ChainlitContextException):  # a REST call (rename) creates no chat
            session = cl.context.session
            if isinstance(session, WebsocketSession) and session.chat_settings:
                return {PREFERENCES_KEY: dict(session.chat_settings)}
        return {}

    def name_chat(self, name: str) -> None:
        """Name this session's chat in a task started after Chainlit's own naming task: this name is kept."""
        if self.store is not None:
            naming = asyncio.create_task(name_thread(self.store, cl.context.session.thread_id, name))
            self.naming.add(naming)  # the loop keeps only weak references to tasks
            naming.add_done_callback(self.naming.discard)

    async def thread(self) -> dict[str, Any] | None:
        """This session's stored chat, if any; HistoryUnavailable when it cannot be read."""
        if self.store is None:
            return None
        try:
            return dict(await self.store.get_thread(cl.context.session.thread_id) or {}) or None
        except STORE_ERRORS as error:
            logger.error("History: could not read the chat to export: %s", error)
            raise HistoryUnavailable("read the chat") from error


def start(settings: Settings, server: FastAPI, notice: Callable[[], str], starting: Starting) -> History:
    """Register the data layer and the login Chainlit will use (at import, before Chainlit starts)."""
    login = startup_login(settings)
    if login is Login.NONE:
        # Chainlit would start its own PostgreSQL layer from DATABASE_URL: no history means none.
        cl.data_layer(lambda: None)  # type: ignore[arg-type,return-value]  # Chainlit accepts None at run time
        return History(None)
    os.environ["CHAINLIT_AUTH_SECRET"] = auth_secret(settings.data_dir)
    store = ChatStore(
        create_engine(database_url(settings.database_url, settings.data_dir)),
        open_registration=login is Login.LOCAL,
        timeout_s=settings.database_timeout,
    )
    history = History(store, notice=notice)
    store.on_write_failure = history.notify_write_failure
    store.new_chat_metadata = history.new_chat_metadata
    store.before_batch = functools.partial(starting.over, ANSWERS_FIRST_S)
    cl.data_layer(lambda: store)
    if login is Login.LOCAL:

        @cl.header_auth_callback
        async def local_user(_headers: Any) -> cl.User:
            """Listening on loopback only, with no users added: whoever reaches the app is the local user."""
            return cl.User(identifier=LOCAL_USER, metadata={"provider": "local"})

    else:

        @cl.password_auth_callback
        async def password_user(name: str, password: str) -> cl.User | None:
            """A user added with `make user-add`, with their password."""
            if await store.in_worker(verify_password, store.engine, name, password):  # argon2 is slow on purpose
                return cl.User(identifier=name, metadata={"provider": "password"})
            return None

    guard_feedback(server, store)
    if login is Login.PASSWORD:
        refuse_unknown_users(store)
    return history


async def name_thread(store: ChatStore, thread_id: str, name: str) -> None:
    """Rename a chat; a failure is logged and announced by the store."""
    with contextlib.suppress(HistoryUnavailable):
        await store.update_thread(thread_id, name=name)


def refuse_unknown_users(store: ChatStore) -> None:
    """No chat for a login cookie of a user removed since (Chainlit would let them in, unsaved, or restore
    their old session)."""
    chainlit_connect = sio.handlers["/"]["connect"]

    async def connect(sid: str, environ: dict[str, Any], auth: dict[str, Any]) -> Any:
        accepted = await chainlit_connect(sid, environ, auth)
        session = WebsocketSession.get(sid)
        if session is None or session.user is None:
            return accepted
        try:
            known = await store.get_user(session.user.identifier)
        except STORE_ERRORS:  # the database is down: chatting goes on, unsaved
            return accepted
        if known is None:
            await session.delete()
            raise ConnectionRefusedError("authentication failed")
        return accepted

    sio.on("connect", connect)


def guard_feedback(server: FastAPI, store: ChatStore) -> None:
    """Thumbs up/down only on one's own chats (Chainlit's routes check no ownership of the message)."""

    async def rate(request: Request, update: UpdateFeedbackRequest, current_user: UserParam) -> Response:
        if not current_user or await store.feedback_owner(step_id=update.feedback.forId) != current_user.identifier:
            raise HTTPException(status_code=404, detail="Message not found")
        return cast(Response, await update_feedback(request, update, current_user))

    async def unrate(request: Request, payload: DeleteFeedbackRequest, current_user: UserParam) -> Response:
        if not current_user or await store.feedback_owner(feedback_id=payload.feedbackId) != current_user.identifier:
            raise HTTPException(status_code=404, detail="Feedback not found")
        return cast(Response, await delete_feedback(request, payload, current_user))

    # Matched before Chainlit's own routes for the same paths.
    server.router.routes[:0] = [
        APIRoute("/feedback", rate, methods=["PUT"]),
        APIRoute("/feedback", unrate, methods=["DELETE"]),
    ]
