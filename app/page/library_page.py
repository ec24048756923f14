"""The user's documents on the page: the Documents command lists them, to use one in this chat, rename or delete it."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import chainlit as cl
from chainlit.types import CommandDict

from app.chat.tab import Tab
from app.documents.library import Library, Outcome
from app.i18n import text
from app.page import seam
from app.page.notices import show

# The composer's command (Chainlit's commands) that lists the user's documents.
DOCUMENTS_COMMAND = "Documents"
# The action callbacks (app/main.py) of the buttons by a listed document (public/elements/Library.jsx).
USE, RENAME, DELETE = "use_document", "rename_document", "delete_document"
# The list's labels (public/elements/Library.jsx's `labels`) and their texts.
LABELS = {
    "none": "documents_none",
    "use": "documents_use",
    "rename": "documents_rename",
    "delete": "documents_delete",
    "save": "documents_save",
    "here": "documents_here",
}
# The list's element id, derived from the tab's: the list is redrawn in place after each change.
LIST_IDS = uuid.UUID("6f1d3c2a-0b7e-4c55-8f0e-2d6a9b1c4e70")


async def offer(chat: Tab, library: Library | None) -> None:
    """The Documents command in the composer, where the user has a library."""
    if library is not None and chat.user is not None:
        command = CommandDict(
            id=DOCUMENTS_COMMAND,
            description=text(chat.lang, "documents_command"),
            icon="library",
            button=True,  # a button by the composer: found without knowing to type "/"
            persistent=False,
            selected=False,
        )
        await cl.context.emitter.set_commands([command])


async def resume(chat: Tab, library: Library | None) -> None:
    """A resumed chat: whether it searches documents, and the Documents button."""
    if library is not None and chat.user is not None:
        project = chat.project.id if chat.project is not None else None
        chat.searches_documents = await library.searched_by(chat.user, seam.thread_id(), project)
    await offer(chat, library)


async def start_with(chat: Tab, library: Library | None, documents: list[str]) -> None:
    """A new chat searching these documents of the user's (a preset's); one gone since is left out."""
    if library is not None and chat.user is not None:
        for document_id in documents:
            chat.searches_documents |= await library.use(chat.user, seam.thread_id(), document_id) is Outcome.USED


async def show_library(chat: Tab, library: Library | None) -> None:
    """The user's documents in a message of their own (not stored), each with its buttons."""
    if library is None or chat.user is None:
        await show(cl.Message(content=text(chat.lang, "documents_need_history")))
        return
    message = cl.Message(content=text(chat.lang, "documents_title"))
    await show(message)
    await draw(chat, library, message.id)


async def draw(chat: Tab, library: Library, message_id: str) -> None:
    """The list by its message, as the library is now."""
    assert chat.user is not None
    here = {document.id for document in await library.listed(chat.user, seam.thread_id())}
    documents = [
        {
            "id": document.id,
            "name": document.name,
            "line": text(chat.lang, "document_line", pages=document.pages, passages=document.passages)
            + f" · {document.bytes / 1_000_000:.1f} MB",
            "here": document.id in here,
        }
        for document in await library.listed(chat.user)
    ]
    labels = {name: text(chat.lang, label) for name, label in LABELS.items()}
    props = {
        "documents": documents,
        "labels": labels,
        "actions": {"use": USE, "rename": RENAME, "delete": DELETE},
        "message": message_id,
    }
    # With a URL, Chainlit sends the element as is instead of writing its props to a file.
    url = "data:application/json;base64," + base64.b64encode(json.dumps(props).encode()).decode()
    element_id = str(uuid.uuid5(LIST_IDS, message_id))
    element = cl.CustomElement(id=element_id, name="Library", props=props, display="inline", url=url)
    await element.send(for_id=message_id, persist=False)


async def act(chat: Tab, library: Library | None, name: str, payload: dict[str, Any]) -> None:
    """A listed document's button: use it in this chat, rename it or delete it; the list redrawn, or why not."""
    document_id, message_id = payload.get("id"), payload.get("message")
    if library is None or chat.user is None or not isinstance(document_id, str):
        return
    if name == USE:
        outcome = await library.use(chat.user, seam.thread_id(), document_id)
        chat.searches_documents |= outcome is Outcome.USED
    elif name == DELETE:
        outcome = await library.delete(chat.user, document_id)
    elif isinstance(new_name := payload.get("name"), str) and new_name.strip():
        outcome = await library.rename(chat.user, document_id, new_name.strip())
    else:
        return
    if outcome is Outcome.CHAT_FULL:
        await show(cl.Message(content=text(chat.lang, "document_chat_full", limit=library.per_chat)))
    elif outcome is Outcome.NOT_FOUND:
        await show(cl.Message(content=text(chat.lang, "document_not_found")))
    if isinstance(message_id, str):
        await draw(chat, library, message_id)
