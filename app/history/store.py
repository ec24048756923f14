"""The chat history behind Chainlit's data-layer interface: SQLAlchemy on SQLite or PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar, cast

import sqlalchemy as sa
from chainlit.data.base import BaseDataLayer
from chainlit.data.utils import queue_until_user_message
from chainlit.types import Feedback, PageInfo, PaginatedResponse, Pagination, ThreadDict, ThreadFilter
from chainlit.user import PersistedUser, User
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.exc import SQLAlchemyError

from app.schema import elements, feedbacks, steps, threads, timestamp, users

if TYPE_CHECKING:
    from chainlit.element import Element, ElementDict
    from chainlit.step import StepDict

logger = logging.getLogger(__name__)
Method = TypeVar("Method", bound=Callable[..., Awaitable[None]])
# Chainlit holds a session's writes back until its first message (a greeting alone makes no chat).
queued: Callable[[Method], Method] = queue_until_user_message()  # type: ignore[no-untyped-call,unused-ignore]  # Chainlit's decorator is unannotated
WriteFailure = Callable[[str], Awaitable[None]]
Work = Callable[[Connection], Any]
# Step fields with a column of their own; the rest of Chainlit's step is kept as sent, in `details`.
STEP_COLUMNS = {
    "id": "id",
    "threadId": "thread_id",
    "parentId": "parent_id",
    "name": "name",
    "type": "type",
    "input": "input",
    "output": "output",
    "isError": "is_error",
    "createdAt": "created_at",
    "start": "start",
    "end": "end",
    "metadata": "metadata",
}
# Chainlit's step fields that are the browser's business only, never worth a row.
TRANSIENT_STEP_FIELDS = frozenset({"streaming", "waitForAnswer", "feedback"})
# Threads a transaction created, known to other writes only once it commits (they run in parallel on
# PostgreSQL, and a step must never reference a thread row that is not committed yet).
NEW_THREADS = "new_threads"
# Where the history cannot be written, Chainlit's own calls see this rather than a driver's error.
STORE_ERRORS = (SQLAlchemyError, OSError)
# Threads of the store's own (a database that hangs holds these, not the threads the rest of the app uses):
# the writer's one and a few readers.
DATABASE_THREADS = 4
Result = TypeVar("Result")


class HistoryUnavailable(RuntimeError):
    """The history database refused or could not be reached."""


class ChatStore(BaseDataLayer):
    """Users, threads, steps, elements and feedback, written at message boundaries.

    A failed write is logged as an error and reported through `on_write_failure` (the chat shows a
    notice); Chainlit fires step and element writes as tasks nobody awaits, so those never raise.
    """

    def __init__(self, engine: Engine, *, open_registration: bool, timeout_s: float) -> None:
        self.engine = engine
        # How long a caller waits for the database: one that hangs (not refuses) gets the usual notice.
        self.timeout_s = timeout_s
        # Local single-user mode: whoever the header callback names becomes a user. With passwords,
        # users are only those added with `make user-add` (a removed user's token creates nobody).
        self.open_registration = open_registration
        self.on_write_failure: WriteFailure | None = None
        # What a chat starts with when it is named at its first message (the app's settings so far), so a
        # chat holds its settings from its first write on, at no extra statement.
        self.new_chat_metadata: Callable[[], dict[str, Any]] = dict
        # What the writer awaits before each batch: the app's answers that are starting (a commit's thread
        # competes with the event loop for the app's core, and a first token is what a user waits for).
        self.before_batch: Callable[[], Awaitable[None]] | None = None
        # One writer per process commits whatever is queued in one transaction: SQLite has one writer at a
        # time anyway, and a transaction per message costs more than the message's statements.
        self._queue: list[tuple[Work, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        # Statements built once (these and the cached properties): building an upsert costs more CPU than running it.
        self._upserts: dict[str, sa.Insert] = {}
        # Chats known to have a committed row, so a message costs one statement, not two.
        self._known_threads: set[str] = set()
        self._workers = ThreadPoolExecutor(DATABASE_THREADS, thread_name_prefix="history")

    async def in_worker(self, function: Callable[..., Result], *args: Any) -> Result:
        """Run database work in one of the store's threads, so the event loop that streams answers never waits on it."""
        return await self._in_time(self._in_thread(function, *args))

    def _in_thread(self, function: Callable[..., Result], *args: Any) -> asyncio.Future[Result]:
        """Database work in one of the store's threads, however long it takes."""
        return asyncio.get_running_loop().run_in_executor(self._workers, function, *args)

    async def _in_time(self, outcome: Awaitable[Result]) -> Result:
        """The outcome, or TimeoutError once the database has taken longer than the store's timeout."""
        try:
            return await asyncio.wait_for(outcome, self.timeout_s)
        except TimeoutError:
            raise TimeoutError(f"the database did not answer within {self.timeout_s:g} s") from None

    async def _read(self, work: Callable[[Connection], Result]) -> Result:
        """Run a query on a connection of its own."""
        return await self.in_worker(self._connected, work)

    async def _scalar(self, query: sa.Select[Any]) -> Any:
        """The first column of the query's first row (None if no row)."""
        return await self._read(lambda connection: connection.execute(query).scalar())

    def _connected(self, work: Callable[[Connection], Result]) -> Result:
        """Work on a connection of its own."""
        with self.engine.connect() as connection:
            return work(connection)

    async def _write(self, what: str, work: Work) -> Any:
        """Run work in the writer's next transaction; a failure is logged, reported, raised as HistoryUnavailable."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((work, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        try:
            # The write stays queued when the caller stops waiting: a database that answers late still gets it.
            return await self._in_time(asyncio.shield(done))
        except STORE_ERRORS as error:
            if not done.done():  # timed out: still queued, and what becomes of it is logged
                done.add_done_callback(functools.partial(log_late_write, what))
            logger.error("History: could not %s: %s", what, error)
            if self.on_write_failure is not None:
                await self.on_write_failure(what)
            raise HistoryUnavailable(what) from error

    async def _in_background(self, what: str, work: Work) -> None:
        """A write Chainlit does not await: reported like any other, never raised."""
        with contextlib.suppress(HistoryUnavailable):
            await self._write(what, work)

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
        results, created = await self._in_thread(self._run_together, works)
        self._known_threads |= created  # committed: later writes may rely on these rows
        return results

    def _run_together(self, works: list[Work]) -> tuple[list[Any], set[str]]:
        """The works' results and the chats they created, once committed."""
        with self.engine.begin() as connection:
            connection.info[NEW_THREADS] = set()
            results = [work(connection) for work in works]
            return results, connection.info.pop(NEW_THREADS)

    def _upsert(self, table: sa.Table) -> sa.Insert:
        """INSERT ... ON CONFLICT (id) DO UPDATE of every column, in the dialect at hand; built once per table."""
        if table.name not in self._upserts:
            statement = self._insert(table)
            changes = {column.name: statement.excluded[column.name] for column in table.c if column.name != "id"}
            self._upserts[table.name] = statement.on_conflict_do_update(index_elements=["id"], set_=changes)
        return self._upserts[table.name]

    @functools.cached_property
    def _name_thread(self) -> sa.Insert:
        """Create a chat or set its name; its owner only if it has none (a chat never changes hands)."""
        statement = self._insert(threads)
        changes = {
            "name": sa.func.coalesce(statement.excluded.name, threads.c.name),
            "user_id": sa.func.coalesce(threads.c.user_id, statement.excluded.user_id),
            # Named for the first time (its first message): the chat takes the row's metadata, the app's settings.
            "metadata": sa.case((threads.c.name.is_(None), statement.excluded.metadata), else_=threads.c.metadata),
        }
        return statement.on_conflict_do_update(index_elements=["id"], set_=changes)

    @functools.cached_property
    def _new_thread(self) -> sa.Insert:
        """Create a chat unless it exists."""
        return self._insert(threads).on_conflict_do_nothing(index_elements=["id"])

    def _insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        """The dialect's INSERT, which knows ON CONFLICT."""
        return postgresql.insert(table) if self.engine.dialect.name == "postgresql" else sqlite.insert(table)

    # ---- users -------------------------------------------------------------------------

    async def get_user(self, identifier: str) -> PersistedUser | None:
        query = sa.select(users).where(users.c.identifier == identifier)
        row = await self._read(lambda connection: connection.execute(query).first())
        return persisted_user(row._mapping) if row else None

    async def create_user(self, user: User) -> PersistedUser | None:
        existing = await self.get_user(user.identifier)
        if existing is not None or not self.open_registration:
            return existing
        row = {
            "id": str(uuid.uuid4()),
            "identifier": user.identifier,
            "metadata": user.metadata,
            "created_at": timestamp(),
        }
        # Someone else's create at the same moment wins; their row is the one returned below.
        insert = self._insert(users).on_conflict_do_nothing(index_elements=["identifier"])
        await self._write("create the local user", lambda connection: connection.execute(insert, row))
        return await self.get_user(user.identifier)

    # ---- feedback ----------------------------------------------------------------------

    async def upsert_feedback(self, feedback: Feedback) -> str:
        def work(connection: Connection) -> str:
            thread_id = connection.execute(sa.select(steps.c.thread_id).where(steps.c.id == feedback.forId)).scalar()
            existing = connection.execute(
                sa.select(feedbacks.c.id).where(feedbacks.c.for_id == feedback.forId)
            ).scalar()
            feedback_id = str(existing or feedback.id or uuid.uuid4())
            row = {
                "id": feedback_id,
                "for_id": feedback.forId,
                "thread_id": thread_id,
                "value": feedback.value,
                "comment": storable(feedback.comment),
            }
            connection.execute(self._upsert(feedbacks), row)
            return feedback_id

        return str(await self._write("store feedback", work))

    async def delete_feedback(self, feedback_id: str) -> bool:
        delete = sa.delete(feedbacks).where(feedbacks.c.id == feedback_id)
        await self._write("delete feedback", lambda connection: connection.execute(delete))
        return True

    async def feedback_owner(self, *, feedback_id: str = "", step_id: str = "") -> str:
        """The identifier of the user whose chat holds this feedback or message ("" if none)."""
        query = sa.select(users.c.identifier).select_from(threads.join(users))
        if feedback_id:
            query = query.join(feedbacks, feedbacks.c.thread_id == threads.c.id).where(feedbacks.c.id == feedback_id)
        else:
            query = query.join(steps, steps.c.thread_id == threads.c.id).where(steps.c.id == step_id)
        return str(await self._scalar(query) or "")

    # ---- elements ----------------------------------------------------------------------

    @queued
    async def create_element(self, element: Element) -> None:
        details = dict(element.to_dict())
        row = {"id": element.id, "thread_id": element.thread_id, "for_id": element.for_id, "details": details}

        def work(connection: Connection) -> None:
            self._ensure_thread(connection, element.thread_id)
            connection.execute(self._upsert(elements), row)

        await self._in_background("save an answer's details", work)

    async def get_element(self, thread_id: str, element_id: str) -> ElementDict | None:
        query = sa.select(elements.c.details).where(elements.c.id == element_id, elements.c.thread_id == thread_id)
        details = await self._scalar(query)
        return cast("ElementDict | None", details)

    @queued
    async def delete_element(self, element_id: str, thread_id: str | None = None) -> None:
        def work(connection: Connection) -> None:
            connection.execute(sa.delete(elements).where(elements.c.id == element_id))

        await self._in_background("remove an answer's details", work)

    # ---- steps (messages) --------------------------------------------------------------

    @queued
    async def create_step(self, step_dict: StepDict) -> None:
        if shown(step_dict):
            await self._in_background("save a message", lambda connection: self._put_step(connection, step_dict))

    @queued
    async def update_step(self, step_dict: StepDict) -> None:
        if shown(step_dict):
            await self._in_background("save a message", lambda connection: self._put_step(connection, step_dict))

    @queued
    async def delete_step(self, step_id: str) -> None:
        def work(connection: Connection) -> None:
            connection.execute(sa.delete(feedbacks).where(feedbacks.c.for_id == step_id))
            connection.execute(sa.delete(elements).where(elements.c.for_id == step_id))
            connection.execute(sa.delete(steps).where(steps.c.id == step_id))

        await self._in_background("remove a message", work)

    def _put_step(self, connection: Connection, step_dict: StepDict) -> None:
        """Insert or replace one step, creating its thread if Chainlit has not yet."""
        step: dict[str, Any] = dict(step_dict)
        thread_id = str(step["threadId"])
        self._ensure_thread(connection, thread_id)
        row = {column: step.get(field) for field, column in STEP_COLUMNS.items()}
        row |= {
            "name": storable(row["name"]),
            "input": storable(row["input"]),
            "output": storable(row["output"]),
            "is_error": bool(row["is_error"]),
            "created_at": row["created_at"] or timestamp(),
            "metadata": row["metadata"] or {},
            "details": {
                key: value
                for key, value in step.items()
                if key not in STEP_COLUMNS and key not in TRANSIENT_STEP_FIELDS
            },
        }
        connection.execute(self._upsert(steps), row)

    def _ensure_thread(self, connection: Connection, thread_id: str) -> None:
        """A row for the thread (Chainlit names it and sets its user with update_thread)."""
        if thread_id in self._known_threads or thread_id in connection.info[NEW_THREADS]:
            return  # committed, or created earlier in this transaction (Chainlit's naming usually comes first)
        connection.execute(self._new_thread, {"id": thread_id, "created_at": timestamp(), "metadata": {}})
        connection.info[NEW_THREADS].add(thread_id)

    # ---- threads -----------------------------------------------------------------------

    async def get_thread_author(self, thread_id: str) -> str:
        query = sa.select(users.c.identifier).select_from(threads.join(users)).where(threads.c.id == thread_id)
        return str(await self._scalar(query) or "")

    async def delete_thread(self, thread_id: str) -> None:
        def work(connection: Connection) -> None:
            for table in (feedbacks, elements, steps):
                connection.execute(sa.delete(table).where(table.c.thread_id == thread_id))
            connection.execute(sa.delete(threads).where(threads.c.id == thread_id))

        await self._write("delete a chat", work)
        self._known_threads.discard(thread_id)

    async def update_thread(
        self,
        thread_id: str,
        name: str | None = None,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
    ) -> None:
        named = name is not None or user_id is not None
        row: dict[str, Any] = {
            "id": thread_id,
            "created_at": timestamp(),
            "metadata": self.new_chat_metadata() if named else {},
            "name": None if name is None else storable(name),
            "user_id": user_id,
        }

        def work(connection: Connection) -> None:
            if named:  # Chainlit's first message or a rename: creates the chat if need be, in one statement
                connection.execute(self._name_thread, row)
                connection.info[NEW_THREADS].add(thread_id)
            if metadata is None and tags is None:
                return
            current = connection.execute(sa.select(threads.c.metadata).where(threads.c.id == thread_id)).first()
            if current is None:  # deleted meanwhile: a settings save does not bring it back
                return
            changes: dict[str, Any] = {}
            if metadata is not None:
                changes["metadata"] = {**(current.metadata or {}), **metadata}
            if tags is not None:
                changes["tags"] = tags
            connection.execute(sa.update(threads).where(threads.c.id == thread_id).values(**changes))

        if named or metadata is not None or tags is not None:
            await self._write("save the chat", work)

    async def list_threads(self, pagination: Pagination, filters: ThreadFilter) -> PaginatedResponse[ThreadDict]:
        query = (
            sa.select(threads, users.c.identifier)
            .select_from(threads.join(users))
            .where(threads.c.user_id == filters.userId)
            .order_by(threads.c.created_at.desc(), threads.c.id.desc())
        )
        if filters.search:
            pattern = "%" + filters.search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            said = sa.select(steps.c.id).where(steps.c.thread_id == threads.c.id, steps.c.output.ilike(pattern, "\\"))
            query = query.where(sa.or_(threads.c.name.ilike(pattern, "\\"), said.exists()))
        if filters.feedback is not None:
            rated = sa.select(feedbacks.c.id).where(
                feedbacks.c.thread_id == threads.c.id, feedbacks.c.value == filters.feedback
            )
            query = query.where(rated.exists())

        def page_of(connection: Connection) -> list[sa.Row[Any]]:
            listed = query
            if pagination.cursor:
                after = connection.execute(
                    sa.select(threads.c.created_at).where(threads.c.id == pagination.cursor)
                ).scalar()
                if after is not None:
                    listed = query.where(
                        sa.tuple_(threads.c.created_at, threads.c.id) < sa.tuple_(sa.literal(after), pagination.cursor)
                    )
            return list(connection.execute(listed.limit(pagination.first + 1)).all())

        rows = await self._read(page_of)
        page = [thread_dict(row._mapping, [], []) for row in rows[: pagination.first]]
        return PaginatedResponse(
            data=page,
            pageInfo=PageInfo(
                hasNextPage=len(rows) > pagination.first,
                startCursor=page[0]["id"] if page else None,
                endCursor=page[-1]["id"] if page else None,
            ),
        )

    async def get_thread(self, thread_id: str) -> ThreadDict | None:
        return await self._read(lambda connection: self._thread(connection, thread_id))

    def _thread(self, connection: Connection, thread_id: str) -> ThreadDict | None:
        """The chat with its messages and elements, as Chainlit shows it."""
        thread = connection.execute(
            sa.select(threads, users.c.identifier)
            .select_from(threads.outerjoin(users))
            .where(threads.c.id == thread_id)
        ).first()
        if thread is None:
            return None
        step_rows = connection.execute(
            sa.select(steps, feedbacks.c.id.label("feedback_id"), feedbacks.c.value, feedbacks.c.comment)
            .select_from(steps.outerjoin(feedbacks, feedbacks.c.for_id == steps.c.id))
            .where(steps.c.thread_id == thread_id)
            .order_by(steps.c.created_at, steps.c.id)
        ).all()
        element_rows = connection.execute(
            sa.select(elements.c.details).where(elements.c.thread_id == thread_id)
        ).scalars()
        step_list = [step_dict(row._mapping) for row in step_rows]
        stored = {step["id"] for step in step_list}
        for step in step_list:
            if step.get("parentId") not in stored:  # its parent was a handler's run step: the page would drop it
                step["parentId"] = None
        return thread_dict(thread._mapping, step_list, list(element_rows))

    # ---- the rest of the interface -----------------------------------------------------

    async def get_favorite_steps(self, user_id: str) -> list[StepDict]:
        # Favourites are off in .chainlit/config.toml: the page never asks.
        return []

    async def build_debug_url(self) -> str:
        return ""

    async def close(self) -> None:
        with contextlib.suppress(TimeoutError):  # a database that hangs keeps its connections
            await self.in_worker(self.engine.dispose)
        self._workers.shutdown(wait=False)


def shown(step: StepDict) -> bool:
    """Whether a step is worth storing: not the "run" step Chainlit wraps around each handler.

    Those carry nothing the page shows (chain of thought is hidden) and cost two writes per message.
    """
    return step.get("type") != "run"


def storable(text: str | None) -> str:
    """Text as both databases can keep it: PostgreSQL refuses NUL characters (a model may emit one)."""
    return (text or "").replace("\x00", "")


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


def persisted_user(row: RowMapping) -> PersistedUser:
    """Chainlit's user from a users row (without its password hash)."""
    return PersistedUser(
        id=row["id"], identifier=row["identifier"], metadata=row["metadata"] or {}, createdAt=row["created_at"]
    )


def step_dict(row: RowMapping) -> StepDict:
    """Chainlit's step from a steps row joined with its feedback."""
    step: dict[str, Any] = {**row["details"], **{field: row[column] for field, column in STEP_COLUMNS.items()}}
    if row["feedback_id"] is not None:
        step["feedback"] = {
            "id": row["feedback_id"],
            "forId": row["id"],
            "value": row["value"],
            "comment": row["comment"],
        }
    return step  # type: ignore[return-value]  # the keys of StepDict, as Chainlit sent them


def thread_dict(row: RowMapping, step_list: list[StepDict], element_list: list[ElementDict]) -> ThreadDict:
    """Chainlit's thread from a threads row joined with its user."""
    return {
        "id": row["id"],
        "createdAt": row["created_at"],
        "name": row["name"],
        "userId": row["user_id"],
        "userIdentifier": row["identifier"],
        "tags": row["tags"],
        "metadata": row["metadata"] or {},
        "steps": step_list,
        "elements": element_list,
    }
