"""Rows of the history's tables to Chainlit's dictionaries and back."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from chainlit.user import PersistedUser
from sqlalchemy.engine import RowMapping

from app.history.schema import timestamp
from app.storable import storable

if TYPE_CHECKING:
    from chainlit.element import ElementDict
    from chainlit.step import StepDict
    from chainlit.types import ThreadDict

# Step fields with a column of their own; the rest of Chainlit's step is kept as sent, in `details`.
STEP_COLUMNS = {
    "id": "id",
    "threadId": "thread_id",
    "parentId": "parent_id",
    "name": "name",
    "type": "type",
    "input": "input",
    "output": "output",
    "isError": "is_error",
    "createdAt": "created_at",
    "start": "start",
    "end": "end",
    "metadata": "metadata",
}
# Chainlit's step fields that are the browser's business only, never worth a row.
TRANSIENT_STEP_FIELDS = frozenset({"streaming", "waitForAnswer", "feedback"})


def shown(step: StepDict) -> bool:
    """Whether a step is worth storing: not the "run" step Chainlit wraps around each handler.

    Those carry nothing the page shows (chain of thought is hidden) and cost two writes per message.
    """
    return step.get("type") != "run"


def step_row(step_dict: StepDict) -> dict[str, Any]:
    """A steps row from Chainlit's step."""
    step: dict[str, Any] = dict(step_dict)
    row = {column: step.get(field) for field, column in STEP_COLUMNS.items()}
    return row | {
        "name": storable(row["name"]),
        "input": storable(row["input"]),
        "output": storable(row["output"]),
        "is_error": bool(row["is_error"]),
        "created_at": row["created_at"] or timestamp(),
        "metadata": row["metadata"] or {},
        "details": {
            key: value for key, value in step.items() if key not in STEP_COLUMNS and key not in TRANSIENT_STEP_FIELDS
        },
    }


def persisted_user(row: RowMapping) -> PersistedUser:
    """Chainlit's user from a users row (without its password hash)."""
    return PersistedUser(
        id=row["id"], identifier=row["identifier"], metadata=row["metadata"] or {}, createdAt=row["created_at"]
    )


def step_dict(row: RowMapping) -> StepDict:
    """Chainlit's step from a steps row joined with its feedback."""
    step: dict[str, Any] = {**row["details"], **{field: row[column] for field, column in STEP_COLUMNS.items()}}
    if row["feedback_id"] is not None:
        step["feedback"] = {
            "id": row["feedback_id"],
            "forId": row["id"],
            "value": row["value"],
            "comment": row["comment"],
        }
    return step  # type: ignore[return-value]  # the keys of StepDict, as Chainlit sent them


def new_step(thread_id: str, kind: str, name: str, output: str, metadata: dict[str, Any]) -> StepDict:
    """A new message of a thread, whole, as Chainlit's data layer takes it (for a write made outside a page)."""
    now = timestamp()
    return {
        "id": str(uuid.uuid4()),
        "threadId": thread_id,
        "parentId": None,
        "name": name,
        "type": kind,  # type: ignore[typeddict-item]  # one of Chainlit's message types, as the caller names it
        "input": "",
        "output": output,
        "isError": False,
        "createdAt": now,
        "start": now,
        "end": now,
        "metadata": metadata,
    }


def thread_dict(row: RowMapping, step_list: list[StepDict], element_list: list[ElementDict]) -> ThreadDict:
    """Chainlit's thread from a threads row joined with its user."""
    return {
        "id": row["id"],
        "createdAt": row["created_at"],
        "name": row["name"],
        "userId": row["user_id"],
        "userIdentifier": row.get("identifier"),
        "tags": row["tags"],
        "metadata": row["metadata"] or {},
        "steps": step_list,
        "elements": element_list,
    }
