"""The chat history behind Chainlit's data-layer interface: users, chats, messages, elements and feedback."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from chainlit.data.base import BaseDataLayer
from chainlit.types import Feedback, PageInfo, PaginatedResponse, Pagination, ThreadDict, ThreadFilter
from chainlit.user import PersistedUser, User
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, RowMapping

from app.errors import HistoryUnavailable
from app.history import chat_search, message_index, passage_index
from app.history.rows import persisted_user, shown, step_dict, step_row, thread_dict
from app.history.schema import (
    chat_documents,
    deleted_chats,
    elements,
    feedbacks,
    insert_into,
    projects,
    steps,
    threads,
    timestamp,
    uploaded_only_to,
    users,
)
from app.history.transcript import SHARING_KEYS, SHOWN_KEY, on_screen, relinked, shown_of
from app.history.writes import SCRATCH, Journal, Kept, Writer
from app.storable import storable

if TYPE_CHECKING:
    from chainlit.element import Element, ElementDict
    from chainlit.step import StepDict

# Scratch key of the chats a transaction created, known to other writes only once it commits (they run in
# parallel on PostgreSQL, and a step must never reference a thread row that is not committed yet).
NEW_THREADS = "new_threads"
# The most favourite prompts the page's list offers (the newest).
MOST_FAVOURITES = 50
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Actor:
    """Whom a write is made for: a tab's logged-in user, and that tab's own chat."""

    user: str
    thread_id: str


class Route(Enum):
    """Who writes when no tab does."""

    # A REST route of Chainlit's (rename, delete, share, feedback) that checked the chat's owner itself.
    CHECKED = "checked"


# Whom a write is for: a tab's actor, a route that checked, or nobody known (then nothing existing is touched).
Caller = Actor | Route | None


def as_data(caller: Caller) -> Any:
    """A caller as the journal keeps it (JSON)."""
    if isinstance(caller, Actor):
        return {"user": caller.user, "thread_id": caller.thread_id}
    return None if caller is None else caller.value


def caller_of(data: Any) -> Caller:
    """The caller a journal's record names."""
    if isinstance(data, dict):
        return Actor(str(data["user"]), str(data["thread_id"]))
    return None if data is None else Route(data)


def chat_of(caller: Caller, default: str) -> str:
    """The chat whose order a write keeps: the tab's, else what it touches."""
    return caller.thread_id if isinstance(caller, Actor) else default


def nobody() -> Caller:
    """No actor given: writes into an existing chat are refused."""
    return None


class ChatStore(BaseDataLayer):
    """Users, threads, steps, elements and feedback, written at message boundaries through the writer.

    Chainlit fires step and element writes as tasks nobody awaits, so those never raise; every other
    call raises HistoryUnavailable when the database fails.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        open_registration: bool,
        timeout_s: float,
        actor: Callable[[], Caller] = nobody,
        new_chat_metadata: Callable[[], dict[str, Any]] = dict,
        new_chat_project: Callable[[], str | None] = lambda: None,
        never_kept: Callable[[str], bool] = lambda _chat: False,
        on_write_failure: Callable[[str], Awaitable[None]] | None = None,
        before_batch: Callable[[], Awaitable[None]] | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.engine = engine
        self.writer = Writer(
            engine,
            timeout_s,
            on_write_failure=on_write_failure,
            before_batch=before_batch,
            after_commit=self._committed,
            journal=journal,
        )
        # What was said is kept as data (the journal holds it while the database is away), applied by these.
        self.writer.appliers |= {
            "step": self._apply_step,
            "delete_step": self._apply_delete_step,
            "element": self._apply_element,
            "delete_element": self._apply_delete_element,
            "thread": self._apply_thread,
            "favourite": self._apply_favourite,
            "delete_thread": self._apply_delete_thread,
        }
        # Local single-user mode: whoever the header callback names becomes a user. With passwords,
        # users are only those added with `make user-add` (a removed user's token creates nobody).
        self.open_registration = open_registration
        # What a chat starts with when it is named at its first message (the app's settings so far), so a
        # chat holds its settings from its first write on, at no extra statement.
        self.new_chat_metadata = new_chat_metadata
        # The project a chat is filed in at its first message (a chat started in a project), if any.
        self.new_chat_project = new_chat_project
        # Whether a chat is temporary: nothing of it is ever written (its writes are dropped here).
        self.never_kept = never_kept
        # Whom a write that Chainlit makes is for: a tab's user and chat, or a route that checked the owner itself.
        self.actor = actor
        # Statements built once (these and the cached properties): building an upsert costs more CPU than running it.
        self._upserts: dict[str, sa.Insert] = {}
        # Chats known to have a committed row, so a message costs one statement, not two.
        self._known_threads: set[str] = set()

    async def _keep(self, what: str, kept: Kept) -> None:
        """A write of what was said, unless its chat is temporary (then it is never written, anywhere)."""
        if not self.never_kept(kept.chat):
            await self.writer.keep(what, kept)

    async def _scalar(self, what: str, query: sa.Select[Any]) -> Any:
        """The first column of the query's first row (None if no row)."""
        return await self.writer.read(what, lambda connection: connection.execute(query).scalar())

    def _committed(self, scratch: dict[str, Any]) -> None:
        """Chats a committed transaction created: later writes may rely on these rows."""
        self._known_threads |= scratch.get(NEW_THREADS, set())

    def _upsert(self, table: sa.Table) -> sa.Insert:
        """INSERT ... ON CONFLICT (id) DO UPDATE of a chat's row, in the dialect at hand; built once per table."""
        if table.name not in self._upserts:
            statement = self._insert(table)
            changes = {column.name: statement.excluded[column.name] for column in table.c if column.name != "id"}
            # A row never moves to another chat: a client that names another chat's row id changes nothing.
            allowed = table.c.thread_id == statement.excluded.thread_id
            if "saved_at" in table.c:  # nor does a write said before the one that stored it (a journal's, replayed)
                newer = sa.or_(table.c.saved_at.is_(None), statement.excluded.saved_at >= table.c.saved_at)
                allowed = sa.and_(allowed, newer)
            self._upserts[table.name] = statement.on_conflict_do_update(
                index_elements=["id"], set_=changes, where=allowed
            )
        return self._upserts[table.name]

    @functools.cached_property
    def _name_thread(self) -> sa.Insert:
        """Create a chat or set its name; its owner only if it has none (a chat never changes hands)."""
        statement = self._insert(threads)
        changes = {
            "name": sa.func.coalesce(statement.excluded.name, threads.c.name),
            "user_id": sa.func.coalesce(threads.c.user_id, statement.excluded.user_id),
            # Named for the first time (its first message): the chat takes the row's metadata, the app's settings,
            # and the project it was started in.
            "metadata": sa.case((threads.c.name.is_(None), statement.excluded.metadata), else_=threads.c.metadata),
            "project_id": sa.case(
                (threads.c.name.is_(None), statement.excluded.project_id), else_=threads.c.project_id
            ),
            "changed_at": statement.excluded.changed_at,
        }
        theirs = statement.excluded.user_id
        owner = sa.or_(threads.c.user_id.is_(None), theirs.is_(None), threads.c.user_id == theirs)
        # A name said before the chat's newest change (a journal's, replayed) changes nothing.
        newer = sa.or_(threads.c.changed_at.is_(None), threads.c.changed_at <= statement.excluded.changed_at)
        return statement.on_conflict_do_update(index_elements=["id"], set_=changes, where=sa.and_(owner, newer))

    @functools.cached_property
    def _owner_of_thread(self) -> sa.Select[Any]:
        """The identifier of a chat's user."""
        return sa.select(users.c.identifier).select_from(threads.join(users)).where(threads.c.id == sa.bindparam("id"))

    def _writable(self, connection: Connection, thread_id: str, actor: Caller, what: str) -> bool:
        """Whether the actor may write into the chat (its tab's own, or its user's) and it was never deleted; a
        refusal is logged."""
        if connection.execute(self._was_deleted, {"id": thread_id}).first() is not None:
            logger.info("History: did not %s: chat %s was deleted", what, thread_id)
            return False
        if actor is Route.CHECKED or (isinstance(actor, Actor) and thread_id == actor.thread_id):
            return True
        owner = connection.execute(self._owner_of_thread, {"id": thread_id}).first()
        if actor is None:  # nobody known: a chat that exists is not touched
            if owner is None and connection.execute(self._thread_exists, {"id": thread_id}).first() is None:
                return True
            logger.warning("History: refused to %s for nobody known: chat %s exists", what, thread_id)
            return False
        if owner is not None and owner[0] == actor.user:
            return True
        logger.warning("History: refused to %s for %s: chat %s is not theirs", what, actor.user, thread_id)
        return False

    @functools.cached_property
    def _was_deleted(self) -> sa.Select[Any]:
        """A deleted chat's id (none for a chat never deleted)."""
        return sa.select(deleted_chats.c.id).where(deleted_chats.c.id == sa.bindparam("id"))

    @functools.cached_property
    def _thread_exists(self) -> sa.Select[Any]:
        """A chat's id, if it has a row."""
        return sa.select(threads.c.id).where(threads.c.id == sa.bindparam("id"))

    @functools.cached_property
    def _new_thread(self) -> sa.Insert:
        """Create a chat unless it exists."""
        return self._insert(threads).on_conflict_do_nothing(index_elements=["id"])

    def _insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        """The dialect's INSERT, which knows ON CONFLICT."""
        return insert_into(table, self.engine.dialect.name)

    # ---- users -------------------------------------------------------------------------

    async def get_user(self, identifier: str) -> PersistedUser | None:
        query = sa.select(users).where(users.c.identifier == identifier)
        row = await self.writer.read("read a user", lambda connection: connection.execute(query).first())
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
        await self.writer.write("create the local user", lambda connection: connection.execute(insert, row))
        return await self.get_user(user.identifier)

    # ---- feedback ----------------------------------------------------------------------

    async def upsert_feedback(self, feedback: Feedback) -> str:
        def work(connection: Connection) -> str:
            thread_id = connection.execute(sa.select(steps.c.thread_id).where(steps.c.id == feedback.forId)).scalar()
            existing = connection.execute(
                sa.select(feedbacks.c.id).where(feedbacks.c.for_id == feedback.forId)
            ).scalar()
            # Never the client's id: it could name another message's rating.
            feedback_id = str(existing or uuid.uuid4())
            row = {
                "id": feedback_id,
                "for_id": feedback.forId,
                "thread_id": thread_id,
                "value": feedback.value,
                "comment": storable(feedback.comment),
            }
            connection.execute(self._upsert(feedbacks), row)
            return feedback_id

        return str(await self.writer.write("store feedback", work))

    async def delete_feedback(self, feedback_id: str) -> bool:
        delete = sa.delete(feedbacks).where(feedbacks.c.id == feedback_id)
        await self.writer.write("delete feedback", lambda connection: connection.execute(delete))
        return True

    async def feedback_owner(self, *, feedback_id: str = "", step_id: str = "") -> str:
        """The identifier of the user whose chat holds this feedback or message ("" if none)."""
        query = sa.select(users.c.identifier).select_from(threads.join(users))
        if feedback_id:
            query = query.join(feedbacks, feedbacks.c.thread_id == threads.c.id).where(feedbacks.c.id == feedback_id)
        else:
            query = query.join(steps, steps.c.thread_id == threads.c.id).where(steps.c.id == step_id)
        return str(await self._scalar("check whose message this is", query) or "")

    # ---- elements ----------------------------------------------------------------------

    async def create_element(self, element: Element) -> None:
        details = dict(element.to_dict())
        row = {"id": element.id, "thread_id": element.thread_id, "for_id": element.for_id, "details": details}
        actor = self.actor()
        data = {"row": row, "actor": as_data(actor)}
        await self._keep("save an answer's details", Kept(chat_of(actor, element.thread_id), "element", data))

    def _apply_element(self, connection: Connection, data: dict[str, Any], _at: float) -> None:
        """Store an element of a chat's message, if the actor may write there and the message is that chat's."""
        row, actor, what = data["row"], caller_of(data["actor"]), "save an answer's details"
        if not self._writable(connection, row["thread_id"], actor, what):
            return
        for_thread = connection.execute(sa.select(steps.c.thread_id).where(steps.c.id == row["for_id"])).scalar()
        if for_thread not in (None, row["thread_id"]):
            logger.warning("History: refused to %s: message %s is in another chat", what, row["for_id"])
            return
        self._ensure_thread(connection, row["thread_id"])
        put(connection, self._upsert(elements), row, what)

    async def get_element(self, thread_id: str, element_id: str) -> ElementDict | None:
        query = sa.select(elements.c.details).where(elements.c.id == element_id, elements.c.thread_id == thread_id)
        details = await self._scalar("read an answer's details", query)
        return cast("ElementDict | None", details)

    async def delete_element(self, element_id: str, thread_id: str | None = None) -> None:
        actor = self.actor()
        data = {"id": element_id, "actor": as_data(actor)}
        await self._keep(
            "remove an answer's details", Kept(chat_of(actor, thread_id or element_id), "delete_element", data)
        )

    def _apply_delete_element(self, connection: Connection, data: dict[str, Any], _at: float) -> None:
        """Remove an element, if the actor may write in its chat."""
        element_id, actor = data["id"], caller_of(data["actor"])
        chat = connection.execute(sa.select(elements.c.thread_id).where(elements.c.id == element_id)).scalar()
        if chat is not None and self._writable(connection, chat, actor, "remove an answer's details"):
            connection.execute(sa.delete(elements).where(elements.c.id == element_id))

    # ---- steps (messages) --------------------------------------------------------------

    async def create_step(self, step_dict: StepDict) -> None:
        await self._save_step(step_dict)

    async def _save_step(self, step_dict: StepDict) -> None:
        """A message written or rewritten, for the tab it is made for."""
        if shown(step_dict):
            actor, thread_id = self.actor(), str(step_dict["threadId"])
            data = {"step": dict(step_dict), "actor": as_data(actor)}
            messages = (str(step_dict["id"]),)
            # A newer copy of the message replaces one still waiting (an answer's text so far, then all of it).
            kept = Kept(chat_of(actor, thread_id), "step", data, messages, key=f"step:{step_dict['id']}")
            await self._keep("save a message", kept)

    async def update_step(self, step_dict: StepDict) -> None:
        await self._save_step(step_dict)

    async def delete_step(self, step_id: str) -> None:
        actor = self.actor()
        data = {"id": step_id, "actor": as_data(actor)}
        await self._keep("remove a message", Kept(chat_of(actor, step_id), "delete_step", data))

    def _apply_delete_step(self, connection: Connection, data: dict[str, Any], _at: float) -> None:
        """Remove a message with its feedback and elements, if the actor may write in its chat."""
        step_id, actor = data["id"], caller_of(data["actor"])
        chat = connection.execute(sa.select(steps.c.thread_id).where(steps.c.id == step_id)).scalar()
        if chat is None or not self._writable(connection, chat, actor, "remove a message"):
            return
        connection.execute(sa.delete(feedbacks).where(feedbacks.c.for_id == step_id))
        connection.execute(sa.delete(elements).where(elements.c.for_id == step_id))
        connection.execute(sa.delete(steps).where(steps.c.id == step_id))
        message_index.unindex(connection, [step_id])

    def _apply_step(self, connection: Connection, data: dict[str, Any], at: float) -> None:
        """Insert or replace one step, creating its thread if Chainlit has not yet."""
        step_dict, actor = cast("StepDict", data["step"]), caller_of(data["actor"])
        thread_id = str(step_dict["threadId"])
        if self._writable(connection, thread_id, actor, "save a message"):
            self._ensure_thread(connection, thread_id)
            row = step_row(step_dict) | {"saved_at": at}
            if put(connection, self._upsert(steps), row, "save a message"):
                message_index.index(connection, row["id"], thread_id, row["type"], row["output"])

    def _ensure_thread(self, connection: Connection, thread_id: str) -> None:
        """A row for the thread (Chainlit names it and sets its user with update_thread)."""
        created = created_in(connection)
        if thread_id in self._known_threads or thread_id in created:
            return  # committed, or created earlier in this transaction (Chainlit's naming usually comes first)
        connection.execute(self._new_thread, {"id": thread_id, "created_at": timestamp(), "metadata": {}})
        created.add(thread_id)

    # ---- threads -----------------------------------------------------------------------

    async def reachable(self) -> bool:
        """Whether the database answers a query now."""
        try:
            await self.writer.read("check the database", lambda connection: connection.execute(sa.text("SELECT 1")))
        except HistoryUnavailable:
            return False
        return True

    async def get_thread_author(self, thread_id: str) -> str:
        query = sa.select(users.c.identifier).select_from(threads.join(users)).where(threads.c.id == thread_id)
        return str(await self._scalar("check whose chat this is", query) or "")

    async def fork(
        self, thread_id: str, step_ids: list[str], name: Callable[[str], str], metadata: dict[str, Any]
    ) -> str | None:
        """A new chat of the same user holding copies of these messages of a chat (None: not the actor's to copy).

        `name` makes the new chat's name from the chat's; `metadata` is the new chat's (its settings).
        """
        actor, what, new_id = self.actor(), "continue a chat in a new one", str(uuid.uuid4())

        def work(connection: Connection) -> str | None:
            source = connection.execute(sa.select(threads).where(threads.c.id == thread_id)).first()
            if source is None or not self._writable(connection, thread_id, actor, what):
                return None
            rows = connection.execute(
                sa.select(steps)
                .where(steps.c.thread_id == thread_id, steps.c.id.in_(step_ids))
                .order_by(steps.c.created_at, steps.c.id)
            ).all()
            copies = {row.id: str(uuid.uuid4()) for row in rows}
            chat = {"id": new_id, "created_at": timestamp(), "name": storable(name(source.name or "")), "tags": None}
            connection.execute(sa.insert(threads), chat | {"user_id": source.user_id, "metadata": metadata})
            created_in(connection).add(new_id)
            if rows:
                connection.execute(sa.insert(steps), [copied(row._mapping, new_id, copies) for row in rows])
                for row in rows:  # the copies found by a search too
                    message_index.index(connection, copies[row.id], new_id, row.type, row.output)
            theirs = sa.select(chat_documents.c.document_id).where(chat_documents.c.thread_id == thread_id)
            searched = [
                {"thread_id": new_id, "document_id": d, "added_at": timestamp()} for d in connection.scalars(theirs)
            ]
            if searched:  # the new chat searches the documents this one does
                connection.execute(sa.insert(chat_documents), searched)
            return new_id

        return cast("str | None", await self.writer.write(what, work))

    async def delete_thread(self, thread_id: str) -> None:
        if self.writer.journal is not None and self.writer.journal.holds(thread_id):
            # Behind the chat's writes the journal holds, which would otherwise bring it back.
            await self.writer.keep("delete a chat", Kept(thread_id, "delete_thread", {"id": thread_id}))
        else:
            data, at = {"id": thread_id}, time.time()
            await self.writer.write("delete a chat", lambda connection: self._apply_delete_thread(connection, data, at))
        self._known_threads.discard(thread_id)

    def _apply_delete_thread(self, connection: Connection, data: dict[str, Any], at: float) -> None:
        """Delete a chat with its messages, elements, feedback and the documents uploaded only to it, for good."""
        thread_id = data["id"]
        tombstone = self._insert(deleted_chats).on_conflict_do_nothing(index_elements=["id"])
        connection.execute(tombstone, {"id": thread_id, "deleted_at": at})
        message_index.unindex_chats(connection, [thread_id])
        for table in (feedbacks, elements, steps):
            connection.execute(sa.delete(table).where(table.c.thread_id == thread_id))
        connection.execute(sa.delete(threads).where(threads.c.id == thread_id))
        passage_index.remove(connection, uploaded_only_to(thread_id))
        connection.execute(sa.delete(chat_documents).where(chat_documents.c.thread_id == thread_id))

    async def update_thread(
        self,
        thread_id: str,
        name: str | None = None,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
    ) -> None:
        if metadata is not None:
            # Chainlit's save of a tab's session carries the copy of the chat's metadata it read at resume: the
            # versions shown and the sharing are written only by what changes them (save_shown, the share route).
            stale = (SHOWN_KEY, *SHARING_KEYS) if isinstance(self.actor(), Actor) else (SHOWN_KEY,)
            metadata = {key: value for key, value in metadata.items() if key not in stale}
        await self._save_thread(thread_id, name, user_id, metadata, tags)

    async def save_shown(self, thread_id: str, shown: dict[str, str]) -> None:
        """Which version of a message the chat shows, where it is not the newest (the app's own metadata)."""
        await self._save_thread(thread_id, None, None, {SHOWN_KEY: shown}, None)

    async def _save_thread(
        self,
        thread_id: str,
        name: str | None,
        user_id: str | None,
        metadata: dict[str, Any] | None,
        tags: list[str] | None,
    ) -> None:
        """Create, name or change a chat for the actor; metadata is merged into the chat's."""
        named = name is not None or user_id is not None
        row: dict[str, Any] = {
            "id": thread_id,
            "created_at": timestamp(),
            "metadata": self.new_chat_metadata() if named else {},
            "name": None if name is None else storable(name),
            "user_id": user_id,
            "project_id": self.new_chat_project() if named else None,
        }

        if named or metadata is not None or tags is not None:
            actor = self.actor()
            data = {"row": row, "named": named, "metadata": metadata, "tags": tags, "actor": as_data(actor)}
            await self._keep("save the chat", Kept(chat_of(actor, thread_id), "thread", data))

    def _apply_thread(self, connection: Connection, data: dict[str, Any], at: float) -> None:
        """Create, name or change a chat for the actor; metadata is merged into the chat's, unless it changed since."""
        row, metadata, tags, actor = data["row"], data["metadata"], data["tags"], caller_of(data["actor"])
        thread_id = row["id"]
        if not self._writable(connection, thread_id, actor, "save the chat"):
            return
        if data["named"]:  # Chainlit's first message or a rename: creates the chat if need be, in one statement
            project = row.get("project_id")
            owned = sa.select(projects.c.id).where(projects.c.id == project, projects.c.user_id == row["user_id"])
            if project is not None and connection.execute(owned).first() is None:  # only a project of the chat's user
                project = None
            connection.execute(self._name_thread, row | {"project_id": project, "changed_at": at})
            created_in(connection).add(thread_id)
        if metadata is None and tags is None:
            return
        current = connection.execute(
            sa.select(threads.c.metadata, threads.c.changed_at).where(threads.c.id == thread_id)
        ).first()
        if current is None or (current.changed_at or 0) > at:  # a settings save brings back no chat, no older state
            return
        changes: dict[str, Any] = {"changed_at": at}
        if metadata is not None:
            changes["metadata"] = {**(current.metadata or {}), **metadata}
        if tags is not None:
            changes["tags"] = tags
        connection.execute(sa.update(threads).where(threads.c.id == thread_id).values(**changes))

    async def list_threads(self, pagination: Pagination, filters: ThreadFilter) -> PaginatedResponse[ThreadDict]:
        """The user's chats newest first, archived ones left out; a search: the best matches, each with a snippet."""
        user_id = str(filters.userId)
        if filters.search:
            return await self._searched(user_id, filters.search, pagination.first)
        query = (
            sa.select(threads, users.c.identifier)
            .select_from(threads.join(users))
            .where(threads.c.user_id == user_id, threads.c.archived_at.is_(None))
            .order_by(threads.c.created_at.desc(), threads.c.id.desc())
        )
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

        rows = await self.writer.read("list the chats", page_of)
        page = [thread_dict(row._mapping, [], []) for row in rows[: pagination.first]]
        return PaginatedResponse(
            data=page,
            pageInfo=PageInfo(
                hasNextPage=len(rows) > pagination.first,
                startCursor=page[0]["id"] if page else None,
                endCursor=page[-1]["id"] if page else None,
            ),
        )

    async def search(self, user_id: str, asked: str, limit: int) -> list[chat_search.Found]:
        """The user's chats a search finds, best first (filters in:<project>, is:pinned, is:archived)."""
        query = chat_search.parse(asked)
        return await self.writer.read("search your chats", lambda c: chat_search.find(c, user_id, query, limit))

    async def _searched(self, user_id: str, asked: str, limit: int) -> PaginatedResponse[ThreadDict]:
        """A search as Chainlit's dialog shows it: each chat named with its snippet, unless its name holds the words."""
        found = await self.search(user_id, asked, limit)
        words = chat_search.parse(asked).text.casefold()
        page: list[ThreadDict] = []
        for item in found:
            chat = thread_dict(item.chat._mapping, [], [])
            if item.snippet and words not in (item.chat.name or "").casefold():
                chat["name"] = " — ".join(part for part in (item.chat.name, item.snippet) if part)
                chat["createdAt"] = item.said_at
            page.append(chat)
        return PaginatedResponse(data=page, pageInfo=PageInfo(hasNextPage=False, startCursor=None, endCursor=None))

    async def get_thread(self, thread_id: str) -> ThreadDict | None:
        """The chat as the page shows it: the branch shown (Chainlit's resume shows every step it is given)."""
        thread = await self.get_whole_thread(thread_id)
        if thread is not None:
            thread["steps"] = on_screen(thread["steps"], shown_of(thread["metadata"]))  # type: ignore[typeddict-item]
            shown = {step["id"] for step in thread["steps"]}
            thread["elements"] = [e for e in thread["elements"] or [] if e.get("forId") in shown or not e.get("forId")]
        return thread

    async def get_whole_thread(self, thread_id: str) -> ThreadDict | None:
        """The chat with every version of its messages, oldest first."""
        return await self.writer.read("read a chat", lambda connection: self._thread(connection, thread_id))

    def _thread(self, connection: Connection, thread_id: str) -> ThreadDict | None:
        """The chat with all its messages and elements."""
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

    # ---- favourite prompts (Chainlit's `favorites`: a star on one's own messages) ------------

    async def get_favorite_steps(self, user_id: str) -> list[StepDict]:
        """The messages a user starred, newest first: only in their own chats (none while the database fails)."""
        query = (
            sa.select(steps, *(sa.null().label(name) for name in ("feedback_id", "value", "comment")))
            .select_from(steps.join(threads, threads.c.id == steps.c.thread_id))
            .where(threads.c.user_id == user_id, steps.c.type == "user_message", self._starred)
            .order_by(steps.c.created_at.desc(), steps.c.id)
            .limit(MOST_FAVOURITES)
        )
        with contextlib.suppress(HistoryUnavailable):  # logged by the writer; the page shows none
            rows = await self.writer.read("list your favourite prompts", lambda c: c.execute(query).all())
            return [step_dict(row._mapping) for row in rows]
        return []

    async def set_step_favorite(self, step_dict: StepDict, favorite: bool) -> StepDict:
        """Star or unstar a message of the tab user's own chats; only the star changes (Chainlit's rewrites all)."""
        actor, step_id = self.actor(), str(step_dict["id"])
        data = {"id": step_id, "favorite": favorite, "actor": as_data(actor)}
        await self._keep("keep a favourite prompt", Kept(chat_of(actor, step_id), "favourite", data))
        return cast("StepDict", {**step_dict, "metadata": {**(step_dict.get("metadata") or {}), "favorite": favorite}})

    def _apply_favourite(self, connection: Connection, data: dict[str, Any], at: float) -> None:
        """Set a message's star, if it is in one of the actor's own chats (no older copy of it replaces it then)."""
        step_id, actor = data["id"], caller_of(data["actor"])
        query = sa.select(steps.c.thread_id, steps.c.metadata, steps.c.saved_at).where(steps.c.id == step_id)
        row = connection.execute(query).first()
        if row is None or not isinstance(actor, Actor):
            return
        if self._writable(connection, row.thread_id, actor, "keep a favourite prompt"):
            starred = {**(row.metadata or {}), "favorite": data["favorite"]}
            saved_at = max(row.saved_at or 0.0, at)
            connection.execute(
                sa.update(steps).where(steps.c.id == step_id).values(metadata=starred, saved_at=saved_at)
            )

    @functools.cached_property
    def _starred(self) -> sa.ColumnElement[bool]:
        """A step's metadata says favourite: true (compared as text on PostgreSQL, where a cast could fail)."""
        flag = steps.c.metadata["favorite"]
        postgresql = self.engine.dialect.name == "postgresql"
        starred = flag.as_string() == "true" if postgresql else flag.as_boolean().is_(True)
        return cast("sa.ColumnElement[bool]", starred)

    # ---- the rest of the interface -----------------------------------------------------

    async def build_debug_url(self) -> str:
        return ""

    async def close(self) -> None:
        await self.writer.close()


def created_in(connection: Connection) -> set[str]:
    """The chats this connection's transaction has created so far."""
    created: set[str] = connection.info[SCRATCH].setdefault(NEW_THREADS, set())
    return created


def copied(row: RowMapping, thread_id: str, copies: dict[str, str]) -> dict[str, Any]:
    """A steps row copied into another chat: a new id, and what it refers to among the copies."""
    return {
        **row,
        "id": copies[row["id"]],
        "thread_id": thread_id,
        "parent_id": None,
        "metadata": relinked(row["metadata"] or {}, copies),
    }


def put(connection: Connection, upsert: sa.Insert, row: dict[str, Any], what: str) -> bool:
    """Run a chat row's upsert (whether it wrote); one whose id is a row of another chat changes nothing, and is
    logged."""
    if connection.execute(upsert, row).rowcount:
        return True
    logger.warning("History: refused to %s: %s is a row of another chat, or a newer copy is stored", what, row["id"])
    return False
