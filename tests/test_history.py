"""Chats that outlive the tab, against the running app, the real vLLM, real SQLite and real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.i18n import text
from tests.support.chat_client import ChatClient, widget_values
from tests.support.history import answer_of, export, run_users, started_chat, stored_rows, unsaved_marks
from tests.support.servers import ROOT, ChatApp, VllmServer, hermetic_environment, running

pytestmark = pytest.mark.app

LIST_ALL = {"pagination": {"first": 50}, "filter": {}}


async def listed(tab: ChatClient, **filters: Any) -> list[dict[str, Any]]:
    """The sidebar's list of chats, as the page asks for it."""
    status, page = await tab.rest("POST", "/project/threads", {"pagination": {"first": 50}, "filter": filters})
    assert status == 200, page
    return list(page["data"])


async def test_a_resumed_chat_continues_with_what_the_model_saw_before_the_restart(history_app, vllm):
    tab = await started_chat(history_app)
    await tab.change_settings({"system_prompt": "RESUME-CHECK", "temperature": 0.3})
    first = answer_of(await tab.ask("first question"))
    second = answer_of(await tab.ask("second question"))
    regenerate = next(a for a in tab.actions(second["id"]) if a["name"] == "regenerate")
    mark, _ = await tab.click_and_wait(regenerate)
    await asyncio.sleep(0.1)
    regenerated = [m for m in tab.events_since(mark, "new_message") if m.get("type") == "assistant_message"][-1]
    edited_id = str(uuid.uuid4())
    answer_of(await tab.ask("a question to edit", message_id=edited_id))
    mark = len(tab.events)
    await tab.edit(edited_id, "the edited question")
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 60)
    await asyncio.sleep(0.1)
    edited_answer = [m for m in tab.events_since(mark, "new_message") if m.get("type") == "assistant_message"][-1]
    await tab.change_settings({"max_tokens": 2000})
    mark = await tab.start_answer("a long answer to stop")
    await tab.stop()
    await tab.wait_for(lambda: tab.events_since(mark, "task_end"), 60)
    await asyncio.sleep(0.3)
    stopped = [m for m in tab.events_since(mark, "new_message") if m.get("type") == "assistant_message"]
    stopped_text = next(m["output"] for m in stopped if m["id"] == tab.events_since(mark, "stream_start")[0]["id"])
    await tab.change_settings({"max_tokens": 8})
    thread_id = tab.thread_id_started
    await tab.close()
    await asyncio.sleep(0.5)  # the last writes are the app's background tasks

    history_app.stop()
    history_app.start()

    again = ChatClient(history_app.url)
    await again.log_in()
    assert thread_id in [t["id"] for t in await listed(again)]
    again.thread_id = thread_id
    await again.connect()
    await again.wait_for(lambda: again.events_since(0, "resume_thread"), 30)
    shown = again.events_since(0, "resume_thread")[0]["steps"]
    assert [s["output"] for s in shown if s["type"] == "user_message"] == [
        "first question",
        "second question",
        "the edited question",
        "a long answer to stop",
    ]
    # Chainlit sends the chat after on_chat_resume (which sends the settings): what is asked before it lands
    # would vanish from the client's page.
    await again.wait_for(lambda: again.settings_widgets and any(e == "resume_thread" for e, _ in again.events), 30)
    restored = widget_values(again.settings_widgets)
    assert restored["system_prompt"] == "RESUME-CHECK" and restored["temperature"] == 0.3
    assert restored["max_tokens"] == 8

    # Every message is one the page can place (a parent it has or none), and Chainlit's run steps
    # around handlers are not stored.
    assert all(s["type"] in ("user_message", "assistant_message") for s in shown)
    assert all(s["parentId"] in (None, *(p["id"] for p in shown)) for s in shown)
    answered = [s for s in shown if s["type"] == "assistant_message" and s["metadata"].get("turn")]
    # The newest answer gets its buttons back and every answer its stats line (neither is stored).
    newest = answered[-1]
    await again.wait_for(lambda: len(again.actions(newest["id"])) == 1, 10)
    lined = {e["forId"]: e["props"] for e in again.events_since(0, "element") if e["name"] == "AnswerStats"}
    said = {s["id"] for s in shown if s["type"] == "user_message" or s["metadata"].get("turn")}
    assert set(lined) == said  # a line by every question and answer (not by a notice): stats, exports, a new chat
    drawn = [lined[s["id"]] for s in answered]
    lines = {s["id"]: props["text"] for s, props in zip(answered, drawn, strict=True)}
    assert all(" tokens · " in line for line in lines.values())
    assert "stopped" in lines[answered[-1]["id"]]
    assert [a["name"] for a in again.actions(newest["id"])] == ["regenerate"]
    exports = [[b["name"] for b in props["exports"]] for props in drawn]
    assert exports == [["export_markdown", "export_json"]] * len(answered)

    before = len(vllm.logged_requests())
    answer_of(await again.ask("after the restart"))
    request = vllm.logged_requests()[before:][-1]
    expected = [
        {"role": "system", "content": "RESUME-CHECK"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": first["output"]},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": regenerated["output"]},
        {"role": "user", "content": "the edited question"},
        {"role": "assistant", "content": edited_answer["output"]},
        {"role": "user", "content": "a long answer to stop"},
        {"role": "assistant", "content": stopped_text},
        {"role": "user", "content": "after the restart"},
    ]
    assert request["prompt"] == vllm.render(expected)
    assert request["temperature"] == "0.3" and request["max_tokens"] == "8"
    await again.close()


async def test_rename_search_rate_export_and_delete_a_chat(history_app):
    tab = await started_chat(history_app)
    answer = answer_of(await tab.ask("tell me about the zebra"))
    answer_of(await tab.ask("and the okapi"))
    thread_id = tab.thread_id_started
    await asyncio.sleep(0.3)

    assert [t["name"] for t in await listed(tab) if t["id"] == thread_id] == ["tell me about the zebra"]
    assert thread_id in [t["id"] for t in await listed(tab, search="OKAPI")]  # a later message, any case
    assert thread_id not in [t["id"] for t in await listed(tab, search="giraffe")]
    status, _ = await tab.rest("PUT", "/project/thread", {"threadId": thread_id, "name": "Animals"})
    assert status == 200
    assert [t["name"] for t in await listed(tab) if t["id"] == thread_id] == ["Animals"]

    feedback = {"feedback": {"forId": answer["id"], "value": 1, "comment": "good"}, "sessionId": tab.session_id}
    status, rated = await tab.rest("PUT", "/feedback", feedback)
    assert status == 200 and rated["success"]
    status, stored = await tab.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200
    assert next(s for s in stored["steps"] if s["id"] == answer["id"])["feedback"]["value"] == 1
    assert thread_id in [t["id"] for t in await listed(tab, feedback=1)]

    exported = {name: await export(tab, name) for name in ("export_json", "export_markdown")}
    document = json.loads(exported["export_json"])
    said = [(m["role"], m["content"]) for m in document["messages"]]
    conversation = [
        (step["type"].split("_")[0], step["output"])
        for step in stored["steps"]
        if step["type"] == "user_message" or (step["type"] == "assistant_message" and step["metadata"].get("turn"))
    ]
    assert said == conversation and [role for role, _ in said] == ["user", "assistant", "user", "assistant"]
    assert document["settings"]["max_tokens"] == 8 and document["name"] == "Animals"
    assert all(m["created_at"] for m in document["messages"]) and document["messages"][1]["stats"]["tokens"]
    markdown = exported["export_markdown"]
    positions = [markdown.index(text) for _, text in said if text]
    assert positions == sorted(positions) and markdown.startswith("# Animals")

    status, _ = await tab.rest("DELETE", "/project/thread", {"threadId": thread_id})
    assert status == 200
    assert thread_id not in [t["id"] for t in await listed(tab)]
    assert (await tab.rest("GET", f"/project/thread/{thread_id}"))[0] == 404
    assert await stored_rows(history_app, thread_id) == {"threads": 0, "steps": 0, "elements": 0, "feedbacks": 0}
    await tab.close()


async def test_a_chat_begun_by_a_starter_is_named_by_its_prompt_and_keeps_its_early_settings(history_app):
    tab = await started_chat(history_app)  # settings changed before the chat's first message
    await tab.change_settings({"system_prompt": "SET-BEFORE-THE-FIRST-MESSAGE"})
    greeting = next(m for m in tab.messages.values() if m.get("type") == "assistant_message")
    starter = next(a for a in tab.actions(greeting["id"]) if a["name"] == "starter")
    await tab.click_and_wait(starter)
    await asyncio.sleep(0.3)
    thread_id = tab.thread_id_started

    # Still connected: Chainlit's own save of the settings (on disconnect) has not happened.
    assert [t["name"] for t in await listed(tab) if t["id"] == thread_id] == [starter["payload"]["prompt"]]
    status, stored = await tab.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200
    saved = stored["metadata"]["chat_settings"]
    assert saved["system_prompt"] == "SET-BEFORE-THE-FIRST-MESSAGE" and saved["max_tokens"] == 8
    assert [s["output"] for s in stored["steps"] if s["type"] == "user_message"] == [starter["payload"]["prompt"]]
    await tab.close()

    typed = await started_chat(history_app)  # the same for a chat begun with a typed message
    await typed.change_settings({"temperature": 0.3})
    answer_of(await typed.ask("typed first"))
    await asyncio.sleep(0.3)
    status, stored = await typed.rest("GET", f"/project/thread/{typed.thread_id_started}")
    assert status == 200 and stored["name"] == "typed first"
    assert stored["metadata"]["chat_settings"]["temperature"] == 0.3
    await typed.close()


async def test_another_app_of_the_same_directory_stopping_leaves_this_ones_files(history_app, vllm):
    tab = await started_chat(history_app)
    answer_of(await tab.ask("asked before the other app stops"))
    with running(ChatApp(vllm)):  # a replica or a second `make chat` run from the same directory
        pass
    assert "asked before the other app stops" in await export(tab, "export_markdown")
    await tab.close()


def files_of_dead_processes() -> list[Path]:
    """Session-file directories of app processes that no longer run, in the project's Chainlit files directory."""
    return [d for d in (ROOT / ".files").glob("process-*") if not Path(f"/proc/{d.name.split('-')[1]}").exists()]


async def test_a_killed_app_keeps_every_finished_turn_and_what_the_tab_was_shown_of_the_answer_it_cut(vllm):
    app = ChatApp(vllm, extra_env={"ANSWER_CHECKPOINT_SECONDS": "1"})
    app.start()
    try:
        tab = await started_chat(app)
        first = answer_of(await tab.ask("a finished turn"))
        await tab.change_settings({"max_tokens": 2000})
        mark = await tab.start_answer("an answer cut by SIGKILL")
        cut_id = tab.events_since(mark, "stream_start")[0]["id"]
        reply = tab.replies[cut_id]
        # Shown for a few checkpoint intervals: one at least is written (and committed) before the kill.
        await tab.wait_for(lambda: time.perf_counter() - (reply.first_token_at or 0) > 3, 30)
        assert reply.final is None  # still streaming
        thread_id = tab.thread_id_started
        app.running.end(signal.SIGKILL)
        await tab.wait_for(lambda: not tab.sio.connected, 30)
        app.start()
        assert not files_of_dead_processes()  # the killed process's session files went at the restart
        database = sqlite3.connect(app.data_dir / "chat.db")  # type: ignore[operator]
        assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        database.close()
        again = ChatClient(app.url)
        await again.log_in()
        status, stored = await again.rest("GET", f"/project/thread/{thread_id}")
        assert status == 200
        said = [(s["type"], s["output"], (s["metadata"].get("turn") or {}).get("ending")) for s in stored["steps"]]
        answers = [entry for entry in said if entry[0] == "assistant_message" and entry[2]]
        assert [entry[1] for entry in said if entry[0] == "user_message"] == [
            "a finished turn",
            "an answer cut by SIGKILL",
        ]
        assert [ending for _, _, ending in answers] == ["complete", "cut_off"]
        cut = next(step for step in stored["steps"] if step["id"] == cut_id)
        assert cut["output"] and reply.streamed.startswith(cut["output"])

        again.thread_id = thread_id  # resumed: the answer is there, its line says it was cut off
        await again.connect()
        await again.wait_for(lambda: again.element("AnswerStats", cut_id), 30)
        assert (again.element("AnswerStats", cut_id) or {})["text"] == text("en", "cut_off")
        await again.change_settings({"max_tokens": 8, "system_prompt": ""})
        before = len(vllm.logged_requests())
        answer_of(await again.ask("after the restart"))
        expected = [
            {"role": "user", "content": "a finished turn"},
            {"role": "assistant", "content": first["output"]},
            {"role": "user", "content": "an answer cut by SIGKILL"},
            {"role": "assistant", "content": cut["output"]},
            {"role": "user", "content": "after the restart"},
        ]
        assert vllm.logged_requests()[before:][-1]["prompt"] == vllm.render(expected)
        await again.close()
    finally:
        app.stop()


@pytest.fixture(scope="module")
def two_user_app(vllm: VllmServer):
    """An app with password login and two users, alice and bob."""
    app = ChatApp(vllm)
    for name in ("alice", "bob"):
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0 and f"Added {name}" in added.stdout, added.stderr
    app.start()
    yield app
    app.stop()


async def test_nobody_else_can_list_open_resume_rename_delete_rate_or_export_my_chat(two_user_app):
    alice = await started_chat(two_user_app, credentials=("alice", "alice-password"))
    answer = answer_of(await alice.ask("alice's secret plan"))
    thread_id = alice.thread_id_started
    await asyncio.sleep(0.3)
    bob = ChatClient(two_user_app.url, credentials=("bob", "bob-password"))
    await bob.log_in()

    assert thread_id in [t["id"] for t in await listed(alice)]
    assert await listed(bob) == [] and await listed(bob, search="secret") == []
    assert (await bob.rest("GET", f"/project/thread/{thread_id}"))[0] in (401, 404)
    assert (await bob.rest("PUT", "/project/thread", {"threadId": thread_id, "name": "mine"}))[0] in (401, 404)
    assert (await bob.rest("DELETE", "/project/thread", {"threadId": thread_id}))[0] in (401, 404)
    rating = {"feedback": {"forId": answer["id"], "value": 0}, "sessionId": bob.session_id}
    assert (await bob.rest("PUT", "/feedback", rating))[0] == 404
    element = f"/project/thread/{thread_id}/element/{answer['id']}"
    assert (await alice.rest("GET", element))[0] == 200  # the owner passes the check (no such element: null)
    assert (await bob.rest("GET", element))[0] in (401, 404)
    bob.thread_id = thread_id  # resume (and so export) alice's chat through the socket
    with pytest.raises(Exception, match=r"(?i)connect|refused|authori"):
        await bob.connect()
    nobody = ChatClient(two_user_app.url)
    assert (await nobody.rest("POST", "/project/threads", LIST_ALL))[0] == 401
    with pytest.raises(PermissionError):
        await ChatClient(two_user_app.url, credentials=("alice", "wrong password")).log_in()

    status, stored = await alice.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200 and stored["name"] == "alice's secret plan"
    assert all(s.get("feedback") is None for s in stored["steps"])
    await alice.close()


async def test_a_removed_user_and_their_chats_are_gone(two_user_app):
    carol = ChatClient(two_user_app.url, credentials=("carol", "carol-password"))
    added = run_users(two_user_app, "add", "carol", password="carol-password")
    assert added.returncode == 0
    await carol.connect()
    await carol.greeting()
    await carol.change_settings({"max_tokens": 8})
    answer_of(await carol.ask("carol was here"))
    thread_id = carol.thread_id_started
    await asyncio.sleep(0.3)
    await carol.close()
    removed = run_users(two_user_app, "remove", "carol")
    assert removed.returncode == 0 and "Removed carol" in removed.stdout
    assert "carol" not in run_users(two_user_app, "list").stdout.split()
    assert await stored_rows(two_user_app, thread_id) == {"threads": 0, "steps": 0, "elements": 0, "feedbacks": 0}
    with pytest.raises(PermissionError):
        await ChatClient(two_user_app.url, credentials=("carol", "carol-password")).log_in()
    assert (await carol.rest("POST", "/project/threads", LIST_ALL))[0] in (401, 404)  # her old cookie
    carol.sio = carol._new_socket()
    with pytest.raises(Exception, match=r"(?i)connect|refused|authenticat"):
        await carol.connect()  # her old cookie opens no chat either


def test_listening_beyond_loopback_needs_a_user_first(tmp_path):
    env = hermetic_environment(CHAT_HOST="0.0.0.0", DATA_DIR=str(tmp_path))
    started = subprocess.run(
        [sys.executable, "-m", "app"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 2
    assert "make user-add" in started.stderr and "CHAT_HOST=0.0.0.0" in started.stderr


async def test_a_read_only_or_hanging_database_marks_messages_until_it_takes_them(pg_app, postgres):
    database = pg_app.extra_env["DATABASE_URL"].rsplit("/", 1)[1]
    tab = await started_chat(pg_app)
    answer_of(await tab.ask("saved before the failure"))

    def read_only(on: bool) -> None:
        postgres.psql(
            f"ALTER DATABASE {database} SET default_transaction_read_only = {'on' if on else 'off'}",
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'",
        )

    read_only(True)
    try:
        answer = answer_of(await tab.ask("said while the database is read-only"))
        assert answer["output"]
        await tab.wait_for(lambda: unsaved_marks(tab).get(answer["id"]) == "journaled", 15)
    finally:
        read_only(False)
    await tab.wait_for(lambda: not unsaved_marks(tab), 30)
    logged = [line for line in pg_app.log_path.read_text(errors="replace").splitlines() if "database is away" in line]
    assert logged and all(" ERROR " in line for line in logged)

    held_up = await started_chat(pg_app)
    postgres.pause()  # it neither answers nor refuses: after DATABASE_TIMEOUT new writes wait in the journal
    try:
        answer = answer_of(await held_up.ask("said while the database hangs"))
        assert answer["output"]
        await held_up.wait_for(lambda: unsaved_marks(held_up).get(answer["id"]) == "journaled", 30)
    finally:
        postgres.resume()
    answer_of(await held_up.ask("said once it answers again"))
    await held_up.wait_for(lambda: not unsaved_marks(held_up), 30)
    thread_id = held_up.thread_id_started
    for _ in range(50):  # the turn said while it hung was kept, and is written now
        if (await stored_rows(pg_app, thread_id))["steps"] == 4:
            break
        await asyncio.sleep(0.3)
    assert (await stored_rows(pg_app, thread_id))["steps"] == 4  # both questions and both answers
    for open_tab in (tab, held_up):
        await open_tab.close()
