"""What a tab's coming and going does to its chat's work: stop, new chat, closed tab, lost connection."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import chainlit as cl
from chainlit.types import ThreadDict

from app import metrics
from app.chat.branches import Step, branches_of
from app.chat.preferences import Preferences
from app.chat.tab import Tab
from app.history.transcript import preferences_of, shown_of
from app.i18n import language_of
from app.page import seam

# Chats waiting out a lost connection (the loop keeps only weak references to tasks).
departures: set[asyncio.Task[None]] = set()


def tab_language(setting: str | None, browser: str | None = None) -> str:
    """'zh' or 'en': the setting, else the browser's (this tab's by default)."""
    return language_of(setting or browser or seam.browser_language())


def arrive(chat: Tab) -> None:
    """A tab's chat begins (new or resumed): its state is kept in Chainlit's user session."""
    cl.user_session.set("chat", chat)
    metrics.SESSIONS.inc()


def current() -> Tab | None:
    """This tab's chat (None before on_chat_start, e.g. for a client that skipped it)."""
    chat = cl.user_session.get("chat")
    return chat if isinstance(chat, Tab) else None


def stop_answer(chat: Tab) -> None:
    """The stop button: end the answer being streamed (closing its request in vLLM)."""
    # Chainlit cancels its current task itself; a refused message may have replaced it.
    generation = chat.generation
    if generation is not None and not generation.done() and not seam.is_current_task(generation):
        generation.cancel()


def depart(chat: Tab, grace_s: float) -> None:
    """A new chat or a closed tab stops the session's work; with a grace period, a lost connection may come back."""
    metrics.SESSIONS.dec()
    session = seam.websocket_session()
    if session is None or session.to_clear or not grace_s:
        chat.cancel_tasks()
        return
    # A closed tab and a network blip look alike here (even an explicit disconnect arrives as a
    # closed transport); after a blip the page reconnects within about a second.
    waiting = asyncio.create_task(cancel_unless_reconnected(chat, session, grace_s))
    departures.add(waiting)
    waiting.add_done_callback(departures.discard)


async def cancel_unless_reconnected(chat: Tab, session: seam.WebsocketSession, grace_s: float) -> None:
    """Stop the session's work if no connection took it over within the grace period."""
    await asyncio.sleep(grace_s)
    if not seam.is_connected(session):
        chat.cancel_tasks()


def resumed_chat(
    thread: ThreadDict, steps: Sequence[Step], defaults: Preferences, max_tokens_limit: int, lang: str
) -> Tab:
    """A past chat's session from all its stored steps: its versions, the branch shown, that chat's settings."""
    return Tab(
        preferences=preferences_of(thread.get("metadata"), defaults, max_tokens_limit),
        lang=lang,
        branches=branches_of(steps, shown_of(thread.get("metadata"))),
        resumed=True,
    )
