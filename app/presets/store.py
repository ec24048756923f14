"""Each user's own presets in the history's database: listed, saved, renamed and deleted only by their user."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import presets, timestamp, user_row, users
from app.history.writes import Writer

# The most presets one user keeps: the list of presets is shown whole when a chat starts.
MOST_PRESETS = 20


@dataclass(frozen=True)
class StoredPreset:
    """One of a user's presets: its name and the settings it sets."""

    name: str
    preferences: dict[str, Any]
    # The user's documents a chat started with it searches, and the project it is in (None: none).
    documents: list[str]
    project_id: str | None = None


class Outcome(StrEnum):
    """What became of a change to a user's presets."""

    SAVED = "saved"
    REPLACED = "replaced"
    RENAMED = "renamed"
    DELETED = "deleted"
    TOO_MANY = "too_many"
    NAME_TAKEN = "name_taken"
    NOT_FOUND = "not_found"


class PresetStore:
    """A user's presets, by name; nothing here reads or writes another user's."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer

    async def list(self, user: str) -> list[StoredPreset]:
        """The user's presets, by name."""
        columns = presets.c.name, presets.c.preferences, presets.c.documents, presets.c.project_id
        query = sa.select(*columns).where(presets.c.user_id == user_row(user))
        rows = await self.writer.read("list your presets", lambda c: c.execute(query.order_by(presets.c.name)).all())
        return [
            StoredPreset(row.name, dict(row.preferences), list(row.documents or []), row.project_id) for row in rows
        ]

    async def get(self, user: str, name: str) -> StoredPreset | None:
        """One of the user's presets by its name (None: the user has none of that name)."""
        return next((preset for preset in await self.list(user) if preset.name == name), None)

    async def save(
        self, user: str, name: str, preferences: dict[str, Any], documents: Sequence[str], project_id: str | None = None
    ) -> Outcome:
        """Keep settings (the documents to search, the project) under a name: a new preset, or the one of that name
        replaced."""

        def work(connection: Connection) -> Outcome:
            user_id = connection.execute(sa.select(users.c.id).where(users.c.identifier == user)).scalar()
            if user_id is None:
                return Outcome.NOT_FOUND
            mine = presets.c.user_id == user_id
            same = connection.execute(sa.select(presets.c.id).where(mine, presets.c.name == name)).scalar()
            if same is not None:
                changed = {"preferences": preferences, "documents": [*documents], "project_id": project_id}
                connection.execute(sa.update(presets).where(presets.c.id == same).values(changed))
                return Outcome.REPLACED
            count = connection.execute(sa.select(sa.func.count()).select_from(presets).where(mine)).scalar()
            if (count or 0) >= MOST_PRESETS:
                return Outcome.TOO_MANY
            row = {"id": str(uuid.uuid4()), "user_id": user_id, "name": name, "preferences": preferences}
            row |= {"documents": [*documents], "project_id": project_id, "created_at": timestamp()}
            connection.execute(sa.insert(presets), row)
            return Outcome.SAVED

        return Outcome(await self.writer.write("save a preset", work))

    async def rename(self, user: str, name: str, new_name: str) -> Outcome:
        """Give one of the user's presets another name, unless they have a preset of that name already."""

        def work(connection: Connection) -> Outcome:
            mine = presets.c.user_id == user_row(user)
            if connection.execute(sa.select(presets.c.id).where(mine, presets.c.name == new_name)).first():
                return Outcome.NAME_TAKEN
            renamed = connection.execute(sa.update(presets).where(mine, presets.c.name == name).values(name=new_name))
            return Outcome.RENAMED if renamed.rowcount else Outcome.NOT_FOUND

        return Outcome(await self.writer.write("rename a preset", work))

    async def delete(self, user: str, name: str) -> Outcome:
        """Delete one of the user's presets."""
        delete = sa.delete(presets).where(presets.c.user_id == user_row(user), presets.c.name == name)
        deleted = await self.writer.write("delete a preset", lambda connection: connection.execute(delete).rowcount)
        return Outcome.DELETED if deleted else Outcome.NOT_FOUND
