""" "remember …" typed in a chat: the fact offered for the user's memory ("About you"), kept only once they confirm.

The message is no question for the model: it stays outside the conversation, and nothing is kept before the click. A
temporary chat neither reads nor writes the memory, so there the message is answered like any other.
"""

from __future__ import annotations

import contextlib

import chainlit as cl

from app.chat.memory import FACT_MAX_CHARS, asked_to_remember, one_line
from app.chat.tab import Tab
from app.errors import HistoryUnavailable
from app.history.memories import Kept, Memories
from app.i18n import text
from app.page.notices import show

# The buttons under the offer: keep the fact, or not.
KEEP, DROP = "remember_keep", "remember_drop"


def buttons(lang: str, notice_id: str, fact: str) -> list[cl.Action]:
    """The offer's two buttons, with ids of their own so that either click takes both away."""
    return [
        cl.Action(name=KEEP, payload={"fact": fact}, label=text(lang, "remember_keep"), id=f"{notice_id}-keep"),
        cl.Action(name=DROP, payload={}, label=text(lang, "remember_drop"), id=f"{notice_id}-drop"),
    ]


async def offered(chat: Tab, typed: str, memories: Memories | None) -> bool:
    """Offer to keep the fact a message asks to remember; True if the message asked so (it then gets no answer)."""
    fact = asked_to_remember(typed) if memories is not None and chat.user is not None and not chat.temporary else None
    if fact is None:
        return False
    if len(fact) > FACT_MAX_CHARS:
        await show(cl.Message(content=text(chat.lang, "remember_too_long", limit=FACT_MAX_CHARS)))
        return True
    notice = cl.Message(content=text(chat.lang, "remember_offer", fact=fact))
    notice.actions = buttons(chat.lang, notice.id, fact)
    await show(notice)
    return True


async def answered(chat: Tab, memories: Memories | None, action: cl.Action) -> None:
    """A click on the offer: the fact kept (or not), said in the offer's place, its buttons gone."""
    notice_id = action.forId or ""
    for button in buttons(chat.lang, notice_id, ""):
        await button.remove()
    fact = one_line(str(action.payload.get("fact") or ""))[:FACT_MAX_CHARS]
    said = "remember_dropped"
    if action.name == KEEP and memories is not None and chat.user is not None and fact:
        said = "remember_failed"
        with contextlib.suppress(HistoryUnavailable):  # logged by the store: the person is told it was not kept
            kept = await memories.add(chat.user, fact)
            said = "remember_kept" if kept is Kept.KEPT else "remember_full"
    await show(cl.Message(content=text(chat.lang, said, fact=fact), id=notice_id), redraw=True)
