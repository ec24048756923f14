"""A chat's Markdown or JSON export, offered as a file in a message that is itself not kept."""

from __future__ import annotations

from typing import Any

import chainlit as cl

from app.chat.attachments import attachments_of, read_in
from app.chat.tab import Tab
from app.documents.library import Library
from app.errors import HistoryUnavailable
from app.history.transcript import export_json, export_markdown
from app.i18n import text
from app.page import seam
from app.page.chat_history import History
from app.page.notices import show


async def send_export(chat: Tab, history: History, kind: str, library: Library | None) -> None:
    """Offer the stored chat as a file ("Markdown" or "JSON"), with the text of the files read whole."""
    try:
        thread = await history.thread()
        if thread is not None and library is not None and chat.user is not None:
            thread = await with_texts(thread, chat.user, library)
    except HistoryUnavailable:
        await show(cl.ErrorMessage(content=text(chat.lang, "history_unavailable")))
        return
    if thread is None:
        await show(cl.Message(content=text(chat.lang, "export_empty")))
        return
    project = chat.project.name if chat.project is not None else None
    if kind == "JSON":
        name, content, mime = "chat.json", export_json(thread, chat.preferences, project), "application/json"
    else:
        names = {"user": text(chat.lang, "you"), "assistant": seam.assistant_name()}
        name, content, mime = "chat.md", export_markdown(thread, chat.preferences, names, project), "text/markdown"
    message = cl.Message(content=text(chat.lang, "export_ready", kind=kind))
    await show(message)
    file = cl.File(name=name, content=content.encode(), mime=mime, display="inline")
    await file.send(for_id=message.id, persist=False)


async def with_texts(thread: dict[str, Any], user: str, library: Library) -> dict[str, Any]:
    """The chat with the text of each document read whole put into its question, as the model read it."""
    steps = thread.get("steps") or []
    wanted = {file.document for step in steps for file in attachments_of(step) if file.document and file.whole}
    texts = await library.texts(user, sorted(wanted)) if wanted else {}
    return thread | {"steps": [read_in(step, texts) for step in steps]} if texts else thread
