"""Files attached to a question: their text read out (UTF-8, or a PDF's through pypdf) and laid out for the model."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from app.chat.conversation import Conversation, TokenCounter
from app.config import DEFAULT_UPLOAD_MAX_CHARACTERS, DEFAULT_UPLOAD_MAX_PAGES
from app.errors import ChatError, Problem

# Step metadata key of a question's files: what the model reads of each, kept with the question.
FILES_KEY = "files"
PDF = ".pdf"
# Characters a file name may not bring into the heading line the model reads (a line break would end it).
UNSAFE_IN_NAME = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Attachment:
    """One attached file as the model reads it: its name, its type as uploaded, its text."""

    name: str
    type: str
    text: str
    # A PDF's pages' texts (empty: a file without pages); `text` is them joined.
    pages: tuple[str, ...] = ()
    # The file's size as uploaded.
    size: int = 0
    # The document it was kept as: its text stays on the server, and the page gets its name only.
    document: str | None = None
    # Kept as a document and read whole (its text fetched for the model); else its passages are searched.
    whole: bool = False

    def as_record(self) -> dict[str, Any]:
        """What the question's metadata keeps of it: a document's id in place of its text, which stays on the server."""
        if self.document is not None:
            return {"name": self.name, "type": self.type, "document": self.document, "whole": self.whole}
        return {"name": self.name, "type": self.type, "text": self.text}

    def kept_as(self, document: str, *, whole: bool) -> Attachment:
        """The file once kept as a document (its text dropped here)."""
        return Attachment(self.name, self.type, "", document=document, whole=whole)

    def with_text(self, text: str) -> Attachment:
        """A document read whole, with its text fetched from the server."""
        return Attachment(self.name, self.type, text, document=self.document, whole=self.whole)


@dataclass(frozen=True)
class UploadLimits:
    """What may be attached: file name endings, files per message, bytes per file."""

    types: frozenset[str]
    max_files: int
    max_bytes: int
    max_pages: int = DEFAULT_UPLOAD_MAX_PAGES
    max_characters: int = DEFAULT_UPLOAD_MAX_CHARACTERS


@dataclass(frozen=True)
class Upload:
    """A file Chainlit received for this message: the name given, its type, where it lies."""

    name: str
    type: str
    path: Path


def read_all(uploads: Sequence[Upload], limits: UploadLimits) -> list[Attachment]:
    """Each file's text, in order; ChatError naming the first file the model cannot read (blocking: run in_worker)."""
    if len(uploads) > limits.max_files:
        raise ChatError(Problem.TOO_MANY_FILES, limit=limits.max_files)
    return [read(upload, limits) for upload in uploads]


def read(upload: Upload, limits: UploadLimits) -> Attachment:
    """One file's text; ChatError if its type is not allowed, it is too big, or it holds no text to read."""
    ending = Path(upload.name).suffix.lower()
    if ending not in limits.types:
        raise ChatError(Problem.FILE_TYPE, name=upload.name, types=", ".join(sorted(limits.types)))
    size = upload.path.stat().st_size
    if size > limits.max_bytes:
        raise ChatError(Problem.FILE_TOO_BIG, name=upload.name, limit=f"{limits.max_bytes / 1_000_000:g}")
    if ending != PDF:
        text = plain_text(upload)
        if len(text) > limits.max_characters:
            raise ChatError(Problem.FILE_TOO_MUCH_TEXT, name=upload.name, limit=limits.max_characters)
        return Attachment(upload.name, upload.type, text, size=size)
    pages = pdf_pages(upload, limits)
    return Attachment(upload.name, upload.type, "\n\n".join(page for page in pages if page), pages, size)


def plain_text(upload: Upload) -> str:
    """A text file's content: UTF-8 (a byte order mark allowed), no NUL byte (a binary file has them)."""
    data = upload.path.read_bytes()
    try:
        if b"\x00" in data:
            raise UnicodeError("a NUL byte")
        return data.decode("utf-8-sig")
    except UnicodeError:
        raise ChatError(Problem.FILE_NOT_TEXT, name=upload.name) from None


def pdf_pages(upload: Upload, limits: UploadLimits) -> tuple[str, ...]:
    """The text of each of a PDF's pages; ChatError for an encrypted one, a damaged one, one of images only, or one
    past the limits on pages and characters (said before reading the rest)."""
    try:
        reader = PdfReader(upload.path)
        if reader.is_encrypted:
            raise ChatError(Problem.FILE_ENCRYPTED, name=upload.name)
        if len(reader.pages) > limits.max_pages:
            raise ChatError(
                Problem.FILE_TOO_MANY_PAGES, name=upload.name, pages=len(reader.pages), limit=limits.max_pages
            )
        pages, characters = [], 0
        for page in reader.pages:
            pages.append(page.extract_text())
            characters += len(pages[-1])
            if characters > limits.max_characters:
                raise ChatError(Problem.FILE_TOO_MUCH_TEXT, name=upload.name, limit=limits.max_characters)
    except (PyPdfError, ValueError, KeyError, TypeError, OSError):  # what pypdf raises on a malformed file
        raise ChatError(Problem.FILE_NOT_PDF, name=upload.name) from None
    texts = tuple(page.strip() for page in pages)
    if not any(texts):
        raise ChatError(Problem.FILE_NO_TEXT, name=upload.name)
    return texts


def attachments_of(step: Mapping[str, Any]) -> list[Attachment]:
    """The files a stored question carries (anything malformed in their place is left out)."""
    records = (step.get("metadata") or {}).get(FILES_KEY)
    if not isinstance(records, list):
        return []
    return [
        Attachment(
            record["name"],
            str(record.get("type") or ""),
            text if isinstance(text, str) else "",
            document=document if isinstance(document, str) else None,
            whole=record.get("whole") is True,
        )
        for record in records
        if isinstance(record, dict) and isinstance(record.get("name"), str)
        for text, document in [(record.get("text"), record.get("document"))]
        if isinstance(text, str) or isinstance(document, str)
    ]


def read_in(step: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, Any]:
    """A copy of a question whose documents read whole carry their text (for the model; never for the page)."""
    records = (step.get("metadata") or {}).get(FILES_KEY)
    if not isinstance(records, list):
        return dict(step)
    filled = [
        record | {"text": texts[record["document"]]}
        if isinstance(record, dict) and record.get("whole") is True and record.get("document") in texts
        else record
        for record in records
    ]
    return dict(step) | {"metadata": dict(step.get("metadata") or {}) | {FILES_KEY: filled}}


def with_files(metadata: Mapping[str, Any] | None, files: Sequence[Attachment]) -> dict[str, Any]:
    """A question's metadata carrying exactly these files (none: no files key)."""
    kept = {key: value for key, value in (metadata or {}).items() if key != FILES_KEY}
    return kept | {FILES_KEY: [file.as_record() for file in files]} if files else kept


def as_seen(step: Mapping[str, Any]) -> str:
    """A question as the model reads it: its files' text under their names, then what was typed."""
    return compose(attachments_of(step), str(step.get("output") or ""))


def compose(files: Sequence[Attachment], typed: str) -> str:
    """Each file read whole as a heading line with its name and its text in a fenced block, then the typed text.

    A document searched is not here (its passages come before the question), nor one whose text is gone.
    """
    read = [file for file in files if not file.document or (file.whole and file.text)]
    blocks = [f"File: {UNSAFE_IN_NAME.sub(' ', file.name)}\n{fenced(file.text)}" for file in read]
    return "\n\n".join([*blocks, typed] if typed or not blocks else blocks)


def fenced(text: str) -> str:
    """The text in a fence longer than any run of backticks in it, so nothing in it can close the fence."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


async def overflowing(
    files: Sequence[Attachment], typed: str, system_prompt: str, limit: int, count: TokenCounter
) -> ChatError | None:
    """The first file that takes the message past `limit` prompt tokens: its name, its tokens, the room it had.

    None if the typed text alone is already too long (then that is what to say).
    """
    alone = Conversation()
    used = await count(alone.messages(system_prompt, compose((), typed)))
    if used > limit:
        return None
    for index, file in enumerate(files):
        total = await count(alone.messages(system_prompt, compose(files[: index + 1], typed)))
        if total > limit:
            return ChatError(Problem.FILE_TOO_LONG, name=file.name, tokens=total - used, room=limit - used)
        used = total
    return None
