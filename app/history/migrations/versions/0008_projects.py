"""Organizing chats: projects (instructions, documents), pinned and archived chats, the messages' full-text index,
and users whose every chat is temporary."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.history import message_index

revision = "0008_projects"
down_revision = "0007_kept_writes"


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("instructions", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("user_id", "name", name="uq_projects_user_name"),
    )
    op.create_table(
        "project_documents",
        sa.Column("project_id", sa.String(36), sa.ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True),
        sa.Column(
            "document_id",
            sa.String(36),
            sa.ForeignKey("documents.id", ondelete="CASCADE"),
            primary_key=True,
            index=True,
        ),
        sa.Column("added_at", sa.Float, nullable=False),
    )
    op.create_table(
        "message_terms",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("step_id", sa.String(36), nullable=False, unique=True),
        sa.Column("thread_id", sa.String(36), nullable=False, index=True),
        sa.Column("terms", sa.Text, nullable=False),
    )
    with op.batch_alter_table("threads") as threads:
        threads.add_column(sa.Column("project_id", sa.String(36)))
        threads.add_column(sa.Column("pinned_at", sa.Float))
        threads.add_column(sa.Column("archived_at", sa.Float))
        threads.create_index("ix_threads_project_id", ["project_id"])
        threads.create_foreign_key("fk_threads_project_id", "projects", ["project_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("users") as users:
        users.add_column(sa.Column("temporary_only", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("presets") as presets:
        presets.add_column(sa.Column("project_id", sa.String(36)))
        presets.create_foreign_key("fk_presets_project_id", "projects", ["project_id"], ["id"], ondelete="SET NULL")
    message_index.create(op.get_bind())
    message_index.backfill(op.get_bind())


def downgrade() -> None:
    message_index.drop(op.get_bind())
    with op.batch_alter_table("presets") as presets:
        presets.drop_constraint("fk_presets_project_id", type_="foreignkey")
        presets.drop_column("project_id")
    with op.batch_alter_table("users") as users:
        users.drop_column("temporary_only")
    with op.batch_alter_table("threads") as threads:
        threads.drop_constraint("fk_threads_project_id", type_="foreignkey")
        threads.drop_index("ix_threads_project_id")
        for column in ("archived_at", "pinned_at", "project_id"):
            threads.drop_column(column)
    for table in ("message_terms", "project_documents", "projects"):
        op.drop_table(table)
