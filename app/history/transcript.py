"""A stored chat read back: the turns the model sees next, the chat's settings, and its export files."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chainlit.types import ThreadDict

from app.conversation import Conversation, Ending, Turn
from app.preferences import Preferences, apply_changes
from app.session import ChatSession
from app.stats import AnswerStats

# Step metadata key under which an answer (or the error that replaced it) records its turn.
TURN_KEY = "turn"
# A message the model never saw (e.g. too long for the window): no turn of the conversation.
NOT_SENT = "not_sent"
# Thread metadata key of the chat's own settings (Chainlit writes `chat_settings` only on disconnect).
PREFERENCES_KEY = "chat_settings"
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


def answer_of(step: Mapping[str, Any]) -> Answer | None:
    """The turn record a step carries, if it is an answer of ours."""
    record = (step.get("metadata") or {}).get(TURN_KEY)
    if not isinstance(record, dict) or not isinstance(record.get("reply_to"), str):
        return None
    return Answer(
        reply_to=record["reply_to"],
        ending=str(record.get("ending", Ending.FAILED)),
        model=str(record.get("model") or ""),
        stats=record.get("stats") if isinstance(record.get("stats"), dict) else None,
    )


def conversation_of(steps: Sequence[Mapping[str, Any]]) -> Conversation:
    """The conversation as the model saw it: each user message with the answer recorded for it.

    A message with no recorded answer (the app stopped mid-answer) counts as a failed turn with an
    empty answer, as a failed request does while the app runs.
    """
    turns: dict[str, Turn] = {}
    for step in steps:
        if step.get("type") == "user_message":
            turns[str(step["id"])] = Turn(str(step.get("output") or ""), "", Ending.FAILED, str(step["id"]))
        elif (answer := answer_of(step)) is not None and answer.reply_to in turns:
            if answer.ending == NOT_SENT:
                del turns[answer.reply_to]
                continue
            turn = turns[answer.reply_to]
            turn.ending = Ending(answer.ending) if answer.ending in ENDINGS else Ending.FAILED
            if not step.get("isError"):
                turn.assistant = str(step.get("output") or "")
    return Conversation(list(turns.values()))


def preferences_of(metadata: Mapping[str, Any] | None, defaults: Preferences, max_tokens_limit: int) -> Preferences:
    """The chat's saved settings over today's defaults; a saved value no longer valid keeps the default."""
    saved = (metadata or {}).get(PREFERENCES_KEY)
    return apply_changes(defaults, saved, max_tokens_limit)[0] if isinstance(saved, dict) else defaults


def resumed_chat(thread: ThreadDict, defaults: Preferences, max_tokens_limit: int, lang: str) -> ChatSession:
    """A past chat's session: the conversation the model saw, that chat's settings, its answers' stats."""
    return ChatSession(
        preferences=preferences_of(thread.get("metadata"), defaults, max_tokens_limit),
        lang=lang,
        conversation=conversation_of(thread["steps"]),
        resumed_answer=last_answer_id(thread["steps"]),
        resumed_stats=stats_of(thread["steps"]),
    )


def last_answer_id(steps: Sequence[Mapping[str, Any]]) -> str | None:
    """The id of the newest answer that is not an error (where regenerate goes)."""
    for step in reversed(steps):
        if answer_of(step) is not None and not step.get("isError"):
            return str(step["id"])
    return None


def stats_of(steps: Sequence[Mapping[str, Any]]) -> dict[str, AnswerStats]:
    """Each shown answer's stats, by answer id (a record from an older layout is skipped)."""
    found: dict[str, AnswerStats] = {}
    for step in steps:
        answer = answer_of(step)
        if answer is not None and answer.stats is not None and not step.get("isError"):
            with contextlib.suppress(TypeError):
                found[str(step["id"])] = AnswerStats(**answer.stats)
    return found


def exported_messages(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages of a chat as said: user messages and our answers, with times, endings and stats."""
    messages: list[dict[str, Any]] = []
    for step in steps:
        answer = answer_of(step)
        if step.get("type") == "user_message":
            messages.append({"role": "user", "content": step.get("output") or "", "created_at": step.get("createdAt")})
        elif answer is not None and answer.ending != NOT_SENT:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "" if step.get("isError") else step.get("output") or "",
                "created_at": step.get("createdAt"),
                "ending": answer.ending,
                "model": answer.model,
                "stats": answer.stats,
            }
            if step.get("isError"):
                message["error"] = step.get("output") or ""
            messages.append(message)
    return messages


def export_json(thread: Mapping[str, Any], preferences: Preferences) -> str:
    """The chat as JSON: its name, time, settings, and every message with its role, time and stats."""
    document = {
        "id": thread["id"],
        "name": thread.get("name"),
        "created_at": thread.get("createdAt"),
        "settings": preferences.model_dump(),
        "messages": exported_messages(thread.get("steps") or []),
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def export_markdown(thread: Mapping[str, Any], preferences: Preferences, names: Mapping[str, str]) -> str:
    """The chat as Markdown: a heading per message, the text as said, settings first."""
    lines = [f"# {thread.get('name') or 'Chat'}", "", f"*{thread.get('createdAt') or ''}*", ""]
    lines += [f"- {key}: {json.dumps(value, ensure_ascii=False)}" for key, value in preferences.model_dump().items()]
    for message in exported_messages(thread.get("steps") or []):
        who = names[message["role"]]
        details = [message.get("created_at") or ""]
        if message["role"] == "assistant":
            details += [message["model"], message["ending"]]
        lines += ["", f"## {who} ({', '.join(d for d in details if d)})", "", message["content"]]
        if message.get("error"):
            lines += ["", f"> {message['error']}"]
    return "\n".join(lines) + "\n"
