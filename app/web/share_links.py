"""Read-only links to a chat (Chainlit's thread sharing): who may open one, and what it shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import Response

from app.config import Settings
from app.history.transcript import SHARING_KEYS
from app.page import seam
from app.web import shared_page

# A shared chat's link (Chainlit's page serves it, and asks it for the chat at seam.SHARED_CHAT_ROUTE).
LINK = "/share/{thread_id}"
# What a user's message is called in a shared chat (Chainlit names it after the user's login).
VIEWED_AUTHOR = "User"


def install(settings: Settings) -> None:
    """With SHARE_LINKS=anyone, a link shows its chat to visitors without a login too (Chainlit asks for one)."""
    if settings.share_links != "anyone":
        return
    seam.open_to_anyone(seam.SHARED_CHAT_ROUTE, "GET")

    async def page(request: Request, thread_id: str) -> Response:
        return await shared_page.serve(request, thread_id, settings.language)

    seam.add_route(LINK, page)


def may_view(thread: Mapping[str, Any], viewer: object, *, anyone: bool) -> bool:
    """Whether a chat's link shows it: only while its owner shares it (to a logged-in viewer, or to anyone).

    Chainlit also shows a chat whose metadata says it is shared, and sends this very dict: what is private
    (owner, settings, the preset it began with, message metadata, ratings, the owner's login name) is taken out
    of it here. The store gives only the branch shown.
    """
    metadata = thread.get("metadata")
    shared = isinstance(metadata, dict) and metadata.get(SHARING_KEYS[0]) is True
    redact(cast(dict[str, Any], thread))
    return shared and (viewer is not None or anyone)


def redact(thread: dict[str, Any]) -> None:
    """A chat as its link shows it: its name, time, and each message's text; nothing about its owner."""
    for key in ("userId", "userIdentifier"):
        thread.pop(key, None)
    thread["tags"] = None  # the preset it began with: maybe one of the owner's own
    metadata = thread.get("metadata")
    if isinstance(metadata, dict):  # in place: Chainlit puts its own reference back into the thread
        for key in [key for key in metadata if key not in SHARING_KEYS]:
            del metadata[key]
    thread["elements"] = []
    for step in thread.get("steps") or []:
        step["metadata"] = {}
        step.pop("feedback", None)
        if step.get("type") == "user_message":
            step["name"] = VIEWED_AUTHOR
