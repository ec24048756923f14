"""The history store and its pieces against real SQLite and PostgreSQL, without the app."""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from chainlit.context import init_http_context
from chainlit.types import Feedback, Pagination, ThreadFilter
from chainlit.user import User

from app.chat.answering import Answering
from app.chat.branches import Answer, branches_of, conversation_of
from app.chat.conversation import Ending, Turn
from app.chat.preferences import Preferences
from app.errors import HistoryUnavailable, LoginRequired
from app.history.accounts import Login, auth_secret, login_mode, remove_user, set_password, verify_password
from app.history.database import create_engine, database_url, upgrade
from app.history.logins import Logins, LoginToken
from app.history.schema import in_metadata, metadata
from app.history.store import Actor, ChatStore
from app.history.transcript import export_json, export_markdown, preferences_of
from app.history.writes import Journal, Saving
from app.history.writes.journal import waiting_in
from app.history.writes.sql import first_time
from tests.support.stores import TIMEOUT_S, Hooks, step, user_with_chat


async def test_the_migrated_schema_is_the_one_the_code_uses_and_migrating_twice_changes_nothing(store):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    upgrade(store.engine)
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_name": in_metadata})
        differences = compare_metadata(context, metadata)
    assert differences == []


async def test_a_chat_round_trips_with_its_steps_elements_and_feedback(store):
    await user_with_chat(store, "local", name="zebras")
    await store.create_step(step("u1", "t1", "user_message", "tell me about zebras", 1))
    run = step("r1", "t1", "run", "", 1) | {"parentId": "u1"}  # Chainlit's step around on_message
    await store.create_step(run)
    answer = step("a1", "t1", "assistant_message", "Stripes.", 2, turn={"reply_to": "u1", "ending": "complete"})
    answer["parentId"] = "r1"
    await store.create_step(answer)
    await store.update_step(run | {"output": "done"})
    await store.update_step({**answer, "output": "Black and white stripes."})
    feedback_id = await store.upsert_feedback(Feedback(forId="a1", value=1, comment="nice"))
    assert await store.upsert_feedback(Feedback(forId="a1", value=0)) == feedback_id  # one rating per answer

    thread = await store.get_thread("t1")
    assert thread is not None and thread["userIdentifier"] == "local" and thread["name"] == "zebras"
    # The run step is not kept, and the answer it wrapped is one the page can still place.
    assert [(s["id"], s["output"], s["parentId"]) for s in thread["steps"]] == [
        ("u1", "tell me about zebras", None),
        ("a1", "Black and white stripes.", None),
    ]
    assert thread["steps"][1]["metadata"] == {"turn": {"reply_to": "u1", "ending": "complete"}}
    assert thread["steps"][1]["feedback"]["value"] == 0 and "streaming" not in thread["steps"][1]
    assert await store.feedback_owner(step_id="a1") == "local"
    assert await store.feedback_owner(feedback_id=feedback_id) == "local"

    await store.delete_step("a1")
    thread = await store.get_thread("t1")
    assert thread is not None and [s["id"] for s in thread["steps"]] == ["u1"]


async def versioned_chat(store: ChatStore) -> None:
    """The user "me" and chat "t1": two questions, the second answered twice (a2, then a2b)."""
    await user_with_chat(store, "me", name="versions")
    turn = functools.partial(Answer, ending="complete")
    for index, (step_id, kind, text, meta) in enumerate(
        [
            ("q1", "user_message", "one", {"follows": ""}),
            ("a1", "assistant_message", "first", turn("q1").as_metadata()),
            ("q2", "user_message", "two", {"follows": "a1"}),
            ("a2", "assistant_message", "second", turn("q2").as_metadata()),
            ("a2b", "assistant_message", "second again", turn("q2").as_metadata()),
        ]
    ):
        await store.create_step(step(step_id, "t1", kind, text, index, **meta))


async def test_a_chat_is_read_on_the_branch_shown_and_whole_with_every_version(store):
    await versioned_chat(store)

    async def shown() -> list[str]:
        thread = await store.get_thread("t1")
        return [s["output"] for s in thread["steps"]] if thread else []

    assert await shown() == ["one", "first", "two", "second again"]  # the newest version
    await store.save_shown("t1", {"q2": "a2"})
    assert await shown() == ["one", "first", "two", "second"]
    # Chainlit saves a session's metadata as it read it at resume: that copy never undoes a later choice.
    await store.update_thread("t1", metadata={"shown_versions": {}, "chat_settings": {"top_p": 0.5}})
    thread = await store.get_thread("t1")
    assert thread is not None and thread["metadata"]["chat_settings"] == {"top_p": 0.5}
    assert await shown() == ["one", "first", "two", "second"]
    whole = await store.get_whole_thread("t1")
    assert whole is not None and [s["id"] for s in whole["steps"]] == ["q1", "a1", "q2", "a2", "a2b"]


async def test_a_branch_continues_in_a_new_chat_of_the_same_user_and_the_chat_stays_as_it_was(store, hooks):
    await versioned_chat(store)
    await store.save_shown("t1", {"q2": "a2"})
    branch = ["q1", "a1", "q2", "a2"]
    settings = {"chat_settings": {"top_p": 0.5}}
    new_chat = await store.fork("t1", branch, lambda name: f"{name} (continued)", settings)
    assert new_chat is not None
    forked = await store.get_thread(new_chat)
    assert forked is not None and forked["userIdentifier"] == "me" and forked["name"] == "versions (continued)"
    assert forked["metadata"] == settings
    assert [s["output"] for s in forked["steps"]] == ["one", "first", "two", "second"]
    assert not {s["id"] for s in forked["steps"]} & set(branch)
    assert branches_of(forked["steps"], {}).path() == [s["id"] for s in forked["steps"]]  # linked to the copies
    assert [(t.user, t.assistant) for t in conversation_of(forked["steps"]).turns] == [
        ("one", "first"),
        ("two", "second"),
    ]
    original = await store.get_whole_thread("t1")
    assert original is not None and [s["id"] for s in original["steps"]] == [*branch, "a2b"]
    # Someone else's tab cannot copy it.
    hooks.actor = Actor("intruder", "their-own-chat")
    assert await store.fork("t1", branch, str, {}) is None


async def test_a_chat_keeps_its_first_owner(store):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    owner = await store.create_user(User(identifier="owner"))
    intruder = await store.create_user(User(identifier="intruder"))
    assert owner is not None and intruder is not None
    await store.update_thread("t1", name="mine", user_id=owner.id)
    await store.update_thread("t1", user_id=intruder.id, metadata={"chat_settings": {"top_p": 0.5}})
    await store.update_thread("t1", metadata={"other": 1})
    await store.update_thread("t1", name="renamed", user_id=intruder.id)
    assert await store.get_thread_author("t1") == "owner"
    thread = await store.get_thread("t1")
    assert thread is not None and thread["metadata"] == {"chat_settings": {"top_p": 0.5}, "other": 1}
    assert thread["name"] == "mine"  # naming it as another user's first message changes nothing
    await store.update_thread("t2", user_id=intruder.id)  # Chainlit's first message names a new chat
    await store.update_thread("t2", name="later")
    assert await store.get_thread_author("t2") == "intruder"


async def test_a_chat_starts_with_the_apps_metadata_when_first_named_and_keeps_it_after(store, hooks):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    user = await store.create_user(User(identifier="local"))
    assert user is not None
    hooks.new_chat_metadata = {"chat_settings": {"top_p": 0.5}}
    await store.create_step(step("u1", "t1", "user_message", "hi", 1))  # the question may come first
    await store.update_thread("t1", name="hi", user_id=user.id)
    await store.update_thread("t2", name="fresh", user_id=user.id)
    await store.update_thread("t1", metadata={"chat_settings": {"top_p": 0.7}})
    await store.update_thread("t1", name="renamed")  # a named chat keeps its own metadata
    first, second = await store.get_thread("t1"), await store.get_thread("t2")
    assert first is not None and second is not None
    assert first["metadata"] == {"chat_settings": {"top_p": 0.7}} and first["name"] == "renamed"
    assert second["metadata"] == {"chat_settings": {"top_p": 0.5}} and second["userIdentifier"] == "local"


async def test_listing_pages_searches_and_filters_only_the_users_chats(store):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    me = await store.create_user(User(identifier="me"))
    other = await store.create_user(User(identifier="other"))
    assert me is not None and other is not None
    for index in range(5):
        await store.update_thread(f"t{index}", name=f"chat {index}", user_id=me.id)
        await store.create_step(step(f"s{index}", f"t{index}", "user_message", f"word{index} 100%_sure", index))
    await store.update_thread("theirs", name="chat of the other", user_id=other.id)
    await store.upsert_feedback(Feedback(forId="s3", value=0))

    first = await store.list_threads(Pagination(first=2), ThreadFilter(userId=me.id))
    second = await store.list_threads(Pagination(first=2, cursor=first.pageInfo.endCursor), ThreadFilter(userId=me.id))
    rest = await store.list_threads(Pagination(first=2, cursor=second.pageInfo.endCursor), ThreadFilter(userId=me.id))
    seen = [t["id"] for page in (first, second, rest) for t in page.data]
    assert sorted(seen) == [f"t{index}" for index in range(5)] and len(set(seen)) == 5
    assert first.pageInfo.hasNextPage and second.pageInfo.hasNextPage and not rest.pageInfo.hasNextPage

    async def found(**filters: object) -> list[str]:
        page = await store.list_threads(Pagination(first=20), ThreadFilter(userId=me.id, **filters))
        return sorted(t["id"] for t in page.data)

    assert await found(search="WORD2") == ["t2"]
    assert await found(search="chat 4") == ["t4"]
    assert await found(search="100%_") == [f"t{index}" for index in range(5)]
    assert await found(search="0%x") == []  # % and _ are literal characters, not wildcards
    assert await found(search="other") == []
    assert await found(feedback=0) == ["t3"] and await found(feedback=1) == []


async def test_deleting_a_chat_removes_all_of_it_and_nothing_else(store):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    user = await store.create_user(User(identifier="me"))
    assert user is not None
    for thread_id in ("gone", "kept"):
        await store.update_thread(thread_id, name=thread_id, user_id=user.id)
        await store.create_step(step(f"{thread_id}-u", thread_id, "user_message", "hi", 1))
        await store.create_step(step(f"{thread_id}-a", thread_id, "assistant_message", "hello", 2))
        await store.upsert_feedback(Feedback(forId=f"{thread_id}-a", value=1))
    await store.delete_thread("gone")
    assert await store.get_thread("gone") is None
    kept = await store.get_thread("kept")
    assert kept is not None and len(kept["steps"]) == 2 and kept["steps"][1]["feedback"]["value"] == 1


async def test_a_failed_write_is_logged_and_raised_only_where_someone_waits_for_its_result(tmp_path, caplog):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    hooks = Hooks()
    broken = hooks.store(create_engine(f"sqlite:///{tmp_path}"))  # a folder; and no journal to keep writes in
    await broken.create_step(step("u1", "t1", "user_message", "hi", 1))  # what was said: never raises
    await broken.update_thread("t1", name="renamed")
    assert hooks.failures == []
    with pytest.raises(HistoryUnavailable):  # a rating's route waits for its id
        await broken.upsert_feedback(Feedback(forId="u1", value=1))
    assert hooks.failures == ["store feedback"]
    logged = [r.getMessage().split(":")[1] for r in caplog.records if "History: could not" in r.getMessage()]
    assert logged == [" could not save a message", " could not save the chat", " could not store feedback"]
    assert {r.levelname for r in caplog.records if "History: could not" in r.getMessage()} == {"ERROR"}
    await broken.close()


async def test_writes_behind_a_database_that_holds_up_wait_in_the_journal_and_are_made_in_order(tmp_path, caplog):
    init_http_context()
    engine = create_engine(database_url("", tmp_path))
    upgrade(engine)
    marks: list[dict[str, dict[str, Any]]] = []
    journal = Journal(tmp_path / "journal", 1_000_000, marks.append)
    journal.open()
    held_up = Hooks().store(engine, timeout_s=0.5, journal=journal)
    other_writer = sqlite3.connect(tmp_path / "chat.db", isolation_level=None)
    other_writer.execute("BEGIN IMMEDIATE")  # holds the write lock, as a hung transaction would
    try:
        await held_up.update_thread("t1", name="said while the database hangs")  # waits 0.5 s, then goes on
        await held_up.create_step(step("u1", "t1", "user_message", "said behind it", 1))
        await held_up.create_step(step("a1", "t1", "assistant_message", "half", 2))
        await held_up.update_step(step("a1", "t1", "assistant_message", "half, then whole", 2))
        # The hung write too (skipped by its id if its commit lands after all), then those behind it, in order; the
        # answer's whole text replaced its half, which waited last in the chat.
        assert [record.kept.messages for record in journal.records] == [(), ("u1",), ("a1",)]
        await journal.flush()
        assert len(waiting_in(journal.path)) == 3  # on disk
        assert marks[0] == {"t1": {"u1": Saving.JOURNALED}}
    finally:
        other_writer.execute("ROLLBACK")
        other_writer.close()
    for _ in range(100):  # the hung commit lands, then the journal's writes, within seconds
        if not journal.records:
            break
        await asyncio.sleep(0.1)
    thread = await held_up.get_thread("t1")
    assert thread is not None and thread["name"] == "said while the database hangs"
    assert [s["output"] for s in thread["steps"]] == ["said behind it", "half, then whole"]
    last = {message: saving for change in marks for message, saving in change["t1"].items()}
    assert last == {"u1": None, "a1": None} and journal.path.read_bytes() == b""
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("History:")]
    assert logged[0] == "History: the database did not commit within 0.5 s: new writes wait in the journal"
    assert logged[-1].endswith("kept write(s) made now that the database answers")
    await held_up.close()


async def test_passwords_are_argon2_hashes_and_removing_a_user_removes_their_chats(store):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    assert set_password(store.engine, "alice", "correct horse")
    assert not set_password(store.engine, "alice", "battery staple")  # a new password, same user
    assert verify_password(store.engine, "alice", "battery staple")
    assert not verify_password(store.engine, "alice", "correct horse")
    assert not verify_password(store.engine, "nobody", "battery staple")
    store.open_registration = False
    alice = await store.get_user("alice")
    assert alice is not None and "password" not in str(alice.metadata)
    assert await store.create_user(User(identifier="mallory")) is None  # a token names nobody new
    await store.update_thread("t1", name="alice's", user_id=alice.id)
    await store.create_step(step("u1", "t1", "user_message", "hi", 1))
    assert remove_user(store.engine, "alice") and not remove_user(store.engine, "alice")
    assert await store.get_thread("t1") is None and await store.get_user("alice") is None


async def test_ended_logins_are_told_apart_in_one_read_whatever_their_number(store):
    for name, password in (("alice", "her first password"), ("alice", "a new one"), ("bob", "bob's password")):
        set_password(store.engine, name, password)  # alice's new password ends her logins from before it
    logins = Logins(store.writer, attempts=5, window_s=60)
    later, earlier = time.time() + 5, time.time() - 60
    await logins.end("bob-logged-out", later + 3600)
    tokens = [
        LoginToken("alice-now", "alice", later),
        LoginToken("alice-before-her-password", "alice", earlier),
        LoginToken("bob-logged-out", "bob", later),
        LoginToken("bob-now", "bob", later),
        LoginToken("carol-removed", "carol", later),
    ]
    statements: list[str] = []
    sqlalchemy.event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    assert await logins.ended(tokens) == {"alice-before-her-password", "bob-logged-out", "carol-removed"}
    assert len(statements) == 2  # one read of each table for all of them
    assert await logins.ended([]) == set() and len(statements) == 2


def test_who_logs_in_depends_on_the_address_and_the_users():
    assert login_mode(history=False, chat_host="0.0.0.0", password_users=0) is Login.NONE
    assert login_mode(history=True, chat_host="127.0.0.1", password_users=0) is Login.LOCAL
    assert login_mode(history=True, chat_host="::1", password_users=0) is Login.LOCAL
    assert login_mode(history=True, chat_host="localhost", password_users=0) is Login.LOCAL
    assert login_mode(history=True, chat_host="127.0.0.1", password_users=2) is Login.PASSWORD
    assert login_mode(history=True, chat_host="0.0.0.0", password_users=1) is Login.PASSWORD
    for host in ("0.0.0.0", "::", "192.168.1.5", "chat.example.com"):
        with pytest.raises(LoginRequired, match="make user-add"):
            login_mode(history=True, chat_host=host, password_users=0)


def test_the_login_secret_is_generated_once_private_and_shared(tmp_path, monkeypatch):
    monkeypatch.delenv("CHAINLIT_AUTH_SECRET", raising=False)
    first = auth_secret(tmp_path)
    assert len(first) >= 32 and auth_secret(tmp_path) == first
    assert stat.S_IMODE((tmp_path / "auth-secret").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["auth-secret"]
    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", "from-the-environment")
    assert auth_secret(tmp_path) == "from-the-environment"


def test_database_urls_get_the_apps_driver():
    data = Path("/data")
    assert database_url("", data) == "sqlite+pysqlite:////data/chat.db"
    assert database_url("postgresql://u:p@db:5432/chat", data) == "postgresql+psycopg://u:p@db:5432/chat"
    assert database_url("postgres://u@db/chat", data) == "postgresql+psycopg://u@db/chat"
    assert database_url("postgresql+asyncpg://u@db/chat", data) == "postgresql+psycopg://u@db/chat"
    assert database_url("sqlite:////tmp/x.db", data) == "sqlite+pysqlite:////tmp/x.db"
    with pytest.raises(ValueError, match="SQLite or PostgreSQL"):
        database_url("mysql://u@db/chat", data)


def answer_step(step_id: str, reply_to: str, text: str, ending: str, is_error: bool = False) -> dict[str, object]:
    """An answer of ours as stored."""
    return {
        "id": step_id,
        "type": "assistant_message",
        "output": text,
        "isError": is_error,
        "metadata": Answer(reply_to, ending).as_metadata(),
    }


def test_the_conversation_is_rebuilt_as_the_model_saw_it():
    steps: list[dict[str, Any]] = [
        {"id": "greeting", "type": "assistant_message", "output": "Hello!", "metadata": {}},
        {"id": "u1", "type": "user_message", "output": "one"},
        answer_step("a1", "u1", "first", "complete"),
        {"id": "u2", "type": "user_message", "output": "two"},
        answer_step("a2", "u2", "partial", "stopped"),
        {"id": "stop", "type": "assistant_message", "output": "Task manually stopped.", "metadata": {}},
        {"id": "u3", "type": "user_message", "output": "three"},
        answer_step("e3", "u3", "The model server is not reachable.", "failed", is_error=True),
        {"id": "u4", "type": "user_message", "output": "far too long"},
        answer_step("e4", "u4", "Your message is too long", "not_sent", is_error=True),
        {"id": "u5", "type": "user_message", "output": "half"},
        answer_step("a5", "u5", "half an answer", "failed"),
        answer_step("e5", "u5", "The connection was lost", "failed", is_error=True),
        {"id": "u6", "type": "user_message", "output": "cut by a crash"},
    ]
    assert conversation_of(steps).turns == [
        Turn("one", "first", Ending.COMPLETE, "u1"),
        Turn("two", "partial", Ending.STOPPED, "u2"),
        Turn("three", "", Ending.FAILED, "u3"),
        Turn("half", "half an answer", Ending.FAILED, "u5"),
        Turn("cut by a crash", "", Ending.FAILED, "u6"),
    ]


def test_saved_settings_apply_where_still_valid():
    defaults = Preferences(
        temperature=0.7, top_p=0.9, max_tokens=512, repetition_penalty=1.05, system_prompt="Be nice."
    )
    saved = {"chat_settings": {"temperature": 0.2, "max_tokens": 99999, "system_prompt": "Be brief.", "junk": 1}}
    restored = preferences_of(saved, defaults, max_tokens_limit=4096)
    assert (restored.temperature, restored.max_tokens, restored.system_prompt) == (0.2, 512, "Be brief.")
    assert preferences_of(None, defaults, 4096) == defaults
    assert preferences_of({"chat_settings": "garbage"}, defaults, 4096) == defaults


def test_exports_hold_exactly_what_was_said():
    steps = [
        {"id": "u1", "type": "user_message", "output": "Hi *there*", "createdAt": "2026-01-01T00:00:01Z"},
        {**answer_step("a1", "u1", "Hello!\n\n```py\nprint(1)\n```", "complete"), "createdAt": "2026-01-01T00:00:02Z"},
        {"id": "n", "type": "assistant_message", "output": "Task manually stopped.", "metadata": {}},
    ]
    thread = {"id": "t", "name": "Greetings", "createdAt": "2026-01-01T00:00:00Z", "steps": steps}
    prefs = Preferences(temperature=0.5, top_p=1.0, max_tokens=64, repetition_penalty=1.0, system_prompt="")
    parsed = json.loads(export_json(thread, prefs))
    assert [(m["role"], m["content"], m["created_at"]) for m in parsed["messages"]] == [
        ("user", "Hi *there*", "2026-01-01T00:00:01Z"),
        ("assistant", "Hello!\n\n```py\nprint(1)\n```", "2026-01-01T00:00:02Z"),
    ]
    assert parsed["settings"]["max_tokens"] == 64 and parsed["name"] == "Greetings"
    markdown = export_markdown(thread, prefs, {"user": "You", "assistant": "ERNIE"})
    assert markdown.startswith("# Greetings\n") and "Task manually stopped" not in markdown
    assert "## You (2026-01-01T00:00:01Z)\n\nHi *there*\n" in markdown
    assert "\n\nHello!\n\n```py\nprint(1)\n```\n" in markdown


async def test_writes_queued_together_commit_together_and_one_bad_write_loses_no_other(store):
    await user_with_chat(store, "me", name="batch")
    writes = [
        store.create_step(step(f"s{index}", "t1", "user_message", f"message {index}", index)) for index in range(20)
    ]
    bad = store.upsert_feedback(Feedback(forId="no-such-message", value=1))  # its thread cannot be found
    outcomes = await asyncio.gather(*writes, bad, return_exceptions=True)
    assert isinstance(outcomes[-1], HistoryUnavailable) and outcomes[:-1] == [None] * 20
    thread = await store.get_thread("t1")
    assert thread is not None and [s["output"] for s in thread["steps"]] == [f"message {index}" for index in range(20)]


async def test_writes_wait_for_the_answers_being_written_at_most_a_while_and_a_failure_is_still_reported(
    store, hooks, tmp_path
):
    await user_with_chat(store, "me", name="busy")
    answering = Answering()
    hooks.before_batch = functools.partial(answering.over, TIMEOUT_S)

    async def saved() -> list[str]:
        thread = await store.get_thread("t1")  # reads never wait
        return [s["output"] for s in thread["steps"]] if thread else []

    with answering.answer():
        writes = asyncio.gather(*(store.create_step(step(f"u{i}", "t1", "user_message", f"q{i}", i)) for i in range(3)))
        await asyncio.sleep(0.3)
        assert not writes.done() and await saved() == []
    await asyncio.wait_for(writes, TIMEOUT_S)  # the answer is written: the writes go in
    assert await saved() == ["q0", "q1", "q2"]

    broken_hooks = Hooks(before_batch=hooks.before_batch)
    broken = broken_hooks.store(create_engine(f"sqlite:///{tmp_path}"))  # a folder
    reported = broken_hooks.failures
    with answering.answer():
        failing = asyncio.ensure_future(broken.delete_thread("t2"))
        await asyncio.sleep(0.3)
        assert reported == [] and not failing.done()
    with pytest.raises(HistoryUnavailable):
        await failing
    assert reported == ["delete a chat"]
    await broken.close()

    hooks.before_batch = functools.partial(answering.over, 0.2)
    with answering.answer():  # a long answer holds the writes only that long
        await asyncio.wait_for(store.create_step(step("u3", "t1", "user_message", "q3", 3)), TIMEOUT_S)
        assert await saved() == ["q0", "q1", "q2", "q3"]


async def test_text_with_a_nul_character_is_kept_without_it(store):
    await user_with_chat(store, "me", name="a\x00b")
    await store.create_step(step("u1", "t1", "user_message", "before\x00after", 1))
    thread = await store.get_thread("t1")
    assert thread is not None and thread["name"] == "ab" and thread["steps"][0]["output"] == "beforeafter"


async def test_a_store_built_without_an_actor_writes_into_no_existing_chat(store, caplog):
    await user_with_chat(store, "owner", name="theirs")
    await store.create_step(step("u1", "t1", "user_message", "kept", 1))
    unowned = ChatStore(store.engine, open_registration=True, timeout_s=TIMEOUT_S)  # a script, a new route
    await unowned.create_step(step("u2", "t1", "user_message", "slipped in", 2))
    await unowned.update_thread("t1", name="taken over")
    thread = await store.get_thread("t1")
    assert thread is not None and thread["name"] == "theirs"
    assert [s["output"] for s in thread["steps"]] == ["kept"]
    assert "refused to save a message for nobody known" in caplog.text


async def test_a_message_id_of_another_chat_moves_none_of_its_words_in_search(store, caplog):
    init_http_context()  # Chainlit holds writes back in a chat session until its first message
    alice = await store.create_user(User(identifier="alice"))
    bob = await store.create_user(User(identifier="bob"))
    assert alice is not None and bob is not None
    await store.update_thread("t1", name="hers", user_id=alice.id)
    await store.create_step(step("u1", "t1", "user_message", "the original words", 1))
    await store.update_thread("t2", name="his", user_id=bob.id)
    await store.create_step(step("u1", "t2", "user_message", "overwritten words", 2))  # her message's id
    assert [found.step_id for found in await store.search(alice.id, "original", 10)] == ["u1"]
    assert await store.search(bob.id, "overwritten", 10) == []
    assert "refused to save a message" in caplog.text


def test_a_write_noted_as_made_is_made_once(store):
    with store.engine.begin() as connection:
        assert first_time(connection, "w1", 1.0)
        assert not first_time(connection, "w1", 1.0)  # replayed from a journal after its commit landed
