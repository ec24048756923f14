"""The team: admins, e-mails that link single sign-on, last logins, limits per user, team defaults, the admin log."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_team"
down_revision = "0004_documents"


def upgrade() -> None:
    op.add_column("users", sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("users", sa.Column("email", sa.String(255)))
    op.add_column("users", sa.Column("last_login_at", sa.Float))
    op.create_index("ix_users_email", "users", ["email"], unique=True)
    op.create_table(
        "user_limits",
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("answers_at_once", sa.Integer),
        sa.Column("messages_per_minute", sa.Integer),
        sa.Column("daily_tokens", sa.Integer),
    )
    op.create_table(
        "team_settings",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.JSON, nullable=False),
    )
    op.create_table(
        "admin_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float, nullable=False, index=True),
        sa.Column("admin", sa.String(255), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
    )
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("seen_at", sa.Float, nullable=False, index=True),
    )


def downgrade() -> None:
    for table in ("replicas", "admin_log", "team_settings", "user_limits"):
        op.drop_table(table)
    op.drop_index("ix_users_email", "users")
    with op.batch_alter_table("users") as batch:
        for column in ("last_login_at", "email", "is_admin"):
            batch.drop_column(column)
