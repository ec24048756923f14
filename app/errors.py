"""The one exception type whose message is meant for the person chatting."""

from __future__ import annotations

from enum import StrEnum


class Problem(StrEnum):
    """What went wrong, in terms a person can act on."""

    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    UNAUTHORIZED = "unauthorized"
    MODEL_MISSING = "model_missing"
    REJECTED = "rejected"
    SERVER_ERROR = "server_error"
    INTERRUPTED = "interrupted"
    MESSAGE_TOO_LONG = "message_too_long"
    EMPTY_MESSAGE = "empty_message"
    BUSY = "busy"


class ChatError(Exception):
    """An error to show in the chat; `details` fill the localized text."""

    def __init__(self, problem: Problem, **details: object) -> None:
        self.problem = problem
        self.details = details
        super().__init__(f"{problem.value}: {details}" if details else problem.value)
