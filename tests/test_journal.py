"""The journal of writes the history database could not take yet: on disk per process, taken over after a stop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from chainlit.context import init_http_context

from app.history.database import create_engine, database_url, upgrade
from app.history.journal import Journal, Saving
from app.history.schema import steps, threads
from app.history.store import Actor, ChatStore
from tests.support.stores import Hooks, step


def refusing_store(tmp_path: Path, journal: Journal) -> ChatStore:
    """A store whose database refuses every connection (its file is a folder), writing for alice's tab of t1."""
    hooks = Hooks(actor=Actor("alice", "t1"))
    return hooks.store(create_engine(f"sqlite:///{tmp_path}"), journal=journal)


async def said_while_away(store: ChatStore) -> None:
    """A chat named, a question, an answer checkpointed and then whole, a setting changed."""
    await store.update_thread("t1", name="said while away")
    await store.create_step(step("u1", "t1", "user_message", "question", 1))
    await store.create_step(step("a1", "t1", "assistant_message", "part of the", 2))
    await store.update_step(step("a1", "t1", "assistant_message", "part of the answer, whole", 2))
    await store.update_thread("t1", metadata={"settings": {"temperature": 0.3}})


async def drained(journal: Journal, timeout_s: float = 15) -> None:
    """Wait until the journal holds nothing."""
    for _ in range(int(timeout_s * 10)):
        if not journal.records:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(journal.records)} write(s) still wait")


def stored(engine: sa.Engine) -> tuple[Any, list[tuple[str, str]]]:
    """The chat t1's row and its messages (id, text), straight from the database."""
    with engine.connect() as connection:
        chat = connection.execute(sa.select(threads).where(threads.c.id == "t1")).first()
        said = connection.execute(sa.select(steps.c.id, steps.c.output).order_by(steps.c.created_at)).all()
    return chat, [tuple(row) for row in said]


async def test_what_a_refusing_database_did_not_take_is_made_by_the_next_app_in_order_and_once(tmp_path, caplog):
    init_http_context()
    marks: list[dict[str, dict[str, Saving | None]]] = []
    first = Journal(tmp_path / "journal", 1_000_000, marks.append)
    first.open()
    refusing = refusing_store(tmp_path, first)
    await said_while_away(refusing)  # nothing raises: each write waits in the journal
    assert [(record.kind, record.messages) for record in first.records] == [
        ("thread", ()),
        ("step", ("u1",)),
        ("step", ("a1",)),
        ("step", ("a1",)),
        ("thread", ()),
    ]
    assert {"u1": Saving.JOURNALED} in [change["t1"] for change in marks]
    waiting, age_s = first.waiting()
    assert waiting == 5 and age_s >= 0
    await refusing.close()  # the app stops with the database still away: the file stays

    engine = create_engine(database_url("", tmp_path / "back"))
    upgrade(engine)
    second = Journal(tmp_path / "journal", 1_000_000)
    second.open()  # a new process takes the stopped one's journal
    assert [record.kind for record in second.records] == ["thread", "step", "step", "step", "thread"]
    assert not list((tmp_path / "journal").glob(first.path.name))
    back = Hooks().store(engine, journal=second)
    back.writer.retry_kept()
    await drained(second)
    chat, said = stored(engine)
    assert chat.name == "said while away" and chat.metadata == {"settings": {"temperature": 0.3}}
    assert said == [("u1", "question"), ("a1", "part of the answer, whole")]

    for record in list(first.records):  # as if a retry's commit landed but its answer was lost: made again
        second.add(record.chat, record.kind, record.data, record.messages)
    back.writer.retry_kept()
    await drained(second)
    assert stored(engine) == (chat, said)  # nothing doubled
    assert "History: 5 kept write(s) made now that the database answers" in caplog.text
    await back.close()


async def test_a_live_apps_journal_is_not_taken_and_what_it_made_or_tore_is_left_out(tmp_path):
    folder = tmp_path / "journal"
    live, other = Journal(folder, 1_000_000), Journal(folder, 1_000_000)
    live.open()
    live.add("t1", "step", {"n": 0}, ("u0",))
    live.add("t1", "step", {"n": 1}, ("u1",))
    other.open()
    assert other.records == []  # its process holds the lock
    live.taken(live.records[:1])  # made in the database
    live.add("t1", "step", {"n": 2}, ("a1",))
    live.close()
    with live.path.open("ab") as file:
        file.write(b'{"seq": 3, "chat": "t1", "ki')  # a process killed within a write
    other.adopt()
    assert [record.data for record in other.records] == [{"n": 1}, {"n": 2}]


async def test_the_disk_refusing_keeps_writes_in_memory_and_past_the_bound_none(tmp_path):
    marks: list[dict[str, dict[str, Saving | None]]] = []
    (tmp_path / "a-file").write_text("")
    nowhere = Journal(tmp_path / "a-file" / "journal", 300, marks.append)  # no folder can be made there
    nowhere.open()
    assert nowhere.add("t1", "step", {"text": "kept in memory"}, ("u1",)) is Saving.IN_MEMORY
    assert nowhere.saving_of("t1") == {"u1": Saving.IN_MEMORY}
    assert nowhere.add("t1", "step", {"text": "x" * 300}, ("a1",)) is Saving.LOST
    assert marks == [{"t1": {"u1": Saving.IN_MEMORY}}, {"t1": {"a1": Saving.LOST}}]
    nowhere.taken(list(nowhere.records))
    assert marks[-1] == {"t1": {"u1": None}} and nowhere.waiting() == (0, 0.0)
