"""Organizing chats in the history, on SQLite and PostgreSQL: projects, pinned and archived chats, temporary chats
never written, and search inside messages (Chinese too) with a snippet, one result per chat, only one's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from chainlit.context import init_http_context
from chainlit.types import Pagination, ThreadFilter
from chainlit.user import User
from hypothesis import given, settings
from hypothesis import strategies as st

from app.history import message_index
from app.history.accounts import remove_user
from app.history.chat_search import parse
from app.history.database import create_engine, database_url, upgrade
from app.history.message_index import is_sqlite
from app.history.projects import Outcome, Projects
from app.history.schema import MIGRATIONS, message_terms, projects, threads
from app.history.store import Actor, ChatStore
from app.terms import indexed
from tests.support.stores import step


async def chat(store: ChatStore, user_id: str, thread_id: str, name: str, *said: str) -> None:
    """A chat of the user with these messages, question and answer in turn."""
    await store.update_thread(thread_id, name=name, user_id=user_id)
    for n, text in enumerate(said):
        kind = "user_message" if n % 2 == 0 else "assistant_message"
        await store.create_step(step(f"{thread_id}-{n}", thread_id, kind, text, n + 1))


async def someone(store: ChatStore, name: str) -> str:
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    user = await store.create_user(User(identifier=name))
    assert user is not None
    return user.id


async def listed(store: ChatStore, user_id: str, search: str | None = None) -> list[dict[str, Any]]:
    """What Chainlit's sidebar (or its search dialog) gets."""
    page = await store.list_threads(Pagination(first=20), ThreadFilter(userId=user_id, search=search))
    return [dict(thread) for thread in page.data]


async def test_a_chinese_word_inside_a_longer_word_is_found_with_a_snippet_one_result_per_chat(store):
    ann = await someone(store, "ann")
    await chat(store, ann, "c1", "水箱", "冬天怎么办？", "冬季气温低于零度时，应打开排水阀门，排空水箱里的水。")
    await chat(
        store, ann, "c2", "Pumps", "How do I clean the pump?", "Clean the pump with warm water.", "And the pump?"
    )
    await chat(store, ann, "c3", "other", "天气", "今天晴天。")
    found = await listed(store, ann, "排水")  # inside 排水阀门: jieba keeps the longer word, the index its pairs too
    assert [thread["id"] for thread in found] == ["c1"]
    assert "排水阀门" in found[0]["name"] and found[0]["name"].startswith("水箱 — ")
    pumps = await listed(store, ann, "pump")
    assert [thread["id"] for thread in pumps] == ["c2"]  # three messages say it: one result
    cleaning = await listed(store, ann, "clean")
    assert cleaning[0]["name"].startswith("Pumps — ")
    assert cleaning[0]["createdAt"].startswith("2026-01-01T00:00:0")  # dated when its best match was said
    assert await listed(store, ann, "warm wat") and await listed(store, ann, "arm wa")  # the substring kept too
    by_name = await listed(store, ann, "pumps")  # a chat looked up by its name keeps it as it is
    assert [(thread["id"], thread["name"]) for thread in by_name] == [("c2", "Pumps")]


async def test_a_message_written_again_is_found_by_its_words_now_and_indexed_once(store):
    ann = await someone(store, "ann")
    await chat(store, ann, "c1", "Weather", "Will it rain?")
    answer = step("c1-1", "c1", "assistant_message", "Clouds gather over the fjord", 2)
    await store.create_step(answer)  # an answer's text so far, then all of it, then its stats
    await store.update_step(answer | {"output": "Sunshine over the fjord all day"})
    await store.update_step(answer | {"output": "Sunshine over the fjord all day", "metadata": {"stats": 1}})
    assert await listed(store, ann, "clouds") == []
    assert [thread["id"] for thread in await listed(store, ann, "sunshine")] == ["c1"]

    def rows(connection: sa.Connection) -> tuple[list[str], int]:
        terms = connection.execute(sa.select(message_terms.c.terms).where(message_terms.c.step_id == "c1-1"))
        full_text = connection.execute(sa.text("SELECT count(*) FROM message_fts")) if is_sqlite(connection) else None
        return list(terms.scalars()), full_text.scalar_one() if full_text else 0

    terms, _ = await store.writer.read("look", rows)
    assert len(terms) == 1 and "sunshine" in terms[0]
    await store.update_step(answer | {"output": ""})  # no words left: none found
    assert await listed(store, ann, "sunshine") == []
    terms, full_text = await store.writer.read("look", rows)
    # SQLite's full-text table keeps the question's words alone (PostgreSQL's vector is a column of the row).
    assert terms == [] and full_text == (1 if store.writer.engine.dialect.name == "sqlite" else 0)


async def test_nobody_finds_anothers_messages_nor_lists_their_chats(store):
    ann, ben = await someone(store, "ann"), await someone(store, "ben")
    await chat(store, ann, "a1", "secret", "my passphrase is zebra-42", "noted")
    assert await listed(store, ben, "zebra") == [] and await listed(store, ben) == []
    assert await store.search(ben, "passphrase", 10) == []


async def test_archived_chats_leave_the_list_and_come_back_with_a_filter_pinned_and_projects_filter_too(store):
    ann = await someone(store, "ann")
    for n in range(4):
        await chat(store, ann, f"c{n}", f"chat {n}", f"question about apples {n}", "an answer")
    filing = Projects(store.writer)
    outcome, garden = await filing.create("ann", "Garden work", "Answer as a gardener.")
    assert outcome is Outcome.DONE
    assert await filing.mark("ann", "c1", archived=True) is Outcome.DONE
    assert await filing.mark("ann", "c2", pinned=True) is Outcome.DONE
    assert await filing.file("ann", "c3", garden) is Outcome.DONE
    assert [thread["id"] for thread in await listed(store, ann)] == ["c3", "c2", "c0"]  # c1 archived
    assert [thread["id"] for thread in await listed(store, ann, "apples is:archived")] == ["c1"]
    assert [thread["id"] for thread in await listed(store, ann, "is:pinned")] == ["c2"]
    assert [thread["id"] for thread in await listed(store, ann, 'apples in:"Garden work"')] == ["c3"]
    active = await filing.chats("ann", archived=False)
    assert [c.id for c in active] == ["c2", "c3", "c0"] and active[0].pinned  # pinned first, then newest
    assert await filing.mark("ann", "c1", archived=False) is Outcome.DONE  # restored in one call
    assert "c1" in [thread["id"] for thread in await listed(store, ann)]


async def test_a_project_is_its_owners_only_and_deleting_it_keeps_its_chats(store):
    ann, _ = await someone(store, "ann"), await someone(store, "ben")
    await chat(store, ann, "c1", "filed", "hello", "hi")
    filing = Projects(store.writer)
    _, garden = await filing.create("ann", "Garden", "")
    assert (await filing.create("ann", "Garden", ""))[0] is Outcome.NAME_TAKEN
    assert await filing.file("ann", "c1", garden) is Outcome.DONE
    for attempt in (
        filing.file("ben", "c1", None),  # not his chat
        filing.change("ben", garden, "Mine now", ""),  # not his project
        filing.delete("ben", garden),
        filing.mark("ben", "c1", pinned=True),
    ):
        assert await attempt is Outcome.NOT_FOUND
    assert await filing.of("ben", garden) is None and await filing.listed("ben") == []
    assert (await filing.of_chat("ann", "c1")).name == "Garden"  # type: ignore[union-attr]
    assert await filing.delete("ann", garden) is Outcome.DONE
    assert await filing.of_chat("ann", "c1") is None and [c.id for c in await filing.chats("ann", archived=False)] == [
        "c1"
    ]


async def test_a_chat_started_in_a_project_is_filed_in_it_at_its_first_message_only_in_its_users_own(tmp_path, store):
    ann, ben = await someone(store, "ann"), await someone(store, "ben")
    _, garden = await Projects(store.writer).create("ann", "Garden", "")
    starting = ChatStore(
        store.engine, open_registration=True, timeout_s=15, new_chat_project=lambda: garden, actor=lambda: None
    )
    await starting.update_thread("mine", name="started in Garden", user_id=ann)
    await starting.update_thread("his", name="ben's, with ann's project id", user_id=ben)
    await starting.update_thread("mine", name="renamed")  # a rename files nothing anew
    with store.engine.connect() as connection:
        filed = dict(connection.execute(sa.select(threads.c.id, threads.c.project_id)).all())
    assert filed == {"mine": garden, "his": None}
    await starting.writer.close()


async def test_a_temporary_chats_writes_are_never_made(store, hooks):
    ann = await someone(store, "ann")
    temporary = ChatStore(
        store.engine,
        open_registration=True,
        timeout_s=15,
        actor=lambda: Actor("ann", "tmp"),
        never_kept=lambda thread_id: thread_id == "tmp",
    )
    await chat(temporary, ann, "tmp", "a secret chat", "a secret question", "a secret answer")
    await temporary.update_thread("tmp", metadata={"settings": {}})
    with store.engine.connect() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(threads)).scalar() == 0
        assert connection.execute(sa.select(sa.func.count()).select_from(message_terms)).scalar() == 0
    await temporary.writer.close()


async def test_removing_a_user_removes_their_projects_and_their_messages_words(store):
    ann = await someone(store, "ann")
    await chat(store, ann, "c1", "x", "hello there", "hi")
    await Projects(store.writer).create("ann", "Garden", "")
    assert remove_user(store.engine, "ann")
    with store.engine.connect() as connection:
        for table in (projects, message_terms):
            assert connection.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0


def full_text(connection: sa.Connection) -> dict[int, str]:
    """SQLite's full-text table, row by row."""
    return dict(connection.execute(sa.text("SELECT rowid, terms FROM message_fts")).all())


def terms_rows(connection: sa.Connection) -> dict[int, str]:
    """message_terms, row by row."""
    return dict(connection.execute(sa.select(message_terms.c.id, message_terms.c.terms)).all())


STEP_IDS = st.sampled_from(["s1", "s2", "s3"])
TEXTS = st.sampled_from(["", "...", "pumps run warm", "pumps run cold", "水泵运行温度", "warm water"])
CHANGES = st.one_of(
    st.tuples(st.just("index"), STEP_IDS, st.sampled_from(["c1", "c2"]), TEXTS),
    st.tuples(st.just("unindex"), STEP_IDS),
    st.tuples(st.just("unindex_chats"), st.sampled_from(["c1", "c2"])),
)


@pytest.fixture(scope="module")
def index_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    """A history database on SQLite, for the index's examples (each rolled back)."""
    engine = create_engine(database_url("", tmp_path_factory.mktemp("message-index")))
    upgrade(engine)
    yield engine
    engine.dispose()


@settings(max_examples=150, deadline=None)
@given(changes=st.lists(CHANGES, max_size=12))
def test_sqlites_full_text_table_follows_the_messages_words_through_any_changes(index_engine, changes):
    expected: dict[str, tuple[str, str]] = {}  # step: (chat, words)
    with index_engine.connect() as connection, connection.begin() as transaction:
        for change in changes:
            if change[0] == "index":
                _, step_id, chat_id, text = change
                message_index.index(connection, step_id, chat_id, "assistant_message", text)
                expected.pop(step_id, None)
                if words := indexed(text):
                    expected[step_id] = (chat_id, words)
            elif change[0] == "unindex":
                message_index.unindex(connection, [change[1]])
                expected.pop(change[1], None)
            else:
                message_index.unindex_chats(connection, [change[1]])
                expected = {step: held for step, held in expected.items() if held[0] != change[1]}
            rows = connection.execute(
                sa.select(message_terms.c.step_id, message_terms.c.thread_id, message_terms.c.terms)
            )
            assert {row.step_id: (row.thread_id, row.terms) for row in rows} == expected
            assert full_text(connection) == terms_rows(connection)
        transaction.rollback()


def test_a_message_indexed_before_the_triggers_is_replaced_not_doubled(tmp_path):
    engine = create_engine(database_url("", tmp_path))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:  # a database of the release before, its message indexed by that code
        config.attributes["connection"] = connection
        command.upgrade(config, "0010_keys_memory")
        message_index.drop_triggers(connection)  # 0008's index had none then
        row = connection.execute(sa.insert(message_terms).values(step_id="a1", thread_id="t1", terms="clouds"))
        connection.execute(
            sa.text("INSERT INTO message_fts (rowid, terms) VALUES (:id, 'clouds')"), {"id": row.lastrowid}
        )
    upgrade(engine)
    with engine.begin() as connection:
        message_index.index(connection, "a1", "t1", "assistant_message", "sunshine")
        assert list(full_text(connection).values()) == ["sunshine"] and full_text(connection) == terms_rows(connection)
        message_index.unindex(connection, ["a1"])
        assert full_text(connection) == {}


def test_a_search_is_split_into_its_filters_and_words():
    assert parse('pump in:"Garden work" is:pinned water') == parse("pump water in:'Garden work' is:pinned")
    query = parse("is:archived 水箱 in:Home")
    assert (query.text, query.project, query.pinned, query.archived) == ("水箱", "Home", False, True)
    assert parse('unclosed "quote').text == 'unclosed "quote'
