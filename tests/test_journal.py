"""The journal of writes the history database could not take yet, and the writer that replays it: on real files and
a real SQLite file, with the faults injected one at a time (tests/test_writes_machine.py mixes them)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from chainlit.context import init_http_context
from sqlalchemy.exc import DataError, IntegrityError, OperationalError, ProgrammingError

from app.history.database import create_engine, database_url, upgrade
from app.history.schema import insert_into, steps, threads, usage
from app.history.store import Actor, ChatStore
from app.history.usage import Usage, today
from app.history.writes import Backoff, Journal, Kept, Saving, Writer, frames
from app.history.writes import writer as writer_module
from app.history.writes.faults import Fault, classify
from app.history.writes.journal import SET_ASIDE, new_id, waiting_in
from tests.support.faulty_database import Faults, Process, faulty_engine
from tests.support.stores import Hooks, step


def refusing_store(tmp_path: Path, journal: Journal, chat: str = "t1") -> ChatStore:
    """A store whose database refuses every connection (its file is a folder), writing for alice's tab of a chat."""
    hooks = Hooks(actor=Actor("alice", chat))
    return hooks.store(create_engine(f"sqlite:///{tmp_path}"), journal=journal)


async def said_while_away(store: ChatStore) -> None:
    """A chat named, a question, an answer checkpointed and then whole, a setting changed (its tab's chat)."""
    chat = store.actor().thread_id  # type: ignore[union-attr]
    ids = ("u1", "a1") if chat == "t1" else (f"{chat}-u1", f"{chat}-a1")
    await store.update_thread(chat, name="said while away")
    await store.create_step(step(ids[0], chat, "user_message", "question", 1))
    await store.create_step(step(ids[1], chat, "assistant_message", "part of the", 2))
    await store.update_step(step(ids[1], chat, "assistant_message", "part of the answer, whole", 2))
    await store.update_thread(chat, metadata={"settings": {"temperature": 0.3}})


async def drained(journal: Journal, timeout_s: float = 15) -> None:
    """Wait until the journal holds nothing."""
    for _ in range(int(timeout_s * 10)):
        if not journal.records:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(journal.records)} write(s) still wait")


def stored(engine: sa.Engine, chat_id: str = "t1") -> tuple[Any, list[tuple[str, str]]]:
    """A chat's row and its messages (id, text), straight from the database."""
    with engine.connect() as connection:
        chat = connection.execute(sa.select(threads).where(threads.c.id == chat_id)).first()
        said = connection.execute(
            sa.select(steps.c.id, steps.c.output).where(steps.c.thread_id == chat_id).order_by(steps.c.created_at)
        ).all()
    return chat, [tuple(row) for row in said]


def migrated(path: Path) -> sa.Engine:
    """The app's database, created."""
    engine = create_engine(database_url("", path))
    upgrade(engine)
    return engine


def opened(folder: Path, marks: list[Any] | None = None) -> Journal:
    journal = Journal(folder, 1_000_000, marks.append if marks is not None else None)
    journal.open()
    return journal


async def test_what_a_refusing_database_did_not_take_is_made_by_the_next_app_in_order_and_once(tmp_path, caplog):
    init_http_context()
    marks: list[dict[str, dict[str, Saving | None]]] = []
    first = opened(tmp_path / "journal", marks)
    refusing = refusing_store(tmp_path, first)
    await said_while_away(refusing)  # nothing raises: each write waits in the journal
    # The answer's whole text replaced its checkpoint, which waited last in its chat.
    assert [(record.kept.kind, record.kept.messages) for record in first.records] == [
        ("thread", ()),
        ("step", ("u1",)),
        ("step", ("a1",)),
        ("thread", ()),
    ]
    assert {"u1": Saving.JOURNALED} in [change["t1"] for change in marks]
    waiting, age_s = first.waiting()
    assert waiting == 4 and age_s >= 0
    copies = [record.kept for record in first.records]
    await refusing.close()  # the app stops with the database still away: the file stays

    engine = migrated(tmp_path / "back")
    second = opened(tmp_path / "journal")
    back = Hooks().store(engine, journal=second)
    await back.writer.start()  # a new process takes the stopped one's journal, first thing
    assert not list((tmp_path / "journal").glob(first.path.name))
    await drained(second)
    chat, said = stored(engine)
    assert chat.name == "said while away" and chat.metadata == {"settings": {"temperature": 0.3}}
    assert said == [("u1", "question"), ("a1", "part of the answer, whole")]

    for kept in copies:  # as if a replay's commit landed but its answer was lost: the same writes, again
        second.add(kept)
    back.writer.retry_kept()
    await drained(second)
    assert stored(engine) == (chat, said)  # nothing made twice (their ids are remembered)
    assert "History: 4 kept write(s) made now that the database answers" in caplog.text
    await back.close()


async def test_a_live_apps_journal_is_not_taken_and_what_it_made_or_tore_is_left_out(tmp_path):
    folder = tmp_path / "journal"
    live, other = opened(folder), opened(folder)
    for n in range(3):
        await live.add(Kept("t1", "step", {"n": n}, (f"m{n}",)))
    assert await other.adopt() == 0  # its process holds the lock
    live.taken(live.records[:1])  # made in the database
    await live.flush()
    live.abandon()  # killed
    with live.path.open("ab") as file:
        file.write(b'0badc0de {"seq": 4, "chat": "t1", "ki')  # killed within a write
    assert await other.adopt() == 2
    assert [record.kept.data for record in other.records] == [{"n": 1}, {"n": 2}]


def test_a_torn_append_loses_only_itself_and_is_cut_off_where_it_can_be(tmp_path, monkeypatch):
    path = tmp_path / "journal-x.jsonl"
    file = frames.JournalFile(path)
    file.append(frames.frame({"n": 0}))
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])  # half of it reaches the disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        file.append(frames.frame({"n": 1}))
    assert frames.read(path) == [{"n": 0}] and path.stat().st_size == file.size  # cut back to the last whole line

    def no_truncate(_fd: int, _size: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError, match="No space left"):
        file.append(frames.frame({"n": 2}))  # and this time the fragment stays
    monkeypatch.undo()
    file.append(frames.frame({"n": 3}))
    assert frames.read(path) == [{"n": 0}, {"n": 3}]  # the next record is whole, on a line of its own


async def test_writes_the_disk_refused_wait_in_memory_and_go_to_the_file_once_it_takes_writes(tmp_path, monkeypatch):
    journal = opened(tmp_path / "journal")
    await journal.add(Kept("t1", "step", {"n": 0}))

    def full_disk(_fd: int, _data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    assert await journal.add(Kept("t1", "step", {"n": 1}, ("m1",))) is Saving.IN_MEMORY
    monkeypatch.undo()
    assert await journal.add(Kept("t1", "step", {"n": 2}, ("m2",))) is Saving.JOURNALED
    await journal.flush()
    assert [kept.data["n"] for kept in waiting_in(journal.path)] == [0, 1, 2] and not journal.in_memory


async def test_the_disk_refusing_keeps_writes_in_memory_and_past_the_bound_none(tmp_path):
    marks: list[dict[str, dict[str, Saving | None]]] = []
    (tmp_path / "a-file").write_text("")
    nowhere = Journal(tmp_path / "a-file" / "journal", 400, marks.append)  # no folder can be made there
    nowhere.open()
    assert await nowhere.add(Kept("t1", "step", {"text": "kept in memory"}, ("u1",))) is Saving.IN_MEMORY
    assert nowhere.saving_of("t1") == {"u1": Saving.IN_MEMORY}
    assert await nowhere.add(Kept("t1", "step", {"text": "x" * 400}, ("a1",))) is Saving.LOST
    assert marks == [{"t1": {"u1": Saving.IN_MEMORY}}, {"t1": {"a1": Saving.LOST}}]
    nowhere.taken(list(nowhere.records))
    assert marks[-1] == {"t1": {"u1": None}} and nowhere.waiting() == (0, 0.0)


async def test_an_answers_checkpoints_replace_the_copy_waiting_so_the_journal_holds_one(tmp_path):
    journal = opened(tmp_path / "journal")
    await journal.add(Kept("t1", "step", {"text": "question"}, ("u1",), key="step:u1"))
    answer = ""
    for _ in range(200):  # a long answer's checkpoints while the database is away
        answer += "word " * 20
        await journal.add(Kept("t1", "step", {"text": answer}, ("a1",), key="step:a1"))
    await journal.flush()
    assert [record.kept.data["text"] for record in journal.records] == ["question", answer]
    waiting = sum(len(record.line) for record in journal.records)
    assert journal.path.stat().st_size < 2 * waiting + 64 * 1024  # not 200 copies (4 MB)
    await journal.add(Kept("t1", "thread", {"name": "x"}))
    await journal.add(Kept("t1", "step", {"text": answer + "more"}, ("a1",), key="step:a1"))
    assert len(journal.records) == 4  # something else of the chat waits between: both copies are made, in order


async def killed_holding(folder: Path, count: int, chats: int = 1) -> Journal:
    """The journal of a process killed while it held this many writes (of chats t0, t1 ... in turn)."""
    stopped = opened(folder)
    for n in range(count):
        await stopped.add(Kept(f"t{n % chats}", "step", {"n": n}))
    stopped.abandon()
    return stopped


def appends_hang(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """The journal's appends hang at the disk: set once one does, and the event that lets them go on."""
    stuck, go_on = threading.Event(), threading.Event()
    do = journal._do

    def hanging_append(kind: str, data: bytes) -> None:
        if kind == "append":
            stuck.set()
            go_on.wait(10)
        do(kind, data)

    monkeypatch.setattr(journal, "_do", hanging_append)
    return stuck, go_on


async def test_two_processes_taking_over_the_same_stopped_journal_at_once_take_it_once(tmp_path):
    folder = tmp_path / "journal"
    stopped = await killed_holding(folder, 50, chats=3)
    first, second = opened(folder), opened(folder)
    taken = await asyncio.gather(first.adopt(), second.adopt(), first.adopt(), second.adopt())
    assert sum(taken) == 50 and sorted(record.kept.data["n"] for record in [*first.records, *second.records]) == list(
        range(50)
    )
    assert not stopped.path.exists() and not stopped.path.with_suffix(".lock").exists()


async def test_an_app_stopping_while_it_takes_over_a_journal_takes_it_whole_and_closes(tmp_path, monkeypatch):
    folder = tmp_path / "journal"
    stopped = await killed_holding(folder, 20)
    taking = opened(folder)
    on_disk, go_on = appends_hang(taking, monkeypatch)
    adopting = asyncio.create_task(taking.adopt())
    await asyncio.to_thread(on_disk.wait, 10)
    adopting.cancel()  # the app stops while the taken records are being written
    await asyncio.sleep(0.05)
    go_on.set()
    await asyncio.wait_for(taking.close(), 10)
    assert not stopped.path.exists() and len(taking.records) == 20
    assert await opened(folder).adopt() == 20  # what it took waits in its own file, once


def error(kind: type[Exception], orig: Exception) -> Exception:
    """A driver's error as SQLAlchemy raises it."""
    return kind("INSERT ...", {}, orig)


class Psycopg(Exception):
    """What psycopg's errors say of themselves."""

    def __init__(self, sqlstate: str | None) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def sqlite_error(name: str) -> sqlite3.Error:
    failure = sqlite3.OperationalError(name)
    failure.sqlite_errorname = name  # set by sqlite3 itself on a real failure
    return failure


@pytest.mark.parametrize(
    ("failure", "fault"),
    [
        (error(OperationalError, Psycopg("08006")), Fault.AWAY),  # connection failure
        (error(OperationalError, Psycopg("57P01")), Fault.AWAY),  # admin shutdown
        (error(OperationalError, Psycopg("57014")), Fault.AWAY),  # statement_timeout
        (error(OperationalError, Psycopg("53100")), Fault.AWAY),  # disk full
        (error(OperationalError, Psycopg("40001")), Fault.AWAY),  # serialization failure
        (error(ProgrammingError, Psycopg("25006")), Fault.AWAY),  # read-only transaction (a failover)
        (error(ProgrammingError, Psycopg("42501")), Fault.HELD),  # permission denied after a restore
        (error(ProgrammingError, Psycopg("42P01")), Fault.HELD),  # a table missing on a new primary
        (error(OperationalError, Psycopg("XX001")), Fault.HELD),  # data corrupted
        (error(IntegrityError, Psycopg("23505")), Fault.REFUSED),  # unique violation
        (error(DataError, Psycopg("22001")), Fault.REFUSED),  # value too long
        (error(OperationalError, Psycopg(None)), Fault.AWAY),  # no answer from a server at all
        (error(OperationalError, sqlite_error("SQLITE_FULL")), Fault.AWAY),
        (error(OperationalError, sqlite_error("SQLITE_BUSY_TIMEOUT")), Fault.AWAY),
        (error(OperationalError, sqlite_error("SQLITE_IOERR_WRITE")), Fault.AWAY),
        (error(IntegrityError, sqlite_error("SQLITE_CONSTRAINT_UNIQUE")), Fault.REFUSED),
        (error(OperationalError, sqlite_error("SQLITE_ERROR")), Fault.HELD),  # no such table
        (error(OperationalError, sqlite_error("SQLITE_CORRUPT")), Fault.HELD),
        (TimeoutError("no answer in 15 s"), Fault.AWAY),
        (OSError(28, "No space left on device"), Fault.AWAY),
        (KeyError("step"), Fault.REFUSED),  # the write's own data broke its applier
    ],
)
def test_a_failure_is_classified_by_what_the_database_said(failure, fault):
    assert classify(failure) is fault


def say(connection: sa.Connection, data: dict[str, Any], _at: float) -> None:
    """A write that fails on purpose where its data says so."""
    if data.get("fails") == "for good":
        connection.execute(sa.text("INSERT INTO applied_writes (id, at) VALUES (NULL, 0)"))  # NOT NULL: refused
    if data.get("fails") == "held":
        connection.execute(sa.text("SELECT * FROM no_such_table"))
    connection.execute(
        sa.insert(usage).values(user=data["n"], day="d", answers=1, prompt_tokens=0, completion_tokens=0)
    )


def faulty_writer(tmp_path: Path, faults: Faults, **more: Any) -> tuple[Writer, Journal]:
    engine = migrated(tmp_path)
    engine.dispose()
    journal = opened(tmp_path / "journal")
    writer = Writer(faulty_engine(tmp_path / "chat.db", faults, Process("app")), 0.3, journal=journal, **more)
    writer.appliers["say"] = say
    return writer, journal


def made(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "chat.db") as database:
        return [row[0] for row in database.execute("SELECT user FROM usage ORDER BY rowid")]


async def test_a_flap_while_the_journal_is_replayed_backs_off_instead_of_spinning(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_module, "REPLAY_BATCH", 2)
    faults = Faults()
    writer, journal = faulty_writer(tmp_path, faults, backoff=Backoff(0.05, 0.2))
    faults.go_away()
    for n in range(10):
        await writer.keep("say", Kept("c", "say", {"n": str(n)}))
    assert len(journal.records) == 10
    faults.flap(1)  # back for one commit, then away again: a flap during the replay
    await asyncio.sleep(1.0)
    assert faults.refused["app"] <= 1.0 / 0.05 + 10  # a try at most every 50 ms, doubling (before: thousands)
    faults.come_back()
    await drained(journal)
    assert made(tmp_path) == [str(n) for n in range(10)]
    await writer.close()


async def test_a_write_refused_for_good_is_set_aside_and_one_held_back_holds_only_its_chat(tmp_path):
    faults = Faults()
    writer, journal = faulty_writer(tmp_path, faults, backoff=Backoff(0.02, 0.1))
    marks: list[dict[str, dict[str, Saving | None]]] = []
    journal.on_change = marks.append
    faults.go_away()
    await writer.keep("say", Kept("bad", "say", {"n": "0", "fails": "for good"}, ("m0",)))
    await writer.keep("say", Kept("stuck", "say", {"n": "1", "fails": "held"}, ("m1",)))
    await writer.keep("say", Kept("stuck", "say", {"n": "2"}, ("m2",)))
    await writer.keep("say", Kept("fine", "say", {"n": "3"}, ("m3",)))
    faults.come_back()
    for _ in range(100):
        if [record.kept.chat for record in journal.records] == ["stuck", "stuck"]:
            break
        await asyncio.sleep(0.05)
    assert made(tmp_path) == ["3"]  # the other chat's writes were not held up
    assert [record.kept.data["n"] for record in journal.records] == ["1", "2"]  # held, in order, not dropped
    assert set(writer.held) == {"stuck"}
    assert {"bad": {"m0": Saving.REJECTED}} in marks
    rejected = list((tmp_path / "journal").glob(SET_ASIDE.format(name="*")))
    assert [[kept.data["n"] for kept in waiting_in(path)] for path in rejected] == [["0"]]
    await writer.close()


async def test_an_app_killed_while_it_takes_over_a_journal_lets_that_journal_go_too(tmp_path, monkeypatch):
    folder = tmp_path / "journal"
    await killed_holding(folder, 5)
    taking = opened(folder)
    on_disk, go_on = appends_hang(taking, monkeypatch)
    adopting = asyncio.create_task(taking.adopt())
    await asyncio.to_thread(on_disk.wait, 10)
    taking.abandon()  # killed while the disk holds up the take-over's append
    assert await opened(folder).adopt() == 5
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await adopting


async def test_a_take_over_whose_file_is_let_go_meanwhile_leaves_the_stopped_journal_for_the_next(
    tmp_path, monkeypatch
):
    folder = tmp_path / "journal"
    stopped = await killed_holding(folder, 5)
    taking = opened(folder)
    await taking.add(Kept("t2", "step", {"n": "its own"}))
    on_disk, go_on = appends_hang(taking, monkeypatch)
    adopting = asyncio.create_task(taking.adopt())
    await asyncio.to_thread(on_disk.wait, 10)
    taking.let_go()  # its app stops while the disk holds up the take-over's append
    another = opened(folder)
    assert await another.adopt() == 1  # the taking one's own record; the stopped journal is locked by the take-over
    go_on.set()
    await adopting
    assert await another.adopt() == 5 and not stopped.path.exists()


async def test_shutting_down_keeps_what_the_database_has_not_taken_within_the_deadline(tmp_path):
    faults = Faults()
    writer, journal = faulty_writer(tmp_path, faults)
    await writer.keep("say", Kept("c", "say", {"n": "0"}))
    faults.hang()  # the database slows down to a stop
    keeping = [asyncio.create_task(writer.keep("say", Kept("c", "say", {"n": str(n)}))) for n in (1, 2, 3)]
    await asyncio.sleep(0.05)
    await writer.close(deadline_s=0.5)  # SIGTERM: what waits for the database is journaled, then the app stops
    await asyncio.gather(*keeping)
    assert [kept.data["n"] for kept in waiting_in(journal.path)] == ["1", "2", "3"]
    faults.come_back()

    again, journal = faulty_writer(tmp_path, Faults())  # the app started again
    await again.start()
    await drained(journal)
    assert made(tmp_path) == ["0", "1", "2", "3"]
    await again.close()


async def test_a_shutdown_the_journals_disk_holds_up_lets_another_app_take_over_what_is_on_disk(tmp_path, monkeypatch):
    faults = Faults()
    writer, journal = faulty_writer(tmp_path, faults)
    faults.go_away()
    await writer.keep("say", Kept("c", "say", {"n": "0"}))  # on the journal's disk
    stuck, go_on = appends_hang(journal, monkeypatch)
    keeping = asyncio.create_task(writer.keep("say", Kept("c", "say", {"n": "1"})))
    await asyncio.to_thread(stuck.wait, 10)
    await writer.close(deadline_s=0.3)  # the disk does not answer within the deadline: the app stops all the same
    faults.come_back()
    again, taking = faulty_writer(tmp_path, faults)  # another app, while the stopped one's disk work hangs
    await again.start()
    await drained(taking)
    go_on.set()
    await keeping
    await again.close()
    assert made(tmp_path)[:1] == ["0"] and not journal.path.with_suffix(".lock").exists()


def counted(connection: sa.Connection, data: dict[str, Any], _at: float) -> None:
    """A write that is not idempotent: each time it is made, its user's answers count one more."""
    add = insert_into(usage, "sqlite").values(user=data["n"], day="d", answers=1, prompt_tokens=0, completion_tokens=0)
    connection.execute(add.on_conflict_do_update(index_elements=["user", "day"], set_={"answers": usage.c.answers + 1}))


async def test_a_write_whose_commit_hung_is_made_once_when_another_app_replays_it_before_the_commit_lands(tmp_path):
    hanging = Faults()
    writer, _journal = faulty_writer(tmp_path, hanging)
    writer.appliers["say"] = counted
    hanging.hang()  # this app's connection to the database stops answering
    await writer.keep("say", Kept("c", "say", {"n": "0"}))
    await asyncio.sleep(0.4)  # past the timeout: the write waits in the journal too
    await writer.close(deadline_s=0.3)
    replaying, taking = faulty_writer(tmp_path, Faults())  # another app takes the journal over and makes the write
    replaying.appliers["say"] = counted
    await replaying.start()
    await drained(taking)
    hanging.come_back()  # the stopped app's commit goes through after all
    await asyncio.sleep(0.5)
    await replaying.close()
    with sqlite3.connect(tmp_path / "chat.db") as database:
        assert database.execute("SELECT user, answers FROM usage").fetchall() == [("0", 1)]


async def test_a_write_kept_after_shutdown_began_is_still_made(tmp_path):
    writer, _journal = faulty_writer(tmp_path, Faults())
    await writer.keep("say", Kept("c", "say", {"n": "0"}))
    await writer.close()
    await writer.keep("say", Kept("c", "say", {"n": "1"}))  # Chainlit's last write, as its tabs close
    assert made(tmp_path) == ["0", "1"]


async def test_an_older_journal_neither_brings_back_a_deleted_chat_nor_undoes_a_newer_change(tmp_path):
    init_http_context()
    engine = migrated(tmp_path)
    folder = tmp_path / "journal"
    stopped = opened(folder)
    for chat in ("t1", "t2"):
        await said_while_away(refusing_store(tmp_path, stopped, chat))
    stopped.abandon()  # killed, its journal holding both chats' writes

    live = Hooks().store(engine)  # another process, later
    await live.delete_thread("t1")
    await live.update_thread("t2", name="renamed since", metadata={"settings": {"temperature": 0.9}})
    await live.writer.close()

    replaying = opened(folder)
    store = Hooks().store(engine, journal=replaying)
    await store.writer.start()
    await drained(replaying)
    assert stored(engine, "t1") == (None, [])  # still deleted: nothing of it came back
    chat, said = stored(engine, "t2")
    assert chat.name == "renamed since" and chat.metadata == {"settings": {"temperature": 0.9}}  # not undone
    assert said == [("t2-u1", "question"), ("t2-a1", "part of the answer, whole")]  # and nothing lost
    await store.close()


async def test_tokens_counted_once_however_often_their_write_is_replayed(tmp_path):
    engine = migrated(tmp_path)
    journal = opened(tmp_path / "journal")
    store = Hooks().store(engine, journal=journal)
    counted = Usage(store.writer)
    row = {"user": "alice", "day": today(), "answers": 1, "prompt_tokens": 100, "completion_tokens": 20}
    kept = Kept("usage:alice", "usage", row)
    await store.writer.keep("count the tokens used", kept)
    await journal.add(kept)  # its commit landed, but the answer was lost: journaled, and replayed
    store.writer.retry_kept()
    await drained(journal)
    assert await counted.tokens_today("alice") == 120
    await store.close()


def test_write_ids_are_new_in_a_process_and_in_one_forked_from_it():
    ids = {new_id() for _ in range(10_000)}
    assert len(ids) == 10_000 and all(len(each) == 32 and int(each, 16) >= 0 for each in ids)
    reading, writing = os.pipe()
    if (child := os.fork()) == 0:  # a server that forks its workers: each draws ids of its own
        os.write(writing, new_id().encode())
        os._exit(0)
    os.close(writing)
    theirs = os.read(reading, 64).decode()
    os.waitpid(child, 0)
    assert len(theirs) == 32 and theirs != new_id() and theirs not in ids
