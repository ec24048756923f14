"""The passages' full-text index in the database's own search (SQLite's FTS5, PostgreSQL's text search), ranked alike.

Each database finds the passages in scope holding a question's words and says how often each holds each word;
the ranking (BM25) is computed here from those counts, the same way for both, with each word's rarity taken among
the passages the chat searches only (not every user's, as FTS5's own bm25() would).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import (
    PASSAGE_TERMS,
    PASSAGE_TERMS_VECTOR,
    PASSAGE_TERMS_VOCABULARY,
    chat_documents,
    documents,
    passages,
)

# SQLite: an FTS5 table whose rowid is the passage's id (unicode61: the terms split at the spaces put between them,
# case folded, diacritics kept as PostgreSQL's 'simple' configuration keeps them), and its `instance` vocabulary,
# which says where each word is. PostgreSQL: the terms' tsvector ('simple': every word as it is) stored with each
# passage under a GIN index. Both are made by the migrations (0009).
SQLITE_TABLE = PASSAGE_TERMS
SQLITE_VOCABULARY = PASSAGE_TERMS_VOCABULARY
POSTGRES_VECTOR = PASSAGE_TERMS_VECTOR
# BM25's constants, as FTS5's bm25() and most search engines use them.
K1 = 0.9
B = 0.4


class Occurrence(NamedTuple):
    """How often a passage holds a word, and how many words the passage holds."""

    passage: int
    length: int
    term: str
    times: int


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


def search(
    connection: Connection, terms: Mapping[str, float], scope: sa.Select[Any], limit: int
) -> list[tuple[int, float]]:
    """The passages of the documents in `scope` holding any of the terms, best first, with their BM25 scores.

    `terms`: each word with its weight (a word of the question before counts less than one of the question).
    """
    if not terms:
        return []
    in_scope = passages.c.document_id.in_(scope)
    found = occurrences(connection, list(terms), in_scope)
    if not found:
        return []
    total, average = connection.execute(
        sa.select(sa.func.count(), sa.func.avg(passages.c.length)).where(in_scope)
    ).one()
    return ranked(found, terms, int(total), float(average or 1), limit)


def occurrences(connection: Connection, terms: Sequence[str], in_scope: Any) -> list[Occurrence]:
    """Each passage in scope holding one of the terms: how often it holds each, and its length."""
    if is_sqlite(connection):
        vocabulary = sa.table(SQLITE_VOCABULARY, sa.column("term"), sa.column("doc"))
        query = (
            sa.select(passages.c.id, passages.c.length, vocabulary.c.term, sa.func.count())
            .join(passages, passages.c.id == vocabulary.c.doc)
            .where(vocabulary.c.term.in_(terms), in_scope)
            .group_by(passages.c.id, passages.c.length, vocabulary.c.term)
        )
    else:
        simple: sa.ColumnElement[str] = sa.literal_column("'simple'")
        vector: sa.ColumnElement[Any] = sa.literal_column(f"passages.{POSTGRES_VECTOR}")
        # Each term written as the vector's lexemes are (the words are letters and digits: no quoting needed).
        wanted = sa.func.to_tsquery(simple, " | ".join(terms))
        held = sa.func.unnest(vector).table_valued("lexeme", "positions", "weights").alias("held")
        query = (
            sa.select(passages.c.id, passages.c.length, held.c.lexeme, sa.func.cardinality(held.c.positions))
            .select_from(passages.join(held, sa.true()))  # a function in FROM sees the rows before it (lateral)
            .where(vector.op("@@")(wanted), in_scope, held.c.lexeme.in_(terms))
        )
    return [Occurrence(*row) for row in connection.execute(query)]


def ranked(
    found: Iterable[Occurrence], weights: Mapping[str, float], total: int, average: float, limit: int
) -> list[tuple[int, float]]:
    """BM25 over the occurrences, each word's rarity among the `total` passages in scope; best first (ties by id)."""
    found = list(found)
    holding = Counter(occurrence.term for occurrence in found)
    scores: defaultdict[int, float] = defaultdict(float)
    for passage, length, term, times in found:
        rarity = math.log(1 + (total - holding[term] + 0.5) / (holding[term] + 0.5))
        saturation = times * (K1 + 1) / (times + K1 * (1 - B + B * length / average))
        scores[passage] += weights.get(term, 0.0) * rarity * saturation
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return best[:limit]
