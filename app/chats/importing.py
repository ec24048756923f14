"""The chats page's import: an uploaded export kept in a temporary file, read into chats, each written in a
transaction of its own, the progress streamed back as server-sent events and a summary at the end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

from app.errors import HistoryUnavailable, ImportRefused
from app.history.imports import Imports
from app.i18n import error_text, language_of
from app.imports.read import Export, read_export
from app.page import seam

log = logging.getLogger(__name__)
# The most file names a summary lists (the count says how many more).
MOST_NAMES = 20
# The longest file name a request's `?name=` gives.
NAME_CHARS = 255


@dataclass
class Summary:
    """What an import came to, as the page says it."""

    source: str
    chats: int = 0
    messages: int = 0
    versions: int = 0
    files: list[str] = field(default_factory=list)
    more_files: int = 0
    left_out: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    not_imported: int = 0
    first: str | None = None

    def named(self, names: tuple[str, ...]) -> None:
        """Files an export names but does not hold."""
        room = max(0, MOST_NAMES - len(self.files))
        self.files += names[:room]
        self.more_files += max(0, len(names) - room)


@dataclass(frozen=True)
class Importing:
    """Exports imported into their uploader's chats."""

    imports: Imports
    most_bytes: int
    forced_language: str

    async def respond(self, request: Request, me: str) -> StreamingResponse:
        """Keep the request's body in a temporary file, then stream the import's progress."""
        name = (request.query_params.get("name") or "export").strip()[:NAME_CHARS] or "export"
        lang = language_of(self.forced_language or request.headers.get("accept-language"))
        with tempfile.NamedTemporaryFile(prefix="import-", delete=False) as kept:
            path = Path(kept.name)
            try:
                async for chunk in request.stream():
                    kept.write(chunk)
            except BaseException:  # the upload cut short or over the limit: nothing of it stays
                forget(path)
                raise
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # each line as it is said, through nginx
        return StreamingResponse(self.progress(me, path, name, lang), media_type="text/event-stream", headers=headers)

    async def progress(self, me: str, path: Path, name: str, lang: str) -> AsyncIterator[str]:
        """Events: reading, each chat written (of how many), then the summary, or the sentence saying why not."""
        try:
            yield event({"reading": name})
            try:
                export = await asyncio.to_thread(read_export, path, name, self.most_bytes)
            except ImportRefused as refused:
                log.info("Import: %s's %s refused: %s", me, name, refused)
                yield event({"refused": error_text(lang, refused)})
                return
            async for line in self.written(me, export):
                yield line
        finally:
            forget(path)

    async def written(self, me: str, export: Export) -> AsyncIterator[str]:
        """Each chat written in its own transaction, a progress event after each; the summary last."""
        summary = Summary(export.source.value, skipped=[{"name": s.name, "reason": s.reason} for s in export.skipped])
        total = len(export.chats)
        assistant = seam.assistant_name()
        for number, chat in enumerate(export.chats, start=1):
            try:
                thread_id = await self.imports.add(me, chat, export.source.value, assistant)
            except HistoryUnavailable:  # the database is away: the chats written so far stay, whole
                summary.not_imported = total - number + 1
                break
            if thread_id is None:  # the user was removed meanwhile
                summary.not_imported = total - number + 1
                break
            summary.first = summary.first or thread_id
            summary.chats += 1
            summary.messages += len(chat.messages)
            summary.versions += chat.versions
            summary.left_out += chat.left_out
            summary.named(chat.missing_files)
            yield event({"written": number, "total": total})
        log.info("Import: %s imported %d of %d chats from %s", me, summary.chats, total, export.source.value)
        yield event({"summary": summary.__dict__})


def forget(path: Path) -> None:
    """The uploaded file gone (a quick local unlink, also while the response is cancelled)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def event(data: dict[str, Any]) -> str:
    """One server-sent event carrying JSON."""
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
