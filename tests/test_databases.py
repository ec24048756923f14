"""The throwaway PostgreSQL cluster and nginx balancer that tests/support/ starts, checked for real."""

from __future__ import annotations

import json
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.nginx import NginxBalancer
from tests.support.postgres import PostgresServer
from tests.support.servers import LOGS, Process, free_port, hermetic_environment, port_is_free, running

# A replica stand-in: answers every GET with its name and the Host it saw; a request to upgrade gets
# 101 and then an echo of each line, as a websocket would keep its connection.
BACKEND = """
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        # As strict as a real websocket server: an HTTP/1.1 request with both headers.
        connection = self.headers.get("Connection", "").lower()
        upgrade = self.headers.get("Upgrade") == "websocket" and "upgrade" in connection
        if upgrade and self.request_version == "HTTP/1.1":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            for line in self.rfile:
                self.wfile.write(sys.argv[1].encode() + b" " + line)
                self.wfile.flush()
            return
        body = json.dumps({"name": sys.argv[1], "host": self.headers.get("Host")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
"""


@dataclass
class Backend:
    """A tiny HTTP server on 127.0.0.1 that answers with its name."""

    name: str
    port: int = field(default_factory=free_port)
    running: Process = field(default_factory=Process)

    def start(self) -> None:
        argv = [sys.executable, "-c", BACKEND, self.name, str(self.port)]
        self.running.begin(argv, hermetic_environment(), LOGS / f"backend-{self.name}.log", False, None)
        self.running.wait_ready(f"http://127.0.0.1:{self.port}/", 10, {})

    def stop(self) -> None:
        self.running.end()


def ask(url: str, cookie: str | None = None) -> dict[str, str]:
    """GET url (with the Chainlit session cookie, if any); the backend's JSON answer and the upstream nginx chose."""
    headers = {"Cookie": f"theme=dark; X-Chainlit-Session-id={cookie}"} if cookie else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as reply:
        return {**json.loads(reply.read()), "upstream": reply.headers["X-Upstream"]}


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Run one statement on its own connection (with the app's driver)."""
    with psycopg.connect(url, connect_timeout=10, autocommit=True) as connection:
        cursor = connection.execute(sql)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer("test-databases")
    with running(server):
        yield server


@pytest.fixture
def balanced() -> Iterator[tuple[NginxBalancer, dict[str, Backend]]]:
    """nginx in front of two backends, a and b."""
    backends = {name: Backend(name) for name in "ab"}
    balancer = NginxBalancer([backend.port for backend in backends.values()], "test-databases", fail_timeout=1)
    with running(*backends.values(), balancer):
        yield balancer, backends


def test_the_test_user_queries_its_database_over_tcp(postgres):
    query(postgres.url, "CREATE TABLE notes (body text)")
    query(postgres.url, "INSERT INTO notes VALUES ('hello')")
    [row] = query(postgres.url, "SELECT current_user, current_database(), inet_server_port(), body FROM notes")
    assert tuple(row) == ("chat", "chat", postgres.port, "hello")
    assert postgres.url == f"postgresql://chat:{postgres.password}@127.0.0.1:{postgres.port}/chat"


def test_a_wrong_password_is_refused(postgres):
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        query(postgres.url.replace(postgres.password, "wrong"), "SELECT 1")


def test_a_new_database_is_isolated(postgres):
    url = postgres.new_database("isolated")
    assert url == postgres.url_for("isolated") and url.endswith("/isolated")
    query(url, "CREATE TABLE only_here (id int)")
    [[here]] = query(url, "SELECT to_regclass('only_here') IS NOT NULL")
    [[there]] = query(postgres.url, "SELECT to_regclass('only_here') IS NOT NULL")
    assert (here, there) == (True, False)
    with pytest.raises(ValueError, match="not a plain SQL name"):
        postgres.new_database("x; DROP DATABASE chat")


def test_a_paused_cluster_hangs_and_resumes(postgres):
    postgres.pause()
    try:
        with pytest.raises(psycopg.OperationalError, match="timeout"):
            psycopg.connect(postgres.url, connect_timeout=1)
    finally:
        postgres.resume()
    assert query(postgres.url, "SELECT 1") == [(1,)]


def test_a_cluster_stopped_with_its_data_comes_back(postgres):
    query(postgres.url, "CREATE TABLE kept (id int)")
    query(postgres.url, "INSERT INTO kept VALUES (7)")
    folder = postgres.folder
    postgres.stop(keep_data=True)
    assert postgres.folder == folder and port_is_free(postgres.port)
    with pytest.raises(psycopg.OperationalError, match="refused"):
        psycopg.connect(postgres.url, connect_timeout=2)
    postgres.start()
    assert query(postgres.url, "SELECT id FROM kept") == [(7,)]


@pytest.mark.postgres  # a cluster of its own
def test_a_stopped_cluster_leaves_no_process_port_or_folder():
    server = PostgresServer("test-databases-stop")
    server.start()
    try:
        processes, folder = server.server_processes(), server.folder
        assert len(processes) > 1 and folder is not None and (folder / "data" / "PG_VERSION").exists()
        assert not port_is_free(server.port)
    finally:
        server.stop()
    assert [pid for pid in processes if Path(f"/proc/{pid}").exists()] == []
    assert port_is_free(server.port) and not folder.exists() and server.folder is None


def test_a_session_cookie_sticks_to_one_replica(balanced):
    balancer, _ = balanced
    answers = [ask(balancer.url, "abc") for _ in range(10)]
    assert len({answer["name"] for answer in answers}) == 1
    # The Host header keeps the balancer's port, for the app's Host allow-list and Origin checks.
    assert {answer["host"] for answer in answers} == {f"127.0.0.1:{balancer.port}"}
    # Without the cookie, the client's address decides: one replica for this (local) client too.
    assert len({ask(balancer.url)["name"] for _ in range(10)}) == 1


def test_sessions_spread_over_both_replicas(balanced):
    balancer, _ = balanced
    chosen = {f"session-{n}": ask(balancer.url, f"session-{n}")["name"] for n in range(40)}
    assert set(chosen.values()) == {"a", "b"}
    assert all(ask(balancer.url, cookie)["name"] == name for cookie, name in chosen.items())


def test_a_session_moves_when_its_replica_stops_and_comes_back(balanced):
    balancer, backends = balanced
    first = ask(balancer.url, "abc")["name"]
    backends[first].stop()
    other = ({"a", "b"} - {first}).pop()
    started = time.monotonic()
    assert [ask(balancer.url, "abc")["name"] for _ in range(5)] == [other] * 5
    assert time.monotonic() - started < 5  # a refused connection is retried at once, not after a timeout
    backends[first].start()
    # nginx tries a failed replica again once fail_timeout has passed, counted in whole seconds.
    deadline = time.monotonic() + balancer.fail_timeout + 3
    while ask(balancer.url, "abc")["name"] != first and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [ask(balancer.url, "abc")["name"] for _ in range(5)] == [first] * 5


def test_a_websocket_upgrade_passes_through(balanced):
    balancer, _ = balanced
    with socket.create_connection(("127.0.0.1", balancer.port), timeout=10) as sock:
        request = (
            f"GET /ws/socket.io/ HTTP/1.1\r\nHost: 127.0.0.1:{balancer.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\nCookie: X-Chainlit-Session-id=abc\r\n\r\n"
        )
        sock.sendall(request.encode())
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 101")
        while reader.readline() not in (b"\r\n", b""):
            pass
        name = ask(balancer.url, "abc")["name"]  # the same session's replica
        sock.sendall(b"ping\n")
        assert reader.readline() == f"{name} ping\n".encode()
        time.sleep(0.2)  # an idle tunnel stays open
        sock.sendall(b"again\n")
        assert reader.readline() == f"{name} again\n".encode()


def test_a_stopped_balancer_frees_its_port(balanced):
    balancer, _ = balanced
    pid, folder = balancer.process.pid, balancer.folder
    assert folder is not None and (folder / "nginx.pid").read_text().strip() == str(pid)
    balancer.stop()
    assert not Path(f"/proc/{pid}").exists() and port_is_free(balancer.port) and not folder.exists()


def test_the_failover_test_can_fail(balanced):
    """With no other replica left, the request fails: the failover above is nginx's doing, not luck."""
    balancer, backends = balanced
    for backend in backends.values():
        backend.stop()
    with pytest.raises(urllib.error.HTTPError, match="502"):
        ask(balancer.url, "abc")
