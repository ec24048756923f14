"""Every exception the app raises on purpose, in one tree.

    AppError
     ├── ChatError              shown in the chat: a Problem the person can act on (vLLM down, too long ...)
     └── HistoryError           the chat history's database
          ├── HistoryUnavailable  a read or write failed or timed out while the app runs (the chat goes on)
          │    └── HistoryRefused  the database refused the write itself (a conflict, bad data): retrying fails too
          ├── HistoryUnreachable  the database cannot be opened at start (`make chat` stops with the sentence)
          └── LoginRequired       listening beyond loopback with nobody able to log in (`make chat` stops)

Drivers' and the OpenAI SDK's own errors are converted at one boundary each: `app/backend.py` for vLLM,
`app/history/writes/writer.py` for the database. Nothing above those modules sees a driver's exception.
"""

from __future__ import annotations

from enum import StrEnum


class AppError(Exception):
    """The base of every error the app raises on purpose."""


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
    ANSWERS_AT_ONCE = "answers_at_once"
    TOO_MANY_MESSAGES = "too_many_messages"
    QUOTA_USED = "quota_used"
    PRESET_NAME = "preset_name"
    PRESET_BUILT_IN = "preset_built_in"
    PRESET_NAME_TAKEN = "preset_name_taken"
    PRESET_MISSING = "preset_missing"
    PRESETS_TOO_MANY = "presets_too_many"
    PRESETS_NEED_HISTORY = "presets_need_history"
    TOO_MANY_FILES = "too_many_files"
    FILE_TYPE = "file_type"
    FILE_TOO_BIG = "file_too_big"
    FILE_NOT_TEXT = "file_not_text"
    FILE_NOT_PDF = "file_not_pdf"
    FILE_ENCRYPTED = "file_encrypted"
    FILE_NO_TEXT = "file_no_text"
    FILE_TOO_LONG = "file_too_long"
    FILE_TOO_MANY_PAGES = "file_too_many_pages"
    FILE_TOO_MUCH_TEXT = "file_too_much_text"
    READER_STOPPED = "reader_stopped"
    LIBRARY_FULL = "library_full"
    CHAT_DOCUMENTS_FULL = "chat_documents_full"


class ChatError(AppError):
    """An error to show in the chat; `details` fill the localized text."""

    def __init__(self, problem: Problem, **details: object) -> None:
        self.problem = problem
        self.details = details
        super().__init__(f"{problem.value}: {details}" if details else problem.value)

    def __reduce__(self) -> tuple[object, tuple[Problem, dict[str, object]]]:
        """Pickled with its problem and details: the processes that read files raise it to the app."""
        return restored, (self.problem, self.details)


def restored(problem: Problem, details: dict[str, object]) -> ChatError:
    """A ChatError unpickled."""
    return ChatError(problem, **details)


class HistoryError(AppError):
    """The chat history's database."""


class HistoryUnavailable(HistoryError):
    """The history database refused, failed or did not answer in time; the message says what was being done."""


class HistoryRefused(HistoryUnavailable):
    """The database refused the write itself (a conflict, bad data): trying again fails the same way."""


class HistoryUnreachable(HistoryError):
    """The history database cannot be opened at start."""


class LoginRequired(HistoryError):
    """Listening beyond loopback with nobody able to log in."""
