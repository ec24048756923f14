"""`python -m tools.explain_search`: PostgreSQL's plan and time for the passage search of one question.

A throwaway PostgreSQL cluster; a 1 000-page manual (tests/support/documents.py's, as the app reads a PDF: its pages'
text) kept through the app's own Library; then a question searched as a chat searches it, each SQL statement the
search issues captured from SQLAlchemy and run again under `EXPLAIN (ANALYZE, BUFFERS)` (after the search itself, so
the pages it reads are in PostgreSQL's buffers, as a chat's second question finds them). Printed: per statement its
SQL and its plan.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from app.chat.attachments import Attachment
from app.history.database import database_url
from tests.support.documents import ENGLISH_NEEDLE, ENGLISH_QUESTION, english_pages
from tests.support.postgres import PostgresServer
from tests.support.servers import running
from tools.bench_retrieval import USER, library_on

CHAT = "explained"
# Where the needle is: the middle of the book, so neither end of the passages' order finds it first.
NEEDLE_PAGE = 500


def manual(pages: int) -> Attachment:
    """The test manual of `pages` pages as the app reads the PDF: each page's text, the pages apart."""
    texts = tuple("\n".join(lines) for lines in english_pages(pages, 40, {min(NEEDLE_PAGE, pages): ENGLISH_NEEDLE}))
    text = "\n\n".join(texts)
    return Attachment("manual.pdf", "application/pdf", text, texts, size=len(text.encode()))


@contextlib.contextmanager
def captured(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (with their parameters) the engine runs meanwhile."""
    statements: list[tuple[str, Any]] = []

    def record(_connection: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        statements.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def explained(engine: Engine, statement: str, parameters: Any) -> str:
    """The statement's plan as PostgreSQL ran it: rows, times and buffers per node."""
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters).scalars()
        return "\n".join(rows)


async def explain(url: str, pages: int, question: str) -> str:
    """Keep the manual, search the question once, then explain each statement of the search."""
    async with library_on(url, per_chat=1) as library:
        kept = await library.keep(USER, CHAT, manual(pages))
        engine = library.writer.engine
        with captured(engine) as statements:
            found = await library.find(USER, CHAT, [question], 24)
        lines = [f"{pages} pages kept: {kept.passages} passages; {len(found)} found for {question!r}."]
        for statement, parameters in statements:
            if statement.lstrip().upper().startswith("SELECT"):
                lines += ["", statement, "", explained(engine, statement, parameters)]
        return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000, help="pages of the manual kept")
    parser.add_argument("--question", default=ENGLISH_QUESTION, help="the question searched")
    args = parser.parse_args()
    server = PostgresServer("explain-search")
    with running(server), tempfile.TemporaryDirectory() as folder:
        url = database_url(server.new_database("explained"), Path(folder))
        print(asyncio.run(explain(url, args.pages, args.question)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
