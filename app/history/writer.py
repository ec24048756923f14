"""Database work off the event loop: reads on worker threads, writes batched into one transaction at a time.

The one place where driver errors become HistoryUnavailable: every read and write, logged with what it was for.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from app import metrics
from app.errors import HistoryUnavailable

logger = logging.getLogger(__name__)
Result = TypeVar("Result")
Work = Callable[[Connection], Any]
WriteFailure = Callable[[str], Awaitable[None]]
# What drivers raise when the history cannot be read or written (TimeoutError is an OSError).
DRIVER_ERRORS = (SQLAlchemyError, OSError)
# Threads of the store's own (a database that hangs holds these, not the threads the rest of the app uses):
# the writer's one and a few readers.
DATABASE_THREADS = 4
# connection.info key of what one transaction's works leave for each other (and for after_commit).
SCRATCH = "transaction_scratch"


class Writer:
    """Runs database work in the store's threads within a timeout; writes keep their order, one writer at a time.

    A failed write is logged as an error and reported through `on_write_failure` (the chat shows a notice).
    """

    def __init__(
        self,
        engine: Engine,
        timeout_s: float,
        *,
        on_write_failure: WriteFailure | None = None,
        before_batch: Callable[[], Awaitable[None]] | None = None,
        after_commit: Callable[[dict[str, Any]], None] | None = None,
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
        # One writer per process commits whatever is queued in one transaction: SQLite has one writer at a
        # time anyway, and a transaction per message costs more than the message's statements.
        self._queue: list[tuple[Work, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
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
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((work, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
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

    async def close(self) -> None:
        """Close the engine's connections and the store's threads."""
        with contextlib.suppress(TimeoutError):  # a database that hangs keeps its connections
            await self._in_time(self._in_thread(self.engine.dispose))
        self._workers.shutdown(wait=False)

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
        """Commit queued writes in batches; after a failed batch each write alone, so one bad write loses no other."""
        while self._queue:
            if self.before_batch is not None:
                await self.before_batch()
            batch, self._queue = self._queue, []
            try:
                outcomes: list[Any] = await self._commit([work for work, _ in batch])
            except Exception as error:  # handed to the writes' callers, which report it
                outcomes = [error] if len(batch) == 1 else [await self._alone(work) for work, _ in batch]
            for (_, done), outcome in zip(batch, outcomes, strict=True):
                settle(done, outcome)

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


def settle(done: asyncio.Future[Any], outcome: Any) -> None:
    """Hand a write's result (or exception) to its caller (shielded: a caller that stops waiting leaves it pending)."""
    if isinstance(outcome, BaseException):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)
