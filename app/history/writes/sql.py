"""What the history database keeps for the writer: the ids of the kept writes it made, so none is made twice."""

from __future__ import annotations

import functools
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import applied_writes, insert_into

# How long a made write's id is remembered: a journal left longer than this on a stopped server may make some of
# its writes twice (an upsert by id or a newer state make that harmless for all but a token count).
KEEP_IDS_S = 30 * 86_400


def first_time(connection: Connection, write_id: str, at: float) -> bool:
    """Note the write as made in this transaction; False if the database made it already."""
    return bool(connection.execute(noting(connection.dialect.name), {"id": write_id, "at": at}).rowcount)


def note_made(connection: Connection, writes: list[dict[str, Any]]) -> None:
    """Note these new writes (each an id and when it was said) as made in this transaction, in one statement."""
    # A plain insert: an id the database has already fails the transaction. A commit that hung, whose writes were
    # journaled and made since from the journal (by another process), must not make them again when it lands.
    connection.execute(sa.insert(applied_writes), writes)


@functools.cache
def noting(dialect: str) -> sa.Insert:
    """The statement noting a write's id, in the dialect at hand; built once (it runs for every kept write)."""
    return insert_into(applied_writes, dialect).on_conflict_do_nothing(index_elements=["id"])


def forget_old(connection: Connection) -> None:
    """Forget the ids of writes made longer ago than anything waiting in a journal should be."""
    connection.execute(sa.delete(applied_writes).where(applied_writes.c.at < time.time() - KEEP_IDS_S))
