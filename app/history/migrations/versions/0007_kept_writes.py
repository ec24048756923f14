"""Writes made exactly once and in time: the ids of kept writes made, deleted chats, when rows were last written."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_kept_writes"
down_revision = "0006_identities"


def upgrade() -> None:
    op.create_table(
        "applied_writes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("at", sa.Float, nullable=False, index=True),
    )
    op.create_table(
        "deleted_chats",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("deleted_at", sa.Float, nullable=False),
    )
    op.add_column("threads", sa.Column("changed_at", sa.Float))
    op.add_column("steps", sa.Column("saved_at", sa.Float))
    op.add_column("documents", sa.Column("complete", sa.Boolean, nullable=False, server_default=sa.true()))


def downgrade() -> None:
    for table, column in (("documents", "complete"), ("steps", "saved_at"), ("threads", "changed_at")):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
    op.drop_table("deleted_chats")
    op.drop_table("applied_writes")
