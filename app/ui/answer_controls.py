"""What sits under an answer: its stats line (with the export buttons) and, on the newest, regenerate."""

from __future__ import annotations

import base64
import json

import chainlit as cl

from app import chainlit_seam as seam
from app.i18n import text
from app.session import ChatSession
from app.stats import AnswerStats

# The export buttons in each answer's stats line: the names of their action callbacks (app/main.py).
EXPORTS = ("export_markdown", "export_json")


async def show_stats(chat: ChatSession, answer_id: str, stats: AnswerStats, *, exports: bool) -> None:
    """The small line under an answer (public/elements/AnswerStats.jsx), drawn from the answer's stored stats.

    Not stored itself: a resumed chat draws it again from the answer's metadata, one write less per answer.
    With history on it carries the export buttons: part of a line sent anyway, not two more messages per answer.
    """
    buttons = [{"name": name, "label": text(chat.lang, name)} for name in EXPORTS] if exports else []
    props = {"text": stats.describe(chat.lang), "exports": buttons}
    # With a URL, Chainlit sends the element as is instead of writing its props to a file per answer.
    url = "data:application/json;base64," + base64.b64encode(json.dumps(props).encode()).decode()
    element = cl.CustomElement(name="AnswerStats", props=props, display="inline", url=url)
    await element.send(for_id=answer_id, persist=False)


async def offer_regenerate(chat: ChatSession, answer_id: str) -> None:
    """The regenerate button, on the newest answer only."""
    if chat.regenerate is not None:
        await chat.regenerate.remove()
    label = text(chat.lang, "regenerate")
    chat.regenerate = cl.Action(name="regenerate", payload={}, label=label, icon="refresh-cw", tooltip=label)
    await chat.regenerate.send(for_id=answer_id)


async def remove_regenerated(chat: ChatSession) -> None:
    """Take the answer being regenerated off the page; its button goes with it."""
    if chat.regenerate is None or (answer_id := chat.regenerate.forId) is None:
        return
    shown = [message for message in seam.shown_messages() if message.id == answer_id]
    for message in shown or [cl.Message(content="", id=answer_id)]:  # none: a resumed answer
        await message.remove()
    chat.regenerate = None


async def redraw_resumed(chat: ChatSession, *, exports: bool) -> None:
    """A resumed chat's stats lines and regenerate button, once the page shows its past messages."""
    if chat.resumed_answer is None:
        return
    for answer_id, stats in chat.resumed_stats.items():
        await show_stats(chat, answer_id, stats, exports=exports)
    await offer_regenerate(chat, chat.resumed_answer)
    chat.resumed_answer, chat.resumed_stats = None, {}
