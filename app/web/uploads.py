"""Chainlit's file upload (button and drag-and-drop) set to the app's limits: types, files per message, size."""

from __future__ import annotations

from collections.abc import Iterable

from app.chat.attachments import PDF, UploadLimits
from app.config import Settings
from app.page import seam

# Chainlit's upload route: the page posts each attached file there as a multipart body.
ROUTE = "/project/file"
# Room for the multipart body around the file (boundaries, part headers, a long file name).
MULTIPART_OVERHEAD = 65_536


def install(settings: Settings) -> None:
    """Attaching files on, for the types, count and size the settings allow."""
    seam.allow_uploads(accept(settings.upload_endings), settings.upload_max_files, settings.upload_max_mb)


def limits(settings: Settings) -> UploadLimits:
    """What the app reads of the files a message carries."""
    return UploadLimits(
        settings.upload_endings,
        settings.upload_max_files,
        settings.upload_max_mb * 1_000_000,
        settings.upload_max_pages,
        settings.upload_max_characters,
    )


def accept(endings: Iterable[str]) -> dict[str, list[str]]:
    """Chainlit's `accept`: a file's type as the browser gives it (unknown: application/octet-stream), then its ending.

    The page offers these endings; Chainlit's route refuses a type outside these patterns or an ending not
    listed for it. What a file really holds is checked when it is read (app/attachments.py).
    """
    every = sorted(endings)
    return {"text/*": [e for e in every if e != PDF], "application/*": every}


def body_limit(settings: Settings) -> int:
    """The largest request body the upload route takes: one file at the size limit, and its multipart wrapping."""
    return settings.upload_max_mb * 1_000_000 + MULTIPART_OVERHEAD
