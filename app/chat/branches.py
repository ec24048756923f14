"""A chat's messages as a tree, and what each message records about its place in it.

An edited question or a regenerated answer is a version beside the old one; a question names the message it
follows, an answer the question it replies to, and the conversation the model sees is read along one branch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from app.chat.attachments import as_seen
from app.chat.conversation import Conversation, Ending, Turn
from app.storable import NUL, storable

Step = Mapping[str, Any]
Read = TypeVar("Read")
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
    # What each message was read for, once rather than at every answer, whose plan walks the whole branch (a copy
    # made with other steps starts without them), and the branch shown as of the last change.
    _read: dict[tuple[Callable[[Step], Any], str], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _path: tuple[int, tuple[str, ...]] = field(default=(-1, ()), init=False, repr=False, compare=False)
    _changes: int = field(default=0, init=False, repr=False, compare=False)

    def add(self, step: Step, parent: str) -> None:
        """A new message (newer than every other) under its parent."""
        message_id = str(step["id"])
        self.steps[message_id] = as_kept(step)
        self.parents[message_id] = parent
        self._children.setdefault(parent, []).append(message_id)
        changes, known = self._path
        self._changes += 1
        if changes == self._changes - 1 and parent == (known[-1] if known else ROOT):
            # Under the end of the branch shown (a new turn): its only child, the branch goes on with it.
            self._path = (self._changes, (*known, message_id))

    def read(self, message_id: str, reader: Callable[[Step], Read]) -> Read:
        """What `reader` finds in a message, read once: a message does not change once added."""
        key = (reader, message_id)
        if key not in self._read:
            self._read[key] = reader(self.steps[message_id])
        return cast("Read", self._read[key])

    def answer(self, message_id: str) -> Answer | None:
        """The turn record a message carries, if it is an answer of ours."""
        return self.read(message_id, answer_of)

    def shown_child(self, parent: str) -> str | None:
        """The version shown after a message (None: it is the end of the branch)."""
        children = self._children.get(parent)
        if not children:
            return None
        chosen = self.shown.get(parent)
        return chosen if chosen in children else children[-1]

    def path(self) -> list[str]:
        """The branch shown, oldest first (a list of its own: the caller may change it)."""
        changes, known = self._path
        if changes == self._changes:
            return list(known)
        path: list[str] = []
        while (child := self.shown_child(path[-1] if path else ROOT)) is not None:
            path.append(child)
        self._path = (self._changes, tuple(path))
        return path

    def leaf(self) -> str:
        """The last message shown (ROOT in an empty chat): where a new question goes."""
        path = self.path()
        return path[-1] if path else ROOT

    def up_to(self, message_id: str) -> list[str]:
        """The branch leading to a message, the message included (ROOT: none)."""
        return list(self.back_from(message_id))[::-1]

    def back_from(self, message_id: str) -> Iterator[str]:
        """The branch leading to a message, newest first, the message included (ROOT: none)."""
        while message_id != ROOT:
            yield message_id
            message_id = self.parents[message_id]

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
        changed = self.shown.get(parent) != before
        if changed:
            self._changes += 1
        return changed

    def newest(self) -> str:
        """The message added last (ROOT in an empty chat): what a stored question that names none follows."""
        return next(reversed(self.steps), ROOT)

    def last_question(self) -> str | None:
        """The newest question on the branch shown."""
        return next((i for i in reversed(self.path()) if is_question(self.steps[i])), None)


def as_kept(step: Step) -> Step:
    """The message as the history keeps it, so a chat resumed from it sends vLLM the very prompt the live one did."""
    unkept = [key for key in ("input", "output") if isinstance(step.get(key), str) and NUL in step[key]]
    return {**step, **{key: storable(step[key]) for key in unkept}} if unkept else step


def is_question(step: Step) -> bool:
    """Whether a message is the user's."""
    return step.get("type") == "user_message"


# Step metadata key under which an answer (or the error that replaced it) records its turn.
TURN_KEY = "turn"

# Step metadata key of a question: the message it follows (ROOT: none), or None for a message outside the
# conversation (refused). Absent: the question follows the message stored before it (a question typed after
# the newest message, which saves a write per turn, or one stored before versions existed).
FOLLOWS = "follows"

# A message the model never saw (e.g. too long for the window): no turn of the conversation.
NOT_SENT = "not_sent"

ENDINGS = frozenset(ending.value for ending in Ending)


@dataclass(frozen=True)
class Answer:
    """What an answer records about its turn, stored with it."""

    reply_to: str
    ending: str
    model: str = ""
    stats: Mapping[str, Any] | None = None

    def as_metadata(self) -> dict[str, Any]:
        """The step metadata that carries it."""
        return {TURN_KEY: {"reply_to": self.reply_to, "ending": self.ending, "model": self.model, "stats": self.stats}}


def answer_of(step: Step) -> Answer | None:
    """The turn record a step carries, if it is an answer of ours."""
    record = (step.get("metadata") or {}).get(TURN_KEY)
    if is_question(step) or not isinstance(record, dict) or not isinstance(record.get("reply_to"), str):
        return None
    return Answer(
        reply_to=record["reply_to"],
        ending=str(record.get("ending", Ending.FAILED)),
        model=str(record.get("model") or ""),
        stats=record.get("stats") if isinstance(record.get("stats"), dict) else None,
    )


def placed(parent: str | None) -> dict[str, Any]:
    """A question's metadata: the message it follows (None: outside the conversation)."""
    return {FOLLOWS: parent}


def branches_of(steps: Sequence[Step], shown: Mapping[str, str]) -> Branches:
    """A stored chat's tree (steps oldest first); notices and refused messages stay outside it."""
    tree = Branches(shown=dict(shown))
    for step in steps:
        parent = parent_of(step, tree)
        if parent is not None:
            tree.add(step, parent)
    return tree


def parent_of(step: Step, tree: Branches) -> str | None:
    """The message a stored message follows in the tree built so far (None: it is not part of it)."""
    if not is_question(step):
        answer = answer_of(step)
        known = answer is not None and answer.reply_to in tree.steps and is_question(tree.steps[answer.reply_to])
        return answer.reply_to if answer is not None and known else None
    metadata = step.get("metadata") or {}
    follows = metadata.get(FOLLOWS)
    if FOLLOWS in metadata and follows is None:
        return None
    if isinstance(follows, str) and (follows == ROOT or follows in tree.steps):
        return follows
    # Typed after the newest message (its place goes without saying), or stored before versions existed.
    return tree.newest()


def conversation_of(
    steps: Sequence[Step], seen: Callable[[Step], str] = as_seen, answer_in: Callable[[Step], Answer | None] = answer_of
) -> Conversation:
    """The conversation as the model saw it along one branch: each user message with the answer recorded for it.

    `seen`: a question as the model read it; `answer_in`: an answer's turn record. A message with no recorded answer
    (the app stopped mid-answer) counts as a failed turn with an empty answer, as a failed request does while the app
    runs.
    """
    turns: dict[str, Turn] = {}
    for step in steps:
        if is_question(step):
            turns[str(step["id"])] = Turn(seen(step), "", Ending.FAILED, str(step["id"]))
        elif (answer := answer_in(step)) is not None and answer.reply_to in turns:
            if answer.ending == NOT_SENT:
                del turns[answer.reply_to]
                continue
            turn = turns[answer.reply_to]
            turn.ending = Ending(answer.ending) if answer.ending in ENDINGS else Ending.FAILED
            if not step.get("isError"):
                turn.assistant = str(step.get("output") or "")
    return Conversation(list(turns.values()))


def conversation_before(tree: Branches, question_id: str, seen: Callable[[Step], str] = as_seen) -> Conversation:
    """What the model sees before a question: the branch leading to it (`seen`: a question as the model read it)."""
    branch = [tree.steps[i] for i in tree.up_to(tree.parents[question_id])]
    return conversation_of(branch, seen, lambda step: tree.answer(str(step["id"])))


def kept_from(tree: Branches, question_id: str) -> int:
    """The oldest turns the previous prompt on the question's branch left out (0 before any): where the next starts."""
    for message_id in tree.back_from(tree.parents[question_id]):  # the newest answer says: no walk of a long chat
        answer = tree.answer(message_id)
        dropped = (answer.stats or {}).get("dropped_turns") if answer is not None else None
        if isinstance(dropped, int):
            return dropped
    return 0
