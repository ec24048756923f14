"""The writer and its journal as a state machine (Hypothesis): writes, outages, flapping, hangs, lost answers, a slow
journal disk, kills and restarts of several processes on one database, with the real writer, journal files and
SQLite.

Checked after every run, once the database is back: every acknowledged write (made, or on a journal's disk) is
made exactly once, each process's writes of a chat in the order said, a deleted chat stays deleted whatever was
replayed after, every journal is empty and no stopped process's journal is left; all along: the retries back off.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from sqlalchemy.engine import Connection

from app.history.schema import applied_writes
from app.history.writes import Backoff, Journal, Kept, Saving, Writer
from app.history.writes import writer as writer_module
from app.history.writes.journal import COMPACT_SLACK_BYTES, new_id
from tests.support.faulty_database import Faults, Process, faulty_engine

SLOTS = 3  # app processes at once (each may be killed and started again)
TIMEOUT_S = 0.15  # DATABASE_TIMEOUT
BACKOFF = Backoff(0.01, 0.08)
SETTLE_S = 15.0  # the longest the journals may take to empty once the database is back

tables = sa.MetaData()
said = sa.Table(
    "said",
    tables,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("chat", sa.String, nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("write_id", sa.String, nullable=False),
)
deleted = sa.Table("deleted", tables, sa.Column("chat", sa.String, primary_key=True))


def say(connection: Connection, data: dict[str, Any], _at: float) -> None:
    """A write that is not idempotent: made twice, it shows twice."""
    if connection.execute(sa.select(deleted.c.chat).where(deleted.c.chat == data["chat"])).first() is None:
        connection.execute(sa.insert(said).values(chat=data["chat"], n=data["n"], write_id=data["id"]))


def delete(connection: Connection, data: dict[str, Any], _at: float) -> None:
    """A chat gone for good: what it said, and whatever it says later."""
    connection.execute(sa.delete(said).where(said.c.chat == data["chat"]))
    connection.execute(sa.insert(deleted).prefix_with("OR IGNORE").values(chat=data["chat"]))


@dataclass(frozen=True)
class Said:
    """A write the test made, as it expects to find it."""

    id: str
    chat: str
    n: int
    incarnation: str
    key: str | None = None
    kind: str = "say"


@dataclass
class App:
    """One app process: its writer, its journal, and what its journal told it was on disk."""

    process: Process
    writer: Writer
    journal: Journal
    journaled: set[str] = field(default_factory=set)


class Writes(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.root = Path(tempfile.mkdtemp(prefix="writes-"))
        self.folder, self.database = self.root / "journal", self.root / "history.db"
        # Replays in batches of a few, so that a replay run meets an outage between two batches (a flap).
        self.batch, writer_module.REPLAY_BATCH = writer_module.REPLAY_BATCH, 3
        engine = sa.create_engine(f"sqlite:///{self.database}")
        tables.create_all(engine)
        applied_writes.create(engine)
        engine.dispose()
        self.faults = Faults()
        self.disk_delay_s = 0.0  # how long each piece of the journals' disk work takes more than it should
        self.apps: dict[int, App] = {}
        self.stopped: list[App] = []
        self.incarnations = itertools.count()
        self.numbers = itertools.count()
        self.writes: list[Said] = []
        self.deleted: set[str] = set()
        self.steps = 0

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout_s: float = 10.0) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, timeout_s))

    async def started(self, slot: int) -> App:
        process = Process(f"app{slot}-{next(self.incarnations)}")
        app_journaled: set[str] = set()

        def told(changes: dict[str, dict[str, Saving | None]]) -> None:
            for marks in changes.values():
                app_journaled.update(write for write, saving in marks.items() if saving is Saving.JOURNALED)

        journal = Journal(self.folder, 10_000_000, told)
        journal.open()
        do = journal._do

        def slowed(kind: str, data: bytes) -> None:
            time.sleep(self.disk_delay_s)
            do(kind, data)

        journal._do = slowed  # type: ignore[method-assign]
        engine = faulty_engine(self.database, self.faults, process)
        writer = Writer(engine, TIMEOUT_S, journal=journal, backoff=BACKOFF)
        writer.appliers |= {"say": say, "delete": delete}
        await writer.start()
        return App(process, writer, journal, app_journaled)

    @initialize()
    def start_apps(self) -> None:
        for slot in range(SLOTS):
            self.apps[slot] = self.run(self.started(slot))

    # ---- what the apps do ----------------------------------------------------------------------------------
    def chat_of(self, slot: int, which: int) -> str:
        return f"chat{slot}.{which}"

    @precondition(lambda self: self.apps)
    @rule(slot=st.integers(0, SLOTS - 1), which=st.integers(0, 1), keyed=st.booleans())
    def say_something(self, slot: int, which: int, keyed: bool) -> None:
        app = self.apps.get(slot)
        chat = self.chat_of(slot, which)
        if app is None or chat in self.deleted:
            return
        key, write_id, n = f"message:{chat}" if keyed else None, new_id(), next(self.numbers)
        self.writes.append(Said(write_id, chat, n, app.process.name, key))
        kept = Kept(chat, "say", {"chat": chat, "n": n, "id": write_id}, (write_id,), key, write_id)
        self.run(app.writer.keep("say something", kept))

    @precondition(lambda self: self.apps)
    @rule(slot=st.integers(0, SLOTS - 1), which=st.integers(0, 1))
    def delete_a_chat(self, slot: int, which: int) -> None:
        app = self.apps.get(slot)
        chat = self.chat_of(slot, which)
        if app is None or chat in self.deleted:
            return
        self.deleted.add(chat)
        write_id = new_id()
        self.writes.append(Said(write_id, chat, -1, app.process.name, kind="delete"))
        self.run(app.writer.keep("delete a chat", Kept(chat, "delete", {"chat": chat}, (write_id,), None, write_id)))

    @rule(seconds=st.sampled_from([0.0, 0.02, 0.1]))
    def time_passes(self, seconds: float) -> None:
        self.run(asyncio.sleep(seconds))

    # ---- what happens to them --------------------------------------------------------------------------------
    @rule()
    def database_goes_away(self) -> None:
        self.faults.go_away()

    @rule()
    def database_comes_back(self) -> None:
        self.faults.come_back()

    @rule(commits=st.integers(1, 3))
    def database_flaps(self, commits: int) -> None:
        """Back for a few commits, then away again, while the retries run."""
        self.faults.flap(commits)
        self.run(asyncio.sleep(0.2))

    @rule()
    def database_hangs(self) -> None:
        self.faults.hang()

    @rule(seconds=st.sampled_from([0.0, 0.3]))
    def the_journals_disk_takes(self, seconds: float) -> None:
        """Slower than the shutdown's deadline, or as fast as it is."""
        self.disk_delay_s = seconds

    @rule()
    def a_commit_loses_its_answer(self) -> None:
        self.faults.lose_next_ack = True

    @precondition(lambda self: self.apps)
    @rule(slot=st.integers(0, SLOTS - 1))
    def killed(self, slot: int) -> None:
        if (app := self.apps.pop(slot, None)) is not None:
            kill(app)
            self.stopped.append(app)

    @precondition(lambda self: self.apps)
    @rule(slot=st.integers(0, SLOTS - 1))
    def stopped_gracefully(self, slot: int) -> None:
        if (app := self.apps.pop(slot, None)) is not None:
            self.run(app.writer.close(deadline_s=TIMEOUT_S), 30)
            self.stopped.append(app)

    @rule(slot=st.integers(0, SLOTS - 1))
    def started_again(self, slot: int) -> None:
        if slot not in self.apps:
            self.apps[slot] = self.run(self.started(slot))

    # ---- what must hold ----------------------------------------------------------------------------------
    @invariant()
    def retries_back_off(self) -> None:
        """No process tries a database that is away more often than its backoff lets it (a few per step aside)."""
        self.steps += 1
        allowed = self.faults.total_away_s() / BACKOFF.first_s + 6 * self.steps + 10
        for name, tries in self.faults.refused.items():
            assert tries <= allowed, f"{name} tried {tries} times while the database was away ({allowed:.0f} allowed)"

    @invariant()
    def journals_stay_near_what_waits(self) -> None:
        for app in self.apps.values():
            self.run(app.journal.flush())
            on_disk = size_of(app.journal.path)
            waiting = sum(len(record.line) for record in app.journal.records)
            biggest = max((len(record.line) for record in app.journal.records), default=0)
            assert on_disk <= 2 * waiting + COMPACT_SLACK_BYTES + 4 * biggest + 1024

    def teardown(self) -> None:
        try:
            self.settle()
            self.check()
        finally:
            self.faults.come_back()
            for app in [*self.apps.values(), *self.stopped]:
                kill(app)
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()
            writer_module.REPLAY_BATCH = self.batch
            shutil.rmtree(self.root, ignore_errors=True)

    def settle(self) -> None:
        """The database back for good, an app running, and time for every journal to empty."""
        self.faults.come_back()
        self.faults.lose_next_ack = False
        self.disk_delay_s = 0.0
        if not self.apps:
            self.apps[0] = self.run(self.started(0))

        async def emptied() -> None:
            while True:
                for app in self.apps.values():
                    app.writer.retry_kept()  # what the watch does every few seconds
                await asyncio.sleep(0.05)
                live = {app.journal.path for app in self.apps.values()}
                left = [path for path in self.folder.glob("journal-*.jsonl") if path not in live]
                if not left and not any(app.journal.records for app in self.apps.values()):
                    for app in self.apps.values():
                        await app.journal.flush()
                    return

        self.run(emptied(), SETTLE_S)

    def check(self) -> None:
        engine = sa.create_engine(f"sqlite:///{self.database}")
        with engine.connect() as connection:
            rows = connection.execute(sa.select(said).order_by(said.c.seq)).all()
            made = set(connection.execute(sa.select(applied_writes.c.id)).scalars())
        engine.dispose()
        journaled = set().union(*(app.journaled for app in [*self.apps.values(), *self.stopped]))
        acknowledged = made | journaled
        deletes = {write.chat for write in self.writes if write.kind == "delete" and write.id in acknowledged}
        shown = [row.write_id for row in rows]
        for write in self.writes:
            if write.kind != "say":
                continue
            times = shown.count(write.id)
            assert times <= 1, f"{write} was made {times} times"
            if write.chat in deletes:
                assert times == 0, f"{write} was made after its chat was deleted"
            elif write.id in acknowledged and not self.replaced(write, acknowledged):
                assert times == 1, f"{write} was acknowledged and never made"
        for chat, incarnation in {(write.chat, write.incarnation) for write in self.writes}:
            order = [row.n for row in rows if row.chat == chat and self.by(row.write_id) == incarnation]
            assert order == sorted(order), f"{incarnation}'s writes of {chat} were made out of order: {order}"
        for app in self.apps.values():
            assert not app.journal.records and size_of(app.journal.path) == 0

    def replaced(self, write: Said, acknowledged: set[str]) -> bool:
        """Whether a newer acknowledged copy with the same key may have replaced this one while both waited."""
        later = self.writes[self.writes.index(write) + 1 :]
        return write.key is not None and any(w.key == write.key and w.id in acknowledged for w in later)

    def by(self, write_id: str) -> str:
        return next(write.incarnation for write in self.writes if write.id == write_id)


def size_of(path: Path) -> int:
    """A file's size (0 when there is none)."""
    return path.stat().st_size if path.exists() else 0


def kill(app: App) -> None:
    """The process dies: its tasks and threads stop where they are, its journal's file and lock are let go."""
    app.process.dead = True
    for task in (app.writer._writer, app.writer._retries, app.writer._watching):
        if task is not None:
            task.cancel()
    app.journal.abandon()
    with contextlib.suppress(Exception):
        app.writer.engine.dispose()


Writes.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_every_acknowledged_write_is_made_once_in_order_through_outages_kills_and_restarts = Writes.TestCase
