"""The passages an answer was given, named under it and opened in the side view on a click."""

from __future__ import annotations

from typing import Any

import chainlit as cl

from app.chat.branches import Step
from app.chat.passages import Source, sources_of
from app.chat.tab import Tab
from app.documents.library import Library
from app.i18n import text

# The action callback (app/main.py) of a source's button: open its passage in the side view.
OPEN_SOURCE = "open_source"


def label(lang: str, source: Source) -> str:
    """A source as the page names it: its document and page."""
    if source.page is None:
        return source.document
    return text(lang, "source_page", document=source.document, page=source.page)


def source_props(lang: str, step: Step) -> dict[str, Any] | None:
    """The sources row of an answer's line (None: it was given no passages)."""
    sources = sources_of(step)
    if not sources:
        return None
    items = [{"label": label(lang, source), "passage": source.passage} for source in sources]
    return {"title": text(lang, "sources"), "action": OPEN_SOURCE, "items": items}


async def open_source(chat: Tab, library: Library | None, payload: dict[str, Any]) -> None:
    """A passage of the user's documents in the side view; nothing for one that is not theirs (any more)."""
    passage_id = payload.get("passage")
    if library is None or chat.user is None or not isinstance(passage_id, int):
        return
    passage = await library.passage(chat.user, passage_id)
    if passage is None:
        await cl.ElementSidebar.set_title(text(chat.lang, "source_gone"))
        await cl.ElementSidebar.set_elements([cl.Text(content=text(chat.lang, "source_gone"), display="side")])
        return
    title = label(chat.lang, Source(passage.id, passage.document, passage.page, passage.heading))
    body = f"**{passage.heading}**\n\n{passage.text}" if passage.heading else passage.text
    await cl.ElementSidebar.set_title(title)
    await cl.ElementSidebar.set_elements(
        [cl.Text(name=title, content=body, display="side")], key=f"passage-{passage.id}"
    )
