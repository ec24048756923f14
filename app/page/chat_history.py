"""History and login wired into Chainlit: the data layer, the login callbacks, ownership, notices."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

import chainlit as cl
from chainlit.step import StepDict
from chainlit.types import ThreadDict

from app import metrics
from app.chat.answering import Answering
from app.chat.tab import Tab
from app.config import Settings
from app.errors import HistoryUnavailable
from app.history.accounts import Login, startup_login, verify_password
from app.history.database import create_engine, database_url
from app.history.store import Actor, Caller, ChatStore, Route
from app.history.team import Team
from app.history.transcript import PREFERENCES_KEY
from app.history.writes import DRAIN_S, Journal, Saving
from app.identity.claims import LOCAL_USER, password_name
from app.page import lifecycle, seam
from app.page.answer_controls import show_line
from app.page.data_layer import TabStore
from app.page.temporary import Temporaries

logger = logging.getLogger(__name__)
# One notice per chat while writes keep failing: a notice per message would bury the answers.
NOTICE_INTERVAL_S = 60.0
# The longest the history's writes wait for the app's answers to be written: they land when none is, or at
# least this often (a commit's thread competes with the event loop for the app's core, and commits that come
# in a batch cost less than one per answer).
ANSWERS_FIRST_S = 0.3


@dataclass
class History:
    """The store (None with history off), the login, which chats were told of failures, and writes nobody waits for."""

    store: ChatStore | None
    login: Login
    # The team's users, limits and defaults (None with history off).
    team: Team | None = None
    notice: Callable[[], str] = str
    noticed: dict[str, float] = field(default_factory=dict)
    unawaited: set[asyncio.Task[None]] = field(default_factory=set)
    # The answers being written: stopped when the app stops, so that what they showed is kept.
    answering: Answering | None = None
    # Which of this process's chats are temporary: never written.
    temporaries: Temporaries = field(default_factory=Temporaries)

    @property
    def kept(self) -> bool:
        """Whether chats are kept (messages then carry export and continue-in-a-new-chat buttons)."""
        return self.store is not None

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

    def saving_changed(self, changes: dict[str, dict[str, Saving | None]]) -> None:
        """Mark (or unmark) messages the history has not saved yet, in every tab showing their chat."""
        for session in seam.live_sessions():
            if (marks := changes.get(session.thread_id)) is not None:
                self.unawaited_write(seam.in_session(session, functools.partial(redraw_marks, marks)))

    async def start(self) -> None:
        """Take over, now and whenever one stops, the writes other app processes kept in their journals."""
        if self.store is not None:
            await self.store.writer.start()

    async def close(self) -> None:
        """The app stops: its answers end, keeping what they showed; what waits is committed, or journaled."""
        if self.store is None:
            return
        if self.answering is not None:
            await self.answering.stop_all(DRAIN_S)
        if self.unawaited:
            await asyncio.wait(set(self.unawaited), timeout=DRAIN_S)
        await self.store.close()

    async def save_preferences(self, preferences: dict[str, Any]) -> None:
        """Keep the chat's settings with it (Chainlit itself saves them only on disconnect)."""
        session = seam.websocket_session()
        if self.store is not None and session is not None and session.has_first_interaction:
            with contextlib.suppress(HistoryUnavailable):  # logged and announced by the store
                await self.store.update_thread(session.thread_id, metadata={PREFERENCES_KEY: preferences})

    def new_chat_project(self) -> str | None:
        """The project this session's chat was started in, filed in at its first message (None: none)."""
        chat = lifecycle.current() if seam.websocket_session() is not None else None
        return chat.project.id if chat is not None and chat.project is not None else None

    async def keep_now(self, chat: Tab) -> None:
        """A temporary chat written as it stands, and from then on (Keep this chat)."""
        session = seam.websocket_session()
        if self.store is None or session is None or not chat.temporary:
            return
        self.temporaries.kept_from_now(session.thread_id)
        chat.temporary = False
        said = list(chat.branches.steps.values())
        first = next((step for step in said if step.get("type") == "user_message"), None)
        name = str(first.get("output") or "") if first is not None else ""
        user_id = seam.tab_user_id()
        with contextlib.suppress(HistoryUnavailable):  # logged and announced by the store; the journal keeps it
            await self.store.update_thread(session.thread_id, name=name[:255], user_id=user_id, metadata={})
            for step in said:
                await self.store.create_step(cast("StepDict", dict(step)))

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

    def keep_unfinished(self, step: StepDict) -> None:
        """Write a message still being written, in a task (its final write, with the same id, replaces it)."""
        if self.store is not None:
            self.unawaited_write(self.store.update_step(step))

    def unawaited_write(self, write: Coroutine[Any, Any, None] | asyncio.Task[None]) -> None:
        """Run a write in a task of its own (its failure is logged and announced by the store)."""
        task = write if isinstance(write, asyncio.Task) else asyncio.create_task(write)
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


def keep_history(settings: Settings, notice: Callable[[], str], answering: Answering) -> History:
    """The history as Chainlit's data layer, and the login Chainlit asks for (before Chainlit starts)."""
    login = startup_login(settings)
    if login is Login.NONE:
        # Chainlit would start its own PostgreSQL layer from DATABASE_URL: no history means none.
        cl.data_layer(lambda: None)  # type: ignore[arg-type,return-value]  # Chainlit accepts None at run time
        return History(None, login)
    history = History(None, login, notice=notice, answering=answering)
    journal = Journal(settings.journal_folder, settings.journal_max_mb * 1_000_000, history.saving_changed)
    journal.open()
    store = TabStore(
        create_engine(database_url(settings.database_url, settings.data_dir), settings.database_timeout),
        open_registration=login is Login.LOCAL,
        timeout_s=settings.database_timeout,
        actor=tab_actor,
        new_chat_metadata=history.new_chat_metadata,
        new_chat_project=history.new_chat_project,
        never_kept=history.temporaries.never_kept,
        on_write_failure=history.notify_write_failure,
        before_batch=functools.partial(answering.over, ANSWERS_FIRST_S),
        journal=journal,
    )
    history.store, history.team = store, Team(store.writer)
    metrics.watch_waiting(journal.waiting, lambda: len(store.writer.held))
    team = history.team
    cl.data_layer(lambda: store)
    if login is Login.LOCAL:

        @cl.header_auth_callback
        async def local_user(_headers: Any) -> cl.User:
            """The local user: only a browser with this start's key gets this far (app/web/local_key.py)."""
            return cl.User(identifier=LOCAL_USER, metadata={"provider": "local"})

    else:

        @cl.password_auth_callback
        async def password_user(name: str, password: str) -> cl.User | None:
            """A user added with `make user-add`, with their password (never by a name kept for the local user)."""
            if refusal := password_name(name):
                logger.warning("Refused a password login: %s", refusal.reason)
                return None
            # argon2 is slow on purpose: in the store's threads.
            if await store.writer.run("check a password", verify_password, store.engine, name, password):
                await team.signed_in(name)
                return cl.User(identifier=name, metadata={"provider": "password"})
            return None

        seam.refuse_unknown_users(functools.partial(still_known, store))
    return history


async def redraw_marks(marks: dict[str, Saving | None]) -> None:
    """This tab's lines of messages whose saving changed, with their mark (none once saved)."""
    chat = lifecycle.current()
    if chat is None:
        return
    for message_id, saving in marks.items():
        if saving is None:
            chat.unsaved.pop(message_id, None)
        else:
            chat.unsaved[message_id] = saving.value
        if message_id in chat.branches.steps:
            await show_line(chat, message_id, kept=True)


async def name_thread(store: ChatStore, thread_id: str, name: str) -> None:
    """Rename a chat; a failure is logged and announced by the store."""
    with contextlib.suppress(HistoryUnavailable):
        await store.update_thread(thread_id, name=name)


def tab_actor() -> Caller:
    """The logged-in user of the tab a write is made for, and the tab's chat; outside a tab, Chainlit's REST route
    that checked the chat's owner itself."""
    session = seam.websocket_session()
    if session is None:
        return Route.CHECKED
    if session.user is None:
        return None
    return Actor(session.user.identifier, session.thread_id)


async def still_known(store: ChatStore, user: str) -> bool:
    """Whether a login cookie's user still exists (a removed user's cookie opens no chat)."""
    try:
        return await store.get_user(user) is not None
    except HistoryUnavailable:  # the database is down: chatting goes on, unsaved
        return True
