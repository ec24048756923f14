"""A document cut into passages at its own structure: pages, headings, paragraphs (code at blank lines), lines."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

# A passage's size in weighted characters: small enough that several fit the room beside a question, big enough
# to hold a paragraph. A CJK character weighs about what a token does, four other characters another.
MOST_WEIGHT = 1600
CJK_WEIGHT = 4
CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")
BLANK_LINES = re.compile(r"\n[ \t]*\n+")
# Where a long line may be cut: after a sentence's end (Western or Chinese punctuation).
SENTENCE_END = re.compile(r"(?<=[.!?;。！？；])\s*")
MARKDOWN_HEADING = re.compile(r"^#{1,6}\s+\S")
# A heading without markup: one short line that does not end like a sentence (PDFs lose the markup).
HEADING_MOST_CHARS = 80
NOT_A_HEADING_END = tuple(".。!！?？,，;；:：")
# Running headers and footers: a line among a page's first or last few that most pages share (their numbers aside:
# "Page 12 of 90") is the page's margin, not its text; left in, it would be in every passage.
EDGE_LINES = 2
RUNNING_SHARE = 0.5
RUNNING_FEWEST_PAGES = 3
NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Piece:
    """A passage before it is stored: its page (from 1; None without pages), the heading it is under, its text."""

    page: int | None
    heading: str
    text: str


def weight(text: str) -> int:
    """A text's size as passages measure it."""
    return len(text) + (CJK_WEIGHT - 1) * len(CJK.findall(text))


def is_heading(block: str) -> bool:
    """A block of one line that is a Markdown heading, or short and not ending like a sentence."""
    line = block.strip()
    if "\n" in line or not line:
        return False
    short = len(line) <= HEADING_MOST_CHARS and not line.endswith(NOT_A_HEADING_END)
    return bool(MARKDOWN_HEADING.match(line)) or short


def pieces(pages: Sequence[str], *, paged: bool) -> list[Piece]:
    """The passages of a document's pages in reading order; a passage never spans two pages."""
    found: list[Piece] = []
    heading = ""
    for number, page in enumerate(pages, start=1):
        heading = page_pieces(page, number if paged else None, heading, found)
    return found


def without_margins(pages: Sequence[str]) -> list[str]:
    """The pages without their running headers and footers: edge lines the same on most pages, numbers aside."""
    lines = [page.split("\n") for page in pages]
    edges = [{index: margin_key(page[index]) for index in edge_lines(page)} for page in lines]
    shared = Counter(key for page in edges for key in set(page.values()))
    fewest = max(RUNNING_FEWEST_PAGES, RUNNING_SHARE * len(pages))
    running = {key for key, count in shared.items() if count >= fewest}
    return [
        "\n".join(line for index, line in enumerate(page) if edge.get(index) not in running)
        for page, edge in zip(lines, edges, strict=True)
    ]


def edge_lines(lines: Sequence[str]) -> set[int]:
    """The indexes of a page's first and last few lines with text."""
    filled = [index for index, line in enumerate(lines) if line.strip()]
    return set(filled[:EDGE_LINES] + filled[-EDGE_LINES:])


def margin_key(line: str) -> str:
    """A line as pages repeat it: spaces and case aside, every number alike."""
    return NUMBER.sub("#", " ".join(line.split()).casefold())


def page_pieces(page: str, number: int | None, heading: str, found: list[Piece]) -> str:
    """A page's passages added to `found`; the heading in force at its end (it goes on over the next page)."""
    current, body = "", False  # body: the passage holds more than headings
    for block in BLANK_LINES.split(page.strip()):
        if not block.strip():
            continue
        titled = is_heading(block)
        if titled:
            if body:  # headings in a row stay together, with the text under the last
                found.append(Piece(number, heading, current))
                current, body = "", False
            heading = block.strip().lstrip("#").strip()
        joint = "\n\n"  # between paragraphs; the lines of a long one keep their single line breaks
        for unit in units(block.strip()):
            joined = current + joint + unit if current else unit
            if current and weight(joined) > MOST_WEIGHT:
                found.append(Piece(number, heading, current))
                joined, body = unit, False
            current, joint, body = joined, "\n", body or not titled
    if current:
        found.append(Piece(number, heading, current))
    return heading


def units(block: str) -> Iterator[str]:
    """A block whole if it is small enough, else its lines, sentences or, at worst, equal cuts of it."""
    if weight(block) <= MOST_WEIGHT:
        yield block
        return
    for line in block.split("\n") if "\n" in block else SENTENCE_END.split(block):
        if weight(line) <= MOST_WEIGHT:
            if line.strip():
                yield line
        elif "\n" in block:
            yield from units(line)
        else:
            yield from cuts(line)


def cuts(text: str) -> Iterator[str]:
    """A text with no place to cut it, in pieces of at most the passage size."""
    start, end = 0, 0
    while end < len(text):
        end, size = start, 0
        while end < len(text) and size + weight(text[end]) <= MOST_WEIGHT:
            size += weight(text[end])
            end += 1
        yield text[start:end]
        start = end
