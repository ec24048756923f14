"""Each user's memory ("About you"): short facts they keep, added, edited, paused and deleted by them alone."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.errors import HistoryUnavailable
from app.history.schema import memories, user_row
from app.history.writes import Writer

# The most facts one user keeps: a short list, not a diary.
MOST_FACTS = 50
# How long the facts read here stand for the answers that start on them: a read a question (hundreds a second at a
# GPU's pace, each a query on the writer's thread that shares the event loop's interpreter) would find them unchanged.
FRESH_SECONDS = 5.0


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


class Memories:
    """The users' facts through the history's writer, each read and change limited to its user."""

    def __init__(self, writer: Writer, fresh_for: float = FRESH_SECONDS) -> None:
        self.writer = writer
        self.fresh_for = fresh_for
        # Each user's facts in use as last read here with when that read began, and the reads under way: see
        # for_answer.
        self._known: dict[str, tuple[list[str], float]] = {}
        self._reading: dict[str, asyncio.Task[None]] = {}
        self._changed: Counter[str] = Counter()  # a user's changes made here: a read begun before one is stale

    async def for_answer(self, user: str) -> list[str]:
        """The facts an answer starts on: as last read here, read again behind it once `fresh_for` has passed; read
        now the first time.

        A read awaited before each request held a burst of questions back by the whole burst's work (+20-30 ms
        at 32); read behind it, a change made on this server counts at once, one made on another within
        `fresh_for` seconds, from the answer after the next.
        """
        if (known := self._known.get(user)) is None:
            return await self._read(user)
        facts, read_at = known
        if time.monotonic() - read_at >= self.fresh_for and user not in self._reading:
            self._reading[user] = asyncio.create_task(self._read_behind(user))
        return facts

    async def _read_behind(self, user: str) -> None:
        try:
            with contextlib.suppress(HistoryUnavailable):  # logged by the writer; the facts known stay
                await self._read(user)
        finally:
            del self._reading[user]

    async def _read(self, user: str) -> list[str]:
        changes, began = self._changed[user], time.monotonic()
        facts = await self.in_use(user)
        if self._changed[user] == changes:
            self._known[user] = (facts, began)
        return facts

    async def _change(self, user: str, what: str, work: Callable[[Connection], Any]) -> Any:
        """A write of the user's facts; what is known of them here forgotten once it is made (or failed)."""
        try:
            return await self.writer.write(what, work)
        finally:  # a read begun before this ends is not kept
            self._changed[user] += 1
            self._known.pop(user, None)

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

        return Kept(await self._change(user, "remember a fact", work))

    async def change(self, user: str, fact_id: str, *, text: str | None = None, paused: bool | None = None) -> bool:
        """A fact of the user's edited, paused or resumed in its place; False if they have none of that id."""
        values = {name: value for name, value in (("text", text), ("paused", paused)) if value is not None}
        if not values:
            return False
        statement = sa.update(memories).where(theirs(user, fact_id)).values(**values)
        return bool(await self._change(user, "change a fact", lambda c: c.execute(statement).rowcount))

    async def delete(self, user: str, fact_id: str) -> bool:
        """A fact of the user's forgotten; False if they have none of that id."""
        statement = sa.delete(memories).where(theirs(user, fact_id))
        return bool(await self._change(user, "forget a fact", lambda c: c.execute(statement).rowcount))
