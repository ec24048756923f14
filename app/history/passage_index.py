"""The passages' full-text index in the database's own search: SQLite's FTS5, PostgreSQL's text search."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import PASSAGE_TERMS, PASSAGE_TERMS_INDEX, chat_documents, documents, passages

# SQLite: an FTS5 table whose rowid is the passage's id (BM25 ranking built in). unicode61 splits the
# segmented terms at the spaces put between them and folds case and diacritics.
SQLITE_TABLE = PASSAGE_TERMS
SQLITE_CREATE = f"CREATE VIRTUAL TABLE IF NOT EXISTS {SQLITE_TABLE} USING fts5(terms, tokenize='unicode61')"
# PostgreSQL: a GIN index over the terms' tsvector; 'simple' keeps every word as it is (no English stemming,
# which would also change Chinese words' neighbours), so both databases match the same words.
POSTGRES_INDEX = PASSAGE_TERMS_INDEX
POSTGRES_CREATE = f"CREATE INDEX IF NOT EXISTS {POSTGRES_INDEX} ON passages USING gin (to_tsvector('simple', terms))"


def create(connection: Connection) -> None:
    """The index, for the database at hand."""
    connection.execute(sa.text(SQLITE_CREATE if is_sqlite(connection) else POSTGRES_CREATE))


def drop(connection: Connection) -> None:
    """The index gone (a migration's downgrade)."""
    statement = f"DROP TABLE IF EXISTS {SQLITE_TABLE}" if is_sqlite(connection) else f"DROP INDEX {POSTGRES_INDEX}"
    connection.execute(sa.text(statement))


def is_sqlite(connection: Connection) -> bool:
    return connection.dialect.name == "sqlite"


def add(connection: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Store passages (each a passages row without its id) and index them."""
    connection.execute(sa.insert(passages), list(rows))
    if is_sqlite(connection):
        added = sorted({(row["document_id"], row["ordinal"]) for row in rows})
        fresh = sa.select(passages.c.id, passages.c.terms).where(
            sa.tuple_(passages.c.document_id, passages.c.ordinal).in_(added)
        )
        connection.execute(
            sa.text(f"INSERT INTO {SQLITE_TABLE} (rowid, terms) VALUES (:id, :terms)"),
            [dict(row._mapping) for row in connection.execute(fresh)],
        )


def remove(connection: Connection, document_ids: sa.Select[Any] | Sequence[str]) -> None:
    """The documents' passages and their index rows, and the documents' places in chats; then the documents."""
    ids = [row[0] for row in connection.execute(document_ids)] if isinstance(document_ids, sa.Select) else document_ids
    if not ids:
        return
    if is_sqlite(connection):
        theirs = connection.execute(sa.select(passages.c.id).where(passages.c.document_id.in_(ids))).all()
        unindex = sa.text(f"DELETE FROM {SQLITE_TABLE} WHERE rowid = :id")
        connection.execute(unindex, [{"id": row.id} for row in theirs])
    connection.execute(sa.delete(passages).where(passages.c.document_id.in_(ids)))
    connection.execute(sa.delete(chat_documents).where(chat_documents.c.document_id.in_(ids)))
    connection.execute(sa.delete(documents).where(documents.c.id.in_(ids)))


def search(connection: Connection, terms: Sequence[str], scope: sa.Select[Any], limit: int) -> list[int]:
    """Ids of the passages of the documents in `scope` matching any of the terms, best ranked first."""
    if not terms:
        return []
    in_scope = passages.c.document_id.in_(scope)
    if is_sqlite(connection):
        fts = sa.table(SQLITE_TABLE, sa.column("rowid"), sa.column("terms"))
        # FTS5 query: each term a quoted string (a quote in it doubled), any of them.
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        rank = sa.func.bm25(sa.literal_column(SQLITE_TABLE))
        query = (
            sa.select(passages.c.id)
            .join(fts, fts.c.rowid == passages.c.id)
            .where(sa.literal_column(SQLITE_TABLE).op("MATCH")(match), in_scope)
            .order_by(rank, passages.c.id)  # bm25(): lower is better
        )
    else:
        # Written as the index's expression is, so that the index serves the query.
        simple: sa.ColumnElement[str] = sa.literal_column("'simple'")
        vector = sa.func.to_tsvector(simple, passages.c.terms)
        each = [sa.func.plainto_tsquery(simple, term) for term in terms]
        weights = rarity(connection, vector, each, in_scope)
        # PostgreSQL's ranking knows how often a word is in a passage, not how rare it is among them (BM25's
        # IDF): each word's rank is weighed by its rarity in the chat's documents, so a distinctive word wins.
        score: sa.ColumnElement[float] = sa.literal(0.0)
        for weight, word in zip(weights, each, strict=True):
            score = score + weight * sa.func.ts_rank(vector, word, 1)
        # websearch syntax: any input is valid; "or" between words makes any of them match.
        wanted = sa.func.websearch_to_tsquery(simple, " or ".join(terms))
        query = sa.select(passages.c.id).where(vector.op("@@")(wanted), in_scope).order_by(score.desc(), passages.c.id)
    return [row.id for row in connection.execute(query.limit(limit))]


def rarity(
    connection: Connection, vector: sa.ColumnElement[Any], words: Sequence[sa.ColumnElement[Any]], in_scope: Any
) -> list[float]:
    """Each word's inverse document frequency among the passages in scope, as BM25 weighs it (one statement)."""
    counted = [
        sa.select(sa.func.count()).select_from(passages).where(in_scope, vector.op("@@")(word)).scalar_subquery()
        for word in words
    ]
    total, *holding = connection.execute(
        sa.select(sa.select(sa.func.count()).select_from(passages).where(in_scope).scalar_subquery(), *counted)
    ).one()
    return [math.log(1 + (total - held + 0.5) / (held + 0.5)) for held in holding]
