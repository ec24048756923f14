"""Database work off the event loop: reads on worker threads, writes batched into one transaction at a time.

The one place where driver errors become HistoryUnavailable (HistoryRefused when the write itself is wrong): every
read and write, logged with what it was for. A write of what was said (`keep`) never fails: when the database is
away it waits in the journal, in its chat's order, and is made once a retry finds the database back, exactly
once: the database remembers its id in the same transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from app import metrics
from app.errors import HistoryRefused, HistoryUnavailable
from app.history.writes.faults import Fault, classify
from app.history.writes.journal import Journal, Kept, Record, Saving
from app.history.writes.sql import first_time, forget_old, note_made
from app.history.writes.threads import DaemonThreads

logger = logging.getLogger(__name__)
Result = TypeVar("Result")
Work = Callable[[Connection], Any]
WriteFailure = Callable[[str], Awaitable[None]]
# Applies a kept write's data, said at that time, in a transaction.
Apply = Callable[[Connection, dict[str, Any], float], Any]
# What drivers raise when the history cannot be read or written (TimeoutError is an OSError).
DRIVER_ERRORS = (SQLAlchemyError, OSError)
# Threads of the store's own (a database that hangs holds these, not the threads the rest of the app uses):
# the writer's one and a few readers.
DATABASE_THREADS = 4
# connection.info key of what one transaction's works leave for each other (and for after_commit).
SCRATCH = "transaction_scratch"
# Scratch key of the kept writes made for the first time in the transaction: their ids are noted at its end, in one
# statement (a kept write made now has a new id; one replayed from a journal is checked first, as it may be made).
NEW_WRITES = "new_writes"
# Seconds between retries of the journal's writes: doubling from the first to the most, so a database that
# comes back gets them within seconds.
FIRST_RETRY_S = 0.5
MOST_RETRY_S = 4.0
# The most kept writes one retry makes in one transaction.
REPLAY_BATCH = 200
# A journaled write that fails this many times in a row as if the database were away, while it answers other
# queries (a lock held for ever, a statement too long for its timeout), holds its chat like any refusal.
STALLS_BEFORE_HELD = 3
# How often a live process looks for the journals of processes that stopped, and forgets old write ids.
ADOPT_EVERY_S = 10.0
FORGET_EVERY_S = 3600.0
# The longest a shutdown waits for queued writes to be committed before it keeps them in the journal.
DRAIN_S = 3.0
# The longest a write of what was said holds up its caller: a healthy database commits in milliseconds and the
# page reads the chat back right after (the sidebar); a slow one gets the write later, or the journal does at
# DATABASE_TIMEOUT, whoever waits. (A shutdown waits on Chainlit's last writes this long, not DATABASE_TIMEOUT.)
KEEP_WAIT_S = 2.0


@dataclass(frozen=True)
class Backoff:
    """How long the retries wait after failing: doubling from the first step, never below it, up to the most."""

    first_s: float = FIRST_RETRY_S
    most_s: float = MOST_RETRY_S

    def after(self, failures: int) -> float:
        """The wait after this many failed retries in a row (at least one)."""
        return min(self.first_s * 2.0 ** (max(failures, 1) - 1), self.most_s)


@dataclass
class Queued:
    """A write waiting for the writer: its work, its caller's future, and (kept writes) its data."""

    work: Work
    done: asyncio.Future[Any]
    kept: Kept | None = None
    # Whether it went to the journal (its commit hung, or the database went away behind it).
    journaled: bool = False


class Writer:
    """Runs database work in the store's threads within a timeout; writes keep their order, one writer at a time.

    A failed write is logged as an error and reported through `on_write_failure` (the chat shows a notice); a
    kept write that the database cannot take goes to the journal instead.
    """

    def __init__(
        self,
        engine: Engine,
        timeout_s: float,
        *,
        on_write_failure: WriteFailure | None = None,
        before_batch: Callable[[], Awaitable[None]] | None = None,
        after_commit: Callable[[dict[str, Any]], None] | None = None,
        journal: Journal | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.engine = engine
        # How long a caller waits for the database: one that hangs (not refuses) gets the usual notice.
        self.timeout_s = timeout_s
        self.on_write_failure = on_write_failure
        # What the writer awaits before each batch: the app's answers being written (a commit's thread
        # competes with the event loop for the app's core, which streams them).
        self.before_batch = before_batch
        # Told each committed transaction's scratch (e.g. the chats it created, which later writes may rely on).
        self.after_commit = after_commit
        # Where kept writes wait while the database is away (None: they are made or logged as failed).
        self.journal = journal
        self.backoff = backoff or Backoff()
        # How each kind of kept write is applied (its data is what the journal holds).
        self.appliers: dict[str, Apply] = {}
        # Chats whose oldest journaled write the database holds back for a reason of its own, and why.
        self.held: dict[str, str] = {}
        # Journaled writes that failed alone, as if the database were away, while it answered: how many times.
        self._stalls: Counter[str] = Counter()
        # One writer per process commits whatever is queued in one transaction: SQLite has one writer at a
        # time anyway, and a transaction per message costs more than the message's statements.
        self._queue: list[Queued] = []
        self._in_flight: list[Queued] = []
        self._writer: asyncio.Task[None] | None = None
        self._retries: asyncio.Task[None] | None = None
        self._watching: asyncio.Task[None] | None = None
        self._closing = False
        self._workers = DaemonThreads(DATABASE_THREADS, "history")

    async def run(self, what: str, function: Callable[..., Result], *args: Any) -> Result:
        """Run database work in one of the store's threads, so the event loop that streams answers never waits on it."""
        try:
            return await self._in_time(self._in_thread(function, *args))
        except DRIVER_ERRORS as error:
            logger.error("History: could not %s: %s", what, error)
            raise failed(what, error) from error

    async def read(self, what: str, work: Callable[[Connection], Result]) -> Result:
        """Run a query on a connection of its own."""
        return await self.run(what, self._connected, work)

    async def write(self, what: str, work: Work) -> Any:
        """Run work in the writer's next transaction; a failure is logged, reported, raised as HistoryUnavailable."""
        done = self._enqueue(work)
        try:
            # The write stays queued when the caller stops waiting: a database that answers late still gets it.
            return await self._in_time(asyncio.shield(done))
        except DRIVER_ERRORS as error:
            if not done.done():  # timed out: still queued, and what becomes of it is logged
                done.add_done_callback(functools.partial(log_late_write, what))
            logger.error("History: could not %s: %s", what, error)
            metrics.HISTORY_WRITE_FAILURES.inc()
            refused = failed(what, error)
            if self.on_write_failure is not None and not isinstance(refused, HistoryRefused):
                await self.on_write_failure(what)
            raise refused from error

    async def write_in_background(self, what: str, work: Work) -> None:
        """A write Chainlit does not await: reported like any other, never raised."""
        with contextlib.suppress(HistoryUnavailable):
            await self.write(what, work)

    async def keep(self, what: str, kept: Kept) -> None:
        """Make a write of what was said, in its chat's order: now, or from the journal once the database is back.

        Returns once it is made or kept (or after KEEP_WAIT_S, while it stays queued); never raises.
        """
        if self.journal is not None and self.journal.holds(kept.chat):  # behind what waits there
            await asyncio.shield(self._journal(kept))  # a caller cancelled meanwhile leaves it kept all the same
            return
        done = self._enqueue(functools.partial(self._apply_new, kept), kept if self.journal else None)
        done.add_done_callback(functools.partial(log_failed, what))
        with contextlib.suppress(Exception):  # logged when it settles
            await asyncio.wait_for(asyncio.shield(done), min(self.timeout_s, KEEP_WAIT_S))

    async def start(self) -> None:
        """Take over the journals of stopped processes now (before any write: a chat's new writes go behind the old
        ones) and every few seconds after; forget old write ids hourly."""
        if self.journal is not None and await self._adopt():
            self.retry_kept()
        self._watching = asyncio.get_running_loop().create_task(self._watch())

    async def close(self, deadline_s: float = DRAIN_S) -> None:
        """Commit what is queued within the deadline, keep the rest in the journal; close connections and threads."""
        if self._closing:  # Chainlit closes its data layer too, after the app's own shutdown did
            return
        self._closing = True
        for task in (self._watching, self._retries):
            if task is not None:
                task.cancel()
        if self._writer is not None and not self._writer.done():
            await asyncio.wait({self._writer}, timeout=min(deadline_s, self.timeout_s))
        if self.journal is not None:
            left = [queued for queued in [*self._in_flight, *self._queue] if queued.kept and not queued.journaled]
            for queued in left:
                self._journal_for(queued)
            if left:
                logger.warning("History: %d write(s) not committed at shutdown wait in the journal", len(left))
            try:
                await asyncio.wait_for(self.journal.close(), deadline_s)
            except TimeoutError:  # a disk that hangs: what was not synced is lost with it, the rest taken over
                logger.error("History: the journal's disk did not answer within %g s at shutdown", deadline_s)
                self.journal.let_go()
        if self._writer is not None:
            self._writer.cancel()
        with contextlib.suppress(TimeoutError):  # a database that hangs keeps its connections
            await self._in_time(self._in_thread(self.engine.dispose))
        self._workers.shutdown(wait=False)
        # A write that comes later (Chainlit's own, as its tabs close after the app's shutdown) is still made, on a
        # thread of its own started only then; the engine opens a connection again for it.
        self._workers = DaemonThreads(1, "history-after-close")

    def retry_kept(self) -> None:
        """Make the journal's writes as soon as the database answers (a retry loop, while any wait)."""
        if self.journal is not None and not self._closing and (self._retries is None or self._retries.done()):
            self._retries = asyncio.get_running_loop().create_task(self._retry())

    def _apply(self, kept: Kept, connection: Connection) -> Any:
        """Apply a kept write in the transaction at hand, unless the database made it already."""
        if first_time(connection, kept.id, kept.at):
            return self.appliers[kept.kind](connection, kept.data, kept.at)
        return None

    def _apply_new(self, kept: Kept, connection: Connection) -> Any:
        """Apply a kept write made now (its id is new), its id noted with the transaction's others at its end."""
        connection.info[SCRATCH].setdefault(NEW_WRITES, []).append({"id": kept.id, "at": kept.at})
        return self.appliers[kept.kind](connection, kept.data, kept.at)

    def _enqueue(self, work: Work, kept: Kept | None = None) -> asyncio.Future[Any]:
        """Queue work for the writer's next transaction; its future settles when committed or failed."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(Queued(work, done, kept))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        return done

    def _journal(self, kept: Kept) -> asyncio.Future[Saving]:
        """Keep a write in the journal (done once it is on disk) and retry the journal's writes."""
        assert self.journal is not None
        saving = self.journal.add(kept)
        self.retry_kept()
        return saving

    def _journal_for(self, queued: Queued) -> None:
        """A queued kept write to the journal; its caller is told once it is kept there."""
        assert queued.kept is not None
        queued.journaled = True
        self._journal(queued.kept).add_done_callback(lambda _: settle(queued.done, None))

    def _in_thread(self, function: Callable[..., Result], *args: Any) -> asyncio.Future[Result]:
        """Database work in one of the store's threads, however long it takes."""
        return asyncio.get_running_loop().run_in_executor(self._workers, function, *args)

    async def _in_time(self, outcome: Awaitable[Result]) -> Result:
        """The outcome, or TimeoutError once the database has taken longer than the store's timeout."""
        try:
            return await asyncio.wait_for(outcome, self.timeout_s)
        except TimeoutError:
            raise TimeoutError(f"the database did not answer within {self.timeout_s:g} s") from None

    def _connected(self, work: Callable[[Connection], Result]) -> Result:
        """Work on a connection of its own."""
        with self.engine.connect() as connection:
            return work(connection)

    async def _write_queued(self) -> None:
        """Commit queued writes in batches; a kept write of a chat the journal holds goes behind what it holds."""
        while self._queue:
            if self.before_batch is not None:
                await self.before_batch()
            batch, self._queue = self._queue, []
            direct = []
            for queued in batch:
                if queued.kept is not None and self.journal is not None and self.journal.holds(queued.kept.chat):
                    self._journal_for(queued)
                else:
                    direct.append(queued)
            if direct:
                await self._commit_batch(direct)

    async def _commit_batch(self, batch: list[Queued]) -> None:
        """Commit a batch and hand each write its outcome; kept writes the database cannot take go to the journal,
        in order, before any queued behind them."""
        self._in_flight = batch
        try:
            outcomes = await self._outcomes(batch)
        finally:
            self._in_flight = []
        away = False
        for queued, outcome in zip(batch, outcomes, strict=True):
            if not isinstance(outcome, BaseException):
                settle(queued.done, outcome)
                continue
            fault = classify(outcome)
            away |= fault is Fault.AWAY
            if queued.kept is None or self.journal is None:
                settle(queued.done, outcome)
            elif queued.journaled:
                settle(queued.done, None)
            elif fault is Fault.REFUSED:
                self.journal.set_aside(queued.kept, outcome)
                settle(queued.done, None)
            else:
                if fault is Fault.HELD:
                    self._hold(queued.kept.chat, outcome)
                self._journal_for(queued)
        if away and self.journal is not None:
            self._go_away()

    async def _outcomes(self, batch: list[Queued]) -> list[Any]:
        """Each write's result or exception: the batch in one transaction; after a failure not of the database
        being away, each write alone, so one bad write loses no other.

        A commit that takes longer than the timeout means the database is away: the batch's kept writes wait in
        the journal too, in case the commit never lands (if it does, their replay is skipped by their ids).
        """
        commit = asyncio.ensure_future(self._commit([queued.work for queued in batch]))
        finished, _ = await asyncio.wait({commit}, timeout=self.timeout_s)
        hung = not finished and self.journal is not None
        if hung:
            logger.error(
                "History: the database did not commit within %g s: new writes wait in the journal", self.timeout_s
            )
            for queued in batch:
                if queued.kept is not None:
                    self._journal_for(queued)
            self._go_away()
        try:
            return await commit
        except Exception as error:  # handed to the writes' callers, which report it
            if hung or len(batch) == 1 or classify(error) is Fault.AWAY:
                return [error] * len(batch)
            return [await self._alone(queued.work) for queued in batch]

    def _go_away(self) -> None:
        """From now on kept writes go to the journal: first those queued (in their order), then each as it comes."""
        assert self.journal is not None
        if not self.journal.away:
            logger.error("History: the database is away: writes wait in the journal")
        self.journal.away = True
        queued, self._queue = self._queue, []
        for entry in queued:
            if entry.kept is not None:
                self._journal_for(entry)
            else:
                self._queue.append(entry)
        self.retry_kept()

    def _hold(self, chat: str, error: BaseException) -> None:
        """The database holds back a write of this chat for a reason of its own: it waits, and an operator is told."""
        if chat not in self.held:
            logger.error(
                "History: the database refuses the writes of chat %s for a reason it does not say is the write's "
                "(%s): they wait in the journal and are retried; check the database's permissions and tables",
                chat,
                error,
            )
        self.held[chat] = str(error)

    async def _watch(self) -> None:
        """Every few seconds: the journals of processes that stopped; every hour: forget old write ids."""
        forgotten_at = -math.inf
        while True:
            if time.monotonic() - forgotten_at > FORGET_EVERY_S:
                forgotten_at = time.monotonic()
                await self.write_in_background("forget the ids of old writes", forget_old)
            await asyncio.sleep(ADOPT_EVERY_S)
            retrying = self._retries is not None and not self._retries.done()
            if self.journal is not None and not retrying and await self._adopt():
                self.retry_kept()

    async def _adopt(self) -> int:
        """Take over the journals of processes that stopped; how many writes."""
        assert self.journal is not None
        try:
            return await self.journal.adopt()
        except OSError as error:
            logger.error("History: the journals of stopped apps could not be read: %s", error)
            return 0

    async def _retry(self) -> None:
        """Make the journal's writes in order, while any wait, backing off while the database is away."""
        assert self.journal is not None
        failures = 0
        while True:
            await self._adopt()
            if not self.journal.records and not self.journal.away:
                return
            if failures:
                await asyncio.sleep(self.backoff.after(failures))
            failures = 0 if await self._replay_round() else failures + 1

    async def _replay_round(self) -> bool:
        """One try at what waits: the oldest write of each held chat, then a batch of the others; whether any of it
        was resolved (made, or set aside), or the database found back."""
        journal = self.journal
        assert journal is not None
        if not journal.records:  # away with nothing waiting: is it back?
            journal.away = not await self._answers()
            return not journal.away
        resolved, away = 0, False
        for chat in list(self.held):
            first = next((record for record in journal.records if record.kept.chat == chat), None)
            if first is None:
                del self.held[chat]
            elif not away:
                made, away = await self._replay_each([first], retrying_held=True)
                resolved += made
        batch = [record for record in journal.records if record.kept.chat not in self.held][:REPLAY_BATCH]
        if batch and not away:
            error = await self._replay(batch)
            if error is None:
                journal.taken(batch)
                resolved += len(batch)
            elif classify(error) is Fault.AWAY and not await self._answers():
                away = True
            else:
                made, away = await self._replay_each(batch)
                resolved += made
        journal.away = away
        if resolved:
            logger.warning("History: %d kept write(s) made now that the database answers", resolved)
        return resolved > 0

    async def _replay_each(self, records: list[Record], *, retrying_held: bool = False) -> tuple[int, bool]:
        """Make records one by one; a chat whose record fails waits with it (its later ones behind), the others go
        on. One the database refuses for good is set aside; one it refuses for a reason of its own holds its
        chat (an operator is told), as does one that keeps failing while the database answers. How many were
        resolved, and whether the database was found away."""
        journal = self.journal
        assert journal is not None
        resolved, stuck = 0, set(self.held) - ({records[0].kept.chat} if retrying_held else set())
        for record in records:
            chat = record.kept.chat
            if chat in stuck:
                continue
            error = await self._replay([record])
            fault = None if error is None else classify(error)
            if fault is Fault.AWAY and not await self._answers():
                return resolved, True
            if error is None or fault is Fault.REFUSED:
                if error is not None:
                    journal.set_aside(record.kept, error)
                journal.taken([record], None if error is None else Saving.REJECTED)
                self.held.pop(chat, None)
                self._stalls.pop(record.kept.id, None)
                resolved += 1
                continue
            stuck.add(chat)
            self._stalls[record.kept.id] += 1
            if fault is Fault.HELD or self._stalls[record.kept.id] >= STALLS_BEFORE_HELD:
                self._hold(chat, error)
        return resolved, False

    async def _replay(self, records: list[Record]) -> Exception | None:
        """Apply records in order in one transaction of the writer's; the error if it failed."""
        try:
            await self._in_time(asyncio.shield(self._enqueue(functools.partial(self._apply_records, records))))
        except Exception as error:  # the caller decides what it means
            return error
        return None

    def _apply_records(self, records: list[Record], connection: Connection) -> None:
        """Apply journaled writes in order, in the transaction at hand."""
        for record in records:
            self._apply(record.kept, connection)

    async def _answers(self) -> bool:
        """Whether the database answers a query now (quietly: a retry asks this at every try)."""
        try:
            await self._in_time(self._in_thread(self._connected, lambda c: c.execute(sa.text("SELECT 1"))))
        except DRIVER_ERRORS:
            return False
        return True

    async def _alone(self, work: Work) -> Any:
        """One write in a transaction of its own: its result, or the exception it raised."""
        try:
            return (await self._commit([work]))[0]
        except Exception as error:  # handed to the write's caller
            return error

    async def _commit(self, works: list[Work]) -> list[Any]:
        """Run the works in one transaction, in a worker thread, however long it takes (writes keep their order)."""
        with metrics.HISTORY_COMMIT.time():
            results, scratch = await self._in_thread(self._run_together, works)
        if self.after_commit is not None:
            self.after_commit(scratch)
        return results

    def _run_together(self, works: list[Work]) -> tuple[list[Any], dict[str, Any]]:
        """The works' results and the transaction's scratch, once committed."""
        with self.engine.begin() as connection:
            connection.info[SCRATCH] = {}
            results = [work(connection) for work in works]
            scratch = connection.info.pop(SCRATCH)
            if made := scratch.pop(NEW_WRITES, None):
                note_made(connection, made)
            return results, scratch


def failed(what: str, error: BaseException) -> HistoryUnavailable:
    """The app's error for a driver's: refused when the write itself is wrong, else unavailable."""
    return HistoryRefused(what) if classify(error) is Fault.REFUSED else HistoryUnavailable(what)


def log_late_write(what: str, done: asyncio.Future[Any]) -> None:
    """Say how a write ended whose caller stopped waiting for the database."""
    if done.cancelled():
        return
    if (error := done.exception()) is not None:
        logger.error("History: could not %s after all: %s", what, error)
    else:
        logger.warning("History: could not %s in time, but did once the database answered", what)


def log_failed(what: str, done: asyncio.Future[Any]) -> None:
    """Log a kept write that failed without a journal to keep it (the database took it as wrong, or is away)."""
    if not done.cancelled() and (error := done.exception()) is not None:
        logger.error("History: could not %s: %s", what, error)
        metrics.HISTORY_WRITE_FAILURES.inc()


def settle(done: asyncio.Future[Any], outcome: Any) -> None:
    """Hand a write's result (or exception) to its caller, once (shielded: a caller that stops waiting leaves it
    pending)."""
    if done.done():
        return
    if isinstance(outcome, BaseException):
        done.set_exception(outcome)
        # Its caller or its callbacks log it: asyncio need not log it again when the future is collected unread
        # (a caller cancelled at shutdown, before the callback that reads it ran).
        done.exception()
    else:
        done.set_result(outcome)
