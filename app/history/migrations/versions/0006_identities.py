"""Sign-on identities by (provider, subject); the per-user allowance to link by e-mail; old local logins ended.

A proxy user keeps their account: each user without a password (but the local user) gets the identity the proxy's
user header gave them, their name. The local user's logins made before now end: they may have come through a
tunnel or a proxy on this machine, which the key link now keeps out.
"""

from __future__ import annotations

import math
import time

import sqlalchemy as sa
from alembic import op

revision = "0006_identities"
down_revision = "0005_team"

# The names as they were when this was written (app/identity/claims.py).
LOCAL_USER = "local"
PROXY_PROVIDER = "proxy"


def upgrade() -> None:
    op.add_column("users", sa.Column("sign_on_may_link", sa.Boolean, nullable=False, server_default=sa.false()))
    identities = op.create_table(
        "identities",
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("subject", sa.String(255), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.id"), nullable=False, index=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used_at", sa.Float),
    )
    users = sa.table(
        "users",
        sa.column("id", sa.String),
        sa.column("identifier", sa.String),
        sa.column("password_hash", sa.Text),
        sa.column("sessions_from", sa.Float),
    )
    passwordless = sa.select(
        sa.literal(PROXY_PROVIDER), users.c.identifier, users.c.id, sa.literal(time.time(), sa.Float)
    ).where(users.c.password_hash.is_(None), users.c.identifier != LOCAL_USER)
    op.execute(sa.insert(identities).from_select(["provider", "subject", "user_id", "created_at"], passwordless))
    # Login tokens carry whole seconds: those of this second end too (app/history/accounts.py next_second).
    ended = sa.update(users).where(users.c.identifier == LOCAL_USER).values(sessions_from=math.floor(time.time()) + 1)
    op.execute(ended)


def downgrade() -> None:
    op.drop_table("identities")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("sign_on_may_link")
