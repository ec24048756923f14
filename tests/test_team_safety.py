"""Safe to open to a team: own chats stay own, logins are throttled and end, hostile requests get a 4xx."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import urllib.request
import uuid
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.chat_client import ChatClient
from tests.support.history import answer_of, run_users, started_chat, stored_rows
from tests.support.memory import rss_kb
from tests.support.servers import ROOT, ChatApp, VllmServer, free_port, hermetic_environment, running

pytestmark = [pytest.mark.app, pytest.mark.vllm]
USERS = ("alice", "bob", "kit")  # kit's password is changed by a test


@pytest.fixture(scope="module")
def team_app(vllm: VllmServer):
    """An app with password login and two users."""
    app = ChatApp(vllm)
    for name in USERS:
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    app.start()
    yield app
    app.stop()


async def user_with_answer(app: ChatApp, name: str, question: str) -> tuple[ChatClient, dict[str, Any]]:
    """A logged-in tab whose chat holds one answered question (saved)."""
    tab = await started_chat(app, credentials=(name, f"{name}-password"))
    answer = answer_of(await tab.ask(question))
    await asyncio.sleep(0.5)  # the history's batch lands
    return tab, answer


def custom_element(thread_id: str, for_id: str) -> dict[str, Any]:
    """A custom element as the page sends one to PUT /project/element."""
    return {
        "id": str(uuid.uuid4()),
        "type": "custom",
        "name": "Planted",
        "display": "inline",
        "threadId": thread_id,
        "forId": for_id,
        "props": {"text": "written by bob"},
    }


async def stored_chat(tab: ChatClient, thread_id: str) -> dict[str, Any]:
    """The chat as its owner's page reads it."""
    status, thread = await tab.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200, thread
    return dict(thread)


async def test_nobody_writes_an_element_into_my_chat(team_app):
    alice, alice_answer = await user_with_answer(team_app, "alice", "alice's notes")
    bob, bob_answer = await user_with_answer(team_app, "bob", "bob's notes")
    alice_chat, bob_chat = alice.thread_id_started, bob.thread_id_started
    planted = [
        custom_element(alice_chat, alice_answer["id"]),  # the finding: alice's chat, her answer
        custom_element(bob_chat, alice_answer["id"]),  # his own chat, her answer
        custom_element(alice_chat, ""),  # her chat, no message
    ]
    for element in planted:
        for method in ("PUT", "DELETE"):
            status, _ = await bob.rest(method, "/project/element", {"element": element, "sessionId": bob.session_id})
            assert status == 404, (method, element)
    await asyncio.sleep(0.5)
    assert (await stored_rows(team_app, alice_chat))["elements"] == 0
    assert (await stored_chat(alice, alice_chat))["elements"] == []
    # The owner's own session is let through to Chainlit.
    own = custom_element(bob_chat, bob_answer["id"])
    status, _ = await bob.rest("PUT", "/project/element", {"element": own, "sessionId": bob.session_id})
    assert status == 200
    log = team_app.log_path.read_text(errors="replace")
    assert f"Refused bob's element for chat {alice_chat}, not theirs" in log
    await alice.close()
    await bob.close()


async def test_nobody_takes_my_rating_by_its_id(team_app):
    alice, alice_answer = await user_with_answer(team_app, "alice", "rate this")
    bob, bob_answer = await user_with_answer(team_app, "bob", "and this")
    rating = {"feedback": {"forId": alice_answer["id"], "value": 1}, "sessionId": alice.session_id}
    status, rated = await alice.rest("PUT", "/feedback", rating)
    assert status == 200, rated
    alice_rating = rated["feedbackId"]
    stolen = {"feedback": {"id": alice_rating, "forId": bob_answer["id"], "value": 0}, "sessionId": bob.session_id}
    assert (await bob.rest("PUT", "/feedback", stolen))[0] == 404
    assert (await bob.rest("DELETE", "/feedback", {"feedbackId": alice_rating}))[0] == 404
    steps = (await stored_chat(alice, alice.thread_id_started))["steps"]
    mine = next(step for step in steps if step["id"] == alice_answer["id"])
    assert mine["feedback"]["id"] == alice_rating and mine["feedback"]["value"] == 1
    # Bob rates his own answer as usual; a stale id of his own is taken as an update of it.
    own_rating = {"feedback": {"forId": bob_answer["id"], "value": 0}, "sessionId": bob.session_id}
    status, own = await bob.rest("PUT", "/feedback", own_rating)
    assert status == 200
    again = {"feedback": {"id": own["feedbackId"], "forId": bob_answer["id"], "value": 1}, "sessionId": bob.session_id}
    status, _ = await bob.rest("PUT", "/feedback", again)
    assert status == 200
    await alice.close()
    await bob.close()


async def test_a_message_id_of_another_chat_changes_nothing_there(team_app):
    alice, _ = await user_with_answer(team_app, "alice", "the original words")
    question = next(step for step in (await stored_chat(alice, alice.thread_id_started))["steps"])
    bob, _ = await user_with_answer(team_app, "bob", "hello")
    await bob.ask("overwritten by bob", message_id=question["id"])  # socket.io: the id is the client's
    await asyncio.sleep(0.5)
    steps = (await stored_chat(alice, alice.thread_id_started))["steps"]
    assert [s["output"] for s in steps if s["id"] == question["id"]] == ["the original words"]
    assert "History: refused to save a message" in team_app.log_path.read_text(errors="replace")
    await alice.close()
    await bob.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/project/element", {"element": custom_element("", ""), "sessionId": "no-such-session"}),
        ("DELETE", "/project/element", {"element": custom_element("", ""), "sessionId": "no-such-session"}),
        ("POST", "/project/action", {"action": {"name": "regenerate", "payload": {}}, "sessionId": "nope"}),
        ("POST", "/mcp", {"sessionId": "no-such-session", "name": "x", "clientType": "sse", "url": "http://x"}),
        ("DELETE", "/mcp", {"sessionId": "no-such-session", "name": "x"}),
        ("PUT", "/project/element", {"element": {"type": "custom"}, "sessionId": "no-such-session"}),
        ("PUT", "/project/element", "not json"),
        ("POST", "/project/action", {"action": "regenerate"}),
    ],
)
async def test_unknown_sessions_and_malformed_bodies_get_a_4xx(team_app, method, path, body):
    bob = ChatClient(team_app.url, credentials=("bob", "bob-password"))
    await bob.log_in()
    before = team_app.log_path.read_text(errors="replace").count("Traceback")
    status, _ = await bob.rest(method, path, body)
    assert 400 <= status < 500
    await asyncio.sleep(0.2)
    assert team_app.log_path.read_text(errors="replace").count("Traceback") == before


async def test_an_element_for_my_own_session_with_no_fields_is_refused(team_app):
    bob = await started_chat(team_app, credentials=("bob", "bob-password"))
    status, _ = await bob.rest("PUT", "/project/element", {"element": {"type": "custom"}, "sessionId": bob.session_id})
    assert status == 400
    await bob.close()


@pytest.fixture(scope="module")
def throttled_app(vllm: VllmServer):
    """An app that allows 3 failed logins per name (12 per address) in a 20-second window."""
    app = ChatApp(vllm, extra_env={"LOGIN_ATTEMPTS": "3", "LOGIN_WINDOW_MINUTES": str(20 / 60)})
    for name in ("dora", "erin"):
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    app.start()
    yield app
    app.stop()


async def login(app: ChatApp, name: str, password: str) -> tuple[int, dict[str, str]]:
    """POST /login as the page's form does: the status and the response headers."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(app.url + "/login", data={"username": name, "password": password}) as reply,
    ):
        return reply.status, dict(reply.headers)


async def test_failed_logins_are_throttled_by_name_across_a_restart_then_let_go(throttled_app):
    assert [(await login(throttled_app, "dora", "wrong"))[0] for _ in range(3)] == [401, 401, 401]
    status, headers = await login(throttled_app, "dora", "dora-password")  # the right one, straight after
    assert status == 429 and 0 < int(headers["Retry-After"]) <= 20
    assert (await login(throttled_app, "erin", "erin-password"))[0] == 200  # another name is not held up
    throttled_app.stop()
    throttled_app.start()
    assert (await login(throttled_app, "dora", "dora-password"))[0] == 429  # kept in the database
    log = throttled_app.log_path.read_text(errors="replace")
    assert "Refused a login for 'dora' from 127.0.0.1: too many failed logins" in log
    await asyncio.sleep(int(headers["Retry-After"]) + 1)
    assert (await login(throttled_app, "dora", "dora-password"))[0] == 200


async def test_failed_logins_are_throttled_by_address_for_unknown_names_too(throttled_app):
    await asyncio.sleep(21)  # the previous test's failures leave the window
    statuses = [(await login(throttled_app, f"nobody-{n}", "guess"))[0] for n in range(13)]
    assert statuses == [401] * 12 + [429]
    assert (await login(throttled_app, "erin", "erin-password"))[0] == 429  # the address is held up


async def test_logout_ends_the_session_for_its_cookie_and_its_socket(team_app):
    alice = await started_chat(team_app, credentials=("alice", "alice-password"))
    assert (await alice.rest("GET", "/user"))[0] == 200
    status, _ = await alice.rest("POST", "/logout")
    assert status == 200
    await alice.wait_for(lambda: not alice.sio.connected, 10)  # its open socket is closed
    assert (await alice.rest("GET", "/user"))[0] == 401  # the old cookie, kept
    assert (await alice.rest("POST", "/project/threads", {"pagination": {"first": 5}, "filter": {}}))[0] == 401
    stale = ChatClient(team_app.url, cookies=dict(alice.cookies))
    with pytest.raises(Exception, match=r"(?i)connect|refused|authenticat"):
        await stale.connect()


async def test_a_new_password_ends_the_old_logins_and_closes_their_connections(team_app):
    kit = await started_chat(team_app, credentials=("kit", "kit-password"))  # a login of this very second
    changed = run_users(team_app, "add", "kit", password="kit-new-password")
    assert changed.returncode == 0
    assert (await kit.rest("GET", "/user"))[0] == 401
    await kit.wait_for(lambda: not kit.sio.connected, 15)  # the sweep closes it
    renewed = ChatClient(team_app.url, credentials=("kit", "kit-new-password"))
    await renewed.log_in()  # straight after the change
    assert (await renewed.rest("GET", "/user"))[0] == 200


async def test_a_token_cannot_renew_itself_and_lasts_login_hours(team_app):
    alice = ChatClient(team_app.url, credentials=("alice", "alice-password"))
    await alice.log_in()
    token = next(value for name, value in alice.cookies.items() if name.startswith("access_token"))
    async with (
        aiohttp.ClientSession() as http,
        http.post(team_app.url + "/auth/jwt", headers={"Authorization": f"Bearer {token}"}) as reply,
    ):
        assert reply.status == 403
    status, headers = await login(team_app, "alice", "alice-password")
    cookie = headers["Set-Cookie"]
    assert status == 200 and "Max-Age=604800" in cookie and "Secure" not in cookie  # 168 h, plain HTTP
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            team_app.url + "/login",
            data={"username": "alice", "password": "alice-password"},
            headers={"X-Forwarded-Proto": "https"},  # a proxy on this machine says the page is HTTPS
        ) as reply,
    ):
        assert reply.status == 200 and "Secure" in reply.headers["Set-Cookie"]


async def test_every_response_carries_the_security_headers_and_the_page_nothing_foreign(team_app):
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/login", "/project/settings?language=en-US", "/public/vendor/inter/inter.css"):
            async with http.get(team_app.url + path) as reply:
                policy = reply.headers["Content-Security-Policy"]
                assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy, path
                assert reply.headers["X-Frame-Options"] == "DENY"
                assert reply.headers["X-Content-Type-Options"] == "nosniff"
                assert reply.headers["Referrer-Policy"] == "same-origin"
        async with http.get(team_app.url + "/") as reply:
            page = await reply.text()
    assert "fonts.googleapis.com" not in page and "jsdelivr" not in page
    assert "/public/vendor/katex/katex.min.css" in page and "/public/vendor/inter/inter.css" in page


@pytest.mark.parametrize("path", ["/logout", "/auth/header", "/set-session-cookie", "/login", "/project/threads"])
async def test_a_foreign_page_cannot_post(team_app, path):
    async with (
        aiohttp.ClientSession() as http,
        http.post(team_app.url + path, data={"x": "1"}, headers={"Origin": "http://evil.example"}) as reply,
    ):
        assert reply.status == 403


async def test_a_body_over_the_limit_is_refused_before_it_is_read(team_app):
    bob = await started_chat(team_app, credentials=("bob", "bob-password"))
    before = rss_kb(team_app)
    upload = aiohttp.FormData()
    upload.add_field("file", b"x" * 50_000_000, filename="big.txt", content_type="text/plain")
    async with (
        aiohttp.ClientSession(headers=bob.cookie_header) as http,
        # Expect: 100-continue, as large uploads do: the refusal comes before a byte of the body is sent
        # (without it the server's early close can race the client's writing and fail the request instead).
        http.post(f"{team_app.url}/project/file?session_id={bob.session_id}", data=upload, expect100=True) as reply,
    ):
        assert reply.status == 413 and "UPLOAD_MAX_MB" in await reply.text()  # the upload route's own limit

    async def chunks():  # no Content-Length: refused while it streams
        for _ in range(50):
            yield b"y" * 100_000

    async with (
        aiohttp.ClientSession(headers=bob.cookie_header) as http,
        http.put(team_app.url + "/feedback", data=chunks(), headers={"Content-Type": "application/json"}) as reply,
    ):
        assert reply.status == 413
    assert rss_kb(team_app) - before < 15_000  # kilobytes: nothing near the 50 MB was held
    await bob.close()


@pytest.fixture(scope="module")
def shares_app(vllm: VllmServer):
    """One answer at a time and 4 messages a minute per user, a 300-token daily quota, metrics on a port."""
    metrics_port = free_port()
    settings = {"ANSWERS_PER_USER": "1", "MESSAGES_PER_MINUTE": "4", "DAILY_TOKEN_QUOTA": "300"}
    app = ChatApp(vllm, extra_env={**settings, "METRICS_PORT": str(metrics_port)})
    for name in ("fern", "gus", "hal"):
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    app.start()
    app.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"  # type: ignore[attr-defined]
    yield app
    app.stop()


def refusals(produced: list[dict[str, Any]]) -> list[str]:
    """The error lines a turn produced."""
    return [m["output"] for m in produced if m.get("isError")]


async def test_one_user_gets_one_answer_at_a_time_across_tabs_and_others_are_not_held_up(shares_app):
    first = await started_chat(shares_app, credentials=("fern", "fern-password"))
    await first.change_settings({"max_tokens": 3000})
    second = await started_chat(shares_app, credentials=("fern", "fern-password"))
    other = await started_chat(shares_app, credentials=("gus", "gus-password"))
    await first.start_answer("a long answer")
    refused = await second.ask("meanwhile in another tab")
    assert refusals(refused) == [
        "You already have 1 answer(s) being written in other tabs. "
        "Send again when one of them has finished (or stop it)."
    ]
    answer = answer_of(await other.ask("someone else"))
    assert answer["output"]  # another user is not held up
    await first.stop()
    await first.wait_for(lambda: first.events_since(0, "task_end"), 30)
    await asyncio.sleep(0.5)
    answer = answer_of(await second.ask("now it is my turn"))
    assert answer["output"]
    for tab in (first, second, other):
        await tab.close()


async def test_messages_per_minute_per_user_say_when_to_send_again(shares_app):
    tab = await started_chat(shares_app, credentials=("hal", "hal-password"))
    said = [await tab.ask(f"message {n}") for n in range(5)]
    assert all(not refusals(turn) for turn in said[:4])
    (line,) = refusals(said[4])
    assert line.startswith("You sent 4 messages in the last minute. Try again in ") and line.endswith(" s.")
    await tab.close()


def scrape(app: ChatApp) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The app's metrics, parsed by prometheus-client: (sample name, labels) -> value."""
    with urllib.request.urlopen(app.metrics_url, timeout=10) as reply:  # type: ignore[attr-defined]
        text = reply.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_the_daily_quota_and_the_usage_report_and_the_metrics_count_what_happened(shares_app):
    before = scrape(shares_app)
    tab = await started_chat(shares_app, credentials=("gus", "gus-password"))
    await tab.change_settings({"max_tokens": 64})
    answered, line = [], ""
    for n in range(6):
        turn = await tab.ask(f"quota question {n}")
        if refusals(turn):
            (line,) = refusals(turn)
            break
        answered.append(answer_of(turn))
    assert answered and line.startswith("You have used today's 300 tokens.")
    await asyncio.sleep(0.5)
    report = subprocess.run(
        [sys.executable, "-m", "app.history.usage", "--days", "1"],
        cwd=ROOT,
        env=hermetic_environment(DATA_DIR=str(shares_app.data_dir)),
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    row = next(line.split("|") for line in report.splitlines() if "| gus |" in line)
    answers, prompt_tokens, completion_tokens = (int(cell) for cell in row[3:6])
    assert completion_tokens >= 64 * len(answered) and prompt_tokens > 0 and answers >= len(answered)
    assert prompt_tokens + completion_tokens >= 300

    after = scrape(shares_app)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("chat_answers_total", ending="complete") == len(answered)
    assert grew("chat_refusals_total", reason="quota_used") == 1
    assert grew("chat_time_to_first_token_seconds_count") == len(answered)
    assert grew("chat_answer_tokens_per_second_count") == len(answered)
    assert grew("chat_history_commit_seconds_count") > 0
    assert after[("chat_sessions_open", ())] >= 1
    await tab.close()


async def test_readiness_says_which_part_is_down(team_app):
    async with aiohttp.ClientSession() as http, http.get(team_app.url + "/ready") as reply:
        nothing_waits = {"waiting_writes": 0, "oldest_waiting_write_s": 0.0, "chats_held": 0}  # in the journal
        assert reply.status == 200 and await reply.json() == {"vllm": "ok", "database": "ok", **nothing_waits}
    absent = ChatApp(VllmServer("absent-for-readiness"))
    with running(absent):
        async with aiohttp.ClientSession() as http, http.get(absent.url + "/ready") as reply:
            assert reply.status == 503 and await reply.json() == {
                "vllm": "unavailable",
                "database": "ok",
                **nothing_waits,
            }


async def test_throttling_and_ended_logins_hold_on_every_replica_and_across_a_restart(vllm, postgres):
    database = postgres.new_database(f"team_{uuid.uuid4().hex[:8]}")
    env = {"DATABASE_URL": database, "CHAINLIT_AUTH_SECRET": "shared-secret-" + "x" * 40, "LOGIN_ATTEMPTS": "2"}
    first, second = ChatApp(vllm, extra_env=dict(env)), ChatApp(vllm, extra_env=dict(env))
    for name in ("ivy", "jay"):
        added = run_users(first, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    with running(first, second):
        assert [(await login(first, "ivy", "wrong"))[0] for _ in range(2)] == [401, 401]
        assert (await login(second, "ivy", "ivy-password"))[0] == 429  # counted in the shared database

        jay = ChatClient(first.url, credentials=("jay", "jay-password"))
        await jay.log_in()
        on_second = ChatClient(second.url, cookies=dict(jay.cookies))
        assert (await on_second.rest("GET", "/user"))[0] == 200
        status, _ = await on_second.rest("POST", "/logout")  # logged out through the other replica
        assert status == 200
        assert (await jay.rest("GET", "/user"))[0] == 401
        first.stop()
        first.start()
        assert (await jay.rest("GET", "/user"))[0] == 401  # still ended after a restart
        assert (await login(first, "ivy", "ivy-password"))[0] == 429
