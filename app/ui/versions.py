"""The branch on the page: taken off after a message, drawn again with its controls, switched to another version."""

from __future__ import annotations

import logging

from app import chainlit_seam as seam
from app.branches import is_question
from app.history.service import History
from app.history.transcript import stats_of
from app.session import ChatSession
from app.ui.answer_controls import drop_regenerate, offer_regenerate, show_stats, version_buttons

logger = logging.getLogger(__name__)


async def cut(chat: ChatSession, message_id: str, *, including: bool) -> None:
    """Take the page's messages after one (and it too, if including) off the page; the history keeps them."""
    shown = seam.shown_messages()
    at = next((index for index, message in enumerate(shown) if message.id == message_id), None)
    if at is None:
        return
    await drop_regenerate(chat)
    for message in shown[at if including else at + 1 :]:
        await seam.hide(message)


async def draw(chat: ChatSession, message_ids: list[str], *, exports: bool) -> None:
    """Put messages of the tree at the end of the page, each with its controls, and regenerate on the newest answer."""
    for message_id in message_ids:
        await seam.show_again(dict(chat.branches.steps[message_id]))  # type: ignore[arg-type]  # a stored step
    await draw_controls(chat, message_ids, exports=exports)


async def draw_controls(chat: ChatSession, message_ids: list[str], *, exports: bool) -> None:
    """The stats lines and version buttons of messages on the page, and regenerate on the newest answer."""
    for message_id in message_ids:
        step = chat.branches.steps[message_id]
        if not is_question(step):
            await show_stats(chat, message_id, stats_of(step), exports=exports)
        await version_buttons(chat, message_id)
    await offer_regenerate(chat)


async def switch_version(chat: ChatSession, message_id: str, history: History) -> None:
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
        if first < len(before):
            await cut(chat, before[first], including=True)
        await draw(chat, after[first:], exports=history.store is not None)
    if changed:
        await history.save_shown(tree.shown)
