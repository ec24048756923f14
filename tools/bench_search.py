"""`make bench-search`: search inside messages, in Chinese: how often the chat holding the answer comes among the
first k results, and the time per search among 10 000 chats; the app's search on SQLite and PostgreSQL beside what
chat UIs commonly do, a substring match (the app before) and whitespace-word search.

Every chat holds two answers, sentences of the Chinese corpus of `make bench-retrieval` (each said exactly once);
filler chats, up to the count asked, hold the same sentences with their characters shuffled (the index as big, no
answer in them). A question is searched three ways: as a person types it into a search box ("文中关于X和Y是怎么说的"),
as the two or three words they remember of it ("X Y"), and as one of them ("X"). A hit at k: the chat with the
answer among the first k.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history import message_index
from app.history.chat_search import find, parse
from app.history.database import create_engine, upgrade
from app.history.schema import steps, threads, users
from tools.bench_retrieval import SQLITE, databases
from tools.reports import publish
from tools.retrieval_corpus import CHINESE_TEMPLATES, Corpus, corpus, sentences

ROOT = Path(__file__).resolve().parent.parent
RANKS = (1, 5, 10)
SUBSTRING = "substring (the app before; name or message, newest first)"
WHITESPACE = "whitespace words, BM25 (other chat UIs)"
APP = "this app"
# The search box's kinds of query.
TYPED, REMEMBERED, ONE_WORD = "the question as typed", "the words remembered", "one word remembered"
# Chats written per transaction while the history is filled.
CHATS_PER_TRANSACTION = 500
# What a filler chat's user says before each answer.
ASKED = "请继续讲。"
Search = Callable[[str, int], list[str]]


def templates() -> list[re.Pattern[str]]:
    """The corpus's question templates as patterns that give back the remembered words."""
    return [re.compile("^" + re.escape(t).replace(r"\{\}", "(.+)") + "$") for t in CHINESE_TEMPLATES.split("|")]


def remembered(question: str) -> list[str]:
    """The words a question names (two or three of its answer's phrases)."""
    for pattern in templates():
        if matched := pattern.match(question):
            return re.split("[、和]", matched.group(1))
    raise ValueError(f"not one of the corpus's questions: {question}")


def answers_in_chats(language: Corpus, chats: int, rng: random.Random) -> tuple[list[list[str]], dict[str, int]]:
    """Each chat's answers (two each), and the chat that holds each answer; filler chats up to `chats`."""
    said = list(dict.fromkeys(s for d in language.documents for page in d.pages for s in sentences("zh", page)))
    held = [said[i : i + 2] for i in range(0, len(said), 2)]
    where = {answer: index for index, pair in enumerate(held) for answer in pair}
    while len(held) < chats:
        held.append(["".join(rng.sample(s, len(s))) for s in rng.sample(said, 2)])
    return held, where


def fill(url: str, held: Sequence[list[str]]) -> tuple[sa.Engine, str]:
    """A migrated history holding the chats of one user, every message indexed as the app indexes it; its user."""
    engine = create_engine(url)
    upgrade(engine)
    user_id = str(uuid.uuid4())
    with engine.begin() as connection:
        connection.execute(sa.insert(users).values(id=user_id, identifier="bench", metadata={}, created_at="2026"))
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for first in range(0, len(held), CHATS_PER_TRANSACTION):
        with engine.begin() as connection:
            for index in range(first, min(first + CHATS_PER_TRANSACTION, len(held))):
                chat(connection, user_id, index, held[index], start + datetime.timedelta(minutes=index))
    return engine, user_id


def chat(connection: Connection, user_id: str, index: int, answers: list[str], at: datetime.datetime) -> None:
    """One chat: a short question before each answer, indexed as the app's store indexes its messages."""
    thread_id = f"chat-{index}"
    when = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    connection.execute(
        sa.insert(threads).values(id=thread_id, user_id=user_id, name=f"对话 {index}", created_at=when, metadata={})
    )
    for turn, answer in enumerate(answers):
        for kind, text in (("user_message", ASKED), ("assistant_message", answer)):
            step_id = f"{thread_id}-{turn}-{kind[0]}"
            row: dict[str, object] = {"id": step_id, "thread_id": thread_id, "name": kind, "type": kind, "input": ""}
            row |= {"output": text, "is_error": False, "created_at": when, "details": {}, "metadata": {}}
            connection.execute(sa.insert(steps).values(**row))
            message_index.index(connection, step_id, thread_id, kind, text)


def app_search(engine: sa.Engine, user_id: str) -> Search:
    """The app's own search over the user's chats (app/history/chat_search.py)."""

    def search(query: str, limit: int) -> list[str]:
        with engine.connect() as connection:
            return [item.chat.id for item in find(connection, user_id, parse(query), limit)]

    return search


def substring_search(engine: sa.Engine) -> Search:
    """The query as typed, anywhere in a chat's name or messages, newest chats first (the app before)."""

    def search(query: str, limit: int) -> list[str]:
        pattern = f"%{query}%"
        said = sa.select(steps.c.thread_id).where(steps.c.output.like(pattern))
        listed = sa.select(threads.c.id).where(sa.or_(threads.c.name.like(pattern), threads.c.id.in_(said)))
        with engine.connect() as connection:
            return list(connection.execute(listed.order_by(threads.c.created_at.desc()).limit(limit)).scalars())

    return search


def whitespace_search(held: Sequence[list[str]], folder: Path) -> Search:
    """SQLite FTS5 over the messages' own text (unicode61: a run of Chinese up to punctuation is one word), queried
    with the query's whitespace-separated words, any of them, BM25, the best message's chat first."""
    database = sqlite3.connect(folder / "whitespace.db")
    database.execute("CREATE VIRTUAL TABLE said USING fts5(text, chat UNINDEXED, tokenize='unicode61')")
    database.executemany(
        "INSERT INTO said (text, chat) VALUES (?, ?)",
        [(text, f"chat-{index}") for index, answers in enumerate(held) for text in (ASKED, *answers)],
    )
    database.commit()

    def search(query: str, limit: int) -> list[str]:
        match = " OR ".join('"' + word.replace('"', '""') + '"' for word in query.split())
        rows = database.execute("SELECT chat FROM said WHERE said MATCH ? ORDER BY bm25(said)", (match,))
        return list(dict.fromkeys(row[0] for row in rows))[:limit]

    return search


def measured(search: Search, queries: Sequence[tuple[str, int]]) -> tuple[list[int | None], list[float]]:
    """Where each query's chat came (None: not in the first 10), and each search's time in ms."""
    ranks, times = [], []
    for query, wanted in queries:
        began = time.perf_counter()
        found = search(query, max(RANKS))
        times.append((time.perf_counter() - began) * 1000)
        where = f"chat-{wanted}"
        ranks.append(found.index(where) + 1 if where in found else None)
    return ranks, times


def row(method: str, kind: str, ranks: list[int | None], times: list[float]) -> str:
    """A line of the table: recall at each k, and the time per search."""
    recall = [f"{sum(1 for r in ranks if r is not None and r <= k) / len(ranks):.0%}" for k in RANKS]
    p95 = sorted(times)[int(len(times) * 0.95) - 1]
    return f"| {method} | {kind} | {' | '.join(recall)} | {statistics.median(times):.1f} / {p95:.1f} |"


def run(args: argparse.Namespace) -> str:
    language = corpus("zh", questions=args.questions, seed=args.seed)
    held, where = answers_in_chats(language, args.chats, random.Random(args.seed))
    queries = {
        TYPED: [(q.text, where[q.answer]) for q in language.questions],
        REMEMBERED: [(" ".join(remembered(q.text)), where[q.answer]) for q in language.questions],
        ONE_WORD: [(remembered(q.text)[0], where[q.answer]) for q in language.questions],
    }
    lines = ["| method | query | " + " | ".join(f"recall@{k}" for k in RANKS) + " | ms per search, median / p95 |"]
    lines.append("|---|---|" + "---|" * len(RANKS) + "---|")
    with tempfile.TemporaryDirectory(prefix="bench-search-") as scratch, contextlib.ExitStack() as servers:
        folder = Path(scratch)
        urls, skipped = databases(args, folder, servers)
        print(f"filling {len(held)} chats", file=sys.stderr, flush=True)
        filled = {database: fill(url, held) for database, url in urls.items()}
        engine, _ = filled[SQLITE]
        methods = {SUBSTRING: substring_search(engine), WHITESPACE: whitespace_search(held, folder)}
        methods |= {f"{APP}, {database}": app_search(*pair) for database, pair in filled.items()}
        for method, search in methods.items():
            for kind, asked in queries.items():
                lines.append(row(method, kind, *measured(search, asked)))
        for engine, _ in filled.values():
            engine.dispose()
    header = (
        f"Search inside messages, Chinese: {len(language.questions)} questions over {len(held)} chats "
        f"({len(where)} answers in {len(set(where.values()))} chats, the rest filler), one user; "
        f"{datetime.date.today().isoformat()}. Corpus: {language.source}. "
        f"Databases: {', '.join(urls)}{' (' + skipped + ')' if skipped else ''}."
    )
    return header + "\n\n" + "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=10_000, help="chats in the history (answers, then filler)")
    parser.add_argument("--questions", type=int, default=200, help="questions searched")
    parser.add_argument("--seed", type=int, default=0, help="which questions the corpus draws")
    parser.add_argument("--skip-postgres", action="store_true", help="SQLite only (no throwaway PostgreSQL cluster)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args()
    return publish(run(args), args.out, "bench-search")


if __name__ == "__main__":
    sys.exit(main())
