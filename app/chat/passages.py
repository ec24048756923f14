"""Passages of a chat's documents put before a question: the strong ones its budget holds, each sent once a chat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.chat.attachments import UNSAFE_IN_NAME, fenced
from app.chat.branches import Branches, is_question
from app.chat.token_bound import content_bound

# Answer metadata key of the passages the model was given: which document, page and passage, not their text.
SOURCES_KEY = "sources"
# The best-ranked passages a question is offered; the strong ones its budget holds are sent.
CANDIDATES = 24
# A candidate scoring under this share of the best one's is left out: it matched a few common words of the
# question, not what sets it apart (docs/documents.md, "How many passages").
WEAKEST = 0.6
INTRO = "Passages from the documents of this chat (use them to answer; say which [n] you used):"
QUESTION = "Question: "
JOINT = "\n\n"


@dataclass(frozen=True)
class Passage:
    """A piece of a document: its id, its document's name, its page (None without pages), its heading, its text."""

    id: int
    document: str
    page: int | None
    heading: str
    text: str
    # Its block's tokens (its heading line and fenced text, as its document was named) by the model server's
    # tokenizer, counted once when it was kept (None: the server did not answer then, a bound stands in).
    tokens: int | None = None
    # Its search score as a share of the best candidate's (1: the best): how it ranked, not what it is.
    strength: float = field(default=1.0, compare=False)

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


@dataclass(frozen=True)
class Choice:
    """The passages a question gets, in reading order; `crowded_out`: there were some, and none fit its room."""

    passages: list[Passage]
    crowded_out: bool = False


class Finder(Protocol):
    """A chat's documents, searched."""

    async def find(self, texts: Sequence[str], limit: int) -> list[Passage]:
        """The chat's passages that best match the texts (the first weighs most), best first; [] without documents."""

    async def passages(self, ids: Sequence[int]) -> dict[int, Passage]:
        """The user's passages by id (one not theirs, or gone, left out)."""

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


def given_before(tree: Branches, question_id: str) -> dict[str, list[int]]:
    """The passages each earlier question on the branch was given, by id in the order its prompt held them."""
    given: dict[str, list[int]] = {}
    for message_id in tree.up_to(tree.parents[question_id]):
        if (sources := tree.read(message_id, sources_of)) and (answer := tree.answer(message_id)) is not None:
            given[answer.reply_to] = [source.passage for source in sources]
    return given


def with_passages(passages: Sequence[Passage], question: str) -> str:
    """The question after the passages, each under its document's name and page, in reading order."""
    if not passages:
        return question
    blocks = [block(passage, n) for n, passage in enumerate(passages, start=1)]
    return JOINT.join([INTRO, *blocks, f"{QUESTION}{question}"])


def block(passage: Passage, number: int = CANDIDATES) -> str:
    """A passage as the model reads it: its number, its document's name, page and heading, its text fenced."""
    return f"[{number}] {heading_of(passage)}\n{fenced(passage.text)}"


def heading_of(passage: Passage) -> str:
    """The line naming a passage for the model: its file, its page, its heading."""
    parts = [UNSAFE_IN_NAME.sub(" ", passage.document)]
    if passage.page is not None:
        parts.append(f"page {passage.page}")
    if passage.heading:
        parts.append(UNSAFE_IN_NAME.sub(" ", passage.heading))
    return ", ".join(parts)


def chosen(candidates: Sequence[Passage], room: int, held: Sequence[Passage]) -> Choice:
    """The strong candidates, best first, that fit `room` tokens together, in reading order; none the prompt already
    holds (the same passage, or the same text in another document).

    Each costs its counted tokens and a bound on its heading line; a long one that does not fit leaves the room to
    shorter ones after it.
    """
    ids, texts = {passage.id for passage in held}, {same_text(passage.text) for passage in held}
    taken, used, crowded = [], content_bound(INTRO) + content_bound(QUESTION), False
    for passage in candidates:
        if passage.strength < WEAKEST or passage.id in ids or same_text(passage.text) in texts:
            continue
        if used + cost(passage) > room:
            crowded = True
            continue
        taken.append(passage)
        used += cost(passage)
        ids.add(passage.id)
        texts.add(same_text(passage.text))
    return Choice(sorted(taken, key=lambda passage: passage.id), crowded and not taken)


def cost(passage: Passage) -> int:
    """The prompt tokens a passage takes: its block's as counted (else a bound on them), and the joint before it."""
    return (passage.tokens if passage.tokens is not None else content_bound(block(passage))) + content_bound(JOINT)


def same_text(text: str) -> str:
    """A passage's text as two copies of it compare (spacing aside)."""
    return " ".join(text.split())


def asked_before(tree: Branches, question_id: str) -> str:
    """What the user typed in the question before this one on its branch ('' if none): a follow-up's context."""
    for message_id in reversed(tree.up_to(tree.parents[question_id])):
        if is_question(tree.steps[message_id]):
            return str(tree.steps[message_id].get("output") or "")
    return ""
