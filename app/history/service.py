"""History and login wired into Chainlit: the data layer, the login callbacks, ownership, notices."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import chainlit as cl
from chainlit.step import StepDict
from chainlit.types import ThreadDict

from app import chainlit_seam as seam
from app.answering import Answering
from app.config import Settings
from app.errors import HistoryUnavailable
from app.history.accounts import LOCAL_USER, Login, auth_secret, startup_login, verify_password
from app.history.database import create_engine, database_url
from app.history.logins import Logins
from app.history.sessions import SessionGate, Sessions, logout_ends_session, no_token_renewal, throttled_login
from app.history.store import Actor, ChatStore
from app.history.transcript import PREFERENCES_KEY
from app.history.usage import Usage
from app.shares import Shares

logger = logging.getLogger(__name__)
# One notice per chat while writes keep failing: a notice per message would bury the answers.
NOTICE_INTERVAL_S = 60.0
# The longest the history's writes wait for the app's answers to be written: they land when none is, or at
# least this often (a commit's thread competes with the event loop for the app's core, and commits that come
# in a batch cost less than one per answer).
ANSWERS_FIRST_S = 0.3


@dataclass
class History:
    """The store (None with history off), which chats were told of failures, and writes nobody waits for."""

    store: ChatStore | None
    notice: Callable[[], str] = str
    noticed: dict[str, float] = field(default_factory=dict)
    unawaited: set[asyncio.Task[None]] = field(default_factory=set)
    # Login sessions the server ends (None with history off: nobody logs in).
    sessions: Sessions | None = None

    async def notify_write_failure(self, _what: str) -> None:
        """Tell the chat whose message could not be saved, at most once a minute (not persisted)."""
        session = seam.websocket_session()
        if session is None:  # a REST call (rename, delete): its caller gets the error
            return
        now = time.monotonic()
        if now - self.noticed.get(session.id, -NOTICE_INTERVAL_S) < NOTICE_INTERVAL_S:
            return
        self.noticed = {sid: at for sid, at in self.noticed.items() if now - at < NOTICE_INTERVAL_S}
        self.noticed[session.id] = now
        await seam.send_unstored(cl.ErrorMessage(content=self.notice()).to_dict())

    async def save_preferences(self, preferences: dict[str, Any]) -> None:
        """Keep the chat's settings with it (Chainlit itself saves them only on disconnect)."""
        session = seam.websocket_session()
        if self.store is not None and session is not None and session.has_first_interaction:
            with contextlib.suppress(HistoryUnavailable):  # logged and announced by the store
                await self.store.update_thread(session.thread_id, metadata={PREFERENCES_KEY: preferences})

    def new_chat_metadata(self) -> dict[str, Any]:
        """What a chat is created with at its first message: this session's settings so far."""
        session = seam.websocket_session()  # None: a REST call (rename) creates no chat
        if session is not None and session.chat_settings:
            return {PREFERENCES_KEY: dict(session.chat_settings)}
        return {}

    def name_chat(self, name: str) -> None:
        """Name this session's chat in a task started after Chainlit's own naming task: this name is kept."""
        if self.store is not None:
            self.unawaited_write(name_thread(self.store, seam.thread_id(), name))

    def keep_shown(self, shown: dict[str, str]) -> None:
        """save_shown in a task, for an answer being written: it never waits for the database (its writes do)."""
        self.unawaited_write(self.save_shown(dict(shown)))

    def unawaited_write(self, write: Coroutine[Any, Any, None]) -> None:
        """Run a write in a task of its own (its failure is logged and announced by the store)."""
        task = asyncio.create_task(write)
        self.unawaited.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self.unawaited.discard)

    async def save_shown(self, shown: dict[str, str]) -> None:
        """Keep which version of a message this session's chat shows where it is not the newest."""
        session = seam.websocket_session()
        if self.store is not None and session is not None and session.has_first_interaction:
            with contextlib.suppress(HistoryUnavailable):  # logged and announced by the store
                await self.store.save_shown(session.thread_id, shown)

    async def fork(self, step_ids: list[str], preferences: dict[str, Any], name: Callable[[str], str]) -> str | None:
        """A new chat holding copies of these messages of this session's chat, with these settings; its id.

        None when this session's chat is not stored; HistoryUnavailable when it cannot be written.
        """
        session = seam.websocket_session()
        if self.store is None or session is None or not session.has_first_interaction:
            return None
        return await self.store.fork(session.thread_id, step_ids, name, {PREFERENCES_KEY: preferences})

    async def every_version(self, thread: ThreadDict) -> list[StepDict]:
        """Every version of a resumed chat's messages (only the branch given if the database fails just now)."""
        with contextlib.suppress(HistoryUnavailable):  # logged by the store; the chat opens on what it has
            if (whole := await self.thread(thread["id"])) is not None:
                return list(whole["steps"])
        return list(thread["steps"])

    async def thread(self, thread_id: str | None = None) -> dict[str, Any] | None:
        """A stored chat (this session's by default) with every version of its messages, if any.

        HistoryUnavailable when it cannot be read.
        """
        if self.store is None:
            return None
        return dict(await self.store.get_whole_thread(thread_id or seam.thread_id()) or {}) or None


def start(settings: Settings, notice: Callable[[], str], answering: Answering) -> History:
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
    store.writer.on_write_failure = history.notify_write_failure
    store.writer.before_batch = functools.partial(answering.over, ANSWERS_FIRST_S)
    store.new_chat_metadata = history.new_chat_metadata
    store.actor = tab_actor
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
            # argon2 is slow on purpose: in the store's threads.
            if await store.writer.run("check a password", verify_password, store.engine, name, password):
                return cl.User(identifier=name, metadata={"provider": "password"})
            return None

    if login is Login.PASSWORD:
        seam.refuse_unknown_users(functools.partial(still_known, store))
    history.sessions = control_logins(settings, store, login)
    return history


def fair_shares(settings: Settings, history: History) -> Shares:
    """The per-user limits; usage counted (and a quota possible) only with the history to keep it in."""
    usage = Usage(history.store.writer) if history.store is not None else None
    exempt = frozenset() if settings.limit_local_user else frozenset({LOCAL_USER})
    return Shares(settings.answers_per_user, settings.messages_per_minute, settings.daily_token_quota, usage, exempt)


def control_logins(settings: Settings, store: ChatStore, login: Login) -> Sessions:
    """Throttled password logins, and sessions ended by logout, a new password or removal; no token renewal."""
    logins = Logins(store.writer, settings.login_attempts, settings.login_window_minutes * 60)
    if login is Login.PASSWORD:
        seam.wrap_route("/login", "POST", functools.partial(throttled_login, logins))
    sessions = Sessions(logins, os.environ["CHAINLIT_AUTH_SECRET"])
    seam.add_middleware(SessionGate, sessions=sessions)
    seam.wrap_route("/logout", "POST", functools.partial(logout_ends_session, sessions))
    seam.guard_route("/auth/jwt", "POST", no_token_renewal)
    seam.set_login_lifetime(int(settings.login_hours * 3600))
    return sessions


async def name_thread(store: ChatStore, thread_id: str, name: str) -> None:
    """Rename a chat; a failure is logged and announced by the store."""
    with contextlib.suppress(HistoryUnavailable):
        await store.update_thread(thread_id, name=name)


def tab_actor() -> Actor | None:
    """The logged-in user of the tab a write is made for, and the tab's chat (None outside a tab)."""
    session = seam.websocket_session()
    if session is None or session.user is None:
        return None
    return Actor(session.user.identifier, session.thread_id)


async def still_known(store: ChatStore, user: str) -> bool:
    """Whether a login cookie's user still exists (a removed user's cookie opens no chat)."""
    try:
        return await store.get_user(user) is not None
    except HistoryUnavailable:  # the database is down: chatting goes on, unsaved
        return True
