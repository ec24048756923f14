"""Personal API keys (their SHA-256 only) and each user's memory ("About you")."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_keys_memory"
down_revision = "0009_passage_ranking"


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("start", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used_at", sa.Float),
    )
    op.create_table(
        "memories",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for table in ("memories", "api_keys"):
        op.drop_table(table)
