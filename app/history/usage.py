"""Tokens per user and day (UTC), from vLLM's usage figures: a daily quota, and `make usage`."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from app.config import get_settings, load_or_explain
from app.history.database import create_engine, database_url, upgrade
from app.history.schema import insert_into, usage
from app.history.writes import Kept, Writer


def today() -> str:
    """The UTC day usage is counted in."""
    return datetime.now(UTC).strftime("%Y-%m-%d")


class Usage:
    """One user's tokens per day, added to at each answer."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        insert = insert_into(usage, writer.engine.dialect.name)
        self._add = insert.on_conflict_do_update(
            index_elements=["user", "day"],
            set_={
                "answers": usage.c.answers + insert.excluded.answers,
                "prompt_tokens": usage.c.prompt_tokens + insert.excluded.prompt_tokens,
                "completion_tokens": usage.c.completion_tokens + insert.excluded.completion_tokens,
            },
        )
        writer.appliers["usage"] = lambda connection, row, _at: connection.execute(self._add, row)

    async def add(self, user: str, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one answer's tokens (in the same batch as the answer's own write)."""
        row = {
            "user": user[:255],
            "day": today(),
            "answers": 1,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
        }
        # Kept like a message: counted once the database takes it (its id makes a second try count nothing).
        await self.writer.keep("count the tokens used", Kept(f"usage:{row['user']}", "usage", row))

    async def tokens_today(self, user: str) -> int:
        """Tokens the user had vLLM read and write today."""
        query = sa.select(usage.c.prompt_tokens + usage.c.completion_tokens).where(
            usage.c.user == user, usage.c.day == today()
        )
        return int(await self.writer.read("read today's usage", lambda c: c.execute(query).scalar()) or 0)


def report(engine: Engine, days: int) -> str:
    """Usage per user and day over the last `days` days, as a Markdown table."""
    since = (datetime.now(UTC) - timedelta(days=days - 1)).strftime("%Y-%m-%d")
    query = sa.select(usage).where(usage.c.day >= since).order_by(usage.c.day.desc(), usage.c.user)
    with engine.connect() as connection:
        rows = list(connection.execute(query))
    lines = ["| day | user | answers | prompt tokens | completion tokens |", "|---|---|---|---|---|"]
    lines += [f"| {r.day} | {r.user} | {r.answers} | {r.prompt_tokens} | {r.completion_tokens} |" for r in rows]
    return "\n".join(lines) if rows else f"No answers in the last {days} day(s)."


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m app.history.usage", description=__doc__)
    parser.add_argument("--days", type=int, default=7, help="how many days back (default 7)")
    args = parser.parse_args()
    settings = load_or_explain(get_settings, "make usage")
    if settings is None:
        return 2
    engine = create_engine(database_url(settings.database_url, settings.data_dir))
    try:
        upgrade(engine)
        print(report(engine, max(1, args.days)))
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
