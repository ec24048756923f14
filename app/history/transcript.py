"""A stored chat read back: its branches, the turns the model sees next, the chat's settings, its export files."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.chat.attachments import Attachment, attachments_of
from app.chat.branches import FOLLOWS, NOT_SENT, ROOT, TURN_KEY, Branches, Step, answer_of, branches_of, is_question
from app.chat.conversation import Ending
from app.chat.passages import sources_of
from app.chat.preferences import Preferences, apply_changes
from app.chat.stats import AnswerStats
from app.i18n import text

# Thread metadata key of which version is shown where (the app's alone: Chainlit never writes it).
SHOWN_KEY = "shown_versions"
# Thread metadata key of the chat's own settings (Chainlit writes `chat_settings` only on disconnect).
PREFERENCES_KEY = "chat_settings"
# Chainlit's thread metadata keys of a chat its owner shares (its share route writes them): the first says so.
SHARING_KEYS = ("is_shared", "shared_at")


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


def preferences_of(metadata: Mapping[str, Any] | None, defaults: Preferences, max_tokens_limit: int) -> Preferences:
    """The chat's saved settings over today's defaults; a saved value no longer valid keeps the default."""
    saved = (metadata or {}).get(PREFERENCES_KEY)
    return apply_changes(defaults, saved, max_tokens_limit)[0] if isinstance(saved, dict) else defaults


def stats_of(step: Step) -> AnswerStats | None:
    """An answer's stats as recorded (None for an error or a record from an older layout)."""
    answer = answer_of(step)
    if answer is None or answer.stats is None or step.get("isError"):
        return None
    with contextlib.suppress(TypeError):
        return AnswerStats(**answer.stats)
    return None


def line_of(step: Step, lang: str) -> str:
    """What the line under an answer says: its figures, or that the app stopped while it was written ("": neither)."""
    if (stats := stats_of(step)) is not None:
        return stats.describe(lang)
    answer = answer_of(step)
    return text(lang, "cut_off") if answer is not None and answer.ending == Ending.CUT_OFF else ""


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
            message["files"] = [{"name": file.name, "type": file.type} | text_of(file) for file in files]
        if sources := sources_of(step):
            message["sources"] = [dataclasses.asdict(source) for source in sources]
        if answer is not None:
            message |= {"ending": answer.ending, "model": answer.model, "stats": answer.stats}
            if step.get("isError"):
                message["error"] = step.get("output") or ""
        messages.append(message)
    return messages


def text_of(file: Attachment) -> dict[str, str]:
    """A file's text as an export carries it (a document searched, or deleted since, has none here)."""
    return {"text": file.text} if file.text else {}


def cited(numbered: tuple[int, dict[str, Any]]) -> str:
    """A source as an export names it: its number in the answer, its document and page."""
    number, source = numbered
    page = f", page {source['page']}" if source.get("page") is not None else ""
    return f"[{number}] {source['document']}{page}"


def export_json(thread: Mapping[str, Any], preferences: Preferences, project: str | None = None) -> str:
    """The stored chat as JSON: its name, project, time, settings, and every version of every message with its
    parent."""
    tree = branches_of(thread.get("steps") or [], shown_of(thread.get("metadata")))
    document = {
        "id": thread["id"],
        "name": thread.get("name"),
        "project": project,
        "created_at": thread.get("createdAt"),
        "settings": preferences.model_dump(),
        "messages": exported_messages(tree),
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def export_markdown(
    thread: Mapping[str, Any], preferences: Preferences, names: Mapping[str, str], project: str | None = None
) -> str:
    """The stored chat as Markdown: the branch shown, a heading per message, the text as said, settings first."""
    tree = branches_of(thread.get("steps") or [], shown_of(thread.get("metadata")))
    lines = [f"# {thread.get('name') or 'Chat'}", "", f"*{thread.get('createdAt') or ''}*", ""]
    lines += [f"- project: {json.dumps(project, ensure_ascii=False)}"] if project else []
    lines += [f"- {key}: {json.dumps(value, ensure_ascii=False)}" for key, value in preferences.model_dump().items()]
    for message in exported_messages(tree):
        if not message["shown"]:
            continue
        who = names[message["role"]]
        details = [message.get("created_at") or ""]
        if message["role"] == "assistant":
            details += [message["model"], message["ending"].replace("_", " ")]  # cut_off reads "cut off"
        lines += ["", f"## {who} ({', '.join(d for d in details if d)})", "", message["content"]]
        if message.get("files"):
            lines += ["", "Attached: " + ", ".join(file["name"] for file in message["files"])]
        if message.get("sources"):
            lines += ["", "Sources: " + "; ".join(map(cited, enumerate(message["sources"], start=1)))]
        if message.get("error"):
            lines += ["", f"> {message['error']}"]
    return "\n".join(lines) + "\n"
