"""Temporary chats: a chat whose first question is sent with the composer's History set to Temporary (or any chat of
someone an admin made so) is never written anywhere; *Keep this chat* writes it, as it stands, and from then on.

The store asks `never_kept` before each write of a chat (Chainlit's own writes of the first question run before the
app's handler does): the chat's first question on the page, with its modes, decides once.
"""

from __future__ import annotations

import chainlit as cl
from chainlit.mode import Mode, ModeOption

from app.chat.tab import Tab
from app.i18n import text
from app.page import lifecycle, seam
from app.page.notices import show

# The composer's mode (Chainlit's modes) that picks whether a new chat is kept.
MODE = "history"
KEPT, TEMPORARY = "kept", "temporary"
# The action under the notice that turns a temporary chat into a kept one.
KEEP = "keep_chat"


class Temporaries:
    """Which chats of this process are temporary, decided at their first question."""

    def __init__(self) -> None:
        self.decided: dict[str, bool] = {}

    def never_kept(self, thread_id: str) -> bool:
        """Whether nothing of this chat may be written (the store's hook)."""
        if thread_id in self.decided:
            return self.decided[thread_id]
        modes = seam.first_question_modes()  # None outside a tab (a REST call), or before its first question
        chat = lifecycle.current() if modes is not None else None
        if chat is None or modes is None or seam.thread_id() != thread_id:
            return False  # not this tab's chat, or nothing to decide yet
        chat.temporary = chat.temporary_only or modes.get(MODE) == TEMPORARY
        self.decided[thread_id] = chat.temporary
        return chat.temporary

    def kept_from_now(self, thread_id: str) -> None:
        """The chat is written from now on (Keep this chat)."""
        self.decided[thread_id] = False

    def forget(self, thread_id: str) -> None:
        """The chat's tab ended: its decision goes with it."""
        self.decided.pop(thread_id, None)


async def offer(chat: Tab) -> None:
    """The composer's History picker: kept or temporary (temporary only, where an admin decided so)."""
    options = [ModeOption(id=TEMPORARY, name=text(chat.lang, "temporary_on"), icon="eye-off", default=True)]
    if not chat.temporary_only:
        options.insert(0, ModeOption(id=KEPT, name=text(chat.lang, "temporary_off"), icon="history", default=True))
        options[1].default = False
    await cl.context.emitter.set_modes([Mode(id=MODE, name=text(chat.lang, "temporary_mode"), options=options)])


async def announce(chat: Tab) -> None:
    """Say, under the first question of a temporary chat, that nothing of it is kept (and how to keep it)."""
    actions = [] if chat.temporary_only else [cl.Action(name=KEEP, payload={}, label=text(chat.lang, "temporary_keep"))]
    await show(cl.Message(content=text(chat.lang, "temporary_notice"), actions=actions))
