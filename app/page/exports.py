"""A chat's Markdown or JSON export, offered as a file in a message that is itself not kept."""

from __future__ import annotations

import chainlit as cl

from app.chat.tab import Tab
from app.errors import HistoryUnavailable
from app.history.transcript import export_json, export_markdown
from app.i18n import text
from app.page import seam
from app.page.chat_history import History
from app.page.notices import show


async def send_export(chat: Tab, history: History, kind: str) -> None:
    """Offer the stored chat as a file ("Markdown" or "JSON")."""
    try:
        thread = await history.thread()
    except HistoryUnavailable:
        await show(cl.ErrorMessage(content=text(chat.lang, "history_unavailable")))
        return
    if thread is None:
        await show(cl.Message(content=text(chat.lang, "export_empty")))
        return
    if kind == "JSON":
        name, content, mime = "chat.json", export_json(thread, chat.preferences), "application/json"
    else:
        names = {"user": text(chat.lang, "you"), "assistant": seam.assistant_name()}
        name, content, mime = "chat.md", export_markdown(thread, chat.preferences, names), "text/markdown"
    message = cl.Message(content=text(chat.lang, "export_ready", kind=kind))
    await show(message)
    file = cl.File(name=name, content=content.encode(), mime=mime, display="inline")
    await file.send(for_id=message.id, persist=False)
