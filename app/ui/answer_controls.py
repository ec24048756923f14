"""What sits by a message: an answer's stats line (with the export buttons), its versions, regenerate."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import chainlit as cl

from app.branches import Branches
from app.i18n import text
from app.session import ChatSession
from app.stats import AnswerStats

# The export buttons in each answer's stats line: the names of their action callbacks (app/main.py).
EXPORTS = ("export_markdown", "export_json")
# The action callback (app/main.py) of the previous and next version buttons: show another version of a message.
SHOW_VERSION = "show_version"
# Element ids derived from the message's: a message put back on the page gets its line replaced, not doubled.
ELEMENT_IDS = uuid.UUID("2b0c6f0e-7f6a-4a55-9a43-1f7e0c2d5b27")


async def show_stats(chat: ChatSession, answer_id: str, stats: AnswerStats | None, *, exports: bool) -> None:
    """The small line under an answer (public/elements/AnswerStats.jsx), drawn from the answer's stored stats.

    Not stored itself: a resumed chat draws it again from the answer's metadata, one write less per answer.
    With history on it carries the export buttons: part of a line sent anyway, not two more messages per answer.
    """
    if stats is None:
        return
    buttons = [{"name": name, "label": text(chat.lang, name)} for name in EXPORTS] if exports else []
    await send_inline(answer_id, "AnswerStats", {"text": stats.describe(chat.lang), "exports": buttons})


async def version_buttons(chat: ChatSession, message_id: str) -> None:
    """Buttons to the previous and next versions of a message that has others (public/elements/Versions.jsx)."""
    if (versions := version_props(chat, message_id)) is not None:
        await send_inline(message_id, "Versions", versions)


def version_props(chat: ChatSession, message_id: str) -> dict[str, Any] | None:
    """Which version of its versions a message is, and the ones before and after it (None: it has no other)."""
    versions = chat.branches.versions(message_id)
    if len(versions) < 2:
        return None
    at = versions.index(message_id)
    return {
        "at": at + 1,
        "of": len(versions),
        "previous": versions[at - 1] if at else None,
        "next": versions[at + 1] if at + 1 < len(versions) else None,
        "action": SHOW_VERSION,
        "labels": {"previous": text(chat.lang, "previous_version"), "next": text(chat.lang, "next_version")},
    }


async def send_inline(for_id: str, name: str, props: dict[str, Any]) -> None:
    """A custom element under (or above) a message, not stored, replacing the one it had."""
    # With a URL, Chainlit sends the element as is instead of writing its props to a file per answer.
    url = "data:application/json;base64," + base64.b64encode(json.dumps(props).encode()).decode()
    element_id = str(uuid.uuid5(ELEMENT_IDS, f"{name}:{for_id}"))
    element = cl.CustomElement(id=element_id, name=name, props=props, display="inline", url=url)
    await element.send(for_id=for_id, persist=False)


async def offer_regenerate(chat: ChatSession) -> None:
    """The regenerate button, on the newest answer of the branch shown (none without one)."""
    await drop_regenerate(chat)
    answer_id = newest_answer(chat.branches)
    if answer_id is None:
        return
    label = text(chat.lang, "regenerate")
    chat.regenerate = cl.Action(name="regenerate", payload={}, label=label, icon="refresh-cw", tooltip=label)
    await chat.regenerate.send(for_id=answer_id)


async def drop_regenerate(chat: ChatSession) -> None:
    """Take the regenerate button off the page."""
    if chat.regenerate is not None:
        await chat.regenerate.remove()
        chat.regenerate = None


def newest_answer(tree: Branches) -> str | None:
    """The newest answer on the branch shown that is not an error."""
    for message_id in reversed(tree.path()):
        step = tree.steps[message_id]
        if step.get("type") == "assistant_message" and not step.get("isError"):
            return message_id
    return None
