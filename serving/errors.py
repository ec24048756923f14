"""The one error the serving side reports to a person."""

from __future__ import annotations


class ServeError(Exception):
    """A setting that cannot work on this machine; the message says what to change."""
