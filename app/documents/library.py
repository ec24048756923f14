"""Each user's documents: kept, listed, renamed, deleted, used in chats and searched, only ever by their user."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from app.chat.attachments import Attachment
from app.chat.passages import Passage, block
from app.chat.workers import in_worker
from app.documents.embeddings import Embedder, Vectors, fused, nearest, vectors_of
from app.documents.split import pieces, without_margins
from app.errors import ChatError, HistoryUnavailable
from app.history import passage_index
from app.history.schema import chat_documents, documents, passages, project_documents, timestamp, user_row, users
from app.history.writes import Writer
from app.terms import query_terms, words

# Passages indexed per transaction: a long document's never keeps the chats' writes waiting for long.
PASSAGES_PER_TRANSACTION = 200
# Documents whose passages' vectors stay in memory (a kept document's never change): a question then reads none of
# them from the database. A 1 000-page document's are about 8 MB with a 1 024-dimension model.
CACHED_DOCUMENTS = 16
Result = TypeVar("Result")
TextCounter = Callable[[Sequence[str]], Awaitable[list[int]]]
logger = logging.getLogger(__name__)


def in_transaction(engine: Engine, work: Callable[[Connection], Result]) -> Result:
    """Run work in a transaction of its own (in a thread of the store's)."""
    with engine.begin() as connection:
        return work(connection)


class Outcome(StrEnum):
    """What became of a change to a user's documents."""

    KEPT = "kept"
    USED = "used"
    RENAMED = "renamed"
    DELETED = "deleted"
    LIBRARY_FULL = "library_full"
    CHAT_FULL = "chat_full"
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class Document:
    """One of a user's documents as its list shows it."""

    id: str
    name: str
    pages: int
    bytes: int
    passages: int


@dataclass(frozen=True)
class Kept:
    """A document kept (its id), or why not."""

    outcome: Outcome
    document_id: str | None = None
    passages: int = 0


def passage_rows(document_id: str, file: Attachment) -> list[dict[str, Any]]:
    """A file's passages as rows, its pages' running headers and footers left out, segmented for the index (blocking:
    run in_worker)."""
    paged = bool(file.pages)
    found = pieces(without_margins(file.pages) if paged else [file.text], paged=paged)
    rows = []
    for ordinal, piece in enumerate(found):
        held = words(f"{piece.heading}\n{piece.text}")
        row = {"document_id": document_id, "ordinal": ordinal, "page": piece.page, "heading": piece.heading}
        rows.append(row | {"text": piece.text, "terms": " ".join(held), "length": len(held)})
    return rows


def digest_of(file: Attachment) -> str:
    """What tells a file's text from any other's: its SHA-256."""
    return hashlib.sha256(file.text.encode()).hexdigest()


def relative(ranked: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Each ranked passage's score as a share of the best one's (1: as good as the best)."""
    best = max((score for _, score in ranked), default=0.0)
    return {passage: score / best if best > 0 else 0.0 for passage, score in ranked}


def meant(row: dict[str, Any]) -> str:
    """What a passage's vector stands for: its heading and its text."""
    return f"{row['heading']}\n{row['text']}" if row["heading"] else str(row["text"])


def searched_scope(user: str, thread_id: str, project_id: str | None) -> sa.Select[Any]:
    """The ids of the documents a chat searches: the user's own, of the chat or of its project, fully indexed."""
    in_chat = sa.select(chat_documents.c.document_id).where(chat_documents.c.thread_id == thread_id)
    searched: sa.ColumnElement[bool] = documents.c.id.in_(in_chat)
    if project_id is not None:
        in_project = sa.select(project_documents.c.document_id).where(project_documents.c.project_id == project_id)
        searched = sa.or_(searched, documents.c.id.in_(in_project))
    return sa.select(documents.c.id).where(documents.c.user_id == user_row(user), documents.c.complete, searched)


class Library:
    """A user's documents; nothing here reads or writes another user's."""

    def __init__(
        self,
        writer: Writer,
        *,
        most_bytes: int,
        per_chat: int,
        embedder: Embedder | None = None,
        count: TextCounter | None = None,
    ) -> None:
        self.writer = writer
        # The operator's embedding model (None: keyword search alone).
        self.embedder = embedder
        # The model server's token count of texts (None: passages kept uncounted, a bound stands in).
        self.count = count
        self._vectors = functools.lru_cache(maxsize=CACHED_DOCUMENTS)(self._document_vectors)
        # The most bytes of uploaded files one user keeps (LIBRARY_MAX_MB).
        self.most_bytes = most_bytes
        # The most documents one chat searches (DOCUMENTS_PER_CHAT).
        self.per_chat = per_chat

    async def keep(self, user: str, thread_id: str, file: Attachment, *, whole: bool = False) -> Kept:
        """A file kept as a document of the user's, split and indexed; one read whole keeps its text too.

        A document too long to read whole is searched by the chat it was uploaded in from now on. The same text kept
        before by the user is that document again. A new one is split in a worker process, each passage's tokens
        counted by the model server once; its passages go in by chunks, each a transaction of its own beside the
        chat's writes (a long one never holds them up); the document is listed and searched once all are in, and
        gone again if they cannot all go in.
        """
        digest = await asyncio.to_thread(digest_of, file)
        again = functools.partial(self._again, user=user, thread_id=thread_id, digest=digest, file=file, whole=whole)
        if (kept_before := await self._transaction("keep a document", again)) is not None:
            return kept_before
        document_id = str(uuid.uuid4())
        rows = await in_worker(passage_rows, document_id, file)
        blocks = [block(Passage(0, file.name, row["page"], row["heading"], row["text"])) for row in rows]
        tokens = await self._counted(blocks)
        vectors: list[bytes | None] = [None] * len(rows)
        if self.embedder is not None and rows:
            vectors = list(await self.embedder.embed([meant(row) for row in rows]) or vectors)
        rows = [
            row | {"embedding": vector, "tokens": count}
            for row, vector, count in zip(rows, vectors, tokens, strict=True)
        ]

        def begin(connection: Connection) -> Outcome:
            user_id = connection.execute(sa.select(users.c.id).where(users.c.identifier == user)).scalar()
            if user_id is None:
                return Outcome.NOT_FOUND
            kept = sa.select(sa.func.coalesce(sa.func.sum(documents.c.bytes), 0)).where(documents.c.user_id == user_id)
            if connection.execute(kept).scalar_one() + file.size > self.most_bytes:
                return Outcome.LIBRARY_FULL
            if not whole and self._chat_full(connection, thread_id):
                return Outcome.CHAT_FULL
            pages = len(file.pages) or 1
            row = {"id": document_id, "user_id": user_id, "name": file.name[:255], "type": file.type[:255]}
            row |= {
                "bytes": file.size,
                "pages": pages,
                "thread_id": thread_id,
                "created_at": timestamp(),
                "digest": digest,
            }
            connection.execute(sa.insert(documents), row | {"text": file.text if whole else None, "complete": False})
            return Outcome.KEPT

        def finish(connection: Connection) -> None:
            connection.execute(sa.update(documents).where(documents.c.id == document_id).values(complete=True))
            if not whole:
                connection.execute(
                    sa.insert(chat_documents),
                    {"thread_id": thread_id, "document_id": document_id, "added_at": timestamp()},
                )

        if (outcome := await self._transaction("keep a document", begin)) is not Outcome.KEPT:
            return Kept(outcome)
        try:
            for start in range(0, len(rows), PASSAGES_PER_TRANSACTION):
                chunk = rows[start : start + PASSAGES_PER_TRANSACTION]
                await self._transaction("index a document", functools.partial(passage_index.add, rows=chunk))
            await self._transaction("keep a document", finish)
        except HistoryUnavailable:
            with contextlib.suppress(HistoryUnavailable):  # left incomplete: never listed nor searched
                await self._transaction("remove a document not kept", lambda c: passage_index.remove(c, [document_id]))
            raise
        return Kept(Outcome.KEPT, document_id, len(rows))

    def _again(
        self, connection: Connection, *, user: str, thread_id: str, digest: str, file: Attachment, whole: bool
    ) -> Kept | None:
        """The user's document of the same text, kept for this upload too (None: they have none).

        Searched, it is searched by this chat too; read whole, it gets its text if it had none. Kept by two chats,
        it no longer goes with the one it was uploaded in: it stays until its user deletes it.
        """
        same = sa.select(documents.c.id, documents.c.text, documents.c.thread_id).where(
            documents.c.user_id == user_row(user), documents.c.digest == digest, documents.c.complete
        )
        found = connection.execute(same).first()
        if found is None:
            return None
        this = documents.c.id == found.id
        if whole and found.text is None:
            connection.execute(sa.update(documents).where(this).values(text=file.text))
        there = chat_documents.c.thread_id == thread_id, chat_documents.c.document_id == found.id
        if not whole and connection.execute(sa.select(chat_documents.c.thread_id).where(*there)).first() is None:
            if self._chat_full(connection, thread_id):
                return Kept(Outcome.CHAT_FULL)
            row = {"thread_id": thread_id, "document_id": found.id, "added_at": timestamp()}
            connection.execute(sa.insert(chat_documents), row)
        if found.thread_id not in (None, thread_id):
            connection.execute(sa.update(documents).where(this).values(thread_id=None))
        held = sa.select(sa.func.count()).select_from(passages).where(passages.c.document_id == found.id)
        return Kept(Outcome.KEPT, found.id, connection.execute(held).scalar_one())

    async def _counted(self, texts: list[str]) -> list[int | None]:
        """Each text's tokens by the model server; None for each when it does not answer (said in the log)."""
        if self.count is None or not texts:
            return [None] * len(texts)
        try:
            return list(await self.count(texts))
        except ChatError as error:
            logger.warning("Documents: the model server did not count the passages (%s); a bound stands in", error)
            return [None] * len(texts)

    async def _transaction(self, what: str, work: Callable[[Connection], Result]) -> Result:
        """Work in a transaction on a connection of its own, outside the chat writer's queue."""
        return await self.writer.run(what, in_transaction, self.writer.engine, work)

    def _chat_full(self, connection: Connection, thread_id: str) -> bool:
        """Whether the chat searches as many documents as it may."""
        used = sa.select(sa.func.count()).select_from(chat_documents).where(chat_documents.c.thread_id == thread_id)
        return (connection.execute(used).scalar() or 0) >= self.per_chat

    async def use(self, user: str, thread_id: str, document_id: str) -> Outcome:
        """One of the user's documents searched by a chat of theirs too."""

        def work(connection: Connection) -> Outcome:
            mine = sa.select(documents.c.id).where(
                documents.c.id == document_id, documents.c.user_id == user_row(user), documents.c.complete
            )
            if connection.execute(mine).first() is None:
                return Outcome.NOT_FOUND
            there = chat_documents.c.thread_id == thread_id, chat_documents.c.document_id == document_id
            if connection.execute(sa.select(chat_documents.c.thread_id).where(*there)).first() is not None:
                return Outcome.USED
            if self._chat_full(connection, thread_id):
                return Outcome.CHAT_FULL
            row = {"thread_id": thread_id, "document_id": document_id, "added_at": timestamp()}
            connection.execute(sa.insert(chat_documents), row)
            return Outcome.USED

        return Outcome(await self.writer.write("use a document", work))

    async def listed(self, user: str, thread_id: str | None = None) -> list[Document]:
        """The user's documents by name; those a chat searches, given one."""
        count = sa.select(sa.func.count()).where(passages.c.document_id == documents.c.id).scalar_subquery()
        query = sa.select(documents.c.id, documents.c.name, documents.c.pages, documents.c.bytes, count.label("n"))
        query = query.where(documents.c.user_id == user_row(user), documents.c.complete)
        query = query.order_by(documents.c.name, documents.c.created_at)
        if thread_id is not None:
            in_chat = sa.select(chat_documents.c.document_id).where(chat_documents.c.thread_id == thread_id)
            query = query.where(documents.c.id.in_(in_chat))
        rows = await self.writer.read("list your documents", lambda connection: connection.execute(query).all())
        return [Document(row.id, row.name, row.pages, row.bytes, row.n) for row in rows]

    async def rename(self, user: str, document_id: str, name: str) -> Outcome:
        """Give one of the user's documents another name."""
        rename = (
            sa.update(documents)
            .where(documents.c.id == document_id, documents.c.user_id == user_row(user))
            .values(name=name[:255])
        )
        renamed = await self.writer.write("rename a document", lambda connection: connection.execute(rename).rowcount)
        return Outcome.RENAMED if renamed else Outcome.NOT_FOUND

    async def delete(self, user: str, document_id: str) -> Outcome:
        """One of the user's documents gone, with its passages, their index rows and its places in chats."""

        def work(connection: Connection) -> Outcome:
            mine = sa.select(documents.c.id).where(documents.c.id == document_id, documents.c.user_id == user_row(user))
            if connection.execute(mine).first() is None:
                return Outcome.NOT_FOUND
            passage_index.remove(connection, [document_id])
            return Outcome.DELETED

        return Outcome(await self.writer.write("delete a document", work))

    async def find(
        self, user: str, thread_id: str, texts: Sequence[str], limit: int, project_id: str | None = None
    ) -> list[Passage]:
        """The passages of the chat's documents and its project's (the user's own) best matching the texts, best
        first."""
        terms = query_terms(*texts)
        if not terms and self.embedder is None:
            return []
        scope = searched_scope(user, thread_id, project_id)
        exists = sa.select(scope.exists())
        if not await self.writer.read("search your documents", lambda connection: connection.execute(exists).scalar()):
            return []  # a chat without documents: no search, no request to the embedding model
        asked = await self.embedder.embed(["\n".join(text for text in texts if text)]) if self.embedder else None

        def work(connection: Connection) -> list[Passage]:
            ranked = passage_index.search(connection, terms, scope, limit)
            strength = relative(ranked)
            ids = [passage for passage, _ in ranked]
            if asked:
                cached = [self._vectors(document) for document in connection.execute(scope).scalars()]
                near = nearest(asked[0], cached)[:limit]
                ids = fused(ids, [passage for passage, _ in near])[:limit]
                closeness = relative(near)
                strength = {i: max(strength.get(i, 0.0), closeness.get(i, 0.0)) for i in ids}
            found = {passage.id: passage for passage in self._passages(connection, ids)}
            return [dataclasses.replace(found[i], strength=strength[i]) for i in ids if i in found]

        result: list[Passage] = await self.writer.read("search your documents", work)
        return result

    async def texts(self, user: str, document_ids: Sequence[str]) -> dict[str, str]:
        """The texts of the user's documents read whole, by id; others' and searched ones left out."""
        query = sa.select(documents.c.id, documents.c.text).where(
            documents.c.id.in_(list(document_ids)), documents.c.user_id == user_row(user), documents.c.text.is_not(None)
        )
        rows = await self.writer.read("read your documents", lambda connection: connection.execute(query).all())
        return {row.id: row.text for row in rows}

    async def passages(
        self, user: str, passage_ids: Sequence[int], scope: sa.Select[Any] | None = None
    ) -> dict[int, Passage]:
        """Passages of the user's documents by id, of those in `scope` if given (one not theirs, or gone, left out)."""
        mine = scope if scope is not None else sa.select(documents.c.id).where(documents.c.user_id == user_row(user))

        def work(connection: Connection) -> list[Passage]:
            return self._passages(connection, passage_ids, mine)

        found: list[Passage] = await self.writer.read("read your passages", work)
        return {passage.id: passage for passage in found}

    async def passage(self, user: str, passage_id: int) -> Passage | None:
        """One passage of the user's documents (None: no such passage of theirs)."""
        return (await self.passages(user, [passage_id])).get(passage_id)

    def _document_vectors(self, document_id: str) -> Vectors:
        """A document's passages' vectors, read on a connection of its own (cached by `_vectors`: they never change)."""
        query = sa.select(passages.c.id, passages.c.embedding).where(
            passages.c.document_id == document_id, passages.c.embedding.is_not(None)
        )
        with self.writer.engine.connect() as connection:
            return vectors_of([(row.id, row.embedding) for row in connection.execute(query)])

    @staticmethod
    def _passages(connection: Connection, ids: Sequence[int], scope: sa.Select[Any] | None = None) -> list[Passage]:
        """Passages by id, with their documents' names."""
        query = (
            sa.select(
                passages.c.id, documents.c.name, passages.c.page, passages.c.heading, passages.c.text, passages.c.tokens
            )
            .join(documents, documents.c.id == passages.c.document_id)
            .where(passages.c.id.in_(list(ids)))
        )
        if scope is not None:
            query = query.where(passages.c.document_id.in_(scope))
        return [
            Passage(row.id, row.name, row.page, row.heading, row.text, row.tokens) for row in connection.execute(query)
        ]

    def finder(
        self, user: str, thread_id: str, *, searches: bool, known: dict[str, str], project_id: str | None = None
    ) -> ChatDocuments:
        """The documents one chat of the user's searches (`searches`: it has any), and those it reads whole.

        `known`: the texts of documents read whole the chat already has, filled with those read from now on.
        """
        return ChatDocuments(self, user, thread_id, searches, known, project_id)

    async def searched_by(self, user: str, thread_id: str, project_id: str | None = None) -> bool:
        """Whether a chat of the user's (or its project) searches any document (False while the database fails)."""
        exists = sa.select(searched_scope(user, thread_id, project_id).exists())
        with contextlib.suppress(HistoryUnavailable):  # logged by the store
            return bool(await self.writer.read("check a chat's documents", lambda c: c.execute(exists).scalar()))
        return False


@dataclass(frozen=True)
class ChatDocuments:
    """One chat's documents, searched for its questions (the chat core's Finder)."""

    library: Library
    user: str
    thread_id: str
    # Whether the chat has documents to search: a chat without costs no query per question.
    searches: bool
    # The texts of the chat's documents read whole, once read (the tab's).
    known: dict[str, str]
    # The chat's project, whose documents it searches too (None: none).
    project_id: str | None = None

    async def find(self, texts: Sequence[str], limit: int) -> list[Passage]:
        if not self.searches:
            return []
        with contextlib.suppress(HistoryUnavailable):  # logged by the store: the answer goes on without them
            return await self.library.find(self.user, self.thread_id, texts, limit, self.project_id)
        return []

    async def passages(self, ids: Sequence[int]) -> dict[int, Passage]:
        if not ids:
            return {}
        with contextlib.suppress(HistoryUnavailable):  # logged by the store: the answer goes on without them
            # Of the documents the chat searches now: a chat moved out of a project no longer reads its passages.
            scope = searched_scope(self.user, self.thread_id, self.project_id)
            return await self.library.passages(self.user, ids, scope)
        return {}

    async def texts(self, documents: Sequence[str]) -> dict[str, str]:
        missing = [document for document in documents if document not in self.known]
        if missing:
            with contextlib.suppress(HistoryUnavailable):  # logged by the store: the answer goes on without them
                self.known.update(await self.library.texts(self.user, missing))
        return {document: self.known[document] for document in documents if document in self.known}
