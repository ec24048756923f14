"""A chat's messages as a tree: an edited question or a regenerated answer is a version beside the old one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Step = Mapping[str, Any]
# The parent of a chat's first questions.
ROOT = ""


@dataclass
class Branches:
    """Every version of every message, each under the message it follows, and the branch shown.

    A message's shown child is the one chosen last, else its newest; `shown` keeps only choices of an older one
    (so a new turn, a regeneration or an edit changes nothing in it).
    """

    steps: dict[str, Step] = field(default_factory=dict)  # by id, oldest first
    parents: dict[str, str] = field(default_factory=dict)
    shown: dict[str, str] = field(default_factory=dict)
    _children: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def add(self, step: Step, parent: str) -> None:
        """A new message (newer than every other) under its parent."""
        message_id = str(step["id"])
        self.steps[message_id] = step
        self.parents[message_id] = parent
        self._children.setdefault(parent, []).append(message_id)

    def replace(self, step: Step) -> None:
        """A message's new content (e.g. an answer's final text), in its place."""
        self.steps[str(step["id"])] = step

    def shown_child(self, parent: str) -> str | None:
        """The version shown after a message (None: it is the end of the branch)."""
        children = self._children.get(parent)
        if not children:
            return None
        chosen = self.shown.get(parent)
        return chosen if chosen in children else children[-1]

    def path(self) -> list[str]:
        """The branch shown, oldest first."""
        path: list[str] = []
        while (child := self.shown_child(path[-1] if path else ROOT)) is not None:
            path.append(child)
        return path

    def leaf(self) -> str:
        """The last message shown (ROOT in an empty chat): where a new question goes."""
        path = self.path()
        return path[-1] if path else ROOT

    def up_to(self, message_id: str) -> list[str]:
        """The branch leading to a message, the message included (ROOT: none)."""
        branch: list[str] = []
        while message_id != ROOT:
            branch.append(message_id)
            message_id = self.parents[message_id]
        return branch[::-1]

    def versions(self, message_id: str) -> list[str]:
        """A message and the other versions of it (its siblings of the same kind), oldest first."""
        kind = is_question(self.steps[message_id])
        siblings = self._children[self.parents[message_id]]
        return [other for other in siblings if is_question(self.steps[other]) == kind]

    def select(self, message_id: str) -> bool:
        """Show this version where it stands; True if the choices changed."""
        parent = self.parents[message_id]
        before = self.shown.get(parent)
        if message_id == self._children[parent][-1]:
            self.shown.pop(parent, None)
        else:
            self.shown[parent] = message_id
        return self.shown.get(parent) != before

    def newest(self) -> str:
        """The message added last (ROOT in an empty chat): what a stored question that names none follows."""
        return next(reversed(self.steps), ROOT)

    def last_question(self) -> str | None:
        """The newest question on the branch shown."""
        return next((i for i in reversed(self.path()) if is_question(self.steps[i])), None)


def is_question(step: Step) -> bool:
    """Whether a message is the user's."""
    return step.get("type") == "user_message"
