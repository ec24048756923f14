"""What was said but not yet written to the history database, kept on local disk until the database takes it.

One file of JSON lines per app process (`journal-<id>.jsonl`, locked while the process lives), so replicas and
restarts never share one; a process adopts the files of processes that died (their lock is free) and makes
their writes as its own. A record is kept in memory when the disk refuses it, and refused past the size bound.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)
# The journal files' names (the lock beside each is named alike, ending .lock).
PATTERN = "journal-*.jsonl"


class Saving(StrEnum):
    """Where a message that the database has not taken yet is kept."""

    # In the journal's file: made when the database answers again, also after the app restarts.
    JOURNALED = "journaled"
    # The journal's disk refused it: kept in this process's memory only, lost if the app stops.
    IN_MEMORY = "in_memory"
    # Past the journal's bound: not kept anywhere.
    LOST = "lost"


@dataclass(frozen=True)
class Record:
    """One write of a chat's, as data: what to apply (`kind`) with what (`data`), in its chat's order."""

    seq: int
    chat: str
    kind: str
    data: dict[str, Any]
    # The messages (step ids) it saves, whose marks on the page follow it.
    messages: tuple[str, ...]
    # When it was said (epoch seconds): how long the oldest write has waited.
    at: float

    def line(self) -> bytes:
        """The record as one line of the journal's file."""
        return (json.dumps(asdict(self), ensure_ascii=False, default=str) + "\n").encode()


# Told which messages changed how they are kept (None: saved now), by chat.
Changes = Callable[[dict[str, dict[str, Saving | None]]], None]


class Journal:
    """This process's journal: records in order, on disk where it can, with the chats and messages they hold."""

    def __init__(self, folder: Path, most_bytes: int, on_change: Changes | None = None) -> None:
        self.folder = folder
        self.most_bytes = most_bytes
        self.on_change = on_change
        self.records: list[Record] = []
        # How many records each chat has: asked at every write while anything waits.
        self._chats: Counter[str] = Counter()
        # The records not in the file (the disk refused them), by seq.
        self.in_memory: set[int] = set()
        # Whether the database is away: every write of a chat goes to the journal until a replay succeeds.
        self.away = False
        self._seq = 0
        self._bytes = 0
        self._name = f"journal-{uuid.uuid4().hex}"
        self._file: IO[bytes] | None = None
        self._lock: IO[bytes] | None = None

    @property
    def path(self) -> Path:
        """This process's journal file."""
        return self.folder / f"{self._name}.jsonl"

    def open(self) -> None:
        """Take this process's file (and its lock), and the records of processes that died."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._lock = (self.folder / f"{self._name}.lock").open("wb")
            fcntl.flock(self._lock, fcntl.LOCK_EX)
        except OSError as error:
            logger.error(
                "History: the journal's folder %s cannot be used (%s): writes wait in memory", self.folder, error
            )
            self._lock = None
        self.adopt()

    def adopt(self) -> None:
        """Take over the journals whose process is gone (no lock held), in their order; delete their files."""
        if self._lock is None:
            return
        for path in sorted(self.folder.glob(PATTERN)):
            if path == self.path:
                continue
            with unlocked(path.with_suffix(".lock")) as free:
                if not free:
                    continue
                taken = read(path)
                for record in taken:
                    self.add(record.chat, record.kind, record.data, record.messages, at=record.at)
                path.unlink(missing_ok=True)
                path.with_suffix(".lock").unlink(missing_ok=True)
                if taken:
                    logger.warning("History: %d write(s) kept by a stopped app taken from %s", len(taken), path.name)

    def holds(self, chat: str) -> bool:
        """Whether a write of this chat must go behind what the journal holds (or the database is away)."""
        return self.away or self._chats[chat] > 0

    @property
    def next_seq(self) -> int:
        """The seq the next record gets: records added from now on have it or a higher one."""
        return self._seq + 1

    def add(
        self,
        chat: str,
        kind: str,
        data: dict[str, Any],
        messages: tuple[str, ...] = (),
        *,
        at: float | None = None,
        ahead_of: int | None = None,
    ) -> Saving:
        """Keep a write behind the others (or ahead of those from seq `ahead_of` on); where it is kept."""
        self._seq += 1
        record = Record(self._seq, chat, kind, data, messages, time.time() if at is None else at)
        line = record.line()
        if self._bytes + len(line) > self.most_bytes:
            logger.error(
                "History: the journal is full (%d bytes, JOURNAL_MAX_MB): a write of chat %s is not kept",
                self._bytes,
                chat,
            )
            self._tell({chat: dict.fromkeys(messages, Saving.LOST)})
            return Saving.LOST
        later = [i for i, kept in enumerate(self.records) if ahead_of is not None and kept.seq >= ahead_of]
        if later:  # written before the writes behind it were: the file is written anew in the new order
            self.records.insert(later[0], record)
            on_disk = self._rewrite()
        else:
            self.records.append(record)
            on_disk = self._append(line)
        self._chats[chat] += 1
        saving = Saving.JOURNALED if on_disk else Saving.IN_MEMORY
        if not on_disk:
            logger.error("History: a write of chat %s is kept in memory only, until the database takes it", chat)
            self.in_memory.add(record.seq)
        self._bytes += len(line)
        self._tell({chat: dict.fromkeys(messages, saving)})
        return saving

    def taken(self, done: list[Record]) -> None:
        """These records reached the database: drop them, and write the file anew with what is left."""
        self._drop(done, None)

    def dropped(self, record: Record) -> None:
        """The database refused this record as wrong: it is not kept any longer."""
        self._drop([record], Saving.LOST)

    def _drop(self, done: list[Record], saving: Saving | None) -> None:
        """Drop records and tell their messages' new state."""
        seqs = {record.seq for record in done}
        self.records = [record for record in self.records if record.seq not in seqs]
        self._chats = Counter(record.chat for record in self.records)
        on_disk = sorted(seqs - self.in_memory)
        self.in_memory -= seqs
        self._bytes = sum(len(record.line()) for record in self.records)
        if not self.records:
            self._rewrite()  # empty again
        elif on_disk:  # a line saying so, not the whole file written anew for each retry's batch
            self._append((json.dumps({"taken": on_disk}) + "\n").encode())
        changes: dict[str, dict[str, Saving | None]] = {}
        for record in done:
            changes.setdefault(record.chat, {}).update(dict.fromkeys(record.messages, saving))
        self._tell(changes)

    def waiting(self) -> tuple[int, float]:
        """How many writes wait, and the oldest one's age in seconds (0 when none)."""
        if not self.records:
            return 0, 0.0
        return len(self.records), max(0.0, time.time() - min(record.at for record in self.records))

    def saving_of(self, chat: str) -> dict[str, Saving]:
        """The chat's messages the database has not taken yet, and where each is kept."""
        kept: dict[str, Saving] = {}
        for record in self.records:
            if record.chat == chat:
                saving = Saving.IN_MEMORY if record.seq in self.in_memory else Saving.JOURNALED
                kept.update(dict.fromkeys(record.messages, saving))
        return kept

    def close(self) -> None:
        """Close the file and give up its lock (what it holds is taken by the next process)."""
        for handle in (self._file, self._lock):
            if handle is not None:
                handle.close()
        self._file = self._lock = None
        if not self.records:
            self.path.unlink(missing_ok=True)
            (self.folder / f"{self._name}.lock").unlink(missing_ok=True)

    def _append(self, line: bytes) -> bool:
        """Write a line to the file and to the disk; False when the disk refuses (full, gone, read-only)."""
        if self._lock is None:
            return False
        try:
            if self._file is None:
                self._file = self.path.open("ab")
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as error:
            logger.error("History: the journal %s refused a write (%s)", self.path, error)
            self._reopen()
            return False
        return True

    def _rewrite(self) -> bool:
        """The file holds the records left that are on disk, replaced at once; False when the disk refuses."""
        if self._lock is None:
            return False
        on_disk = [record for record in self.records if record.seq not in self.in_memory]
        fresh = self.path.with_suffix(".new")
        try:
            fresh.write_bytes(b"".join(record.line() for record in on_disk))
            os.replace(fresh, self.path)
        except OSError as error:
            logger.error("History: the journal %s could not be written anew (%s)", self.path, error)
            fresh.unlink(missing_ok=True)
            return False
        finally:
            self._reopen()
        return True

    def _reopen(self) -> None:
        """Drop the open file: the next append opens it anew (after a rewrite or a refused write)."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        self._file = None

    def _tell(self, changes: dict[str, dict[str, Saving | None]]) -> None:
        """Tell the page which messages changed how they are kept."""
        changes = {chat: marks for chat, marks in changes.items() if marks}
        if changes and self.on_change is not None:
            self.on_change(changes)


def read(path: Path) -> list[Record]:
    """The records of a journal file not yet taken, in order (a torn last line, of a killed process, left out)."""
    records: list[Record] = []
    taken: set[int] = set()
    with path.open("rb") as file:
        for line in file:
            try:
                fields = json.loads(line)
                if "taken" in fields:
                    taken.update(fields["taken"])
                    continue
                messages = tuple(fields["messages"])
                records.append(
                    Record(fields["seq"], fields["chat"], fields["kind"], fields["data"], messages, fields["at"])
                )
            except (ValueError, KeyError, TypeError):
                logger.error("History: a torn record in %s was left out", path.name)
    return [record for record in records if record.seq not in taken]


@contextlib.contextmanager
def unlocked(lock_path: Path) -> Iterator[bool]:
    """Hold a journal's lock while the block runs if nobody holds it (its process is gone); yields whether so."""
    try:
        handle = lock_path.open("ab")
    except OSError:
        yield False
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
