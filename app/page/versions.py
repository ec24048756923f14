"""The branch on the page: taken off after a message, drawn again with its controls, switched to another version."""

from __future__ import annotations

import logging

from app.chat.branches import ROOT
from app.chat.tab import Tab
from app.page import seam
from app.page.answer_controls import drop_regenerate, offer_regenerate, show_line
from app.page.chat_history import History

logger = logging.getLogger(__name__)


async def cut(chat: Tab, after: str) -> None:
    """Take the page's messages after one (ROOT: all the chat's) off the page, notices too; the history keeps them."""
    shown = seam.shown_messages()
    ids = [message.id for message in shown]
    if after != ROOT and after not in ids:
        return
    await drop_regenerate(chat)
    for message in shown[ids.index(after) + 1 if after != ROOT else 0 :]:
        await seam.hide(message)


async def draw(chat: Tab, message_ids: list[str], *, kept: bool) -> None:
    """Put messages of the tree at the end of the page, each with its line, and regenerate on the newest answer."""
    for message_id in message_ids:
        await seam.show_again(dict(chat.branches.steps[message_id]))  # type: ignore[arg-type]  # a stored step
    await draw_lines(chat, message_ids, kept=kept)


async def draw_lines(chat: Tab, message_ids: list[str], *, kept: bool) -> None:
    """The lines by messages on the page, and regenerate on the newest answer."""
    for message_id in message_ids:
        await show_line(chat, message_id, kept=kept)
    await offer_regenerate(chat)


async def switch_version(chat: Tab, message_id: str, history: History) -> None:
    """Show another version of a message in its place, with the branch that follows it; keep the choice."""
    tree = chat.branches
    if message_id not in tree.steps:  # e.g. an id of another chat: this session's tree does not hold it
        logger.warning("Refused to show version %s: not a message of this chat", message_id)
        return
    before = tree.path()
    changed = tree.select(message_id)
    after = tree.path()
    if after != before:
        pairs = enumerate(zip(before, after, strict=False))
        first = next((index for index, (old, new) in pairs if old != new), min(len(before), len(after)))
        await cut(chat, after[first - 1] if first else ROOT)  # what the branches still share stays
        await draw(chat, after[first:], kept=history.kept)
    if changed:
        await history.save_shown(tree.shown)
