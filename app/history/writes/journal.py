"""What was said but not yet written to the history database, kept on local disk until the database takes it.

One file per app process (`journal-<id>.jsonl`, locked while the process lives), so replicas and restarts never
share one; any live process adopts the files of processes that died (their lock is free), merged in time order.
Each record carries its write's id, which the database remembers with the write (app/history/writes/sql.py):
a record made twice (its mark lost, its file adopted twice) is skipped the second time. The disk work runs in a
thread of its own, appends grouped under one fsync.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import fcntl
import functools
import logging
import random
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from app import metrics
from app.history.writes.frames import JournalFile, frame, read
from app.history.writes.threads import DaemonThreads

logger = logging.getLogger(__name__)
# The journal files' names (the lock beside each is named alike, ending .lock).
PATTERN = "journal-*.jsonl"
# Records the database refused for good, kept for an operator beside the journal (one file per process).
SET_ASIDE = "rejected-{name}.jsonl"
# The file is written anew once what was taken from it outweighs what still waits by this much.
COMPACT_SLACK_BYTES = 64 * 1024


class Saving(StrEnum):
    """Where a message that the database has not taken yet is kept."""

    # In the journal's file: made when the database answers again, also after the app restarts.
    JOURNALED = "journaled"
    # The journal's disk refused it: kept in this process's memory only, lost if the app stops.
    IN_MEMORY = "in_memory"
    # Past the journal's bound: not kept anywhere.
    LOST = "lost"
    # The database refused it for good: set aside in the journal's folder for an operator.
    REJECTED = "rejected"


class Clock:
    """Wall-clock times that only go forward in this process: a chat's writes keep their order by them."""

    last = 0.0

    @classmethod
    def now(cls) -> float:
        cls.last = max(time.time(), cls.last + 1e-6)
        return cls.last


def new_id() -> str:
    """A write's id, which the database remembers once it is made: 128 random bits, unique, not secret.

    Not uuid4: its os.urandom is a system call that lets the history's writer thread take the interpreter from the
    event loop. `random` needs none; it is seeded from the OS, and again in a forked process.
    """
    return f"{random.getrandbits(128):032x}"


@dataclass(frozen=True)
class Kept:
    """A write of what was said, as data: its chat, how to apply it, the messages it saves."""

    chat: str
    kind: str
    data: dict[str, Any]
    messages: tuple[str, ...] = ()
    # While both wait, a later write of the same chat with the same key replaces this one (a newer full copy).
    key: str | None = None
    id: str = field(default_factory=new_id)
    # When it was said: a chat's writes are made in this order, and never over a newer state of the chat.
    at: float = field(default_factory=Clock.now)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Kept:
        """A write as a journal's line holds it (an older app's lines had no id: each gets one)."""
        return cls(
            str(payload["chat"]),
            str(payload["kind"]),
            dict(payload["data"]),
            tuple(payload.get("messages") or ()),
            payload.get("key"),
            str(payload.get("id") or new_id()),
            float(payload["at"]),
        )


@dataclass(frozen=True)
class Record:
    """A write in this process's journal: its place (seq) and what it is."""

    seq: int
    kept: Kept

    @functools.cached_property
    def line(self) -> bytes:
        """The record as one framed line of the journal's file."""
        kept = self.kept
        payload = {"seq": self.seq, "id": kept.id, "chat": kept.chat, "kind": kept.kind, "data": kept.data}
        return frame(payload | {"messages": list(kept.messages), "key": kept.key, "at": kept.at})

    @property
    def order(self) -> tuple[float, int]:
        """Where it goes among the others: by time said, then by place."""
        return self.kept.at, self.seq


# Told which messages changed how they are kept (None: saved now), by chat.
Changes = Callable[[dict[str, dict[str, Saving | None]]], None]


@dataclass
class DiskWork:
    """A piece of work for the journal's disk thread, and whether it succeeded."""

    kind: str  # "append" (grouped with the appends next to it), "rewrite", "set_aside"
    data: bytes
    done: asyncio.Future[bool]


@dataclass
class Dead:
    """A journal of a process that is gone, locked while this one takes it over."""

    path: Path
    lock: IO[bytes]
    records: list[Kept]


class Journal:
    """This process's journal: records in time order, on disk where it can, with the chats and messages they hold."""

    def __init__(self, folder: Path, most_bytes: int, on_change: Changes | None = None) -> None:
        self.folder = folder
        self.most_bytes = most_bytes
        self.on_change = on_change
        self.records: list[Record] = []
        # Whether the database is away: every kept write goes to the journal until a replay succeeds.
        self.away = False
        # The records not in the file (the disk refused them), by seq.
        self.in_memory: set[int] = set()
        # How many records each chat has: asked at every write while anything waits.
        self._chats: Counter[str] = Counter()
        self._seq = 0
        self._bytes = 0
        self._name = f"journal-{uuid.uuid4().hex}"
        self._file: JournalFile | None = None  # None: the folder cannot be used, records wait in memory
        self._lock: IO[bytes] | None = None
        # Seqs made in the database whose mark is not in the file yet.
        self._unmarked: list[int] = []
        self._work: deque[DiskWork] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._taking_over: set[asyncio.Task[int]] = set()  # adoptions under way: see adopt
        # The locks of stopped journals a take-over holds, let go with this journal's own when it is abandoned (as
        # at a kill): guarded, as the disk thread takes them while the event loop may abandon.
        self._dead_locks: set[IO[bytes]] = set()
        self._abandoned = False
        self._guard = threading.Lock()
        self._disk = DaemonThreads(1, "journal")

    @property
    def path(self) -> Path:
        """This process's journal file."""
        return self.folder / f"{self._name}.jsonl"

    def open(self) -> None:
        """Take this process's file and its lock (the journals of processes that died are adopted later)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._lock = (self.folder / f"{self._name}.lock").open("wb")
            fcntl.flock(self._lock, fcntl.LOCK_EX)
        except OSError as error:
            logger.error(
                "History: the journal's folder %s cannot be used (%s): writes wait in memory", self.folder, error
            )
            self._lock = None
            return
        self._file = JournalFile(self.path)

    def holds(self, chat: str) -> bool:
        """Whether a write of this chat must go behind what the journal holds (or the database is away)."""
        return self.away or self._chats[chat] > 0

    def add(self, kept: Kept) -> asyncio.Future[Saving]:
        """Keep a write in its chat's order; done once it is on disk (or known not to be): where it is kept."""
        saving: asyncio.Future[Saving] = asyncio.get_running_loop().create_future()
        record = Record(self._seq + 1, kept)
        line = record.line
        if self._bytes + len(line) > self.most_bytes:
            logger.error(
                "History: the journal is full (%d bytes, JOURNAL_MAX_MB): a write of chat %s is not kept",
                self._bytes,
                kept.chat,
            )
            self._tell({kept.chat: dict.fromkeys(kept.messages, Saving.LOST)})
            saving.set_result(Saving.LOST)
            return saving
        self._seq += 1
        lines = [line]
        replaced = self._replaced_by(kept)
        if replaced is not None:  # a newer full copy: the older one is not made
            self._remove([replaced])
            lines.append(frame({"taken": [replaced.seq]}))  # after the new record: a tear keeps both
        self._insert(record)
        if self._file is None:
            self._kept_in_memory([record])
            saving.set_result(Saving.IN_MEMORY)
            return saving

        def settled(written: asyncio.Future[bool]) -> None:
            if written.result():
                self._tell({kept.chat: dict.fromkeys(kept.messages, Saving.JOURNALED)})
                if self.in_memory:  # the disk takes writes again: those it refused go to the file too
                    self._compact()
            else:
                self._kept_in_memory([record])
            saving.set_result(Saving.IN_MEMORY if record.seq in self.in_memory else Saving.JOURNALED)

        self._disk_work("append", b"".join(lines)).add_done_callback(settled)
        if replaced is not None:
            self._tidy()
        return saving

    def taken(self, done: list[Record], saving: Saving | None = None) -> None:
        """These records reached the database (or were set aside): drop them, and say so in the file."""
        self._remove(done)
        on_disk = [record.seq for record in done if record.seq not in self.in_memory]
        self.in_memory -= {record.seq for record in done}
        self._unmarked += on_disk
        self._tidy()
        self._tell_saved(done, saving)

    def set_aside(self, kept: Kept, error: BaseException) -> None:
        """The database refused this write for good: into the file an operator reads (the caller drops it)."""
        logger.error(
            "History: the database refused a write of chat %s (%s) for good: set aside in %s: %s",
            kept.chat,
            kept.kind,
            self.folder / SET_ASIDE.format(name=self._name),
            error,
        )
        metrics.HISTORY_WRITES_REJECTED.inc()
        if self._file is not None:
            self._disk_work("set_aside", Record(0, kept).line)
        self._tell({kept.chat: dict.fromkeys(kept.messages, Saving.REJECTED)})

    async def adopt(self) -> int:
        """Take over the records of processes that are gone, in time order among this one's; how many.

        A caller cancelled meanwhile (the app stopping) leaves the take-over to finish, and close waits for it: cut
        in the middle, the records would be in this file but not in memory, and the stopped journals still locked.
        """
        taking_over = asyncio.create_task(self._take_over())
        self._taking_over.add(taking_over)
        taking_over.add_done_callback(self._taking_over.discard)
        return await asyncio.shield(taking_over)

    async def _take_over(self) -> int:
        if self._file is None:
            return 0
        loop = asyncio.get_running_loop()
        dead: list[Dead] = await loop.run_in_executor(self._disk, self._lock_dead)
        kept = sorted((kept for journal in dead for kept in journal.records), key=lambda kept: kept.at)
        records = [Record(self._seq + n, kept) for n, kept in enumerate(kept, 1)]
        written = not records or await self._disk_work("append", b"".join(record.line for record in records))
        if written:
            self._seq += len(records)
            for record in records:
                self._insert(record)
            self._tell_saved(records, Saving.JOURNALED)
        # Its file let go meanwhile (a shutdown the disk held up), another process may have read it before these
        # records were in it: the stopped journals stay for the next take-over.
        await loop.run_in_executor(self._disk, self._release, dead, written and self._lock is not None)
        if records and written:
            logger.warning("History: %d write(s) kept by stopped app(s) taken over", len(records))
        return len(records) if written else 0

    def waiting(self) -> tuple[int, float]:
        """How many writes wait, and the oldest one's age in seconds (0 when none)."""
        if not self.records:
            return 0, 0.0
        return len(self.records), max(0.0, time.time() - self.records[0].kept.at)

    def saving_of(self, chat: str) -> dict[str, Saving]:
        """The chat's messages the database has not taken yet, and where each is kept."""
        kept: dict[str, Saving] = {}
        for record in self.records:
            if record.kept.chat == chat:
                saving = Saving.IN_MEMORY if record.seq in self.in_memory else Saving.JOURNALED
                kept.update(dict.fromkeys(record.kept.messages, saving))
        return kept

    async def flush(self) -> None:
        """Wait until the disk work asked so far is done."""
        if self._worker is not None:
            await asyncio.shield(self._worker)

    async def close(self) -> None:
        """Finish the disk work, close the file and give up its lock (what it holds is taken by another process)."""
        if self._taking_over:  # its failure was its caller's to hear
            await asyncio.wait(set(self._taking_over))
        await self.flush()
        self.abandon()
        if not self.records:
            self.path.unlink(missing_ok=True)
            (self.folder / f"{self._name}.lock").unlink(missing_ok=True)

    def abandon(self) -> None:
        """Close the file and its lock at once, as a killed process would (what it holds stays on disk)."""
        for task in (self._worker, *self._taking_over):
            if task is not None:
                task.cancel()
        if self._file is not None:
            self._file.close()
        self.let_go()
        with self._guard:
            self._abandoned = True
            for lock in self._dead_locks:
                lock.close()
        self._disk.shutdown(wait=False)

    def let_go(self) -> None:
        """Give up the file's lock, as at exit: another process takes over what is on disk (disk work under way ends
        on its own)."""
        if self._lock is not None:
            self._lock.close()
        self._lock = None

    def _replaced_by(self, kept: Kept) -> Record | None:
        """The record a new write replaces: its chat's newest one waiting, if it has the same key."""
        if kept.key is None or not self._chats[kept.chat]:
            return None
        newest = next(record for record in reversed(self.records) if record.kept.chat == kept.chat)
        return newest if newest.kept.key == kept.key else None

    def _insert(self, record: Record) -> None:
        """A record in its place: by time said (almost always last)."""
        if not self.records or self.records[-1].order <= record.order:
            self.records.append(record)
        else:
            self.records.insert(bisect.bisect(self.records, record.order, key=lambda kept: kept.order), record)
        self._chats[record.kept.chat] += 1
        self._bytes += len(record.line)

    def _remove(self, done: list[Record]) -> None:
        """Records out of the list and the counts (their marks are the caller's)."""
        seqs = {record.seq for record in done}
        self.records = [record for record in self.records if record.seq not in seqs]
        for record in done:
            self._chats[record.kept.chat] -= 1
            self._bytes -= len(record.line)
        self._chats = +self._chats  # chats with nothing left out

    def _kept_in_memory(self, records: list[Record]) -> None:
        """Records the disk refused: they wait in memory, and their messages say so."""
        for record in records:
            if any(waiting.seq == record.seq for waiting in self.records):
                logger.error(
                    "History: a write of chat %s is kept in memory only, until the database takes it", record.kept.chat
                )
                self.in_memory.add(record.seq)
                self._tell_saved([record], Saving.IN_MEMORY)

    def _tidy(self) -> None:
        """Keep the file near what waits: a line of marks for what was made, or the file written anew once what it
        holds that waits no more outweighs what does."""
        if self._file is None:
            return
        if not self.records or self._file.size > 2 * self._bytes + COMPACT_SLACK_BYTES:
            self._compact()
            return
        if not self._unmarked:
            return
        marks, self._unmarked = self._unmarked, []

        def settled(written: asyncio.Future[bool]) -> None:
            if not written.result():  # tried again with the next ones; made twice meanwhile, they are skipped
                self._unmarked += marks

        self._disk_work("append", frame({"taken": marks})).add_done_callback(settled)

    def _compact(self) -> None:
        """Write the file anew with the records that wait, those kept in memory too."""
        self._unmarked = []
        snapshot = list(self.records)

        def settled(written: asyncio.Future[bool]) -> None:
            if not written.result():
                return
            moved = [record for record in snapshot if record.seq in self.in_memory]
            self.in_memory -= {record.seq for record in moved}
            self._tell_saved(moved, Saving.JOURNALED)

        self._disk_work("rewrite", b"".join(record.line for record in snapshot)).add_done_callback(settled)

    def _disk_work(self, kind: str, data: bytes) -> asyncio.Future[bool]:
        """Queue work for the disk thread, in order; done with whether the disk took it."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._work.append(DiskWork(kind, data, done))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work_the_disk())
        return done

    async def _work_the_disk(self) -> None:
        """Run the queued disk work in order; appends next to each other share one write and one fsync."""
        loop = asyncio.get_running_loop()
        while self._work:
            group = [self._work.popleft()]
            while group[0].kind == "append" and self._work and self._work[0].kind == "append":
                group.append(self._work.popleft())
            data = b"".join(work.data for work in group)
            try:
                await loop.run_in_executor(self._disk, self._do, group[0].kind, data)
                written = True
            except (OSError, RuntimeError) as error:  # RuntimeError: the disk thread was stopped
                logger.error("History: the journal %s refused a write (%s)", self.path, error)
                written = False
            for work in group:
                if not work.done.done():  # an awaiter cancelled it: the work was done all the same
                    work.done.set_result(written)

    def _do(self, kind: str, data: bytes) -> None:
        """One piece of disk work (in the disk thread)."""
        assert self._file is not None
        if kind == "append":
            self._file.append(data)
        elif kind == "rewrite":
            self._file.rewrite(data)
        else:
            JournalFile(self.folder / SET_ASIDE.format(name=self._name)).append(data)

    def _lock_dead(self) -> list[Dead]:
        """The journals whose process is gone, each locked and read (in the disk thread)."""
        dead = []
        for path in sorted(self.folder.glob(PATTERN)):
            if path == self.path:
                continue
            try:
                lock = path.with_suffix(".lock").open("ab")
            except OSError:
                continue
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # its process lives, or another one is taking it over
                lock.close()
                continue
            with self._guard:
                if self._abandoned:
                    lock.close()
                    break
                self._dead_locks.add(lock)
            dead.append(Dead(path, lock, waiting_in(path)))
        return dead

    def _release(self, dead: list[Dead], adopted: bool) -> None:
        """Give up the dead journals' locks, deleting them first if their records were taken over."""
        for journal in dead:
            if adopted or not journal.path.exists():
                journal.path.unlink(missing_ok=True)
                journal.path.with_suffix(".lock").unlink(missing_ok=True)
            with self._guard:
                self._dead_locks.discard(journal.lock)
                journal.lock.close()

    def _tell_saved(self, records: list[Record], saving: Saving | None) -> None:
        """Tell the page these records' messages are kept another way now."""
        changes: dict[str, dict[str, Saving | None]] = {}
        for record in records:
            changes.setdefault(record.kept.chat, {}).update(dict.fromkeys(record.kept.messages, saving))
        self._tell(changes)

    def _tell(self, changes: dict[str, dict[str, Saving | None]]) -> None:
        """Tell the page which messages changed how they are kept."""
        changes = {chat: marks for chat, marks in changes.items() if marks}
        if changes and self.on_change is not None:
            self.on_change(changes)


def waiting_in(path: Path) -> list[Kept]:
    """The writes a journal file holds that were not made, in its order (torn lines left out)."""
    taken: set[int] = set()
    records: list[tuple[int, Kept]] = []
    for payload in read(path):
        if "taken" in payload:
            taken.update(int(seq) for seq in payload["taken"])
            continue
        with contextlib.suppress(KeyError, TypeError, ValueError):
            records.append((int(payload["seq"]), Kept.from_payload(payload)))
    return [kept for seq, kept in records if seq not in taken]
