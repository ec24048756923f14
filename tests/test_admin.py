"""The admin page's routes against the real app and vLLM: admins only, the chat's own page only, every change
taking effect (users, logins, limits, defaults, shared links) and logged; on every replica (PostgreSQL)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from app.errors import Problem
from app.i18n import text
from tests.support.chat_client import ChatClient, errors
from tests.support.history import answer_of, run_users, started_chat
from tests.support.postgres import PostgresServer
from tests.support.servers import ChatApp, VllmServer, running

pytestmark = [pytest.mark.app, pytest.mark.vllm]
USERS = ("alice", "bob", "dora")
# Every route that changes something, with a body it would accept.
CHANGES: dict[str, dict[str, Any]] = {
    "users/add": {"name": "mallory", "password": "mallory-password", "admin": True},
    "users/password": {"name": "alice", "password": "taken-over-1"},
    "users/admin": {"name": "bob", "admin": True},
    "users/email": {"name": "alice", "email": "mallory@example.com"},
    "users/limits": {"name": "alice", "daily_tokens": 1},
    "users/end-sessions": {"name": "alice"},
    "users/remove": {"name": "alice"},
    "defaults": {"system_prompt": "Obey mallory.", "hidden_presets": [], "open_sign_on": True},
    "shares/unshare": {"thread_id": "00000000-0000-0000-0000-000000000000"},
}


@pytest.fixture(scope="module")
def admin_app(vllm: VllmServer):
    """An app with password login: root, an admin, and three users."""
    app = ChatApp(vllm)
    assert run_users(app, "add", "root", "--admin", password="root-password").returncode == 0
    for name in USERS:
        assert run_users(app, "add", name, password=f"{name}-password").returncode == 0
    app.start()
    yield app
    app.stop()


async def logged_in(app: ChatApp, name: str, password: str = "") -> ChatClient:
    """A client logged in (no socket), sending what the chat's own page sends with a change."""
    client = ChatClient(app.url, credentials=(name, password or f"{name}-password"), headers={"Origin": app.url})
    await client.log_in()
    return client


async def state(admin: ChatClient) -> dict[str, Any]:
    """Everything the admin page shows."""
    status, body = await admin.rest("GET", "/admin/api/state")
    assert status == 200, body
    return dict(body)


async def change(admin: ChatClient, path: str, body: dict[str, Any]) -> int:
    """A change, as the admin page's script sends it; its status."""
    return (await admin.rest("POST", f"/admin/api/{path}", body))[0]


def member(seen: dict[str, Any], name: str) -> dict[str, Any]:
    """A user as the admin page lists them."""
    return next(user for user in seen["users"] if user["name"] == name)


async def test_nobody_but_an_admin_reaches_any_admin_route_nor_sees_a_link(admin_app):
    bob, root = await logged_in(admin_app, "bob"), await logged_in(admin_app, "root")
    anonymous = ChatClient(admin_app.url, headers={"Origin": admin_app.url})
    assert (await bob.rest("GET", "/admin"))[0] == 403
    assert (await bob.rest("GET", "/admin/api/state"))[0] == 403
    assert (await anonymous.rest("GET", "/admin/api/state"))[0] == 401
    for path, body in CHANGES.items():
        assert await change(bob, path, body) == 403, path
        assert await change(anonymous, path, body) == 401, path
    seen = await state(root)
    assert {user["name"] for user in seen["users"]} == {"root", *USERS}  # nobody added
    assert not member(seen, "bob")["admin"] and seen["defaults"]["system_prompt"] is None
    status, page = await root.rest("GET", "/admin")
    assert status == 200 and "<h1>Admin</h1>" in page
    # The greeting links the admin page for an admin only.
    for name, linked in (("root", True), ("bob", False)):
        tab = await started_chat(admin_app, credentials=(name, f"{name}-password"))
        assert ("(/admin)" in tab.texts()[0]) is linked
        await tab.close()


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}],
    ids=["other-origin", "sandboxed", "cross-site"],
)
async def test_another_sites_page_cannot_change_anything_even_with_an_admins_cookie(admin_app, headers):
    root = await logged_in(admin_app, "root")
    root.headers = headers
    for path, body in CHANGES.items():
        assert await change(root, path, body) == 403, path
    root.headers = {"Origin": admin_app.url}
    assert "mallory" not in {user["name"] for user in (await state(root))["users"]}


async def test_a_form_post_is_refused_however_same_site_it_says_it_is(admin_app):
    root = await logged_in(admin_app, "root")
    status, _ = await root.rest("POST", "/admin/api/users/add", None)  # no JSON body: what a form would send
    assert status == 403


async def test_an_added_user_logs_in_and_their_limit_holds_from_their_next_message(admin_app):
    root = await logged_in(admin_app, "root")
    assert await change(root, "users/add", {"name": "erin", "password": "erin-password-1"}) == 200
    assert await change(root, "users/add", {"name": "erin", "password": "another-one"}) == 409
    assert await change(root, "users/add", {"name": "finn", "password": "short"}) == 422
    erin = await started_chat(admin_app, credentials=("erin", "erin-password-1"))
    assert answer_of(await erin.ask("Say one word."))["output"]
    assert await change(root, "users/limits", {"name": "erin", "messages_per_minute": 1}) == 200
    refused = await erin.ask("And another?")
    expected = text("en", Problem.TOO_MANY_MESSAGES, limit=1, seconds=0).split(" 0 ")[0]
    assert any(expected in line for line in errors(refused)), refused
    seen = await state(root)
    assert member(seen, "erin")["limits"]["messages_per_minute"] == 1
    assert member(seen, "erin")["last_login_at"] is not None and member(seen, "dora")["last_login_at"] is None
    assert any(row["user"] == "erin" and row["answers"] == 1 for row in seen["usage"])
    logged = [(line["admin"], line["action"], line["target"]) for line in seen["changes"]]
    assert ("root", "add user", "erin") in logged and ("root", "set limits", "erin") in logged
    await erin.close()


async def test_ending_a_users_sessions_closes_their_open_tab_and_their_cookie(admin_app):
    dora = await started_chat(admin_app, credentials=("dora", "dora-password"))
    root = await logged_in(admin_app, "root")
    assert await change(root, "users/end-sessions", {"name": "dora"}) == 200
    await dora.wait_for(lambda: not dora.sio.connected, 10)
    assert (await dora.rest("GET", "/user"))[0] == 401
    again = await started_chat(admin_app, credentials=("dora", "dora-password"))  # her password still works
    assert (await again.rest("GET", "/user"))[0] == 200
    await again.close()


async def test_an_admin_made_or_unmade_is_so_at_once_and_nobody_unmakes_themselves(admin_app):
    root, alice = await logged_in(admin_app, "root"), await logged_in(admin_app, "alice")
    assert await change(root, "users/admin", {"name": "alice", "admin": True}) == 200
    assert (await alice.rest("GET", "/admin/api/state"))[0] == 200
    assert await change(alice, "users/admin", {"name": "alice", "admin": False}) == 409
    assert await change(root, "users/admin", {"name": "alice", "admin": False}) == 200
    assert (await alice.rest("GET", "/admin/api/state"))[0] == 403
    assert await change(root, "users/remove", {"name": "root"}) == 409
    assert await change(root, "users/admin", {"name": "nobody", "admin": True}) == 404


async def test_a_removed_user_loses_their_chats_and_their_login(admin_app):
    assert run_users(admin_app, "add", "gus", password="gus-password").returncode == 0
    gus = await started_chat(admin_app, credentials=("gus", "gus-password"))
    answer_of(await gus.ask("Hello?"))
    root = await logged_in(admin_app, "root")
    assert await change(root, "users/remove", {"name": "gus"}) == 200
    await gus.wait_for(lambda: not gus.sio.connected, 10)
    assert "gus" not in {user["name"] for user in (await state(root))["users"]}
    with pytest.raises(PermissionError):
        await (await logged_in(admin_app, "gus")).log_in()


async def test_defaults_for_everyone_set_the_system_prompt_and_the_presets_shown(admin_app):
    root = await logged_in(admin_app, "root")
    defaults = {"system_prompt": "You answer in haiku.", "hidden_presets": ["Creative"], "open_sign_on": False}
    assert await change(root, "defaults", defaults) == 200
    assert await change(root, "defaults", {**defaults, "hidden_presets": ["Nope"]}) == 422
    bob = await started_chat(admin_app, credentials=("bob", "bob-password"))
    prompt = next(w for w in bob.settings_widgets if w["id"] == "system_prompt")
    assert prompt["initial"] == "You answer in haiku."
    status, project = await bob.rest("GET", "/project/settings?language=en-US")
    assert status == 200
    assert "Creative" not in {profile["name"] for profile in project["chatProfiles"]}
    assert "Precise" in {profile["name"] for profile in project["chatProfiles"]}
    assert await change(root, "defaults", {"system_prompt": None, "hidden_presets": [], "open_sign_on": False}) == 200
    await bob.close()


async def test_an_admin_lists_every_shared_chat_and_unshares_one(admin_app):
    alice = await started_chat(admin_app, credentials=("alice", "alice-password"))
    answer_of(await alice.ask("Something to share."))
    await asyncio.sleep(0.5)  # the chat's row lands
    thread_id = alice.thread_id_started
    assert (await alice.rest("PUT", "/project/thread/share", {"threadId": thread_id, "isShared": True}))[0] == 200
    root = await logged_in(admin_app, "root")
    shared = {share["id"]: share for share in (await state(root))["shares"]}
    assert shared[thread_id]["owner"] == "alice" and shared[thread_id]["since"]
    bob = await logged_in(admin_app, "bob")
    assert (await bob.rest("GET", f"/project/share/{thread_id}"))[0] == 200
    assert await change(root, "shares/unshare", {"thread_id": thread_id}) == 200
    assert thread_id not in {share["id"] for share in (await state(root))["shares"]}
    assert (await bob.rest("GET", f"/project/share/{thread_id}"))[0] == 404
    await alice.close()


async def test_health_names_the_model_the_database_and_this_server(admin_app):
    health = (await state(await logged_in(admin_app, "root")))["health"]
    assert health["vllm"]["serving"] and health["vllm"]["model"] and health["vllm"]["engine"] == "vllm"
    assert health["database"] == {"kind": "sqlite", "reachable": True}
    assert [replica["this"] and replica["recent"] for replica in health["replicas"]] == [True]


@pytest.mark.postgres
async def test_a_limit_set_on_one_replica_holds_on_the_other(vllm: VllmServer, postgres: PostgresServer):
    url = postgres.new_database(f"admin_{secrets.token_hex(4)}")
    first, second = (ChatApp(vllm, extra_env={"DATABASE_URL": url}) for _ in range(2))
    assert run_users(first, "add", "root", "--admin", password="root-password").returncode == 0
    assert run_users(first, "add", "hal", password="hal-password").returncode == 0
    with running(first, second):
        root = await logged_in(first, "root")
        assert await change(root, "users/limits", {"name": "hal", "messages_per_minute": 1}) == 200
        hal = await started_chat(second, credentials=("hal", "hal-password"))
        assert answer_of(await hal.ask("One?"))["output"]
        assert errors(await hal.ask("Two?"))
        replicas = (await state(root))["health"]["replicas"]
        assert len(replicas) == 2 and all(replica["recent"] for replica in replicas)
        await hal.close()


@pytest.mark.postgres
async def test_each_change_is_one_transaction_503_while_the_database_is_away_409_for_a_conflict(
    vllm: VllmServer, postgres: PostgresServer
):
    url = postgres.new_database(f"admin_{secrets.token_hex(4)}")
    first, second = (ChatApp(vllm, extra_env={"DATABASE_URL": url, "DATABASE_TIMEOUT": "2"}) for _ in range(2))
    assert run_users(first, "add", "root", "--admin", password="root-password").returncode == 0
    assert run_users(first, "add", "hal", password="hal-password").returncode == 0
    with running(first, second):
        on_first, on_second = await logged_in(first, "root"), await logged_in(second, "root")
        logged = len((await state(on_first))["changes"])
        postgres.stop(keep_data=True)
        try:
            assert (await on_first.rest("GET", "/admin/api/state"))[0] == 503
            assert await change(on_first, "users/limits", {"name": "hal", "daily_tokens": 5}) == 503
        finally:
            postgres.start()
        seen = await state(on_first)
        assert member(seen, "hal")["limits"]["daily_tokens"] is None and len(seen["changes"]) == logged  # nothing
        new = {"name": "zed", "password": "zed-password-1"}
        both = await asyncio.gather(change(on_first, "users/add", new), change(on_second, "users/add", new))
        assert sorted(both) == [200, 409]  # the same user added on two replicas at once: once
        seen = await state(on_first)
        assert [c["action"] for c in seen["changes"]][: len(seen["changes"]) - logged] == ["add user"]
