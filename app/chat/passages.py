"""Passages of a chat's documents put before a question: as many of the best as the room allows, counted exactly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.chat.attachments import UNSAFE_IN_NAME, fenced
from app.chat.branches import Branches, is_question
from app.chat.conversation import Conversation, TokenCounter, most_that_fit

# Answer metadata key of the passages the model was given: which document, page and passage, not their text.
SOURCES_KEY = "sources"
# The best-ranked passages a question is offered; those that fit the room are sent.
CANDIDATES = 24


@dataclass(frozen=True)
class Passage:
    """A piece of a document: its id, its document's name, its page (None without pages), its heading, its text."""

    id: int
    document: str
    page: int | None
    heading: str
    text: str

    def as_source(self) -> dict[str, Any]:
        """What an answer keeps of a passage it was given."""
        return {"passage": self.id, "document": self.document, "page": self.page, "heading": self.heading}


@dataclass(frozen=True)
class Source:
    """A passage an answer was given, as its metadata names it."""

    passage: int
    document: str
    page: int | None
    heading: str


class Finder(Protocol):
    """A chat's documents, searched."""

    async def find(self, texts: Sequence[str], limit: int) -> list[Passage]:
        """The chat's passages that best match the texts (the first weighs most), best first; [] without documents."""

    async def texts(self, documents: Sequence[str]) -> dict[str, str]:
        """The whole texts of the user's documents read whole, by id (one not theirs, or gone, left out)."""


def sources_of(step: Mapping[str, Any]) -> list[Source]:
    """The passages an answer was given (anything malformed left out)."""
    records = (step.get("metadata") or {}).get(SOURCES_KEY)
    if not isinstance(records, list):
        return []
    return [
        Source(record["passage"], record["document"], page if isinstance(page, int) else None, str(heading or ""))
        for record in records
        if isinstance(record, dict) and isinstance(record.get("passage"), int)
        if isinstance(record.get("document"), str)
        for page, heading in [(record.get("page"), record.get("heading"))]
    ]


def with_passages(passages: Sequence[Passage], question: str) -> str:
    """The question after the passages, each under its document's name and page, in reading order."""
    if not passages:
        return question
    blocks = [f"[{n}] {heading_of(passage)}\n{fenced(passage.text)}" for n, passage in enumerate(passages, start=1)]
    intro = "Passages from the documents of this chat (use them to answer; say which [n] you used):"
    return "\n\n".join([intro, *blocks, f"Question: {question}"])


def heading_of(passage: Passage) -> str:
    """The line naming a passage for the model: its file, its page, its heading."""
    parts = [UNSAFE_IN_NAME.sub(" ", passage.document)]
    if passage.page is not None:
        parts.append(f"page {passage.page}")
    if passage.heading:
        parts.append(UNSAFE_IN_NAME.sub(" ", passage.heading))
    return ", ".join(parts)


async def fitting(
    candidates: Sequence[Passage], question: str, system_prompt: str, room: int, count: TokenCounter
) -> list[Passage]:
    """The most of the best-ranked candidates that fit the room with the question, in reading order.

    A search over how many: each count is exact and costs a request, and adding a passage only adds tokens.
    """

    async def fits(n: int) -> bool:
        chosen = sorted(candidates[:n], key=lambda passage: passage.id)
        return await count(Conversation().messages(system_prompt, with_passages(chosen, question))) <= room

    # fits(0) is taken as true: the question alone is the budget's business.
    taken = await most_that_fit(fits, len(candidates))
    return sorted(candidates[:taken], key=lambda passage: passage.id)


def asked_before(tree: Branches, question_id: str) -> str:
    """What the user typed in the question before this one on its branch ('' if none): a follow-up's context."""
    earlier = [i for i in tree.up_to(tree.parents[question_id]) if is_question(tree.steps[i])]
    return str(tree.steps[earlier[-1]].get("output") or "") if earlier else ""
