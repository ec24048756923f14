"""The messages' full-text index in the database's own search: questions and answers by their words, Chinese
segmented as passages are (SQLite's FTS5 with BM25; PostgreSQL's stored tsvector with a GIN index)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import (
    MESSAGE_FTS,
    MESSAGE_VECTOR,
    MESSAGE_VECTOR_INDEX,
    insert_into,
    message_terms,
    steps,
)
from app.terms import indexed

# Ids given as a list or as a statement selecting them.
Ids = Sequence[str] | sa.Select[Any] | sa.ScalarSelect[Any]
# The kinds of message searched: what the person and the model said.
SEARCHED = ("user_message", "assistant_message")
# SQLite's FTS5 table follows message_terms by triggers, so a message's words are written in one statement.
SQLITE_TRIGGERS = {
    "message_terms_added": f"AFTER INSERT ON message_terms BEGIN "
    f"INSERT INTO {MESSAGE_FTS} (rowid, terms) VALUES (new.id, new.terms); END",
    "message_terms_changed": f"AFTER UPDATE OF terms ON message_terms BEGIN "
    f"UPDATE {MESSAGE_FTS} SET terms = new.terms WHERE rowid = old.id; END",
    "message_terms_removed": f"AFTER DELETE ON message_terms BEGIN DELETE FROM {MESSAGE_FTS} WHERE rowid = old.id; END",
}
SQLITE_CREATE = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {MESSAGE_FTS} USING fts5(terms, tokenize='unicode61')",
    *(f"CREATE TRIGGER IF NOT EXISTS {name} {body}" for name, body in SQLITE_TRIGGERS.items()),
)
POSTGRES_CREATE = (
    f"ALTER TABLE message_terms ADD COLUMN IF NOT EXISTS {MESSAGE_VECTOR} tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED",
    f"CREATE INDEX IF NOT EXISTS {MESSAGE_VECTOR_INDEX} ON message_terms USING gin ({MESSAGE_VECTOR})",
)
# A message without words (only punctuation, or emptied) leaves the index.
REMOVE = sa.delete(message_terms).where(message_terms.c.step_id == sa.bindparam("step_id"))


@dataclass(frozen=True)
class Hit:
    """A message that matches a search: which, in which chat, how well (higher is better)."""

    step_id: str
    thread_id: str
    score: float


def is_sqlite(connection: Connection) -> bool:
    return connection.dialect.name == "sqlite"


def create(connection: Connection) -> None:
    """The index, for the database at hand (what is there already is kept)."""
    for statement in SQLITE_CREATE if is_sqlite(connection) else POSTGRES_CREATE:
        connection.execute(sa.text(statement))


def drop(connection: Connection) -> None:
    """The index gone (a migration's downgrade)."""
    if is_sqlite(connection):
        drop_triggers(connection)
        connection.execute(sa.text(f"DROP TABLE IF EXISTS {MESSAGE_FTS}"))


def drop_triggers(connection: Connection) -> None:
    """SQLite's triggers gone (a migration's downgrade: the code before them wrote the FTS5 table itself)."""
    if is_sqlite(connection):
        for name in SQLITE_TRIGGERS:
            connection.execute(sa.text(f"DROP TRIGGER IF EXISTS {name}"))


@functools.cache
def replacing(dialect: str) -> sa.Insert:
    """A message's words added, or put in place of other ones it had; built once (every message runs it)."""
    statement = insert_into(message_terms, dialect)
    new = statement.excluded
    changed = sa.or_(message_terms.c.terms != new.terms, message_terms.c.thread_id != new.thread_id)
    return statement.on_conflict_do_update(
        index_elements=["step_id"], set_={"terms": new.terms, "thread_id": new.thread_id}, where=changed
    )


def index(connection: Connection, step_id: str, thread_id: str, kind: str, text: str) -> None:
    """A message's words as they stand now: a message written anew with other words has them replaced."""
    if kind not in SEARCHED:
        return
    if terms := indexed(text):
        connection.execute(
            replacing(connection.dialect.name), {"step_id": step_id, "thread_id": thread_id, "terms": terms}
        )
    else:
        connection.execute(REMOVE, {"step_id": step_id})


def unindex(connection: Connection, step_ids: Ids) -> None:
    """The messages' words out of the index."""
    connection.execute(sa.delete(message_terms).where(message_terms.c.step_id.in_(step_ids)))


def unindex_chats(connection: Connection, thread_ids: Ids) -> None:
    """Every message of these chats out of the index."""
    unindex(connection, sa.select(message_terms.c.step_id).where(message_terms.c.thread_id.in_(thread_ids)))


def search(connection: Connection, terms: Sequence[str], chats: sa.Select[Any], limit: int) -> list[Hit]:
    """The messages of the chats in `chats` matching any of the terms, best first."""
    if not terms:
        return []
    in_chats = message_terms.c.thread_id.in_(chats)
    if is_sqlite(connection):
        fts = sa.table(MESSAGE_FTS, sa.column("rowid"))
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        rank = sa.func.bm25(sa.literal_column(MESSAGE_FTS)).label("rank")
        query = (
            sa.select(message_terms.c.step_id, message_terms.c.thread_id, rank)
            .join(fts, fts.c.rowid == message_terms.c.id)
            .where(sa.literal_column(MESSAGE_FTS).op("MATCH")(match), in_chats)
            .order_by(rank, message_terms.c.id.desc())  # bm25(): lower is better; then the newer
        )
        return [Hit(row.step_id, row.thread_id, -row.rank) for row in connection.execute(query.limit(limit))]
    vector: sa.ColumnElement[Any] = sa.literal_column(f"message_terms.{MESSAGE_VECTOR}")
    wanted = sa.func.websearch_to_tsquery(sa.literal_column("'simple'"), " or ".join(terms))
    score = sa.func.ts_rank(vector, wanted).label("score")
    query = (
        sa.select(message_terms.c.step_id, message_terms.c.thread_id, score)
        .where(vector.op("@@")(wanted), in_chats)
        .order_by(score.desc(), message_terms.c.id.desc())
    )
    return [Hit(row.step_id, row.thread_id, row.score) for row in connection.execute(query.limit(limit))]


def backfill(connection: Connection) -> None:
    """Index every stored question and answer (a migration: the index is new, the messages are not)."""
    rows = connection.execute(
        sa.select(steps.c.id, steps.c.thread_id, steps.c.type, steps.c.output).where(steps.c.type.in_(SEARCHED))
    )
    for row in rows.all():
        index(connection, row.id, row.thread_id, row.type, row.output)
