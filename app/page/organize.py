"""A chat's place among its user's: the project it was started in (its page opened as /?project=<id>) or is filed
in, and whether it is temporary (the composer's History picker, or an admin's choice)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from app.chat.tab import Project, Tab
from app.documents.library import Library
from app.errors import HistoryUnavailable
from app.history.projects import Projects
from app.history.team import Team
from app.page import seam, temporary
from app.page.chat_history import History


async def start(
    chat: Tab, projects: Projects | None, team: Team | None, library: Library | None, preset_project: str | None
) -> None:
    """A new chat: the project its page asked for, or its preset's (if the user's); whether it must be temporary;
    the History picker."""
    if projects is None or team is None or chat.user is None:
        return
    asked = parse_qs(urlsplit(seam.page_address()).query).get("project", [""])[0] or preset_project
    try:
        found = await projects.of(chat.user, asked) if asked else None
        chat.temporary_only = await team.temporary_only(chat.user)
    except HistoryUnavailable:  # logged by the store: a plain chat
        return
    if found is not None:
        chat.project = Project(found.id, found.name, found.instructions)
        if library is not None:
            chat.searches_documents = await library.searched_by(chat.user, seam.thread_id(), found.id)
    await temporary.offer(chat)


async def resume(chat: Tab, projects: Projects | None) -> None:
    """A past chat opened again: the project it is filed in."""
    if projects is None or chat.user is None:
        return
    try:
        found = await projects.of_chat(chat.user, seam.thread_id())
    except HistoryUnavailable:  # logged by the store: answered without the project's instructions
        return
    if found is not None:
        chat.project = Project(found.id, found.name, found.instructions)


async def first_question(chat: Tab, history: History) -> None:
    """Before the chat's first question is answered: whether it is temporary, and if so the page says so."""
    if history.store is not None and not chat.branches.steps and history.temporaries.never_kept(seam.thread_id()):
        await temporary.announce(chat)
