"""A stored chat read back: its branches, the turns the model sees next, the chat's settings, its export files."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chainlit.types import ThreadDict

from app.attachments import as_seen, attachments_of
from app.branches import ROOT, Branches, Step, is_question
from app.conversation import Conversation, Ending, Turn
from app.preferences import Preferences, apply_changes
from app.session import ChatSession
from app.stats import AnswerStats

# Step metadata key under which an answer (or the error that replaced it) records its turn.
TURN_KEY = "turn"
# Step metadata key of a question: the message it follows (ROOT: none), or None for a message outside the
# conversation (refused). Absent: the question follows the message stored before it (a question typed after
# the newest message, which saves a write per turn, or one stored before versions existed).
FOLLOWS = "follows"
# Thread metadata key of which version is shown where (the app's alone: Chainlit never writes it).
SHOWN_KEY = "shown_versions"
# A message the model never saw (e.g. too long for the window): no turn of the conversation.
NOT_SENT = "not_sent"
# Thread metadata key of the chat's own settings (Chainlit writes `chat_settings` only on disconnect).
PREFERENCES_KEY = "chat_settings"
# Chainlit's thread metadata keys of a chat its owner shares (its share route writes them): the first says so.
SHARING_KEYS = ("is_shared", "shared_at")
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


def relinked(metadata: Mapping[str, Any], copies: Mapping[str, str]) -> dict[str, Any]:
    """A copied message's metadata, pointing at the copies of the messages it follows or answers."""
    linked = dict(metadata)
    if isinstance(follows := linked.get(FOLLOWS), str):
        linked[FOLLOWS] = copies.get(follows, ROOT)
    if isinstance(record := linked.get(TURN_KEY), dict) and isinstance(record.get("reply_to"), str):
        linked[TURN_KEY] = {**record, "reply_to": copies.get(record["reply_to"], record["reply_to"])}
    return linked


def shown_of(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """A chat's stored choices of versions (anything else in their place is ignored)."""
    saved = (metadata or {}).get(SHOWN_KEY)
    if not isinstance(saved, dict):
        return {}
    return {parent: child for parent, child in saved.items() if isinstance(parent, str) and isinstance(child, str)}


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


def on_screen(steps: Sequence[Step], shown: Mapping[str, str]) -> list[Step]:
    """The steps of the branch shown, oldest first, each notice with the message it came after."""
    tree = branches_of(steps, shown)
    branch = set(tree.path())
    after, kept = ROOT, []
    for step in steps:
        if step["id"] in tree.steps:
            after = str(step["id"])
        if after in branch or after == ROOT:
            kept.append(step)
    return kept


def conversation_of(steps: Sequence[Step]) -> Conversation:
    """The conversation as the model saw it along one branch: each user message with the answer recorded for it.

    A message with no recorded answer (the app stopped mid-answer) counts as a failed turn with an
    empty answer, as a failed request does while the app runs.
    """
    turns: dict[str, Turn] = {}
    for step in steps:
        if is_question(step):
            turns[str(step["id"])] = Turn(as_seen(step), "", Ending.FAILED, str(step["id"]))
        elif (answer := answer_of(step)) is not None and answer.reply_to in turns:
            if answer.ending == NOT_SENT:
                del turns[answer.reply_to]
                continue
            turn = turns[answer.reply_to]
            turn.ending = Ending(answer.ending) if answer.ending in ENDINGS else Ending.FAILED
            if not step.get("isError"):
                turn.assistant = str(step.get("output") or "")
    return Conversation(list(turns.values()))


def conversation_before(tree: Branches, question_id: str) -> Conversation:
    """What the model sees before a question: the branch leading to it."""
    return conversation_of([tree.steps[i] for i in tree.up_to(tree.parents[question_id])])


def preferences_of(metadata: Mapping[str, Any] | None, defaults: Preferences, max_tokens_limit: int) -> Preferences:
    """The chat's saved settings over today's defaults; a saved value no longer valid keeps the default."""
    saved = (metadata or {}).get(PREFERENCES_KEY)
    return apply_changes(defaults, saved, max_tokens_limit)[0] if isinstance(saved, dict) else defaults


def resumed_chat(
    thread: ThreadDict, steps: Sequence[Step], defaults: Preferences, max_tokens_limit: int, lang: str
) -> ChatSession:
    """A past chat's session from all its stored steps: its versions, the branch shown, that chat's settings."""
    return ChatSession(
        preferences=preferences_of(thread.get("metadata"), defaults, max_tokens_limit),
        lang=lang,
        branches=branches_of(steps, shown_of(thread.get("metadata"))),
        resumed=True,
    )


def stats_of(step: Step) -> AnswerStats | None:
    """An answer's stats as recorded (None for an error or a record from an older layout)."""
    answer = answer_of(step)
    if answer is None or answer.stats is None or step.get("isError"):
        return None
    with contextlib.suppress(TypeError):
        return AnswerStats(**answer.stats)
    return None


def exported_messages(tree: Branches) -> list[dict[str, Any]]:
    """Every version of every message, oldest first: role, text, time, what it follows, whether it is shown."""
    branch = set(tree.path())
    messages: list[dict[str, Any]] = []
    for message_id, step in tree.steps.items():
        answer = answer_of(step)
        if answer is not None and answer.ending == NOT_SENT:
            continue
        message: dict[str, Any] = {
            "id": message_id,
            "parent": tree.parents[message_id] or None,
            "shown": message_id in branch,
            "role": "user" if is_question(step) else "assistant",
            "content": "" if step.get("isError") else step.get("output") or "",
            "created_at": step.get("createdAt"),
        }
        if files := attachments_of(step):
            message["files"] = [file.as_record() for file in files]
        if answer is not None:
            message |= {"ending": answer.ending, "model": answer.model, "stats": answer.stats}
            if step.get("isError"):
                message["error"] = step.get("output") or ""
        messages.append(message)
    return messages


def export_json(thread: Mapping[str, Any], preferences: Preferences) -> str:
    """The stored chat as JSON: its name, time, settings, and every version of every message with its parent."""
    tree = branches_of(thread.get("steps") or [], shown_of(thread.get("metadata")))
    document = {
        "id": thread["id"],
        "name": thread.get("name"),
        "created_at": thread.get("createdAt"),
        "settings": preferences.model_dump(),
        "messages": exported_messages(tree),
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def export_markdown(thread: Mapping[str, Any], preferences: Preferences, names: Mapping[str, str]) -> str:
    """The stored chat as Markdown: the branch shown, a heading per message, the text as said, settings first."""
    tree = branches_of(thread.get("steps") or [], shown_of(thread.get("metadata")))
    lines = [f"# {thread.get('name') or 'Chat'}", "", f"*{thread.get('createdAt') or ''}*", ""]
    lines += [f"- {key}: {json.dumps(value, ensure_ascii=False)}" for key, value in preferences.model_dump().items()]
    for message in exported_messages(tree):
        if not message["shown"]:
            continue
        who = names[message["role"]]
        details = [message.get("created_at") or ""]
        if message["role"] == "assistant":
            details += [message["model"], message["ending"]]
        lines += ["", f"## {who} ({', '.join(d for d in details if d)})", "", message["content"]]
        if message.get("files"):
            lines += ["", "Attached: " + ", ".join(file["name"] for file in message["files"])]
        if message.get("error"):
            lines += ["", f"> {message['error']}"]
    return "\n".join(lines) + "\n"
