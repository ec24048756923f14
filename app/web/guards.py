"""Checks run before Chainlit's routes: the session a request names is the caller's, and so is what it touches.

Chainlit answers an unknown session id with a 500 and checks no ownership of the message or feedback rated,
nor of the chat an element names; each refusal here is a 4xx and one log line.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, NoReturn

from fastapi import HTTPException

from app.history.store import ChatStore
from app.page import seam

log = logging.getLogger(__name__)
# Chainlit's element fields the page always sends; anything else is not an element.
ELEMENT_FIELDS = ("id", "type", "name", "display")


def install(store: ChatStore | None) -> None:
    """Put the checks before Chainlit's routes (ownership only with a history to know owners from)."""
    for path, method in (("/project/action", "POST"), ("/mcp", "POST"), ("/mcp", "DELETE")):
        seam.guard_route(path, method, callers_session)
    for method in ("PUT", "DELETE"):
        seam.guard_route("/project/element", method, functools.partial(element_in_own_chat, store))
    if store is not None:
        seam.guard_route("/feedback", "PUT", functools.partial(rating_of_own_message, store))
        seam.guard_route("/feedback", "DELETE", functools.partial(removal_of_own_rating, store))


def refuse(status: int, detail: str, why: str, *values: object) -> NoReturn:
    """Log one line saying why, and answer the request with the status."""
    log.warning("Refused " + why, *values)
    raise HTTPException(status_code=status, detail=detail)


def caller(params: dict[str, Any]) -> str:
    """The logged-in user making the request ("" without login)."""
    user = params.get("current_user")
    return str(user.identifier) if user is not None else ""


async def callers_session(params: dict[str, Any]) -> seam.WebsocketSession:
    """The tab session the request names, which must exist and belong to the caller."""
    session = seam.session_by_id(getattr(params["payload"], "sessionId", None))
    if session is None:
        refuse(404, "Session not found", "a request for a session that does not exist")
    user = caller(params)
    if user and (session.user is None or session.user.identifier != user):
        refuse(404, "Session not found", "%s's request for another user's session", user)
    return session


async def element_in_own_chat(store: ChatStore | None, params: dict[str, Any]) -> None:
    """An element sent to one's own session, naming one's own chat and message."""
    session = await callers_session(params)
    element: dict[str, Any] = params["payload"].element
    if not all(isinstance(element.get(name), str) for name in ELEMENT_FIELDS):
        refuse(400, "Malformed element", "an element without %s", ", ".join(ELEMENT_FIELDS))
    if store is None:
        return
    user, thread_id, for_id = caller(params), element.get("threadId") or "", element.get("forId") or ""
    if thread_id and thread_id != session.thread_id and await store.get_thread_author(thread_id) != user:
        refuse(404, "Chat not found", "%s's element for chat %s, not theirs", user, thread_id)
    if for_id and await store.feedback_owner(step_id=for_id) not in ("", user):
        refuse(404, "Message not found", "%s's element for message %s, not theirs", user, for_id)


async def rating_of_own_message(store: ChatStore, params: dict[str, Any]) -> None:
    """Thumbs up/down only on a message of one's own chats, and never through someone else's rating's id."""
    user, feedback = caller(params), params["update"].feedback
    if not user or await store.feedback_owner(step_id=feedback.forId) != user:
        refuse(404, "Message not found", "%s's rating of message %s, not theirs", user, feedback.forId)
    if feedback.id and await store.feedback_owner(feedback_id=feedback.id) not in ("", user):
        refuse(404, "Feedback not found", "%s's rating through rating %s, not theirs", user, feedback.id)


async def removal_of_own_rating(store: ChatStore, params: dict[str, Any]) -> None:
    """A rating removed only from one's own chats."""
    user, feedback_id = caller(params), params["payload"].feedbackId
    if not user or await store.feedback_owner(feedback_id=feedback_id) != user:
        refuse(404, "Feedback not found", "%s's removal of rating %s, not theirs", user, feedback_id)
