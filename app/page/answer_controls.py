"""What sits by a message: its line (an answer's stats and exports, versions, continue in a new chat), regenerate."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import chainlit as cl

from app.chat.branches import Branches, is_question
from app.chat.tab import Tab
from app.history.transcript import line_of
from app.i18n import text
from app.page.sources import source_props

# The export buttons in each answer's line: the names of their action callbacks (app/main.py).
EXPORTS = ("export_markdown", "export_json")
# The action callback (app/main.py) of the previous and next version buttons: show another version of a message.
SHOW_VERSION = "show_version"
# The action callback (app/main.py) of "continue in a new chat" by a message.
FORK = "fork"
# Element ids derived from the message's: a message put back on the page gets its line replaced, not doubled.
ELEMENT_IDS = uuid.UUID("2b0c6f0e-7f6a-4a55-9a43-1f7e0c2d5b27")


async def show_line(chat: Tab, message_id: str, *, kept: bool) -> None:
    """The small line by a message (public/elements/AnswerStats.jsx): an answer's stats, its sources, and buttons.

    The buttons: the message's versions; with history on, an answer's exports and "continue in a new chat".
    Not stored itself: a resumed chat draws it again from the answers' metadata, one write less per answer.
    The buttons are part of a line sent anyway, not more messages per answer.
    """
    step = chat.branches.steps[message_id]
    line, versions, sources = line_of(step, chat.lang), version_props(chat, message_id), source_props(chat.lang, step)
    unsaved = chat.unsaved.get(message_id)
    if not line and versions is None and sources is None and not kept and unsaved is None:
        return
    exports = kept and not is_question(step)
    props = {
        "text": line,
        "exports": [{"name": name, "label": text(chat.lang, name)} for name in EXPORTS] if exports else [],
        "versions": versions,
        "fork": {"name": FORK, "label": text(chat.lang, FORK), "payload": {"id": message_id}} if kept else None,
        "sources": sources,
        "unsaved": {"state": unsaved, "label": text(chat.lang, f"unsaved_{unsaved}")} if unsaved else None,
    }
    # With a URL, Chainlit sends the element as is instead of writing its props to a file per answer.
    url = "data:application/json;base64," + base64.b64encode(json.dumps(props).encode()).decode()
    element_id = str(uuid.uuid5(ELEMENT_IDS, message_id))
    element = cl.CustomElement(id=element_id, name="AnswerStats", props=props, display="inline", url=url)
    await element.send(for_id=message_id, persist=False)


def version_props(chat: Tab, message_id: str) -> dict[str, Any] | None:
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


async def offer_regenerate(chat: Tab) -> None:
    """The regenerate button, on the newest answer of the branch shown (none without one)."""
    await drop_regenerate(chat)
    answer_id = newest_answer(chat.branches)
    if answer_id is None:
        return
    label = text(chat.lang, "regenerate")
    chat.regenerate = cl.Action(name="regenerate", payload={}, label=label, icon="refresh-cw", tooltip=label)
    await chat.regenerate.send(for_id=answer_id)


async def drop_regenerate(chat: Tab) -> None:
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
