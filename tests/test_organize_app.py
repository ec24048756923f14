"""Organizing chats through the running app (socket.io and REST as the pages use them, real vLLM, SQLite and
PostgreSQL): a temporary chat leaves nothing anywhere until it is kept; a chat started in a project gets its
instructions; another user reaches none of it by any route."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from app.history.database import create_engine, database_url
from app.history.schema import metadata
from tests.support.chat_client import ChatClient
from tests.support.history import answer_of, app_with_users, run_users
from tests.support.servers import ChatApp, VllmServer, running
from tests.support.versions import sent_prompt

pytestmark = [pytest.mark.app, pytest.mark.vllm]


def everything_stored(app: ChatApp) -> str:
    """Every row of every table of the app's database, as text."""
    engine = create_engine(database_url(app.extra_env.get("DATABASE_URL", ""), app.data_dir or Path()))
    try:
        with engine.connect() as connection:
            return "\n".join(
                repr(row) for table in metadata.sorted_tables for row in connection.execute(sa.select(table))
            )
    finally:
        engine.dispose()


def files_under(folder: Path) -> str:
    """The names and contents of every file under a folder."""
    return "\n".join(f"{path}\n{path.read_bytes()!r}" for path in sorted(folder.rglob("*")) if path.is_file())


async def logged_in(app: ChatApp, headers: dict[str, str] | None = None, **client: Any) -> ChatClient:
    """A greeted tab with short answers, sending what the chat's own page sends."""
    tab = ChatClient(app.url, headers={"Origin": app.url, **(headers or {})}, **client)
    await tab.connect()
    await tab.greeting()
    await tab.change_settings({"max_tokens": 4})
    return tab


async def test_a_temporary_chat_answers_and_leaves_nothing_anywhere_until_kept(history_app: ChatApp):
    tab = await logged_in(history_app, modes={"history": "temporary"})
    produced = await tab.ask("a temporary question about zanzibar")
    assert answer_of(produced)["output"]
    notices = [m["output"] for m in tab.messages.values() if "Temporary chat" in m.get("output", "")]
    assert notices, "the page says the chat is temporary"
    thread_id = tab.thread_id_started
    await tab.close()
    await asyncio.sleep(2)  # the disconnect's writes, the writer's batch window
    stored, on_disk = everything_stored(history_app), files_under(history_app.data_dir or Path())
    for trace in ("zanzibar", thread_id):
        assert trace not in stored and trace not in on_disk, trace

    kept = await logged_in(history_app, modes={"history": "temporary"})
    await kept.ask("a temporary question about tanganyika")
    notice = next(m for m in kept.messages.values() if "Temporary chat" in m.get("output", ""))
    keep = next(a for a in kept.actions(notice["id"]) if a["name"] == "keep_chat")
    assert (await kept.click(keep))[0] == 200
    await kept.wait_for(lambda: "tanganyika" in everything_stored(history_app), 30)
    produced = await kept.ask("and now kept: about pemba")
    await kept.wait_for(lambda: "pemba" in everything_stored(history_app), 30)
    assert answer_of(produced)["output"]
    await kept.close()


async def test_a_chat_started_in_a_project_is_answered_with_its_instructions(chat_app: ChatApp, vllm: VllmServer):
    owner = await logged_in(chat_app)
    status, made = await owner.rest(
        "POST", "/chats/api/projects/create", {"name": "Garden", "instructions": "INSTRUCTIONS-OF-GARDEN: be brief."}
    )
    assert status == 200, made
    await owner.close()
    tab = await logged_in(
        chat_app, headers={"Origin": chat_app.url, "Referer": f"{chat_app.url}/?project={made['id']}"}
    )
    assert any("Garden" in m.get("output", "") for m in tab.messages.values())  # the greeting names the project
    before = len(vllm.logged_requests())
    await tab.ask("What should I plant?")
    prompt = sent_prompt(vllm, before)
    assert "INSTRUCTIONS-OF-GARDEN: be brief." in prompt.split("What should I plant?")[0]
    status, state = await tab.rest("GET", "/chats/api/state")
    filed = next(c for c in state["chats"] if c["id"] == tab.thread_id_started)
    assert filed["project_id"] == made["id"]
    await tab.close()


@pytest.fixture(scope="module")
def two_users(vllm: VllmServer) -> Iterator[ChatApp]:
    """An app with password login for ann and ben, and root, an admin."""
    app = app_with_users(vllm, "ann", "ben")
    assert run_users(app, "add", "root", "--admin", password="root-password").returncode == 0
    with running(app):
        yield app


async def test_another_user_reaches_none_of_it_by_any_route(two_users: ChatApp):
    ann = await logged_in(two_users, credentials=("ann", "ann-password"))
    status, made = await ann.rest("POST", "/chats/api/projects/create", {"name": "Private", "instructions": "ann's"})
    assert status == 200
    await ann.ask("my locker code is quokka-7")
    chat = ann.thread_id_started
    assert (await ann.rest("POST", "/chats/api/chats/pin", {"id": chat, "on": True}))[0] == 200
    await ann.close()

    ben = await logged_in(two_users, credentials=("ben", "ben-password"))
    status, state = await ben.rest("GET", "/chats/api/state")
    assert status == 200 and state["projects"] == [] and chat not in str(state)
    assert (await ben.rest("GET", "/chats/api/search?q=quokka"))[1] == {"results": []}
    threads = {"pagination": {"first": 20}, "filter": {"search": "quokka"}}  # Chainlit's own search dialog
    assert (await ben.rest("POST", "/project/threads", threads))[1]["data"] == []
    for path, body in (
        ("chats/pin", {"id": chat, "on": False}),
        ("chats/archive", {"id": chat, "on": True}),
        ("chats/project", {"id": chat, "project_id": None}),
        ("projects/change", {"id": made["id"], "name": "Mine", "instructions": ""}),
        ("projects/delete", {"id": made["id"]}),
    ):
        assert (await ben.rest("POST", f"/chats/api/{path}", body))[0] == 404, path
    foreign = ChatClient(two_users.url, headers={"Origin": "https://evil.example"}, cookies=dict(ben.cookies))
    assert (await foreign.rest("POST", "/chats/api/chats/pin", {"id": chat, "on": True}))[0] == 403
    assert (await ChatClient(two_users.url).rest("GET", "/chats/api/state"))[0] == 401
    await ben.close()

    again = await logged_in(two_users, credentials=("ann", "ann-password"))  # ann's own is as she left it
    status, state = await again.rest("GET", "/chats/api/state")
    assert [c["id"] for c in state["chats"] if c["pinned"]] == [chat] and state["projects"][0]["name"] == "Private"
    await again.close()


async def test_a_preset_saved_in_a_projects_chat_starts_its_chats_in_that_project(two_users: ChatApp):
    ben = await logged_in(two_users, credentials=("ben", "ben-password"))
    status, made = await ben.rest("POST", "/chats/api/projects/create", {"name": "Orchard", "instructions": ""})
    assert status == 200
    await ben.close()
    started = {"Referer": f"{two_users.url}/?project={made['id']}"}
    in_orchard = await logged_in(two_users, headers=started, credentials=("ben", "ben-password"))
    await in_orchard.change_settings({"preset_save": "Orchard work"})
    await in_orchard.close()
    with_preset = await logged_in(two_users, credentials=("ben", "ben-password"), chat_profile="Orchard work")
    assert any("Orchard" in m.get("output", "") for m in with_preset.messages.values())  # the greeting names it
    await with_preset.close()


async def test_an_admin_makes_every_chat_of_someone_temporary(two_users: ChatApp):
    root = await logged_in(two_users, credentials=("root", "root-password"))
    assert (await root.rest("POST", "/admin/api/users/temporary", {"name": "ann", "on": True}))[0] == 200
    ann = await logged_in(two_users, credentials=("ann", "ann-password"))  # no History picked: temporary all the same
    modes = [data for event, data in ann.events if event == "set_modes"]
    assert [option["id"] for option in modes[-1][0]["options"]] == ["temporary"]  # nothing else to pick
    await ann.ask("a question about wombats")
    await ann.close()
    await asyncio.sleep(2)
    assert "wombats" not in everything_stored(two_users)
    assert (await root.rest("POST", "/admin/api/users/temporary", {"name": "ann", "on": False}))[0] == 200
    await root.close()
