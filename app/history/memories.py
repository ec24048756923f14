"""Each user's memory ("About you"): short facts they keep, added, edited, paused and deleted by them alone."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import memories, user_row
from app.history.writes import Writer

# The most facts one user keeps: a short list, not a diary.
MOST_FACTS = 50


class Kept(StrEnum):
    """What keeping a new fact came to."""

    KEPT = "kept"
    TOO_MANY = "too_many"
    NO_USER = "no_user"


@dataclass(frozen=True)
class Fact:
    """One fact of a user's memory."""

    id: str
    text: str
    paused: bool
    created_at: float


def theirs(user: str, fact_id: str) -> sa.ColumnElement[bool]:
    """The user's own fact of this id."""
    return sa.and_(memories.c.id == fact_id, memories.c.user_id == user_row(user))


@dataclass(frozen=True)
class Memories:
    """The users' facts through the history's writer, each read and change limited to its user."""

    writer: Writer

    async def listed(self, user: str) -> list[Fact]:
        """The user's facts, oldest first (the order they are told to the model in)."""
        query = (
            sa.select(memories)
            .where(memories.c.user_id == user_row(user))
            .order_by(memories.c.created_at, memories.c.id)
        )
        rows = await self.writer.read("read your memory", lambda c: c.execute(query).all())
        return [Fact(r.id, r.text, bool(r.paused), r.created_at) for r in rows]

    async def in_use(self, user: str) -> list[str]:
        """The texts of the user's facts that are not paused, oldest first."""
        return [fact.text for fact in await self.listed(user) if not fact.paused]

    async def add(self, user: str, text: str) -> Kept:
        """A new fact at the end of the user's memory."""

        def work(connection: Connection) -> Kept:
            owner = connection.execute(sa.select(user_row(user))).scalar()
            if owner is None:
                return Kept.NO_USER
            held = sa.select(sa.func.count()).select_from(memories).where(memories.c.user_id == owner)
            if (connection.execute(held).scalar() or 0) >= MOST_FACTS:
                return Kept.TOO_MANY
            row = {"id": str(uuid.uuid4()), "user_id": owner, "text": text, "paused": False, "created_at": time.time()}
            connection.execute(sa.insert(memories).values(**row))
            return Kept.KEPT

        return Kept(await self.writer.write("remember a fact", work))

    async def change(self, user: str, fact_id: str, *, text: str | None = None, paused: bool | None = None) -> bool:
        """A fact of the user's edited, paused or resumed in its place; False if they have none of that id."""
        values = {name: value for name, value in (("text", text), ("paused", paused)) if value is not None}
        if not values:
            return False
        statement = sa.update(memories).where(theirs(user, fact_id)).values(**values)
        return bool(await self.writer.write("change a fact", lambda c: c.execute(statement).rowcount))

    async def delete(self, user: str, fact_id: str) -> bool:
        """A fact of the user's forgotten; False if they have none of that id."""
        statement = sa.delete(memories).where(theirs(user, fact_id))
        return bool(await self.writer.write("forget a fact", lambda c: c.execute(statement).rowcount))
