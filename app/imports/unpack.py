"""An uploaded export's JSON documents: the file itself, or the conversations in a ZIP (ChatGPT's: conversations.json,
or since 2026 conversations-000.json, -001 ...), each unpacked within the import's limit however the ZIP says it is
sized; a file that is neither, or damaged, refused with a sentence."""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any

from app.errors import ImportRefused, Problem

# ChatGPT's conversations, in one file or split into numbered ones, at the ZIP's top or in a folder of it.
CONVERSATIONS = re.compile(r"(?:^|/)conversations(?:-(\d+))?\.json$")
ZIP_MAGIC = b"PK\x03\x04"
CHUNK = 1 << 20
# What a ZIP reader raises on a damaged, encrypted or unsupported member.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError)


def documents(path: Path, name: str, most_bytes: int) -> list[Any]:
    """The JSON documents of an uploaded file, in order; ImportRefused if it is foreign, damaged or too big."""
    with path.open("rb") as file:
        start = file.read(len(ZIP_MAGIC))
    if start == ZIP_MAGIC:
        return unzipped(path, name, most_bytes)
    if path.stat().st_size > most_bytes:
        raise ImportRefused(Problem.IMPORT_TOO_BIG, name=name, limit=most_bytes // 1_000_000)
    return [parsed(path.read_bytes(), name, name)]


def unzipped(path: Path, name: str, most_bytes: int) -> list[Any]:
    """The conversations files of a ZIP, parsed, numbered ones in their order."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if CONVERSATIONS.search(info.filename)]
            if not members:
                raise ImportRefused(Problem.IMPORT_FOREIGN, name=name)
            members.sort(key=lambda info: (int(CONVERSATIONS.search(info.filename).group(1) or -1), info.filename))  # type: ignore[union-attr]
            budget = most_bytes
            found = []
            for member in members:
                with archive.open(member) as stream:
                    data = read_within(stream, budget, name, most_bytes)
                budget -= len(data)
                found.append(parsed(data, name, member.filename))
            return found
    except ZIP_ERRORS as error:
        reason = str(error) or type(error).__name__
        raise ImportRefused(Problem.IMPORT_DAMAGED, name=name, part=name, reason=reason) from None


def read_within(stream: IO[bytes], budget: int, name: str, most_bytes: int) -> bytes:
    """A ZIP member's bytes, read a chunk at a time: ImportRefused past the budget (a ZIP bomb stops there)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(CHUNK):
        size += len(chunk)
        if size > budget:
            raise ImportRefused(Problem.IMPORT_TOO_BIG, name=name, limit=most_bytes // 1_000_000)
        chunks.append(chunk)
    return b"".join(chunks)


def parsed(data: bytes, name: str, part: str) -> Any:
    """A file's JSON; ImportRefused: foreign if it is not JSON at all, damaged if it is JSON cut short or broken."""
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        if data.lstrip()[:1] not in (b"[", b"{"):
            raise ImportRefused(Problem.IMPORT_FOREIGN, name=name) from None
        reason = str(error) or type(error).__name__
        raise ImportRefused(Problem.IMPORT_DAMAGED, name=name, part=part, reason=reason) from None
