"""One browser tab's chat: preferences, its messages and their versions, language and running tasks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.chat.branches import Branches
from app.chat.preferences import Preferences


@dataclass(frozen=True)
class Project:
    """A chat's project as its answers need it."""

    id: str
    name: str
    instructions: str


class Control(Protocol):
    """A control the page shows by a message (the regenerate button)."""

    async def send(self, for_id: str) -> Any:
        """Show it by that message."""

    async def remove(self) -> Any:
        """Take it off the page."""


@dataclass
class Tab:
    """Everything a tab's chat owns; nothing here is shared between tabs (a login session is another thing)."""

    preferences: Preferences
    lang: str
    # The logged-in user (None without login): fair shares and usage are theirs.
    user: str | None = None
    branches: Branches = field(default_factory=Branches)
    generation: asyncio.Task[None] | None = None
    readiness: asyncio.Task[None] | None = None
    # The regenerate button, on the newest answer (its forId).
    regenerate: Control | None = None
    # Set by a resume: the answers' lines and the versions' controls are drawn once the page shows the messages.
    resumed: bool = False
    # Whether the chat searches documents: only then does a question cost a search (the database may be slow).
    searches_documents: bool = False
    # The texts of this chat's files read whole, by document id, once read: a turn does not ask the database.
    file_texts: dict[str, str] = field(default_factory=dict)
    # Messages the history has not saved yet, and where each waits (the journal's Saving values): marked on the page.
    unsaved: dict[str, str] = field(default_factory=dict)
    # The project the chat is filed in: its id, and its instructions joined to the system prompt (None: none).
    project: Project | None = None
    # Whether nothing of the chat is written anywhere (a temporary chat), and whether an admin made it so.
    temporary: bool = False
    temporary_only: bool = False
    # The user's memory as the next answer reads it ("": none, or a temporary chat), and the facts it was made of.
    memory: str = ""
    remembered: tuple[str, ...] = ()

    def answering_preferences(self) -> Preferences:
        """The preferences an answer uses: the memory, then the project's instructions, first in the system prompt
        (each byte-stable)."""
        instructions = self.project.instructions.strip() if self.project is not None else ""
        if not self.memory and not instructions:
            return self.preferences
        joined = "\n\n".join(part for part in (self.memory, instructions, self.preferences.system_prompt) if part)
        return self.preferences.model_copy(update={"system_prompt": joined})

    @property
    def generating(self) -> bool:
        """True while an answer is being streamed."""
        return self.generation is not None and not self.generation.done()

    def cancel_tasks(self) -> None:
        """Stop the running answer and the readiness watch, if any."""
        for task in (self.generation, self.readiness):
            if task is not None and not task.done():
                task.cancel()
