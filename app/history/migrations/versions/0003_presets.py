"""Presets: each user's own named settings."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_presets"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "presets",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("preferences", sa.JSON, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.UniqueConstraint("user_id", "name", name="uq_presets_user_name"),
    )


def downgrade() -> None:
    op.drop_table("presets")
