"""An API call kept in a chat of its caller's, when it names one: its question and answer as a turn the page shows.

Only the call's last user message is kept as the question (the call brings its own conversation); the chat must be
the caller's own: any other chat, another user's too, is "not found".
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from app.chat.branches import Answer
from app.chat.reply import Replied
from app.history.rows import new_step
from app.history.store import ChatStore
from app.page import seam
from app.web.openai_errors import ApiRefusal

# The chat_id that asks for a new chat (its id is in the answer's X-Chat-Id header, and in a completion's body).
NEW = "new"


@dataclass(frozen=True)
class Chat:
    """Where a call is kept: the chat's id, and whether the call makes it."""

    id: str
    new: bool


@dataclass(frozen=True)
class Keeper:
    """Keeps calls in their callers' chats, through the history's store."""

    store: ChatStore

    async def chat_for(self, user: str, asked: str) -> Chat:
        """The chat a call names: a new one of the caller's, or theirs of that id (404 for any other)."""
        if asked == NEW:
            return Chat(str(uuid.uuid4()), new=True)
        if await self.store.get_thread_author(asked) != user:
            raise ApiRefusal(404, f"You have no chat {asked}.", code="chat_not_found", param="chat_id")
        return Chat(asked, new=False)

    async def keep(self, user: str, chat: Chat, question: str, replied: Replied, model: str) -> None:
        """The question and its answer at the end of the chat (the chat made first if the call asked for a new one).

        Its owner was checked by chat_for: the store takes the writes as a route's that checked.
        """
        if chat.new:
            owner = await self.store.get_user(user)
            await self.store.update_thread(chat.id, name=question[:255], user_id=owner.id if owner else None)
        asked = new_step(chat.id, "user_message", user, question, {})
        # ChatStore's own write: the page's data layer holds a tab's writes until its first message, and a call has
        # no tab (nor Chainlit context); with none, the store writes as a route that checked the owner.
        await ChatStore.create_step(self.store, asked)
        if replied.text or replied.failure is None:
            record = Answer(str(asked["id"]), replied.ending.value, model, dataclasses.asdict(replied.stats))
            await ChatStore.create_step(
                self.store,
                new_step(chat.id, "assistant_message", seam.assistant_name(), replied.text, record.as_metadata()),
            )
