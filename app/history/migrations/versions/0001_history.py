"""History: users, threads, steps, elements, feedbacks."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


# A revision is frozen history: it spells its tables out instead of importing today's app.history.schema.
def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("identifier", sa.String(255), nullable=False, unique=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("password_hash", sa.Text),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    op.create_table(
        "threads",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("name", sa.Text),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), index=True),
        sa.Column("tags", sa.JSON),
        sa.Column("metadata", sa.JSON, nullable=False),
    )
    op.create_table(
        "steps",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "thread_id", sa.String(36), sa.ForeignKey("threads.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("parent_id", sa.String(36)),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("input", sa.Text, nullable=False),
        sa.Column("output", sa.Text, nullable=False),
        sa.Column("is_error", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("start", sa.String(40)),
        sa.Column("end", sa.String(40)),
        sa.Column("details", sa.JSON, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
    )
    op.create_table(
        "elements",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "thread_id", sa.String(36), sa.ForeignKey("threads.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("for_id", sa.String(36)),
        sa.Column("details", sa.JSON, nullable=False),
    )
    op.create_table(
        "feedbacks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("for_id", sa.String(36), sa.ForeignKey("steps.id", ondelete="CASCADE"), nullable=False, unique=True),
        sa.Column(
            "thread_id", sa.String(36), sa.ForeignKey("threads.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("value", sa.Integer, nullable=False),
        sa.Column("comment", sa.Text),
    )


def downgrade() -> None:
    for table in ("feedbacks", "elements", "steps", "threads", "users"):
        op.drop_table(table)
