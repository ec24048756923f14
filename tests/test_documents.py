"""Documents kept, split, indexed by the database's own full-text search and searched, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
import unicodedata
from typing import Any

import pytest
import rjieba
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from hypothesis import given
from hypothesis import strategies as st

from app.chat.attachments import Attachment
from app.documents import library as library_module
from app.documents.embeddings import fused, nearest, unit, vectors_of
from app.documents.library import Library, Outcome, passage_rows
from app.documents.split import MOST_WEIGHT, pieces, weight
from app.errors import HistoryUnavailable
from app.history import passage_index
from app.history.accounts import remove_user
from app.history.database import create_engine, database_url, upgrade
from app.history.passage_index import SQLITE_TABLE
from app.history.schema import MIGRATIONS, chat_documents, documents, passages, steps, threads, users
from app.history.store import ChatStore
from app.terms import MOST_QUERY_TERMS, WORD, query_terms, words
from tests.support.stores import Hooks, step, user_with_chat
from tools.bench_retrieval import USER, as_uploaded, library_on
from tools.retrieval_corpus import corpus

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
    assert (await small.keep("ann", "t2", mixed_manual(pages=4))).outcome is Outcome.LIBRARY_FULL  # 100 000 > 80 000
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


@given(st.text(alphabet=st.sampled_from("ab 1_-.,，。的设备运行时气温Ｆｕｌｌ\n"), max_size=40) | st.text(max_size=40))
def test_a_texts_words_are_those_of_each_of_jiebas_tokens_cut_on_its_own(text):
    folded = unicodedata.normalize("NFKC", text).lower()
    each_token = [word for token in rjieba.cut_for_search(folded) for word in WORD.findall(token)]
    assert words(text)[: len(each_token)] == each_token


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
    first = vectors_of([(1, unit([0.0, 1.0]).tobytes()), (2, unit([1.0, 0.1]).tobytes())])
    second = vectors_of([(3, unit([1.0, 1.0]).tobytes())])
    other_model = vectors_of([(4, unit([1.0, 0.0, 0.0]).tobytes())])
    assert [passage for passage, _ in nearest(query, [first, second, other_model])] == [2, 3, 1]


async def test_the_same_file_kept_again_is_the_one_document_every_chat_of_its_user_searches(store):
    await user_with_chat(store, "ann", name="manual")
    library = library_of(store)
    first = await library.keep("ann", "t1", mixed_manual())
    again = await library.keep("ann", "t1", mixed_manual())  # a retry
    elsewhere = await library.keep("ann", "t2", mixed_manual())  # another chat
    whole = await library.keep("ann", "t3", mixed_manual(), whole=True)  # read whole there
    assert first.document_id == again.document_id == elsewhere.document_id == whole.document_id
    assert [document.id for document in await library.listed("ann")] == [first.document_id]
    assert "pump" in (await library.find("ann", "t2", ["pump"], 3))[0].text
    assert await library.texts("ann", [str(first.document_id)]) == {first.document_id: mixed_manual().text}
    await store.delete_thread("t1")  # kept by several chats: it stays until its user deletes it
    assert [document.id for document in await library.listed("ann")] == [first.document_id]


async def test_a_words_rarity_is_taken_among_the_chats_documents_not_every_users(store):
    await user_with_chat(store, "ann", name="manual")
    await user_with_chat(store, "ben", name="his")
    library = library_of(store)
    gaskets = ("The gasket is rubber.", "A gasket seals the lid.", "Keep a spare gasket.", "Oil the gasket yearly.")
    pages = ("Replace the valve and the hinge.", "Replace the gasket and the latch.", *gaskets)
    await library.keep("ann", "t1", Attachment("pump.pdf", "application/pdf", "\n\n".join(pages), pages, size=300))
    question = ["Replace the valve gasket?"]
    assert "valve" in (await library.find("ann", "t1", question, 3))[0].text  # valve is rare in her manual
    valves = "\n\n".join(f"Check the valve, then valve seat {n} and the valve stem." for n in range(400))
    await library.keep("ben", "t9", Attachment("valves.txt", "text/plain", valves, size=len(valves)))
    assert "valve" in (await library.find("ann", "t1", question, 3))[0].text  # his valves change nothing of hers


def test_running_headers_and_footers_are_left_out_of_the_passages():
    bodies = ("The pump must be cleaned every three months.", "Order filter FX-220.", "冬季应排空水箱。", "Fin.")
    pages = tuple(f"ACME Pump Manual\n{body}\nPage {n} of 4" for n, body in enumerate(bodies, start=1))
    rows = passage_rows("d1", Attachment("manual.pdf", "application/pdf", "\n\n".join(pages), pages, size=500))
    assert [row["text"] for row in rows] == list(bodies)
    assert [row["page"] for row in rows] == [1, 2, 3, 4]


def test_a_question_leaves_out_pairs_around_stop_characters_and_the_one_before_keeps_its_share():
    chinese = query_terms("为什么我的水泵不工作？")
    assert "水泵" in chinese and not {"为什", "么我", "我的"} & set(chinese)
    long = " ".join(f"part{n}" for n in range(100))
    terms = query_terms(long, "How do I clean the pump?")
    assert len(terms) == MOST_QUERY_TERMS and terms["pump"] < terms["part0"]  # there, weighing less


@pytest.mark.postgres
async def test_sqlite_and_postgresql_rank_the_retrieval_benchmarks_questions_alike(postgres, tmp_path):
    corpora = [corpus(language, questions=25) for language in ("en", "zh")]
    rankings = []
    for url in (database_url("", tmp_path), database_url(postgres.new_database("ranked_alike"), tmp_path)):
        async with library_on(url, per_chat=20) as library:
            for language in corpora:
                for document in language.documents:
                    await library.keep(USER, language.language, as_uploaded(document))
            rankings.append(
                [
                    [passage.text for passage in await library.find(USER, language.language, [question.text], 5)]
                    for language in corpora
                    for question in language.questions
                ]
            )
    assert rankings[0] == rankings[1]


async def test_the_migration_numbers_new_passages_past_every_id_an_answer_names(tmp_path):
    engine = create_engine(database_url("", tmp_path))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0008_projects")
        kept_before_0009(connection)
    upgrade(engine)
    store = Hooks().store(engine)
    library = library_of(store)
    [found] = await library.find("ann", "t1", ["impeller 4471"], 3)  # its terms rewritten, indexed again
    assert (found.id, found.text) == (2, "The spare impeller is part ZX-4471.")
    kept = await library.keep("ann", "t1", Attachment("new.txt", "text/plain", "A new manual.", size=13))
    with engine.connect() as connection:
        query = sa.select(passages.c.id).where(passages.c.document_id == kept.document_id)
        added = connection.execute(query).scalars().all()
    assert added and min(added) > 9  # passage 9, which an old answer names, is never another passage
    await store.close()


def kept_before_0009(connection: sa.Connection) -> None:
    """A user's chat with a document of two passages, and an answer naming passage 9 (of a document deleted since)."""
    at = "2026-01-01T00:00:00.000000Z"
    connection.execute(sa.insert(users).values(id="u1", identifier="ann", metadata={}, created_at=at))
    connection.execute(sa.insert(threads).values(id="t1", created_at=at, user_id="u1", metadata={}))
    sources = {"sources": [{"passage": 9, "document": "gone.pdf", "page": 1, "heading": ""}]}
    answer = {"id": "a1", "thread_id": "t1", "name": "ERNIE", "type": "assistant_message", "input": "", "output": "x"}
    connection.execute(sa.insert(steps).values(**answer, is_error=False, created_at=at, details={}, metadata=sources))
    document = {"id": "d1", "user_id": "u1", "name": "manual.pdf", "type": "application/pdf", "bytes": 100}
    connection.execute(sa.insert(documents).values(**document, pages=1, thread_id="t1", created_at=at, complete=True))
    connection.execute(sa.insert(chat_documents).values(thread_id="t1", document_id="d1", added_at=at))
    indexed = sa.text("INSERT INTO passage_terms (rowid, terms) VALUES (:id, :terms)")
    old = ((1, "Filler.", "filler"), (2, "The spare impeller is part ZX-4471.", "spare impeller zx-4471"))
    for number, text, terms in old:  # terms as jieba gave them then, "zx-4471" whole
        row = {"id": number, "document_id": "d1", "ordinal": number, "page": 1, "heading": "", "text": text}
        connection.execute(sa.insert(passages).values(**row, terms=terms))
        connection.execute(indexed, {"id": number, "terms": terms})
