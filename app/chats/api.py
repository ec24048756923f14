"""The chats page's JSON routes: one to read what the page shows, one to search, one per change; each only ever
reads or changes the caller's own projects and chats."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response

from app.chats.importing import Importing
from app.documents.library import Library
from app.history.projects import INSTRUCTIONS_MAX_CHARS, Outcome, Projects
from app.history.store import ChatStore
from app.page import seam
from app.web.app_pages import page_sender, page_user, serve_page_routes
from app.web.protection import IMPORT_ROUTE

log = logging.getLogger(__name__)
PREFIX = "/chats/api"
# The most results a search on the page lists.
MOST_RESULTS = 50
ID = Field(min_length=1, max_length=36)


class NewProject(BaseModel):
    name: str = Field(min_length=1, max_length=255)
    instructions: str = Field("", max_length=INSTRUCTIONS_MAX_CHARS)


class ProjectChange(NewProject):
    id: str = ID


class ProjectId(BaseModel):
    id: str = ID


class Attachment(BaseModel):
    id: str = ID
    document_id: str = ID
    attached: bool


class Filing(BaseModel):
    id: str = ID
    project_id: str | None = Field(None, min_length=1, max_length=36)


class Flag(BaseModel):
    id: str = ID
    on: bool


def done(outcome: Outcome, what: str) -> dict[str, bool]:
    """A change's answer: done, or the reason it was not (404 no such project or chat, 409 a name taken)."""
    if outcome is Outcome.NOT_FOUND:
        raise HTTPException(404, f"No such {what} of yours")
    if outcome is Outcome.NAME_TAKEN:
        raise HTTPException(409, "You have a project of that name already")
    return {"ok": True}


@dataclass(frozen=True)
class Chats:
    """What the chats page reads and changes, for the user asking."""

    projects: Projects
    store: ChatStore
    library: Library | None

    async def state(self, me: str) -> dict[str, Any]:
        """What the page shows: projects (with their documents), chats pinned first, archived chats, the library."""
        library = [asdict(d) for d in await self.library.listed(me)] if self.library is not None else []
        return {
            "me": me,
            "projects": [asdict(project) for project in await self.projects.listed(me)],
            "chats": [asdict(chat) for chat in await self.projects.chats(me, archived=False)],
            "archived": [asdict(chat) for chat in await self.projects.chats(me, archived=True)],
            "library": [{"id": d["id"], "name": d["name"]} for d in library],
        }

    async def search(self, me: str, q: str = "") -> dict[str, Any]:
        """The user's chats a search finds, each with a snippet around its best hit and the words to mark."""
        user = await self.store.get_user(me)
        found = await self.store.search(user.id, q[:1000], MOST_RESULTS) if user is not None and q.strip() else []
        return {
            "results": [
                {
                    "id": item.chat.id,
                    "name": item.chat.name or "",
                    "project_id": item.chat.project_id,
                    "step_id": item.step_id,
                    "said_at": item.said_at,
                    "snippet": item.snippet,
                    "words": item.words,
                }
                for item in found
            ]
        }

    async def create(self, me: str, new: NewProject) -> dict[str, Any]:
        outcome, project_id = await self.projects.create(me, new.name.strip(), new.instructions)
        return done(outcome, "user") | {"id": project_id}

    async def change(self, me: str, change: ProjectChange) -> dict[str, bool]:
        return done(await self.projects.change(me, change.id, change.name.strip(), change.instructions), "project")

    async def delete(self, me: str, project: ProjectId) -> dict[str, bool]:
        return done(await self.projects.delete(me, project.id), "project")

    async def attach(self, me: str, change: Attachment) -> dict[str, bool]:
        outcome = await self.projects.attach(me, change.id, change.document_id, change.attached)
        return done(outcome, "project or document")

    async def file(self, me: str, filing: Filing) -> dict[str, bool]:
        return done(await self.projects.file(me, filing.id, filing.project_id), "chat or project")

    async def pin(self, me: str, flag: Flag) -> dict[str, bool]:
        return done(await self.projects.mark(me, flag.id, pinned=flag.on), "chat")

    async def archive(self, me: str, flag: Flag) -> dict[str, bool]:
        return done(await self.projects.mark(me, flag.id, archived=flag.on), "chat")


def install(chats: Chats, importing: Importing) -> None:
    """Serve the routes: each checks its caller first, then touches only the caller's own rows."""
    me = Annotated[str, Depends(page_user)]

    async def import_export(request: Request, user: seam.LoggedInUser) -> Response:
        """An export's chats made the caller's, its progress streamed (the file is the body, its name `?name=`)."""
        return await importing.respond(request, page_sender(request, user, "application/octet-stream"))

    seam.add_route(IMPORT_ROUTE, import_export, "POST")
    serve_page_routes(
        PREFIX,
        me,
        {"state": chats.state, "search": chats.search},
        {
            "projects/create": chats.create,
            "projects/change": chats.change,
            "projects/delete": chats.delete,
            "projects/documents": chats.attach,
            "chats/project": chats.file,
            "chats/pin": chats.pin,
            "chats/archive": chats.archive,
        },
    )
