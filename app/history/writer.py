"""Database work off the event loop: reads on worker threads, writes batched into one transaction at a time.

The one place where driver errors become HistoryUnavailable: every read and write, logged with what it was for.
A write of what was said (`keep`) never fails: when the database is away it waits in the journal, in its chat's
order, and is made when a retry finds the database back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DataError, IntegrityError, NotSupportedError, ProgrammingError, SQLAlchemyError

from app import metrics
from app.errors import HistoryUnavailable
from app.history.journal import Journal, Record

logger = logging.getLogger(__name__)
Result = TypeVar("Result")
Work = Callable[[Connection], Any]
WriteFailure = Callable[[str], Awaitable[None]]
# Applies a kept write's data in a transaction.
Apply = Callable[[Connection, dict[str, Any]], Any]
# What drivers raise when the history cannot be read or written (TimeoutError is an OSError).
DRIVER_ERRORS = (SQLAlchemyError, OSError)
# What a write itself is wrong in: retrying it cannot help. Any other driver error means the database is away.
WRONG_WRITE = (IntegrityError, DataError, ProgrammingError, NotSupportedError)
# Threads of the store's own (a database that hangs holds these, not the threads the rest of the app uses):
# the writer's one and a few readers.
DATABASE_THREADS = 4
# connection.info key of what one transaction's works leave for each other (and for after_commit).
SCRATCH = "transaction_scratch"
# Seconds between retries of the journal's writes: doubling from the first to the most, so a database that
# comes back gets them within seconds.
FIRST_RETRY_S = 0.5
MOST_RETRY_S = 4.0
# The most kept writes one retry makes in one transaction.
REPLAY_BATCH = 200


@dataclass(frozen=True)
class Kept:
    """A write of what was said, as data the journal can hold: its chat, how to apply it, the messages it saves."""

    chat: str
    kind: str
    data: dict[str, Any]
    messages: tuple[str, ...] = ()
    # Whether making it twice changes nothing (an upsert, a merge): then it may be journaled while its commit hangs.
    repeatable: bool = True


@dataclass(frozen=True)
class Queued:
    """A write waiting for the writer: its work, its caller's future, and (kept writes) its data."""

    work: Work
    done: asyncio.Future[Any]
    kept: Kept | None = None


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
        # How each kind of kept write is applied (its data is what the journal holds).
        self.appliers: dict[str, Apply] = {}
        # One writer per process commits whatever is queued in one transaction: SQLite has one writer at a
        # time anyway, and a transaction per message costs more than the message's statements.
        self._queue: list[Queued] = []
        self._writer: asyncio.Task[None] | None = None
        self._retries: asyncio.Task[None] | None = None
        self._workers = ThreadPoolExecutor(DATABASE_THREADS, thread_name_prefix="history")

    async def run(self, what: str, function: Callable[..., Result], *args: Any) -> Result:
        """Run database work in one of the store's threads, so the event loop that streams answers never waits on it."""
        try:
            return await self._in_time(self._in_thread(function, *args))
        except DRIVER_ERRORS as error:
            logger.error("History: could not %s: %s", what, error)
            raise HistoryUnavailable(what) from error

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
            if self.on_write_failure is not None:
                await self.on_write_failure(what)
            raise HistoryUnavailable(what) from error

    async def write_in_background(self, what: str, work: Work) -> None:
        """A write Chainlit does not await: reported like any other, never raised."""
        with contextlib.suppress(HistoryUnavailable):
            await self.write(what, work)

    async def keep(self, what: str, kept: Kept) -> None:
        """Make a write of what was said, in its chat's order: now, or from the journal once the database is back.

        Returns once it is made or kept (or after the timeout, while it stays queued); never raises.
        """
        if self.journal is not None and self.journal.away:  # nothing is queued: the database went away behind it
            self._journal(kept)
            return
        apply = self.appliers[kept.kind]
        done = self._enqueue(lambda connection: apply(connection, kept.data), kept if self.journal else None)
        done.add_done_callback(functools.partial(log_failed, what))
        with contextlib.suppress(Exception):  # logged when it settles
            await self._in_time(asyncio.shield(done))

    async def close(self) -> None:
        """Close the engine's connections, the store's threads and the journal (what it holds waits on disk)."""
        if self._retries is not None:
            self._retries.cancel()
        with contextlib.suppress(TimeoutError):  # a database that hangs keeps its connections
            await self._in_time(self._in_thread(self.engine.dispose))
        self._workers.shutdown(wait=False)
        if self.journal is not None:
            self.journal.close()

    def retry_kept(self) -> None:
        """Make the journal's writes (e.g. a stopped app's, taken over at start) as soon as the database answers."""
        if self.journal is not None and self.journal.records and (self._retries is None or self._retries.done()):
            self._retries = asyncio.get_running_loop().create_task(self._retry())

    def _enqueue(self, work: Work, kept: Kept | None = None) -> asyncio.Future[Any]:
        """Queue work for the writer's next transaction; its future settles when committed or failed."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(Queued(work, done, kept))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        return done

    def _journal(self, kept: Kept, ahead_of: int | None = None) -> None:
        """Keep a write in the journal and retry the journal's writes until the database takes them."""
        assert self.journal is not None
        self.journal.add(kept.chat, kept.kind, kept.data, kept.messages, ahead_of=ahead_of)
        self.retry_kept()

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
        """Commit queued writes in batches; after a failed batch each write alone, so one bad write loses no other.

        A kept write of a chat the journal holds goes behind it; kept writes the database cannot take go to it.
        """
        while self._queue:
            if self.before_batch is not None:
                await self.before_batch()
            batch, self._queue = self._queue, []
            # Writes of this batch that fail go ahead of any the journal takes while it commits (it may hang).
            ahead_of = self.journal.next_seq if self.journal is not None else None
            direct = []
            for queued in batch:
                if queued.kept is not None and self.journal is not None and self.journal.holds(queued.kept.chat):
                    self._journal(queued.kept)
                    settle(queued.done, None)
                else:
                    direct.append(queued)
            if not direct:
                continue
            journaled: set[int] = set()  # writes of this batch the journal took while their commit hung
            try:
                outcomes: list[Any] = await self._committed_or_away(direct, journaled)
            except Exception as error:  # handed to the writes' callers, which report it
                if self._is_away(error):
                    outcomes = [error] * len(direct)
                else:
                    outcomes = [error] if len(direct) == 1 else [await self._alone(queued.work) for queued in direct]
            for queued, outcome in zip(direct, outcomes, strict=True):
                away = isinstance(outcome, BaseException) and self._is_away(outcome)
                if queued.kept is not None and away:
                    if id(queued) not in journaled:
                        self._journal(queued.kept, ahead_of)
                    settle(queued.done, None)
                else:
                    settle(queued.done, outcome)

    async def _committed_or_away(self, batch: list[Queued], journaled: set[int]) -> list[Any]:
        """Commit the batch; if that takes longer than the timeout, the database is away: its kept writes that may
        be made twice (and those queued behind) wait in the journal too, marked, in case the commit never lands."""
        commit = asyncio.ensure_future(self._commit([queued.work for queued in batch]))
        finished, _ = await asyncio.wait({commit}, timeout=self.timeout_s)
        if not finished and self.journal is not None:
            logger.error(
                "History: the database did not commit within %g s: new writes wait in the journal", self.timeout_s
            )
            for queued in batch:
                if queued.kept is not None and queued.kept.repeatable:
                    self._journal(queued.kept)
                    journaled.add(id(queued))
            self._go_away()
        return await commit

    def _is_away(self, error: BaseException) -> bool:
        """Whether the error says the database is away (refused, gone, full, hanging): it is then marked so."""
        away = isinstance(error, DRIVER_ERRORS) and not isinstance(error, WRONG_WRITE)
        if away and self.journal is not None and not self.journal.away:
            logger.error("History: the database is away (%s): writes wait in the journal", error)
            self._go_away()
        return away

    def _go_away(self) -> None:
        """From now on kept writes go to the journal: first those queued (in their order), then each as it comes."""
        assert self.journal is not None
        self.journal.away = True
        queued, self._queue = self._queue, []
        for entry in queued:
            if entry.kept is not None:
                self._journal(entry.kept)
                settle(entry.done, None)
            else:
                self._queue.append(entry)
        self.retry_kept()

    async def _retry(self) -> None:
        """Make the journal's writes in order, retrying with backoff while the database is away."""
        assert self.journal is not None
        delay = FIRST_RETRY_S
        while self.journal.records:
            await asyncio.sleep(delay)
            records = self.journal.records[:REPLAY_BATCH]
            try:
                await self._enqueue(functools.partial(self._apply_all, records))
            except Exception as error:  # away: try again later; a wrong write: each alone
                if self._is_away(error):
                    delay = min(delay * 2, MOST_RETRY_S)
                    continue
                await self._replay_each(records)
            else:
                self.journal.taken(records)
                logger.warning("History: %d kept write(s) made now that the database answers", len(records))
            self.journal.away, delay = False, 0.0

    async def _replay_each(self, records: list[Record]) -> None:
        """Make records one by one: one the database refuses as wrong is logged and dropped, not retried forever."""
        assert self.journal is not None
        for record in records:
            try:
                await self._enqueue(functools.partial(self._apply_all, [record]))
            except Exception as error:  # away: try later; a wrong write: dropped
                if self._is_away(error):
                    return
                logger.error(
                    "History: a kept write of chat %s (%s) was refused and dropped: %s", record.chat, record.kind, error
                )
                self.journal.dropped(record)
            else:
                self.journal.taken([record])

    def _apply_all(self, records: list[Record], connection: Connection) -> None:
        """Apply kept writes in order, in the transaction at hand."""
        for record in records:
            self.appliers[record.kind](connection, record.data)

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
            return results, connection.info.pop(SCRATCH)


def log_late_write(what: str, done: asyncio.Future[Any]) -> None:
    """Say how a write ended whose caller stopped waiting for the database."""
    if done.cancelled():
        return
    if (error := done.exception()) is not None:
        logger.error("History: could not %s after all: %s", what, error)
    else:
        logger.warning("History: could not %s in time, but did once the database answered", what)


def log_failed(what: str, done: asyncio.Future[Any]) -> None:
    """Log a kept write that failed for a reason of its own (the database took it as wrong)."""
    if not done.cancelled() and (error := done.exception()) is not None:
        logger.error("History: could not %s: %s", what, error)
        metrics.HISTORY_WRITE_FAILURES.inc()


def settle(done: asyncio.Future[Any], outcome: Any) -> None:
    """Hand a write's result (or exception) to its caller (shielded: a caller that stops waiting leaves it pending)."""
    if isinstance(outcome, BaseException):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)
