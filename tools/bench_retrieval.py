"""`make bench-retrieval`: passage retrieval side by side (recall@k in English and Chinese), how many passages the
app sends per budget, then indexing speed.

Every row searches the same passages (what app/documents/split.py cuts of each corpus document, kept as a text
file), with each question as a person typed it. Whitespace BM25 is what other chat UIs do: SQLite FTS5 over the
passages' own text (unicode61: a run of Chinese characters up to a space or punctuation is one word), queried with
the question's whitespace-separated tokens OR'ed. Character bigrams index and query Chinese as overlapping pairs of
characters (other words as written), FTS5 and BM25 too. This project's rows are the app's Library (jieba's words) on
a SQLite file and on a throwaway PostgreSQL cluster. A hit at k: one of the first k passages contains the sentence
that answers the question. Then the app's own choice of passages (app/chat/passages.py: the strong candidates a
budget of tokens holds) per budget: how often the answer is among them, and how many passages it takes, each
passage's tokens estimated as the splitter weighs text (about one a Chinese character, one per four other
characters: ERNIE's tokenizer, which cannot be downloaded here). Then, per database, the time to read a long English
PDF and to keep it (split, segment, insert, index), and to keep a long Chinese text.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from app.chat.attachments import Attachment, Upload, UploadLimits, read
from app.chat.passages import CANDIDATES, Passage, block, chosen
from app.documents.library import Library, Outcome
from app.documents.split import CJK_WEIGHT, pieces, weight
from app.history.database import create_engine, database_url, upgrade
from app.history.schema import timestamp, users
from app.history.writes import Writer
from tests.support.pdfs import paged_pdf
from tests.support.postgres import PostgresServer, postgres_bin
from tests.support.servers import running
from tools.reports import publish
from tools.retrieval_corpus import CJK_RUN, Corpus, Document, corpus

ROOT = Path(__file__).resolve().parent.parent
LANGUAGES = ("en", "zh")
RANKS = (1, 2, 3, 5, 10)
# Passage budgets (DOCUMENT_TOKENS) the app's choice is measured at.
BUDGETS = (500, 1000, 1500, 2000, 3000)
USER = "bench"
WHITESPACE = "whitespace BM25 (what other chat UIs do)"
BIGRAMS = "character bigrams"
SQLITE = "SQLite"
POSTGRES = "PostgreSQL"
# No limit of the app's in the way: every document fits the library, and a chat searches all of its corpus.
EVERYTHING_BYTES = 1 << 40
LIMITS = UploadLimits(frozenset({".pdf", ".txt"}), max_files=1, max_bytes=EVERYTHING_BYTES)
# Seconds a database may take for one write: keeping a 300-page document on a busy 2-core machine.
TIMEOUT_S = 600.0
# The long PDF's pages: lines of about 70 characters, 40 to a page, as a printed manual's.
LINE_CHARS = 70
PAGE_LINES = 40
# The long Chinese text: this many characters make one of its nominal pages.
CHINESE_PAGE_CHARS = 1500
# Chinese runs and the other words: a bigram index cuts the first into pairs and keeps the rest whole.
CJK_OR_WORD = re.compile(r"[\u4e00-\u9fff]+|[^\W\u4e00-\u9fff]+")


@dataclass(frozen=True)
class Indexed:
    """What reading and keeping one long document cost on one database."""

    document: str
    database: str
    pages: int
    characters: int
    passages: int
    read_s: float
    keep_s: float


def as_uploaded(document: Document) -> Attachment:
    """A corpus document as the app reads it from a text file: its text alone, no pages."""
    text = "\n\n".join(document.pages)
    return Attachment(document.name, "text/plain", text, size=len(text.encode()))


def passages_of(language: Corpus) -> list[tuple[str, str]]:
    """The corpus's passages as the Library cuts a text file: what its index holds (heading and text), its text."""
    found = [piece for document in language.documents for piece in pieces([as_uploaded(document).text], paged=False)]
    return [(f"{piece.heading}\n{piece.text}", piece.text) for piece in found]


def bigrams(text: str) -> list[str]:
    """The text's Chinese runs as overlapping character pairs (a lone character alone), other words whole."""
    folded = unicodedata.normalize("NFKC", text).lower()
    found: list[str] = []
    for piece in CJK_OR_WORD.findall(folded):
        chinese = CJK_RUN.fullmatch(piece)
        found += [piece[i : i + 2] for i in range(max(len(piece) - 1, 1))] if chinese else [piece]
    return found


def fts5_found(
    passages: Sequence[tuple[str, str]],
    questions: Sequence[str],
    index: Callable[[str], str],
    query: Callable[[str], list[str]],
) -> list[list[str]]:
    """For each question, the texts of the passages FTS5 ranks first by bm25(), its query's words OR'ed."""
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        connection.execute("CREATE VIRTUAL TABLE terms USING fts5(words, tokenize='unicode61')")
        rows = [(rowid, index(indexed)) for rowid, (indexed, _) in enumerate(passages)]
        connection.executemany("INSERT INTO terms (rowid, words) VALUES (?, ?)", rows)
        found = []
        for question in questions:
            # Each word a quoted string (a quote in it doubled), as the app's own query is written.
            match = " OR ".join('"' + word.replace('"', '""') + '"' for word in dict.fromkeys(query(question)))
            ranked = connection.execute(
                "SELECT rowid FROM terms WHERE terms MATCH ? ORDER BY bm25(terms), rowid LIMIT ?",
                (match, max(RANKS)),
            )
            found.append([passages[rowid][1] for (rowid,) in ranked])
        return found


@contextlib.asynccontextmanager
async def library_on(url: str, per_chat: int) -> AsyncIterator[Library]:
    """The app's Library on an empty database brought to the newest schema, with the user whose documents it keeps."""
    engine = create_engine(url)
    upgrade(engine)
    with engine.begin() as connection:
        user = {"id": str(uuid.uuid4()), "identifier": USER, "metadata": {}, "created_at": timestamp()}
        connection.execute(sa.insert(users), user)
    writer = Writer(engine, TIMEOUT_S)
    try:
        yield Library(writer, most_bytes=EVERYTHING_BYTES, per_chat=per_chat)
    finally:
        await writer.close()


async def library_found(library: Library, language: Corpus) -> list[list[Passage]]:
    """For each question, the candidates the Library finds, best first, all the corpus kept in one chat."""
    chat = f"corpus-{language.language}"
    for document in language.documents:
        kept = await library.keep(USER, chat, as_uploaded(document))
        if kept.outcome is not Outcome.KEPT:
            raise RuntimeError(f"{document.name} not kept: {kept.outcome}")
    return [await library.find(USER, chat, [question.text], CANDIDATES) for question in language.questions]


def estimated(passage: Passage) -> Passage:
    """A passage with its tokens estimated as the splitter weighs its block (a CJK character one token, four other
    characters one)."""
    return dataclasses.replace(passage, tokens=-(-weight(block(passage)) // CJK_WEIGHT))


def budget_table(corpora: Sequence[Corpus], found: dict[str, list[list[Passage]]]) -> str:
    """Per budget and language: the share of questions whose answer is among the passages the app sends, and the
    mean passages and tokens it sends."""
    head = " | ".join(f"{language.language}: answer sent | passages | tokens" for language in corpora)
    lines = [f"| budget (tokens) | {head} |", "|---|" + "---|" * 3 * len(corpora)]
    for budget in BUDGETS:
        cells = []
        for language in corpora:
            sent = [
                chosen([estimated(passage) for passage in candidates], budget, []).passages
                for candidates in found[language.language]
            ]
            answered = [
                any(question.answer in passage.text for passage in passages)
                for passages, question in zip(sent, language.questions, strict=True)
            ]
            tokens = [sum(passage.tokens or 0 for passage in passages) for passages in sent]
            cells += [
                f"{sum(answered) / len(answered):.0%}",
                f"{statistics.mean(map(len, sent)):.1f}",
                f"{statistics.mean(tokens):.0f}",
            ]
        lines.append(f"| {budget} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def alike(corpora: Sequence[Corpus], found: dict[str, dict[str, list[list[Passage]]]]) -> str:
    """How many questions get the same first passages, in the same order, on both databases."""
    if len(found) < 2:
        return ""
    counts = []
    for language in corpora:
        rankings = [
            [[passage.text for passage in candidates[: max(RANKS)]] for candidates in database[language.language]]
            for database in found.values()
        ]
        same = sum(first == second for first, second in zip(*rankings, strict=True))
        counts.append(f"{same} of {len(language.questions)} {language.language} questions")
    return f"SQLite and PostgreSQL rank alike: the same first {max(RANKS)} passages for " + " and ".join(counts) + "."


async def keep_long(library: Library, database: str, upload: Upload, pages: int) -> Indexed:
    """One long file read as the app reads an upload, then kept in a chat of its own: the time of each."""
    started = time.perf_counter()
    file = await asyncio.to_thread(read, upload, LIMITS)
    read_s = time.perf_counter() - started
    chat = f"long-{upload.name}"
    started = time.perf_counter()
    kept = await library.keep(USER, chat, file)
    keep_s = time.perf_counter() - started
    if kept.outcome is not Outcome.KEPT:
        raise RuntimeError(f"{upload.name} not kept: {kept.outcome}")
    (listed,) = await library.listed(USER, chat)
    return Indexed(upload.name, database, pages, len(file.text), listed.passages, read_s, keep_s)


def english_pdf(english: Corpus, pages: int, folder: Path) -> Upload:
    """A PDF of the English corpus's text (repeated as needed) wrapped into pages of 40 lines of 70 characters."""
    # Helvetica, the PDF's font, draws Latin-1 only: another character becomes "?".
    lines = [
        line.encode("latin-1", "replace").decode("latin-1")
        for document in english.documents
        for page in document.pages
        for paragraph in page.split("\n")
        for line in textwrap.wrap(paragraph, LINE_CHARS) or [""]
    ]
    wanted = pages * PAGE_LINES
    lines = (lines * (wanted // len(lines) + 1))[:wanted]
    path = folder / "manual.pdf"
    path.write_bytes(paged_pdf([lines[start : start + PAGE_LINES] for start in range(0, wanted, PAGE_LINES)]))
    return Upload(path.name, "application/pdf", path)


def chinese_text(chinese: Corpus, pages: int, folder: Path) -> Upload:
    """A text file of the Chinese corpus's text (repeated as needed), as long as `pages` pages of 1 500 characters."""
    text = "\n\n".join(page for document in chinese.documents for page in document.pages) + "\n\n"
    wanted = pages * CHINESE_PAGE_CHARS
    path = folder / "chinese.txt"
    path.write_text((text * (wanted // len(text) + 1))[:wanted], encoding="utf-8")
    return Upload(path.name, "text/plain", path)


def first_hit(found: Sequence[str], answer: str) -> int | None:
    """The rank (from 1) of the first passage holding the whole answer; None if none does."""
    return next((rank for rank, text in enumerate(found, start=1) if answer in text), None)


def recall_table(corpora: Sequence[Corpus], found: dict[str, dict[str, list[list[str]]]]) -> str:
    """Per method, the share of questions whose answer is in one of its first k passages, per language and k."""
    head = " | ".join(f"{language.language} @{k}" for language in corpora for k in RANKS)
    lines = [f"| method | {head} |", "|---|" + "---|" * len(corpora) * len(RANKS)]
    for method in (WHITESPACE, BIGRAMS, f"this project, {SQLITE}", f"this project, {POSTGRES}"):
        cells = ["–"] * len(corpora) * len(RANKS)  # a database not measured
        if method in found:
            cells = []
            for language in corpora:
                ranks = [
                    first_hit(texts, question.answer)
                    for texts, question in zip(found[method][language.language], language.questions, strict=True)
                ]
                cells += [f"{sum(r is not None and r <= k for r in ranks) / len(ranks):.0%}" for k in RANKS]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def indexing_table(results: Sequence[Indexed]) -> str:
    """Per long document and database: its size, and the seconds to read it and to keep it."""
    lines = [
        "| document | database | pages | characters | passages | read (s) | keep (s) | total (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        times = f"{r.read_s:.2f} | {r.keep_s:.2f} | {r.read_s + r.keep_s:.2f}"
        lines.append(f"| {r.document} | {r.database} | {r.pages} | {r.characters} | {r.passages} | {times} |")
    return "\n".join(lines)


def tree() -> str:
    """The commit measured, and whether the work tree differs from it."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    )
    return commit.stdout.strip() + (" with uncommitted changes" if changed.stdout.strip() else "")


def header(corpora: Sequence[Corpus], passages: dict[str, list[tuple[str, str]]]) -> str:
    """What was measured, on what text, when and on which tree."""
    lines = [f"# Passage retrieval ({datetime.date.today().isoformat()}, the tree of {tree()})", ""]
    for language in corpora:
        texts = [text for _, text in passages[language.language]]
        split = sum(not any(question.answer in text for text in texts) for question in language.questions)
        pages = sum(len(document.pages) for document in language.documents)
        characters = sum(len(page) for document in language.documents for page in document.pages)
        lines += [
            f"- {language.language}: {language.source}.",
            f"  {len(language.documents)} documents, {pages} pages, {characters} characters, {len(texts)} passages; "
            f"{len(language.questions)} questions, of whose answers {split} are in no single passage (split across "
            "two: no method finds those whole).",
        ]
    return "\n".join(lines)


def databases(args: argparse.Namespace, folder: Path, servers: contextlib.ExitStack) -> tuple[dict[str, str], str]:
    """The URL of each database to measure (PostgreSQL a throwaway cluster started here), and why one is left out."""
    urls = {SQLITE: database_url("", folder)}  # the app's default: a SQLite file in its data folder
    if args.skip_postgres:
        return urls, "PostgreSQL: not measured (--skip-postgres)."
    try:
        postgres_bin()
    except FileNotFoundError as error:
        return urls, f"PostgreSQL: not measured, {error}."
    server = PostgresServer("bench-retrieval")
    servers.enter_context(running(server))
    return urls | {POSTGRES: database_url(server.new_database("bench_retrieval"), folder)}, ""


async def measure(
    url: str, database: str, corpora: Sequence[Corpus], long_files: Sequence[Upload], pages: int
) -> tuple[dict[str, list[list[Passage]]], list[Indexed]]:
    """The Library on one database: what it finds for each corpus's questions, then what keeping long files costs."""
    async with library_on(url, max(len(language.documents) for language in corpora)) as library:
        found = {}
        for language in corpora:
            print(f"{database}: keeping and searching the {language.language} corpus", file=sys.stderr, flush=True)
            found[language.language] = await library_found(library, language)
        indexed = []
        for upload in long_files:
            print(f"{database}: reading and keeping {upload.name}", file=sys.stderr, flush=True)
            indexed.append(await keep_long(library, database, upload, pages))
    return found, indexed


async def run(args: argparse.Namespace) -> str:
    corpora = [corpus(language, questions=args.questions, seed=args.seed) for language in LANGUAGES]
    passages = {language.language: passages_of(language) for language in corpora}
    found: dict[str, dict[str, list[list[str]]]] = {WHITESPACE: {}, BIGRAMS: {}}
    for language in corpora:
        cut, questions = passages[language.language], [question.text for question in language.questions]
        found[WHITESPACE][language.language] = fts5_found(cut, questions, lambda text: text, str.split)
        found[BIGRAMS][language.language] = fts5_found(cut, questions, lambda text: " ".join(bigrams(text)), bigrams)
    indexed: list[Indexed] = []
    app_found: dict[str, dict[str, list[list[Passage]]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as scratch, contextlib.ExitStack() as servers:
        folder = Path(scratch)
        english, chinese = corpora
        long_files = [english_pdf(english, args.pages, folder), chinese_text(chinese, args.pages, folder)]
        urls, skipped = databases(args, folder, servers)
        for database, url in urls.items():
            app_found[database], kept = await measure(url, database, corpora, long_files, args.pages)
            indexed += kept
    for database, by_language in app_found.items():
        texts = {language: [[p.text for p in ps] for ps in found] for language, found in by_language.items()}
        found[f"this project, {database}"] = texts
    note = f"\n\n{skipped}" if skipped else ""
    sections = [
        header(corpora, passages),
        "## Recall: the share of questions answered by one of the first k passages",
        recall_table(corpora, found) + note,
        alike(corpora, app_found),
        "## How many passages: the app's choice by budget (SQLite)",
        budget_table(corpora, app_found[SQLITE]),
        "## Indexing: a long file read as the app reads an upload, then kept (split, segmented, inserted, indexed)",
        f"The English corpus's text wrapped into a PDF of {PAGE_LINES} lines of {LINE_CHARS} characters a page "
        f"(English only: the PDF's font, Helvetica, has no Chinese), and the Chinese corpus's text as a text file "
        f"of {CHINESE_PAGE_CHARS} characters a page; each corpus repeated as often as the pages need.",
        indexing_table(indexed) + note,
    ]
    return "\n\n".join(section for section in sections if section)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200, help="questions per language")
    parser.add_argument("--seed", type=int, default=0, help="which questions the corpora draw")
    parser.add_argument("--pages", type=int, default=300, help="pages of the long PDF and of the long Chinese text")
    parser.add_argument("--skip-postgres", action="store_true", help="SQLite only (no throwaway PostgreSQL cluster)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results")
    args = parser.parse_args()
    return publish(asyncio.run(run(args)), args.out, "bench-retrieval")


if __name__ == "__main__":
    sys.exit(main())
