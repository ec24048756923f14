"""Documents: each user's files, their passages in the database's full-text index, their chats and presets."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_documents"
down_revision = "0003_presets"

# The full-text index as this revision made it (0009 changed it): SQLite's FTS5 table, PostgreSQL's expression index.
SQLITE_INDEX = "CREATE VIRTUAL TABLE IF NOT EXISTS passage_terms USING fts5(terms, tokenize='unicode61')"
POSTGRES_INDEX = "CREATE INDEX IF NOT EXISTS ix_passages_terms ON passages USING gin (to_tsvector('simple', terms))"


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("bytes", sa.Integer, nullable=False),
        sa.Column("pages", sa.Integer, nullable=False),
        sa.Column("thread_id", sa.String(36), index=True),
        sa.Column("text", sa.Text),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "passages",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "document_id", sa.String(36), sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("page", sa.Integer),
        sa.Column("heading", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("terms", sa.Text, nullable=False),
        sa.Column("embedding", sa.LargeBinary),
    )
    op.create_table(
        "chat_documents",
        sa.Column("thread_id", sa.String(36), primary_key=True),
        sa.Column(
            "document_id",
            sa.String(36),
            sa.ForeignKey("documents.id", ondelete="CASCADE"),
            primary_key=True,
            index=True,
        ),
        sa.Column("added_at", sa.String(40), nullable=False),
    )
    op.execute(SQLITE_INDEX if op.get_bind().dialect.name == "sqlite" else POSTGRES_INDEX)
    with op.batch_alter_table("presets") as presets:
        presets.add_column(sa.Column("documents", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("presets") as presets:
        presets.drop_column("documents")
    op.execute("DROP TABLE passage_terms" if op.get_bind().dialect.name == "sqlite" else "DROP INDEX ix_passages_terms")
    op.drop_table("chat_documents")
    op.drop_table("passages")
    op.drop_table("documents")
