"""The files tests attach to a question, and the question as the model must read it with them."""

from __future__ import annotations

NOTES = "Notes: the meeting moved to Thursday.\n"
README = "# Plan\n\n- ship the `files` feature\n"
SENTENCE = "The quokka sleeps at noon."


def seen(files: list[tuple[str, str]], typed: str) -> str:
    """A question as the model must read it: each file under its name in a fence, then the typed text."""
    return "\n\n".join([*(f"File: {name}\n```\n{text}\n```" for name, text in files), typed])
