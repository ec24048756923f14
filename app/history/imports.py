"""Chats read out of an export written into a user's history: each chat in one transaction of its own (all of it or
none), its messages in this app's tree (versions side by side, the one shown kept) and in the search index."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.chat.attachments import Attachment, with_files
from app.chat.branches import ROOT, Answer, placed
from app.chat.passages import SOURCES_KEY
from app.history import message_index
from app.history.schema import projects, steps, threads, timestamp, users
from app.history.transcript import PREFERENCES_KEY, SHOWN_KEY
from app.history.writes import Writer
from app.imports.model import USER, ImportedChat, ImportedMessage
from app.storable import storable

# Thread metadata key of where an imported chat came from, when it was imported, when it last changed there.
IMPORTED_KEY = "imported"
# The longest name a chat without one takes from its first question.
NAME_CHARS = 80


@dataclass(frozen=True)
class Imports:
    """Chats imported into users' histories."""

    writer: Writer

    async def add(self, user: str, chat: ImportedChat, source: str, assistant: str) -> str | None:
        """A new chat of the user holding the imported one (None: no such user); `assistant` names its answers."""
        thread_id = str(uuid.uuid4())

        def work(connection: Connection) -> str | None:
            user_id = connection.execute(sa.select(users.c.id).where(users.c.identifier == user)).scalar()
            if user_id is None:
                return None
            ids = {message.key: str(uuid.uuid4()) for message in chat.messages}
            row = thread_row(chat, source, ids) | {"id": thread_id, "user_id": user_id}
            if chat.project is not None:  # filed in the user's project of that name, if they have one
                mine = sa.select(projects.c.id).where(projects.c.user_id == user_id, projects.c.name == chat.project)
                row["project_id"] = connection.execute(mine).scalar()
            connection.execute(sa.insert(threads), row)
            rows = [step_row(message, ids, thread_id, assistant) for message in chat.messages]
            connection.execute(sa.insert(steps), rows)
            for row in rows:
                message_index.index(connection, row["id"], thread_id, row["type"], row["output"])
            return thread_id

        result: str | None = await self.writer.write("import a chat", work)
        return result


def thread_row(chat: ImportedChat, source: str, ids: Mapping[str, str]) -> dict[str, Any]:
    """The chat's row but its id and owner: its name, time, settings, the versions shown, where it came from."""
    metadata: dict[str, Any] = {
        SHOWN_KEY: {(ids[parent] if parent else ROOT): ids[child] for parent, child in chat.shown.items()},
        IMPORTED_KEY: {"from": source, "at": timestamp(), "updated_at": chat.updated_at},
    }
    if chat.settings is not None:
        metadata[PREFERENCES_KEY] = dict(chat.settings)
    return {
        "created_at": chat.created_at,
        "name": storable(chat.name or name_from(chat)),
        "tags": None,
        "metadata": metadata,
        "changed_at": time.time(),
        "project_id": None,
    }


def name_from(chat: ImportedChat) -> str:
    """A name for a chat the export left unnamed: its first question's first line."""
    first = next((message.content for message in chat.messages if message.role == USER), "")
    line = first.strip().splitlines()[0] if first.strip() else ""
    return line[:NAME_CHARS]


def step_row(message: ImportedMessage, ids: Mapping[str, str], thread_id: str, assistant: str) -> dict[str, Any]:
    """A message's row, with what it records about its place: the message it follows, or the question it answers."""
    parent = ids[message.parent] if message.parent is not None else ROOT
    if message.role == USER:
        files = [Attachment(file.name, file.type, file.text) for file in message.files]
        metadata = with_files(placed(parent), files)
    else:
        metadata = Answer(parent, message.ending, message.model, message.stats).as_metadata()
        if message.sources:
            metadata[SOURCES_KEY] = [dict(source) for source in message.sources]
    answered = message.role != USER
    return {
        "id": ids[message.key],
        "thread_id": thread_id,
        "parent_id": None,
        "name": "User" if message.role == USER else assistant,
        "type": "user_message" if message.role == USER else "assistant_message",
        "input": "",
        "output": storable(message.error if message.error is not None else message.content),
        "is_error": message.error is not None,
        "created_at": message.created_at,
        "start": message.created_at if answered else None,
        "end": message.created_at if answered else None,
        "details": {},
        "metadata": metadata,
        "saved_at": time.time(),
    }
