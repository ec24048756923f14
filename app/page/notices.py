"""Messages that are shown but not part of the conversation: notices, errors, the greeting."""

from __future__ import annotations

import chainlit as cl

from app.chat.branches import Answer
from app.chat.tab import Tab
from app.errors import ChatError
from app.i18n import error_text
from app.page import seam


async def show(message: cl.Message | cl.ErrorMessage, *, redraw: bool = False) -> None:
    """Send (or redraw) a message that is not part of the conversation, so the history does not keep it.

    A greeting, a notice or an export stored with every chat would cost writes on every first message.
    """
    await seam.send_unstored(message.to_dict(), redraw=redraw)
    for action in getattr(message, "actions", []):  # an ErrorMessage has none
        await action.send(for_id=message.id)


async def say_error(chat: Tab, error: ChatError, record: Answer | None = None) -> cl.ErrorMessage:
    """Show an error in the session's language; `record`: the turn it ends, kept with it in the history."""
    message = cl.ErrorMessage(content=error_text(chat.lang, error))
    if record is not None:
        message.metadata = record.as_metadata()
    await message.send()
    return message
