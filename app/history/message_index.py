"""The messages' full-text index in the database's own search: questions and answers by their words, Chinese
segmented as passages are (SQLite's FTS5 with BM25; PostgreSQL's stored tsvector with a GIN index)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import MESSAGE_FTS, MESSAGE_VECTOR, MESSAGE_VECTOR_INDEX, message_terms, steps
from app.terms import indexed

# Ids given as a list or as a statement selecting them.
Ids = Sequence[str] | sa.Select[Any] | sa.ScalarSelect[Any]
# The kinds of message searched: what the person and the model said.
SEARCHED = ("user_message", "assistant_message")
SQLITE_CREATE = f"CREATE VIRTUAL TABLE IF NOT EXISTS {MESSAGE_FTS} USING fts5(terms, tokenize='unicode61')"
POSTGRES_CREATE = (
    f"ALTER TABLE message_terms ADD COLUMN IF NOT EXISTS {MESSAGE_VECTOR} tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED",
    f"CREATE INDEX IF NOT EXISTS {MESSAGE_VECTOR_INDEX} ON message_terms USING gin ({MESSAGE_VECTOR})",
)

# A message's index statements, built once: building one costs more CPU than running it, and every question and
# answer runs them in the writer's transaction.
HELD = sa.select(message_terms.c.thread_id, message_terms.c.terms).where(
    message_terms.c.step_id == sa.bindparam("step_id")
)
ADD = sa.insert(message_terms).returning(message_terms.c.id)
ADD_TO_FTS = sa.text(f"INSERT INTO {MESSAGE_FTS} (rowid, terms) VALUES (:id, :terms)")


@dataclass(frozen=True)
class Hit:
    """A message that matches a search: which, in which chat, how well (higher is better)."""

    step_id: str
    thread_id: str
    score: float


def is_sqlite(connection: Connection) -> bool:
    return connection.dialect.name == "sqlite"


def create(connection: Connection) -> None:
    """The index, for the database at hand."""
    for statement in (SQLITE_CREATE,) if is_sqlite(connection) else POSTGRES_CREATE:
        connection.execute(sa.text(statement))


def drop(connection: Connection) -> None:
    """The index gone (a migration's downgrade)."""
    if is_sqlite(connection):
        connection.execute(sa.text(f"DROP TABLE IF EXISTS {MESSAGE_FTS}"))


def index(connection: Connection, step_id: str, thread_id: str, kind: str, text: str) -> None:
    """A message's words as they stand now: a message written anew with other words has them replaced."""
    if kind not in SEARCHED:
        return
    terms = indexed(text)
    held = connection.execute(HELD, {"step_id": step_id}).all()
    if [tuple(row) for row in held] == ([(thread_id, terms)] if terms else []):
        return  # the same words (a question's place or an answer's stats written again): nothing to rewrite
    if held:
        unindex(connection, [step_id])
    if not terms:
        return
    row = connection.execute(ADD, {"step_id": step_id, "thread_id": thread_id, "terms": terms}).scalar_one()
    if is_sqlite(connection):
        connection.execute(ADD_TO_FTS, {"id": row, "terms": terms})


def unindex(connection: Connection, step_ids: Ids) -> None:
    """The messages' words out of the index."""
    which = message_terms.c.step_id.in_(step_ids)
    if is_sqlite(connection):
        rows = connection.execute(sa.select(message_terms.c.id).where(which)).scalars().all()
        if rows:
            connection.execute(sa.text(f"DELETE FROM {MESSAGE_FTS} WHERE rowid = :id"), [{"id": row} for row in rows])
    connection.execute(sa.delete(message_terms).where(which))


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
