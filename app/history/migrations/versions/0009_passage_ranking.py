"""Passages ranked alike on both databases, counted once, never renumbered; a document kept once per user.

Documents get the digest of their text; passages their token count and their number of words. SQLite's passages
become AUTOINCREMENT, the sequence starting past every passage id an answer names, so no old source opens a new
passage. The terms are rewritten as runs of letters and digits (what both databases' tokenizers keep whole), FTS5
keeps diacritics as PostgreSQL's 'simple' does and gets a vocabulary table, and PostgreSQL stores each passage's
tsvector under its GIN index instead of computing it per question and row.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0009_passage_ranking"
down_revision = "0008_projects"

# The index's SQL as it was when this was written (app/history/passage_index.py), before and after.
WORD = re.compile(r"[^\W_]+")
OLD_FTS5 = "CREATE VIRTUAL TABLE passage_terms USING fts5(terms, tokenize='unicode61')"
NEW_FTS5 = "CREATE VIRTUAL TABLE passage_terms USING fts5(terms, tokenize='unicode61 remove_diacritics 0')"
VOCABULARY = "CREATE VIRTUAL TABLE passage_terms_vocabulary USING fts5vocab(passage_terms, instance)"
OLD_GIN = "CREATE INDEX ix_passages_terms ON passages USING gin (to_tsvector('simple', terms))"
VECTOR = (
    "ALTER TABLE passages ADD COLUMN terms_vector tsvector GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED"
)
NEW_GIN = "CREATE INDEX ix_passages_terms ON passages USING gin (terms_vector)"
# The highest passage id any stored answer names (its metadata's sources), malformed metadata left out.
NAMED_PASSAGES = """
SELECT max(CAST(json_extract(source.value, '$.passage') AS INTEGER))
FROM steps, json_each(CASE WHEN json_valid(steps.metadata) THEN steps.metadata ELSE '{}' END, '$.sources') AS source
"""
CHUNK = 500
passages = sa.table("passages", sa.column("id", sa.Integer), sa.column("terms"), sa.column("length", sa.Integer))


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("digest", sa.String(64)))
        batch.create_index("ix_documents_user_digest", ["user_id", "digest"])
    op.execute("DROP TABLE IF EXISTS passage_terms" if sqlite else "DROP INDEX IF EXISTS ix_passages_terms")
    with op.batch_alter_table(
        "passages", recreate="always" if sqlite else "auto", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        batch.add_column(sa.Column("tokens", sa.Integer))
        batch.add_column(sa.Column("length", sa.Integer, nullable=False, server_default="0"))
    rewrite_terms()
    if sqlite:
        op.execute(NEW_FTS5)
        op.execute(VOCABULARY)
        op.execute("INSERT INTO passage_terms (rowid, terms) SELECT id, terms FROM passages")
        start_past_named_passages()
    else:
        op.execute(VECTOR)
        op.execute(NEW_GIN)


def rewrite_terms() -> None:
    """Each passage's terms as runs of letters and digits, and how many there are."""
    bind = op.get_bind()
    last = 0
    while rows := bind.execute(
        sa.select(passages.c.id, passages.c.terms).where(passages.c.id > last).order_by(passages.c.id).limit(CHUNK)
    ).all():
        changed = []
        for row in rows:
            words = [word for term in row.terms.split() for word in WORD.findall(term)]
            changed.append({"key": row.id, "terms": " ".join(words), "length": len(words)})
        bind.execute(
            sa.update(passages)
            .where(passages.c.id == sa.bindparam("key"))
            .values(terms=sa.bindparam("terms"), length=sa.bindparam("length")),
            changed,
        )
        last = rows[-1].id


def start_past_named_passages() -> None:
    """SQLite's sequence for passages past the highest id a stored passage or an answer's sources hold."""
    bind = op.get_bind()
    highest = max(
        bind.execute(sa.text(NAMED_PASSAGES)).scalar() or 0,
        bind.execute(sa.text("SELECT max(id) FROM passages")).scalar() or 0,
    )
    bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = 'passages'"))
    bind.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES ('passages', :seq)"), {"seq": highest})


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        op.execute("DROP TABLE passage_terms_vocabulary")
        op.execute("DROP TABLE passage_terms")
    else:
        op.execute("DROP INDEX ix_passages_terms")
        op.execute("ALTER TABLE passages DROP COLUMN terms_vector")
    with op.batch_alter_table(
        "passages", recreate="always" if sqlite else "auto", table_kwargs={"sqlite_autoincrement": False}
    ) as batch:
        batch.drop_column("length")
        batch.drop_column("tokens")
    if sqlite:
        op.execute(OLD_FTS5)
        op.execute("INSERT INTO passage_terms (rowid, terms) SELECT id, terms FROM passages")
    else:
        op.execute(OLD_GIN)
    with op.batch_alter_table("documents") as batch:
        batch.drop_index("ix_documents_user_digest")
        batch.drop_column("digest")
