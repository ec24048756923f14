"""Two app replicas on one PostgreSQL behind Debian's nginx with sticky sessions: a chat outlives its replica."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt
import pytest

from app.config import DEFAULT_SYSTEM_PROMPT
from tests.support.chat_client import ChatClient
from tests.support.history import answer_of, run_users, unsaved_marks
from tests.support.nginx import NginxBalancer
from tests.support.postgres import PostgresServer
from tests.support.servers import ChatApp, VllmServer, free_port, running

pytestmark = pytest.mark.app

SESSION_COOKIE = "X-Chainlit-Session-id"
# Requests the page makes before it has its session cookie: the balancer hashes them on the client's address.
COOKIELESS = ("/auth/config", "/login", "/set-session-cookie")
# Replicas behind a balancer serve a network: they run with logins (the local user is one machine's own).
USER = ("rita", "rita-password")
# nginx's `balancer` log format (tests/support/nginx.py).
ACCESS_LINE = re.compile(
    r'^\S+ "(?P<method>\S+) (?P<path>\S+) [^"]*" (?P<status>\d{3}) -> (?P<upstreams>.*) \(.*\) \S+ s$'
)


@dataclass
class Replicas:
    balancer: NginxBalancer
    apps: dict[str, ChatApp]  # by the address nginx names them with ($upstream_addr, X-Upstream)
    secret: str


@pytest.fixture
def replicas(vllm: VllmServer, postgres: PostgresServer) -> Iterator[Replicas]:
    """Two replicas sharing a fresh database, a user and the login secret (not their data folders), behind nginx."""
    ports = [free_port(), free_port()]
    assert ports[0] != ports[1]
    balancer = NginxBalancer(ports, "replicas", fail_timeout=1)
    secret = secrets.token_urlsafe(48)
    env = {
        "DATABASE_URL": postgres.new_database(f"replicas_{secrets.token_hex(4)}"),
        "CHAINLIT_AUTH_SECRET": secret,
        # The page is the balancer's: its socket.io connections carry that Origin, refused otherwise.
        "ALLOWED_ORIGINS": balancer.url,
    }
    apps = [ChatApp(vllm, port=port, extra_env=dict(env)) for port in ports]
    assert run_users(apps[0], "add", USER[0], password=USER[1]).returncode == 0
    with running(*apps, balancer):
        yield Replicas(balancer, {f"127.0.0.1:{app.port}": app for app in apps}, secret)


def browser_tab(replicas: Replicas, session_id: str, **more: Any) -> ChatClient:
    """A tab of the page served by the balancer: its Origin, polling first then websocket, as the page connects."""
    url = replicas.balancer.url
    page: dict[str, Any] = {"headers": {"Origin": url}, "transports": ("polling", "websocket")}
    return ChatClient(url, session_id=session_id, credentials=USER, **page, **more)


async def call(tab: ChatClient, method: str, path: str, body: Any = None) -> tuple[int, Any, str]:
    """A REST call as the page makes it (login and session cookies): status, JSON or text, nginx's X-Upstream."""
    async with (
        aiohttp.ClientSession(headers={**tab.headers, **tab.cookie_header}) as http,
        http.request(method, tab.url + path, json=body) as reply,
    ):
        text = await reply.text()
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        return reply.status, payload, reply.headers.get("X-Upstream", "")


async def set_session_cookie(tab: ChatClient) -> str:
    """What the page does before it opens its socket (the balancer sticks on the cookie it sets); who served it."""
    async with (
        aiohttp.ClientSession(headers={**tab.headers, **tab.cookie_header}) as http,
        http.post(tab.url + "/set-session-cookie", json={"session_id": tab.session_id}) as reply,
    ):
        assert reply.status == 200, await reply.text()
        tab.cookies[SESSION_COOKIE] = reply.cookies[SESSION_COOKIE].value
        assert tab.cookies[SESSION_COOKIE] == tab.session_id
        return reply.headers.get("X-Upstream", "")


async def served_by(replicas: Replicas, session_id: str | None) -> str:
    """The replica the balancer sends a request with this session cookie to (None: with none)."""
    headers = {"Cookie": f"{SESSION_COOKIE}={session_id}"} if session_id else {}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.get(replicas.balancer.url + "/auth/config") as reply,
    ):
        assert reply.status == 200
        return reply.headers["X-Upstream"]


async def session_served_by(replicas: Replicas, wanted: Callable[[str], bool]) -> str:
    """A new session id whose requests the balancer sends to a replica for which wanted(address) holds."""
    for _ in range(64):  # each id lands on either replica, about evenly (tests/test_databases.py)
        session_id = str(uuid.uuid4())
        if wanted(await served_by(replicas, session_id)):
            return session_id
    raise AssertionError("no session id reached the wanted replica in 64 tries")


async def log_mark(replicas: Replicas) -> int:
    """Where nginx's access log stands once every request answered so far is in it (a byte offset).

    nginx logs a request just after answering it, so a client may be on before its line is written: a
    request nginx answers itself, then logged by the same (single) worker, marks the point.
    """
    token = uuid.uuid4().hex
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{replicas.balancer.url}/.balancer-ready?mark={token}") as reply,
    ):
        assert reply.status == 204
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = replicas.balancer.access_log_path.read_bytes()
        found = text.find(f"mark={token} ".encode())
        if found >= 0:
            return text.index(b"\n", found) + 1
        await asyncio.sleep(0.05)
    raise TimeoutError("nginx did not log the mark request")


async def access_lines(replicas: Replicas, start: int) -> list[dict[str, Any]]:
    """The replicas' requests nginx logged since offset start, parsed; upstreams: the replicas tried, in order.

    A websocket is logged when it closes: its line (status 101) is waited for.
    """
    deadline = time.monotonic() + 10
    while True:
        end = await log_mark(replicas)
        text = replicas.balancer.access_log_path.read_bytes()[start:end].decode()
        parsed = []
        for line in text.splitlines():
            match = ACCESS_LINE.match(line)
            assert match, f"unexpected access log line: {line}"
            if not match["path"].startswith("/.balancer-ready"):
                parsed.append({**match.groupdict(), "upstreams": match["upstreams"].split(", "), "line": line})
        if any(line["status"] == "101" for line in parsed) or time.monotonic() > deadline:
            return parsed
        await asyncio.sleep(0.1)


def check_socket_lines(lines: list[dict[str, Any]], sid: str) -> None:
    """The socket.io connection is in the log: the polling handshake, then the websocket upgrade of its session."""
    socket_lines = [line for line in lines if line["path"].startswith("/ws/socket.io/")]
    assert any("transport=polling" in line["path"] and "sid=" not in line["path"] for line in socket_lines), lines
    assert any(
        "transport=websocket" in line["path"] and f"sid={sid}&" in line["path"] and line["status"] == "101"
        for line in socket_lines
    ), lines


async def test_a_chat_goes_on_through_the_balancer_after_its_replica_stops(replicas: Replicas, vllm: VllmServer):
    for app in replicas.apps.values():
        # The secret came from the environment: the app generated none into its own data folder.
        assert app.data_dir is not None and not (app.data_dir / "auth-secret").exists()
    # Logging in comes before the page has a session cookie: nginx hashes it on the client's address,
    # always to the same replica. The chat's session is picked to land on the other one, so that a login
    # token signed by one replica must open the socket of the other (the shared secret).
    login_replica = await served_by(replicas, None)
    first_id = await session_served_by(replicas, lambda address: address != login_replica)
    chat_replica = await served_by(replicas, first_id)
    # The second tab's session lands on the chat's replica, too: once that is stopped, nginx must move it.
    second_id = await session_served_by(replicas, lambda address: address == chat_replica)
    (other_replica,) = set(replicas.apps) - {chat_replica}
    assert login_replica == other_replica

    # 1. A chat through the balancer, with the page's session cookie.
    offset = await log_mark(replicas)
    tab = browser_tab(replicas, first_id)
    await tab.log_in()
    assert jwt.decode(tab.cookies["access_token"], replicas.secret, algorithms=["HS256"])["identifier"] == USER[0]
    assert await set_session_cookie(tab) == login_replica  # no session cookie yet
    await tab.connect()
    sid = tab.sio.eio.sid
    await tab.greeting()
    assert tab.sio.eio.current_transport == "websocket"  # the upgrade found the handshake's replica
    await tab.change_settings({"max_tokens": 8})
    questions = ["first question about owls", "second question about bats"]
    answers = [answer_of(await tab.ask(question))["output"] for question in questions]
    thread_id = tab.thread_id_started
    assert thread_id
    status, page, upstream = await call(tab, "GET", f"/project/thread/{thread_id}")
    assert status == 200 and upstream == chat_replica, (status, upstream, page)
    await tab.close()
    await asyncio.sleep(0.5)  # the last writes are the app's background tasks

    # Every request that carried the session cookie went to the chat's replica, and only to it.
    lines = await access_lines(replicas, offset)
    check_socket_lines(lines, sid)
    cookieless = [line for line in lines if line["path"] in COOKIELESS]
    with_cookie = [line for line in lines if line["path"] not in COOKIELESS]
    assert len(cookieless) == 3 and all(line["upstreams"] == [login_replica] for line in cookieless), cookieless
    assert with_cookie and all(line["upstreams"] == [chat_replica] for line in with_cookie), with_cookie
    assert all(line["status"] in ("101", "200") for line in lines), lines

    # 2. The chat's replica goes away; a new tab finds the chat on the other one and goes on with it.
    stopped = replicas.apps[chat_replica]
    stopped.stop()
    assert stopped.process is None
    offset = await log_mark(replicas)
    again = browser_tab(replicas, second_id)
    await again.log_in()
    await set_session_cookie(again)
    status, page, upstream = await call(again, "POST", "/project/threads", {"pagination": {"first": 20}, "filter": {}})
    assert status == 200, page
    assert upstream == f"{chat_replica}, {other_replica}", upstream  # refused by the stopped one, then served
    assert [t["name"] for t in page["data"] if t["id"] == thread_id] == [questions[0]], page

    again.thread_id = thread_id
    await again.connect()
    sid = again.sio.eio.sid
    await again.wait_for(lambda: again.events_since(0, "resume_thread"), 30)
    shown = again.events_since(0, "resume_thread")[0]["steps"]
    assert [s["output"] for s in shown if s["type"] == "user_message"] == questions
    stored_answers = [s["output"] for s in shown if s["type"] == "assistant_message" and s["metadata"].get("turn")]
    assert stored_answers == answers

    before = len(vllm.logged_requests())
    answer = answer_of(await again.ask("third question about moths"))
    assert answer["output"]
    logged = vllm.logged_requests()[before:]
    assert logged, f"vLLM logged no request for the third question; see {vllm.log_path}"
    request = logged[-1]
    expected = [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": questions[0]},
        {"role": "assistant", "content": answers[0]},
        {"role": "user", "content": questions[1]},
        {"role": "assistant", "content": answers[1]},
        {"role": "user", "content": "third question about moths"},
    ]
    assert request["prompt"] == vllm.render(expected)
    assert request["max_tokens"] == "8"  # the chat's settings, saved by one replica, applied by the other
    await again.close()

    # The second session was served by the other replica, every request of it.
    lines = await access_lines(replicas, offset)
    check_socket_lines(lines, sid)
    assert lines and all(line["upstreams"][-1] == other_replica for line in lines), lines
    assert all(line["status"] in ("101", "200") for line in lines), lines


def all_saved(tab: ChatClient) -> bool:
    """No message of the tab is marked as not saved."""
    return not unsaved_marks(tab)


async def test_each_replica_keeps_what_its_chats_said_while_postgresql_is_away(
    replicas: Replicas, postgres: PostgresServer
):
    sessions = {address: await session_served_by(replicas, address.__eq__) for address in replicas.apps}
    tabs = {}
    for address, session_id in sessions.items():
        tab = browser_tab(replicas, session_id)
        await tab.log_in()
        await set_session_cookie(tab)
        await tab.connect()
        await tab.greeting()
        await tab.change_settings({"max_tokens": 8})
        answer_of(await tab.ask(f"saved through {address}"))
        tabs[address] = tab
    postgres.stop(keep_data=True)
    try:
        for address, tab in tabs.items():
            answer_of(await tab.ask(f"kept by {address} while the database is down"))
        for address, app in replicas.apps.items():  # each in its own journal, in its own data folder
            assert app.data_dir is not None
            kept = b"".join(path.read_bytes() for path in (app.data_dir / "journal").glob("journal-*.jsonl"))
            assert f"kept by {address}".encode() in kept
            assert not [other for other in replicas.apps if other != address and f"kept by {other}".encode() in kept]
    finally:
        postgres.start()
    for address, tab in tabs.items():
        await tab.wait_for(functools.partial(all_saved, tab), 30)
        status, page, _ = await call(tab, "GET", f"/project/thread/{tab.thread_id_started}")
        assert status == 200, page
        said = [s["output"] for s in page["steps"] if s["type"] == "user_message"]
        assert said == [f"saved through {address}", f"kept by {address} while the database is down"]
        await tab.close()
