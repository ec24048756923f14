"""Imported chats in the history on real SQLite and PostgreSQL: this app's export imported and exported again is the
same document; another app's branches are versions of a chat the app reads as it reads its own; each chat is whole or
not there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from app.chat.branches import Answer, branches_of, conversation_of
from app.chat.preferences import Preferences
from app.config import Settings
from app.errors import HistoryUnavailable
from app.history.imports import Imports
from app.history.projects import Projects
from app.history.schema import message_terms, steps, threads
from app.history.store import ChatStore
from app.history.transcript import export_json, on_screen, preferences_of, shown_of
from app.imports.read import Export, read_export
from tests.support.exports import branched_chatgpt
from tests.support.stores import step, user_with_chat

SETTINGS = Settings(_env_file=None)
DEFAULTS = Preferences.defaults(SETTINGS)


async def chat_with_everything(store: ChatStore) -> None:
    """The user "me" and chat "t1" in the project Garden: a file read whole, an answer regenerated (the older one
    shown), an edited question whose answer failed, stats, sources, its own settings."""
    await user_with_chat(store, "me", name="Pumps and tomatoes")
    projects = Projects(store.writer)
    _, garden = await projects.create("me", "Garden", "Answer as a gardener.")
    await projects.file("me", "t1", garden)
    stats = {"first_token_s": 0.5, "tokens": 12, "seconds": 1.0, "tokens_per_second": 12.0}
    source = {"passage": 3, "document": "pump.pdf", "page": 2, "heading": "Priming"}
    file = {"name": "pump.txt", "type": "text/plain", "text": "Prime the pump first."}
    for index, (step_id, kind, text, meta) in enumerate(
        [
            ("q1", "user_message", "How do I start the pump?", {"follows": "", "files": [file]}),
            (
                "a1",
                "assistant_message",
                "Prime it, then switch it on.",
                Answer("q1", "complete", "ernie", stats).as_metadata() | {"sources": [source]},
            ),
            ("a1b", "assistant_message", "Switch it on.", Answer("q1", "stopped", "ernie").as_metadata()),
            ("q2", "user_message", "And tomatoes?", {"follows": "a1"}),
            ("a2", "assistant_message", "Water them daily.", Answer("q2", "complete", "ernie", stats).as_metadata()),
            ("q2b", "user_message", "And peppers?", {"follows": "a1"}),
            ("a2b", "assistant_message", "The model server went away.", Answer("q2b", "failed", "ernie").as_metadata()),
        ]
    ):
        stored = step(step_id, "t1", kind, text, index + 1, **meta)
        stored["isError"] = step_id == "a2b"
        await store.create_step(stored)
    await store.save_shown("t1", {"q1": "a1"})
    settings = {
        "temperature": 0.3,
        "top_p": 0.8,
        "max_tokens": 60,
        "repetition_penalty": 1.1,
        "system_prompt": "Be brief.",
    }
    await store.update_thread("t1", metadata={"chat_settings": settings})


async def exported(store: ChatStore, thread_id: str) -> dict[str, Any]:
    """The chat as Export JSON gives it: its settings and project as a tab resuming it has them."""
    thread = await store.get_whole_thread(thread_id)
    assert thread is not None
    project_id = await store.writer.read(
        "", lambda c: c.execute(sa.select(threads.c.project_id).where(threads.c.id == thread_id)).scalar()
    )
    names = {p.id: p.name for p in await Projects(store.writer).listed("me")}
    preferences = preferences_of(thread["metadata"], DEFAULTS, SETTINGS.max_tokens_limit)
    document: dict[str, Any] = json.loads(export_json(thread, preferences, names.get(project_id or "")))
    return document


def without_ids(document: dict[str, Any]) -> dict[str, Any]:
    """The document with its chat's and messages' ids numbered in their order (an import gives new ones)."""
    numbers = {message["id"]: f"#{n}" for n, message in enumerate(document["messages"])}
    messages = [m | {"id": numbers[m["id"]], "parent": numbers.get(m["parent"])} for m in document["messages"]]
    return document | {"id": "#chat", "messages": messages}


def read(tmp_path: Path, document: Any, name: str) -> Export:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return read_export(path, name, 10_000_000)


async def test_this_apps_export_imported_and_exported_again_is_the_same_document(store, tmp_path):
    await chat_with_everything(store)
    first = await exported(store, "t1")
    assert len(first["messages"]) == 7 and first["project"] == "Garden"
    export = read(tmp_path, first, "chat.json")
    (chat,) = export.chats
    imported = await Imports(store.writer).add("me", chat, export.source, "Assistant")
    assert imported is not None and imported != "t1"
    again = await exported(store, imported)
    assert without_ids(again) == without_ids(first)
    assert not {m["id"] for m in again["messages"]} & {m["id"] for m in first["messages"]}
    # It reads as the original does: the branch on screen, the conversation the model sees next.
    original, copy = await store.get_thread("t1"), await store.get_thread(imported)
    assert [s["output"] for s in copy["steps"]] == [s["output"] for s in original["steps"]]
    said = [
        [(t.user, t.assistant, t.ending) for t in conversation_of(chat["steps"]).turns] for chat in (original, copy)
    ]
    assert said[0] == said[1]
    user = await store.get_user("me")
    found = await store.search(user.id, "peppers", 10)
    assert {item.chat.id for item in found} == {"t1", imported}  # its messages are in the search index


async def test_chatgpts_branches_become_versions_of_a_chat_shown_where_chatgpt_left_it(store, tmp_path):
    await user_with_chat(store, "me", name="mine")
    export = read(tmp_path, [branched_chatgpt().document()], "conversations.json")
    thread_id = await Imports(store.writer).add("me", export.chats[0], export.source, "Assistant")
    thread = await store.get_whole_thread(thread_id)
    assert thread["name"] == "Tomatoes on a balcony" and thread["userIdentifier"] == "me"
    assert thread["createdAt"] == "2026-03-01T09:00:00.000000Z"
    tree = branches_of(thread["steps"], shown_of(thread["metadata"]))
    by_text = {step["output"]: step_id for step_id, step in tree.steps.items()}
    first = by_text["Water them every morning (first version)."]
    second = "Water them when the top soil is dry (second version)."
    assert tree.versions(first) == [first, by_text[second]]
    shown = [tree.steps[i]["output"] for i in tree.path()]
    assert shown == [
        "How often should I water tomatoes on a balcony?",
        "Water them every morning (first version).",
        "And in a heat wave?",
        "Twice a day, early and late.",
    ]
    on_page = on_screen(thread["steps"], shown_of(thread["metadata"]))
    assert [step["output"] for step in on_page] == shown
    assert all(step["metadata"]["turn"]["model"] == "gpt-5" for step in on_page if step["type"] == "assistant_message")
    user = await store.get_user("me")
    (found,) = await store.search(user.id, "soil", 10)  # a word only the version not shown says
    assert found.chat.id == thread_id and found.step_id == by_text[second]


REFUSE_SQLITE = (
    "CREATE TRIGGER refuse BEFORE INSERT ON steps WHEN NEW.output = 'refused' "
    "BEGIN SELECT RAISE(ABORT, 'refused'); END",
)
REFUSE_POSTGRES = (
    "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN IF NEW.output = 'refused' THEN RAISE EXCEPTION 'refused'; "
    "END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
    "CREATE TRIGGER refuse BEFORE INSERT ON steps FOR EACH ROW EXECUTE FUNCTION refuse()",
)


async def test_a_chat_the_database_refuses_midway_leaves_nothing_behind_and_the_next_is_imported(store, tmp_path):
    await user_with_chat(store, "me", name="mine")
    refusing = branched_chatgpt("Refused")
    refusing.say("q3", "a2", "user", "refused")  # its last message: the database refuses it, after the rest
    export = read(tmp_path, [refusing.document(), branched_chatgpt("Kept").document()], "conversations.json")
    sqlite = store.engine.dialect.name == "sqlite"
    with store.engine.begin() as connection:
        for statement in REFUSE_SQLITE if sqlite else REFUSE_POSTGRES:
            connection.exec_driver_sql(statement)
    imports = Imports(store.writer)
    with pytest.raises(HistoryUnavailable):
        await imports.add("me", export.chats[0], export.source, "Assistant")
    kept = await imports.add("me", export.chats[1], export.source, "Assistant")
    with store.engine.connect() as connection:
        names = connection.execute(sa.select(threads.c.name).order_by(threads.c.name)).scalars().all()
        chats = connection.execute(sa.select(steps.c.thread_id).distinct()).scalars().all()
        indexed = connection.execute(sa.select(message_terms.c.thread_id).distinct()).scalars().all()
    assert names == ["Kept", "mine"] and set(chats) == set(indexed) == {kept}
