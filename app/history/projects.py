"""Each user's projects, and how their chats are filed, pinned and archived: every read and write checks the owner."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from app.history.schema import documents, project_documents, projects, threads, user_row
from app.history.writes import Writer

# A project's instructions are joined to the system prompt: as long as a system prompt may be.
INSTRUCTIONS_MAX_CHARS = 20_000


class Outcome(StrEnum):
    """What a change to a user's projects or chats came to."""

    DONE = "done"
    NOT_FOUND = "not_found"
    NAME_TAKEN = "name_taken"


@dataclass(frozen=True)
class Project:
    """A project as the page shows it and as a chat of it is answered."""

    id: str
    name: str
    instructions: str
    chats: int = 0
    documents: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Chat:
    """A chat as the chats page lists it."""

    id: str
    name: str
    created_at: str
    project_id: str | None
    pinned: bool
    archived: bool


def theirs(user: str, thread_id: str) -> sa.ColumnElement[bool]:
    """The user's own chat of this id."""
    return sa.and_(threads.c.id == thread_id, threads.c.user_id == user_row(user))


def their_project(user: str, project_id: str) -> sa.ColumnElement[bool]:
    """The user's own project of this id."""
    return sa.and_(projects.c.id == project_id, projects.c.user_id == user_row(user))


@dataclass(frozen=True)
class Projects:
    """The user's projects and the filing of their chats, through the history's writer."""

    writer: Writer

    async def listed(self, user: str) -> list[Project]:
        """The user's projects by name, with how many chats each holds and its documents."""
        count = sa.select(sa.func.count()).where(threads.c.project_id == projects.c.id).scalar_subquery()
        query = sa.select(projects, count.label("chats")).where(projects.c.user_id == user_row(user))
        docs = (
            sa.select(project_documents.c.project_id, documents.c.id, documents.c.name)
            .join(documents, documents.c.id == project_documents.c.document_id)
            .where(documents.c.user_id == user_row(user))
            .order_by(documents.c.name)
        )

        def work(connection: Connection) -> list[Project]:
            attached: dict[str, list[dict[str, str]]] = {}
            for row in connection.execute(docs):
                attached.setdefault(row.project_id, []).append({"id": row.id, "name": row.name})
            rows = connection.execute(query.order_by(projects.c.name)).all()
            return [Project(r.id, r.name, r.instructions, r.chats, attached.get(r.id, [])) for r in rows]

        result: list[Project] = await self.writer.read("list your projects", work)
        return result

    async def of(self, user: str, project_id: str) -> Project | None:
        """One of the user's projects (None: no such project of theirs)."""
        query = sa.select(projects).where(their_project(user, project_id))
        row = await self.writer.read("read a project", lambda c: c.execute(query).first())
        return Project(row.id, row.name, row.instructions) if row else None

    async def of_chat(self, user: str, thread_id: str) -> Project | None:
        """The project the user's chat is filed in (None: none, or not theirs)."""
        query = sa.select(projects).join(threads, threads.c.project_id == projects.c.id).where(theirs(user, thread_id))
        row = await self.writer.read("read a chat's project", lambda c: c.execute(query).first())
        return Project(row.id, row.name, row.instructions) if row else None

    async def create(self, user: str, name: str, instructions: str) -> tuple[Outcome, str]:
        """A new project of the user's (its id), unless they have one of that name."""
        project_id = str(uuid.uuid4())

        def work(connection: Connection) -> tuple[Outcome, str]:
            owner = connection.execute(sa.select(user_row(user))).scalar()
            if owner is None:
                return Outcome.NOT_FOUND, ""
            if self._named(connection, user, name):
                return Outcome.NAME_TAKEN, ""
            row = {"id": project_id, "user_id": owner, "name": name, "instructions": instructions}
            connection.execute(sa.insert(projects).values(**row, created_at=time.time()))
            return Outcome.DONE, project_id

        outcome: tuple[Outcome, str] = await self.writer.write("create a project", work)
        return outcome

    async def change(self, user: str, project_id: str, name: str, instructions: str) -> Outcome:
        """A project renamed and its instructions set."""

        def work(connection: Connection) -> Outcome:
            if self._named(connection, user, name, besides=project_id):
                return Outcome.NAME_TAKEN
            statement = sa.update(projects).where(their_project(user, project_id))
            changed = connection.execute(statement.values(name=name, instructions=instructions)).rowcount
            return Outcome.DONE if changed else Outcome.NOT_FOUND

        return Outcome(await self.writer.write("change a project", work))

    async def delete(self, user: str, project_id: str) -> Outcome:
        """A project gone; its chats stay, unfiled, and its documents stay in the library."""

        def work(connection: Connection) -> Outcome:
            if connection.execute(sa.select(projects.c.id).where(their_project(user, project_id))).first() is None:
                return Outcome.NOT_FOUND
            connection.execute(sa.update(threads).where(threads.c.project_id == project_id).values(project_id=None))
            connection.execute(sa.delete(project_documents).where(project_documents.c.project_id == project_id))
            connection.execute(sa.delete(projects).where(projects.c.id == project_id))
            return Outcome.DONE

        return Outcome(await self.writer.write("delete a project", work))

    async def attach(self, user: str, project_id: str, document_id: str, attached: bool) -> Outcome:
        """One of the user's documents searched by every chat of the project (or no longer)."""

        def work(connection: Connection) -> Outcome:
            mine = sa.select(documents.c.id).where(documents.c.id == document_id, documents.c.user_id == user_row(user))
            project = sa.select(projects.c.id).where(their_project(user, project_id))
            if connection.execute(mine).first() is None or connection.execute(project).first() is None:
                return Outcome.NOT_FOUND
            which = (project_documents.c.project_id == project_id) & (project_documents.c.document_id == document_id)
            connection.execute(sa.delete(project_documents).where(which))
            if attached:
                row = {"project_id": project_id, "document_id": document_id, "added_at": time.time()}
                connection.execute(sa.insert(project_documents).values(**row))
            return Outcome.DONE

        return Outcome(await self.writer.write("attach a document to a project", work))

    async def file(self, user: str, thread_id: str, project_id: str | None) -> Outcome:
        """Move the user's chat into one of their projects (None: out of any)."""

        def work(connection: Connection) -> Outcome:
            if project_id is not None:
                project = sa.select(projects.c.id).where(their_project(user, project_id))
                if connection.execute(project).first() is None:
                    return Outcome.NOT_FOUND
            moved = connection.execute(sa.update(threads).where(theirs(user, thread_id)).values(project_id=project_id))
            return Outcome.DONE if moved.rowcount else Outcome.NOT_FOUND

        return Outcome(await self.writer.write("move a chat", work))

    async def mark(self, user: str, thread_id: str, **flags: bool) -> Outcome:
        """Pin or unpin, archive or restore the user's chat (`pinned`, `archived`)."""
        values = {f"{flag}_at": time.time() if on else None for flag, on in flags.items()}
        statement = sa.update(threads).where(theirs(user, thread_id)).values(**values)
        changed = await self.writer.write("pin or archive a chat", lambda c: c.execute(statement).rowcount)
        return Outcome.DONE if changed else Outcome.NOT_FOUND

    async def chats(self, user: str, *, archived: bool, project_id: str | None = None) -> list[Chat]:
        """The user's chats (archived ones, or the others), pinned first, then newest first; of one project."""
        query = sa.select(threads).where(threads.c.user_id == user_row(user), threads.c.name.is_not(None))
        query = query.where(threads.c.archived_at.is_not(None) if archived else threads.c.archived_at.is_(None))
        if project_id is not None:
            query = query.where(threads.c.project_id == project_id)
        query = query.order_by(threads.c.pinned_at.is_(None), threads.c.pinned_at.desc(), threads.c.created_at.desc())
        rows = await self.writer.read("list your chats", lambda c: c.execute(query).all())
        return [chat_of(row._mapping) for row in rows]

    @staticmethod
    def _named(connection: Connection, user: str, name: str, besides: str | None = None) -> bool:
        """Whether the user has another project of this name."""
        query = sa.select(projects.c.id).where(projects.c.user_id == user_row(user), projects.c.name == name)
        if besides is not None:
            query = query.where(projects.c.id != besides)
        return connection.execute(query).first() is not None


def chat_of(row: Any) -> Chat:
    """A threads row as the chats page lists it."""
    return Chat(
        row["id"],
        row["name"] or "",
        row["created_at"],
        row["project_id"],
        bool(row["pinned_at"]),
        bool(row["archived_at"]),
    )
