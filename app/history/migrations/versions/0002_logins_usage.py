"""Logins (failures for throttling, sessions ended by logout, tokens voided by a new password); usage per day."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("users") as users:
        users.add_column(sa.Column("sessions_from", sa.Float))
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False, index=True),
        sa.Column("address", sa.String(64), nullable=False, index=True),
        sa.Column("at", sa.Float, nullable=False, index=True),
    )
    op.create_table(
        "ended_sessions",
        sa.Column("token_digest", sa.String(64), primary_key=True),
        sa.Column("expires_at", sa.Float, nullable=False, index=True),
    )
    op.create_table(
        "usage",
        sa.Column("user", sa.String(255), primary_key=True),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("answers", sa.Integer, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("usage")
    op.drop_table("ended_sessions")
    op.drop_table("login_failures")
    with op.batch_alter_table("users") as users:
        users.drop_column("sessions_from")
