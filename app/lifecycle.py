"""What a tab's coming and going does to its chat's work: stop, new chat, closed tab, lost connection."""

from __future__ import annotations

import asyncio

import chainlit as cl

from app import chainlit_seam as seam
from app import metrics
from app.session import ChatSession

# Chats waiting out a lost connection (the loop keeps only weak references to tasks).
departures: set[asyncio.Task[None]] = set()


def arrive(chat: ChatSession) -> None:
    """A tab's chat begins (new or resumed): its state is kept in Chainlit's user session."""
    cl.user_session.set("chat", chat)
    metrics.SESSIONS.inc()


def current() -> ChatSession | None:
    """This tab's chat (None before on_chat_start, e.g. for a client that skipped it)."""
    chat = cl.user_session.get("chat")
    return chat if isinstance(chat, ChatSession) else None


def stop_answer(chat: ChatSession) -> None:
    """The stop button: end the answer being streamed (closing its request in vLLM)."""
    # Chainlit cancels its current task itself; a refused message may have replaced it.
    generation = chat.generation
    if generation is not None and not generation.done() and not seam.is_current_task(generation):
        generation.cancel()


def depart(chat: ChatSession, grace_s: float) -> None:
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


async def cancel_unless_reconnected(chat: ChatSession, session: seam.WebsocketSession, grace_s: float) -> None:
    """Stop the session's work if no connection took it over within the grace period."""
    await asyncio.sleep(grace_s)
    if not seam.is_connected(session):
        chat.cancel_tasks()
