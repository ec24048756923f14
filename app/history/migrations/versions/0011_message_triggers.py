"""SQLite's full-text table of messages kept by triggers: a message's words are one statement, not three."""

from __future__ import annotations

from alembic import op

from app.history import message_index

revision = "0011_message_triggers"
down_revision = "0010_keys_memory"


def upgrade() -> None:
    message_index.create(op.get_bind())


def downgrade() -> None:
    message_index.drop_triggers(op.get_bind())
