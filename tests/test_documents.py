"""Documents kept, split, indexed by the database's own full-text search and searched, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import sqlalchemy as sa

from app.chat.attachments import Attachment
from app.documents import library as library_module
from app.documents.embeddings import fused, nearest, unit
from app.documents.library import Library, Outcome
from app.documents.split import MOST_WEIGHT, pieces, weight
from app.errors import HistoryUnavailable
from app.history import passage_index
from app.history.accounts import remove_user
from app.history.passage_index import SQLITE_TABLE
from app.history.schema import chat_documents, documents, passages
from app.history.store import ChatStore
from tests.support.stores import step, user_with_chat

ENGLISH = (
    "# Maintenance\n\nThe pump must be cleaned every three months with warm water and a soft brush.\n\n"
    "The filter cartridge is replaced once a year; order part number FX-220 from the dealer."
)
CHINESE = "# 安全说明\n\n设备运行时不得打开外壳，否则可能触电。\n\n冬季气温低于零度时，应排空水箱里的水，防止管道冻裂。"
FILLER = "\n\n".join(f"Section {n}. General remarks about operating the appliance in a household." for n in range(60))


def mixed_manual(pages: int = 3) -> Attachment:
    """A PDF-like document of English and Chinese pages, filler in between."""
    texts = (ENGLISH, FILLER, CHINESE, *(FILLER for _ in range(pages - 3)))
    return Attachment("manual.pdf", "application/pdf", "\n\n".join(texts), texts, size=50_000)


def library_of(store: ChatStore, **limits: int) -> Library:
    return Library(store.writer, most_bytes=limits.get("most_bytes", 10_000_000), per_chat=limits.get("per_chat", 5))


async def test_a_chinese_question_finds_the_chinese_passage_and_an_english_one_the_english(store):
    await user_with_chat(store, "ann", name="manual")
    library = library_of(store)
    kept = await library.keep("ann", "t1", mixed_manual())
    assert kept.outcome is Outcome.KEPT

    chinese = await library.find("ann", "t1", ["冬天水箱要怎么处理？"], 3)
    english = await library.find("ann", "t1", ["Which part number do I order for the filter?"], 3)
    assert "排空水箱" in chinese[0].text and chinese[0].page == 3 and chinese[0].heading == "安全说明"
    assert "FX-220" in english[0].text and english[0].page == 1 and english[0].document == "manual.pdf"


async def test_a_follow_up_finds_its_passage_through_the_question_before_it(store):
    await user_with_chat(store, "ann", name="manual")
    library = library_of(store)
    await library.keep("ann", "t1", mixed_manual())
    alone = await library.find("ann", "t1", ["And how often?"], 3)
    follow_up = await library.find("ann", "t1", ["And how often?", "How do I clean the pump?"], 3)
    assert not any("pump" in passage.text for passage in alone)
    assert "pump must be cleaned" in follow_up[0].text


async def test_nobody_else_finds_or_opens_my_passages(store):
    await user_with_chat(store, "ann", name="manual")
    await user_with_chat(store, "ben", name="his")  # ben's chat is "t1" too: the same id guessed
    library = library_of(store)
    await library.keep("ann", "t1", mixed_manual())
    mine = await library.find("ann", "t1", ["filter part number"], 3)
    assert mine
    assert await library.find("ben", "t1", ["filter part number"], 3) == []
    assert await library.passage("ben", mine[0].id) is None
    assert await library.passage("ann", mine[0].id) == mine[0]
    assert await library.listed("ben") == []
    document_id = (await library.listed("ann"))[0].id
    assert await library.use("ben", "t1", document_id) is Outcome.NOT_FOUND
    assert await library.rename("ben", document_id, "mine now") is Outcome.NOT_FOUND
    assert await library.delete("ben", document_id) is Outcome.NOT_FOUND
    assert [document.name for document in await library.listed("ann")] == ["manual.pdf"]


async def test_a_document_is_used_in_another_chat_and_renamed_and_deleted_with_its_index_rows(store):
    await user_with_chat(store, "ann", name="manual")
    library = library_of(store)
    document_id = (await library.keep("ann", "t1", mixed_manual())).document_id
    assert document_id is not None
    assert await library.find("ann", "t2", ["pump"], 3) == []  # another chat does not search it ...
    assert await library.use("ann", "t2", document_id) is Outcome.USED
    assert "pump" in (await library.find("ann", "t2", ["pump"], 3))[0].text  # ... until it is used there
    assert await library.rename("ann", document_id, "pump manual.pdf") is Outcome.RENAMED
    [listed] = await library.listed("ann", "t2")
    assert (listed.name, listed.pages) == ("pump manual.pdf", 3) and listed.passages > 3

    assert await library.delete("ann", document_id) is Outcome.DELETED
    assert await library.find("ann", "t1", ["pump"], 3) == []
    assert index_rows(store) == (0, 0, 0)


async def test_a_chat_deleted_takes_the_documents_uploaded_only_to_it(store):
    await user_with_chat(store, "ann", name="manual")
    library = library_of(store)
    only_here = await library.keep("ann", "t1", mixed_manual())
    shared = await library.keep("ann", "t1", Attachment("notes.txt", "text/plain", ENGLISH, size=300))
    assert shared.document_id is not None
    await library.use("ann", "t2", shared.document_id)
    await store.delete_thread("t1")
    assert [document.id for document in await library.listed("ann")] == [shared.document_id]
    assert only_here.document_id not in {row for row in ids_of(store, passages.c.document_id)}


async def test_a_user_removed_takes_their_documents_and_index_rows(store):
    await user_with_chat(store, "ann", name="manual")
    await library_of(store).keep("ann", "t1", mixed_manual())
    assert remove_user(store.engine, "ann")
    assert index_rows(store) == (0, 0, 0)


async def test_the_library_and_chat_limits_refuse_a_document(store):
    await user_with_chat(store, "ann", name="manual")
    small = library_of(store, most_bytes=80_000, per_chat=1)
    assert (await small.keep("ann", "t1", mixed_manual())).outcome is Outcome.KEPT
    assert (await small.keep("ann", "t2", mixed_manual())).outcome is Outcome.LIBRARY_FULL  # 100 000 > 80 000
    note = Attachment("note.txt", "text/plain", ENGLISH, size=100)
    assert (await small.keep("ann", "t1", note)).outcome is Outcome.CHAT_FULL
    assert (await small.keep("ann", "t3", note)).outcome is Outcome.KEPT


async def test_a_long_document_goes_in_by_chunks_and_a_chats_writes_are_not_held_up_behind_it(store, monkeypatch):
    await user_with_chat(store, "ann", name="manual")
    monkeypatch.setattr(library_module, "PASSAGES_PER_TRANSACTION", 3)
    real_add, chunks = passage_index.add, []

    def slow_add(connection: sa.Connection, rows: Any) -> None:
        chunks.append(len(rows))
        time.sleep(0.2)  # a big chunk on a slow disk, its transaction open
        real_add(connection, rows)

    monkeypatch.setattr(passage_index, "add", slow_add)
    done: list[str] = []

    async def upload() -> None:
        await library_of(store).keep("ann", "t1", mixed_manual(pages=6))
        done.append("document")

    async def a_message() -> None:
        await asyncio.sleep(0.3)  # while the document is being indexed
        await store.create_step(step("u9", "t1", "user_message", "asked meanwhile", 3))
        done.append("message")

    await asyncio.gather(upload(), a_message())
    assert len(chunks) > 3 and done == ["message", "document"]  # not queued behind the whole document
    assert [document.name for document in await library_of(store).listed("ann")] == ["manual.pdf"]


async def test_a_document_that_cannot_all_go_in_is_neither_listed_nor_left_half(store, monkeypatch):
    await user_with_chat(store, "ann", name="manual")
    monkeypatch.setattr(library_module, "PASSAGES_PER_TRANSACTION", 5)
    real_add = passage_index.add

    def fails_later(connection: sa.Connection, rows: Any) -> None:
        if rows[0]["ordinal"] >= 5:
            raise OSError(28, "No space left on device")
        real_add(connection, rows)

    monkeypatch.setattr(passage_index, "add", fails_later)
    with pytest.raises(HistoryUnavailable):
        await library_of(store).keep("ann", "t1", mixed_manual(pages=6))
    assert await library_of(store).listed("ann") == [] and index_rows(store) == (0, 0, 0)


def test_passages_keep_to_their_pages_and_size_and_lose_no_text():
    pages = [FILLER * 3, "短句。" * 2_000, "x" * 5_000]
    found = pieces(pages, paged=True)
    assert {piece.page for piece in found} == {1, 2, 3}
    assert all(weight(piece.text) <= MOST_WEIGHT for piece in found)
    for number, page in enumerate(pages, start=1):
        text = "".join(piece.text for piece in found if piece.page == number)
        assert "".join(text.split()) == "".join(page.split())


def ids_of(store: ChatStore, column: sa.Column[str]) -> list[str]:
    with store.engine.connect() as connection:
        return [row[0] for row in connection.execute(sa.select(column))]


def index_rows(store: ChatStore) -> tuple[int, int, int]:
    """Documents, passages, and the full-text index's rows (SQLite's own table; PostgreSQL indexes the passages)."""
    with store.engine.connect() as connection:
        counted = [
            connection.execute(sa.select(sa.func.count()).select_from(t)).scalar() for t in (documents, passages)
        ]
        fts = SQLITE_TABLE if connection.dialect.name == "sqlite" else "passages"
        rows = connection.execute(sa.text(f"SELECT count(*) FROM {fts}")).scalar()
        assert connection.execute(sa.select(sa.func.count()).select_from(chat_documents)).scalar() == 0
    return (counted[0] or 0, counted[1] or 0, rows or 0)


def test_fusion_puts_a_passage_found_by_both_first_and_a_keyword_best_before_a_vector_only_best():
    assert fused([3, 1, 2], [1, 4]) == [1, 3, 4, 2]  # 1: both; 3: keywords' best; 4: vectors' second
    assert fused([7], []) == [7]


def test_the_nearest_vectors_are_the_closest_by_cosine_and_other_sizes_are_left_out():
    query = unit([1.0, 0.0]).tobytes()
    stored = [(1, unit([0.0, 1.0]).tobytes()), (2, unit([1.0, 0.1]).tobytes()), (3, unit([1.0, 1.0]).tobytes())]
    assert nearest(query, [*stored, (4, unit([1.0, 0.0, 0.0]).tobytes())], 2) == [2, 3]
