"""One chat session's state: preferences, conversation, language and running tasks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.conversation import Conversation
from app.preferences import Preferences
from app.stats import AnswerStats

if TYPE_CHECKING:
    import chainlit as cl


@dataclass
class ChatSession:
    """Everything a session owns; nothing here is shared between sessions."""

    preferences: Preferences
    lang: str
    # The logged-in user (None without login): fair shares and usage are theirs.
    user: str | None = None
    conversation: Conversation = field(default_factory=Conversation)
    generation: asyncio.Task[None] | None = None
    readiness: asyncio.Task[None] | None = None
    # The regenerate button, on the newest answer (its forId).
    regenerate: cl.Action | None = None
    # Set by a resume: the answer to give that button, and each answer's stats line, once the page
    # shows the past messages.
    resumed_answer: str | None = None
    resumed_stats: dict[str, AnswerStats] = field(default_factory=dict)

    @property
    def generating(self) -> bool:
        """True while an answer is being streamed."""
        return self.generation is not None and not self.generation.done()

    def cancel_tasks(self) -> None:
        """Stop the running answer and the readiness watch, if any."""
        for task in (self.generation, self.readiness):
            if task is not None and not task.done():
                task.cancel()
