"""The journal's file: one record per line, each framed with its checksum; appended with one fsync per group.

A write the disk tears (full, gone) is cut off again where possible; where not, the next append starts on a
line of its own, so a torn record loses only itself. A rewrite is made whole beside the file, synced, then
moved over it, and the folder synced, so the file is the old one or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import zlib
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
# A framed line: the CRC-32 of the JSON after it, in hex.
FRAMED = re.compile(rb"^([0-9a-f]{8}) (.*)$", re.DOTALL)


def frame(payload: dict[str, Any]) -> bytes:
    """One framed line."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def unframe(data: bytes, name: str = "") -> list[dict[str, Any]]:
    """The payloads of a file's whole lines, in order; torn or damaged ones left out, and logged."""
    payloads: list[dict[str, Any]] = []
    torn = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        if (payload := checked(line)) is None:
            torn += 1
        else:
            payloads.append(payload)
    if torn:
        logger.error("History: %d torn or damaged line(s) in the journal %s were left out", torn, name)
    return payloads


def checked(line: bytes) -> dict[str, Any] | None:
    """A line's payload if it is whole: its checksum matches (a journal of an older app: plain JSON)."""
    match = FRAMED.match(line)
    try:
        if match is None:
            legacy = json.loads(line)
            return legacy if isinstance(legacy, dict) else None
        crc, body = match.groups()
        if int(crc, 16) != zlib.crc32(body):
            return None
        payload = json.loads(body)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def read(path: Path) -> list[dict[str, Any]]:
    """A journal file's payloads (none if it is gone)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return unframe(data, path.name)


class JournalFile:
    """One process's journal file, appended to and rewritten; each method blocks on the disk (call it off the loop)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self._fd: int | None = None
        # A write that failed may have left a fragment that could not be cut off: the next starts a new line.
        self._torn_tail = False

    def append(self, data: bytes) -> None:
        """Add whole lines and sync them to the disk; OSError if the disk refuses (the file is as it was)."""
        fd = self._open()
        lines = (b"\n" if self._torn_tail else b"") + data
        try:
            written = 0
            while written < len(lines):
                written += os.write(fd, lines[written:])
            os.fsync(fd)
        except OSError:
            self._cut_back(fd)
            raise
        self.size += len(lines)
        self._torn_tail = False

    def rewrite(self, data: bytes) -> None:
        """Replace the file's content with these lines, atomically and synced; OSError if the disk refuses."""
        fresh = self.path.with_name(self.path.name + ".new")
        try:
            with fresh.open("wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(fresh, self.path)
            sync_folder(self.path.parent)
        except OSError:
            with contextlib.suppress(OSError):
                fresh.unlink()
            raise
        finally:
            self.close()
        self.size = len(data)
        self._torn_tail = False

    def close(self) -> None:
        """Close the file (the next append opens it again)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self.size = os.fstat(self._fd).st_size
        return self._fd

    def _cut_back(self, fd: int) -> None:
        """Cut a torn append off the file; if even that fails, the next append starts on a new line."""
        try:
            os.ftruncate(fd, self.size)
        except OSError:
            self._torn_tail = True


def sync_folder(folder: Path) -> None:
    """Make a rename or a new file in the folder durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
