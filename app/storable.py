"""Text as both databases can keep it, and as a chat holds it so that what is shown, kept and resumed agree."""

from __future__ import annotations

# PostgreSQL refuses NUL characters in text; a model may emit one, an API client may send one.
NUL = "\x00"


def storable(text: str | None) -> str:
    """The text without NUL characters (None: empty)."""
    return (text or "").replace(NUL, "")
