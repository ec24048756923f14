"""The history database: its URL, an engine tuned for it, and its schema brought up to date."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.schema import migrate

# The async driver SQLAlchemy uses for each database a user may name.
ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg"}
# Seconds a SQLite writer waits for another process's transaction (a second app on the same file).
SQLITE_BUSY_TIMEOUT_MS = 30_000


def async_url(database_url: str, data_dir: Path) -> str:
    """The URL with an async driver; empty means a SQLite file in the data folder."""
    if not database_url.strip():
        return f"sqlite+aiosqlite:///{data_dir.resolve() / 'chat.db'}"
    url = make_url(database_url.strip())
    backend = url.get_backend_name()
    if backend not in ASYNC_DRIVERS:
        raise ValueError(f"{url.drivername!r}: the history is kept in SQLite or PostgreSQL")
    if "+" not in url.drivername:
        url = url.set(drivername=ASYNC_DRIVERS[url.drivername])
    return url.render_as_string(hide_password=False)


def describe(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


def create_engine(url: str) -> AsyncEngine:
    """An engine; SQLite gets WAL (readers never wait for the writer) and waits out other writers."""
    if make_url(url).get_backend_name() != "sqlite":
        return create_async_engine(url, pool_pre_ping=True)
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url)

    @event.listens_for(engine.sync_engine, "connect")
    def tune(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    return engine


async def upgrade(engine: AsyncEngine) -> None:
    """Create or migrate the schema to the newest version."""
    async with engine.begin() as connection:
        await connection.run_sync(migrate)
