"""A real SQLite database whose outages the test decides: away, hanging, or losing the answer to a commit it made.

Every app process of a test gets an engine of its own on the one file, as processes do; the faults are shared,
as a database's are. A process that is killed never commits again (its transaction dies with it).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

# The longest a hanging statement waits for the test to let it go (a test that forgets still ends).
LONGEST_HANG_S = 20.0


@dataclass
class Faults:
    """What the database does now, as the test sets it."""

    away: bool = False
    # Set: statements run; clear: they hang until it is set again.
    running: threading.Event = field(default_factory=threading.Event)
    # The next commit lands, but its caller is told it failed (the answer lost on the way).
    lose_next_ack: bool = False
    # The database goes away again after this many commits (None: it stays): a flap.
    commits_left: int | None = None
    # Failed tries of each process while the database was away, and when they happened.
    refused: Counter[str] = field(default_factory=Counter)
    # How long the database has been away in all, and since when it is away now (None: it is not).
    away_s: float = 0.0
    away_since: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.running.set()

    def go_away(self) -> None:
        with self.lock:
            if not self.away:
                self.away, self.away_since = True, time.monotonic()

    def come_back(self) -> None:
        with self.lock:
            self.commits_left = None
            if self.away and self.away_since is not None:
                self.away_s += time.monotonic() - self.away_since
            self.away, self.away_since = False, None
        self.running.set()

    def hang(self) -> None:
        self.running.clear()

    def total_away_s(self) -> float:
        with self.lock:
            return self.away_s + (time.monotonic() - self.away_since if self.away_since is not None else 0.0)

    def before(self, process: Process) -> None:
        """What the database does to a process's next step: refuse, hang, or let it through."""
        self.running.wait(LONGEST_HANG_S)
        if process.dead:
            raise sqlite3.OperationalError(f"{process.name} was killed")
        if self.away:
            with self.lock:
                self.refused[process.name] += 1
            raise sqlite3.OperationalError("unable to open database file (the test took it away)")

    def flap(self, commits: int) -> None:
        """Back for this many commits, then away again."""
        self.come_back()
        with self.lock:
            self.commits_left = commits

    def committed(self) -> bool:
        """A commit landed: whether its answer is lost (once); the database goes away after the flap's last one."""
        with self.lock:
            lost, self.lose_next_ack = self.lose_next_ack, False
            if self.commits_left is not None:
                self.commits_left -= 1
                flapped = self.commits_left <= 0
                if flapped:
                    self.commits_left = None
            else:
                flapped = False
        if flapped:
            self.go_away()
        return lost


@dataclass
class Process:
    """One app process as the database sees it."""

    name: str
    dead: bool = False


def faulty_engine(path: Path, faults: Faults, process: Process) -> Engine:
    """An engine on the SQLite file whose every connection, statement and commit goes through the faults."""

    class Connection(sqlite3.Connection):
        def commit(self) -> None:
            faults.before(process)
            super().commit()
            if faults.committed():
                raise sqlite3.OperationalError("disk I/O error (after the commit: the test lost its answer)")

    def connect() -> sqlite3.Connection:
        faults.before(process)
        return sqlite3.connect(path, factory=Connection, check_same_thread=False, timeout=10)

    engine = sa.create_engine("sqlite://", creator=connect, poolclass=NullPool)

    def checked(*_args: Any) -> None:
        faults.before(process)

    sa.event.listen(engine, "before_cursor_execute", checked)
    return engine
