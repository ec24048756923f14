"""Continue in a new chat: the branch up to a message, copied into a new chat of the same user, with its settings."""

from __future__ import annotations

import logging

import chainlit as cl

from app.chat.tab import Tab
from app.errors import HistoryUnavailable
from app.i18n import text
from app.page.chat_history import History
from app.page.notices import show

logger = logging.getLogger(__name__)


async def fork(chat: Tab, message_id: str, history: History) -> None:
    """Copy the branch up to the message (included) into a new chat, and link to it; this chat stays as it is."""
    if not history.kept:
        await show(cl.Message(content=text(chat.lang, "fork_needs_history")))
        return
    if message_id not in chat.branches.steps:  # e.g. an id of another chat: this session's tree does not hold it
        logger.warning("Refused to continue from %s in a new chat: not a message of this chat", message_id)
        return
    try:
        new_chat = await history.fork(
            chat.branches.up_to(message_id),
            chat.preferences.model_dump(),
            lambda name: text(chat.lang, "fork_name", name=name),
        )
    except HistoryUnavailable:
        await show(cl.ErrorMessage(content=text(chat.lang, "history_unavailable")))
        return
    key = "forked" if new_chat is not None else "fork_empty"
    await show(cl.Message(content=text(chat.lang, key, link=f"/thread/{new_chat}")))
