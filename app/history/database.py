"""The history database: its URL, an engine tuned for it, and its schema brought up to date."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url

from app.history.schema import migrate

# The driver for each database a user may name. Synchronous drivers run in worker threads: a batch of
# statements costs one thread hop, where an async driver costs a hop (and a greenlet switch) per statement.
DRIVERS = {"sqlite": "sqlite+pysqlite", "postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}
# Seconds a SQLite writer waits for another process's transaction (a second app on the same file).
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Seconds to reach PostgreSQL before the write counts as failed (libpq waits forever by default).
POSTGRES_CONNECT_TIMEOUT_S = 10
# TCP keepalives and a bound on unacknowledged sends: a connection whose server vanished (a half-open one, after a
# failover or a cable pulled) fails within about half a minute instead of when TCP gives up (hours).
POSTGRES_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}


def database_url(configured: str, data_dir: Path) -> str:
    """The URL with the app's driver; empty means a SQLite file in the data folder."""
    if not configured.strip():
        return f"{DRIVERS['sqlite']}:///{data_dir.resolve() / 'chat.db'}"
    url = make_url(configured.strip())
    backend = url.get_backend_name()
    if backend not in DRIVERS:
        raise ValueError(f"{url.drivername!r}: the history is kept in SQLite or PostgreSQL")
    return url.set(drivername=DRIVERS[backend]).render_as_string(hide_password=False)


def describe(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


# An INSERT's row count kept for every driver (SQLAlchemy keeps only UPDATE's and DELETE's by default; psycopg's
# INSERT then reads -1, true): whether an INSERT ... ON CONFLICT wrote is how a name is found taken, a replayed
# write found made already, a message found to be another chat's.
COUNTED_ROWS = {"preserve_rowcount": True}


def create_engine(url: str, statement_timeout_s: float | None = None) -> Engine:
    """An engine; SQLite gets WAL (readers never wait for the writer) and waits out other writers; PostgreSQL
    keepalives, and statements cancelled past `statement_timeout_s` (none: no bound, as migrations need)."""
    if make_url(url).get_backend_name() != "sqlite":
        connect: dict[str, Any] = {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S, **POSTGRES_KEEPALIVES}
        if statement_timeout_s is not None:
            connect["options"] = f"-c statement_timeout={math.ceil(statement_timeout_s * 1000)}"
        return sa.create_engine(url, pool_pre_ping=True, connect_args=connect, execution_options=COUNTED_ROWS)
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, execution_options=COUNTED_ROWS)

    @event.listens_for(engine, "connect")
    def tune(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    return engine


def upgrade(engine: Engine) -> None:
    """Create or migrate the schema to the newest version."""
    with engine.begin() as connection:
        migrate(connection)
