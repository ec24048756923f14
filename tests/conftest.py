"""Session-wide real servers: one vLLM with the tiny ERNIE-4.5 model, one Chainlit app against it."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import FrameType

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from chat_client import ChatClient  # after the path above
from databases import PostgresServer  # after the path above
from servers import LOGS, PROJECT_VARIABLES, ChatApp, VllmServer, running  # after the path above

# The user's own configuration never reaches a test: neither their environment nor their .env.
for name in PROJECT_VARIABLES & set(os.environ):
    del os.environ[name]
os.environ["PYTHON_DOTENV_DISABLED"] = "1"


def interrupt(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM or SIGHUP end the run as Ctrl-C does: pytest then tears its fixtures (and servers) down."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def pytest_configure(config: pytest.Config) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def serve(name: str, window: int) -> Iterator[tuple[VllmServer, ChatApp]]:
    """A real vLLM with the tiny model and the real app in front of it, for the whole session."""
    server = VllmServer(name, max_model_len=window)
    app = ChatApp(server)
    with running(server, app):
        yield server, app


@pytest.fixture(scope="session")
def shared_stack() -> Iterator[tuple[VllmServer, ChatApp]]:
    """A 4096-token window: long answers to stop."""
    yield from serve("shared", 4096)


@pytest.fixture(scope="session")
def small_stack() -> Iterator[tuple[VllmServer, ChatApp]]:
    """A 256-token window, where conversations overflow quickly."""
    yield from serve("small", 256)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster on loopback, for the whole session."""
    server = PostgresServer()
    with running(server):
        yield server


@pytest.fixture(scope="session")
def pg_app(shared_stack: tuple[VllmServer, ChatApp], postgres: PostgresServer) -> Iterator[ChatApp]:
    """The app keeping its history in PostgreSQL, against the shared vLLM."""
    database = postgres.new_database("shared_history")
    app = ChatApp(shared_stack[0], extra_env={"DATABASE_URL": database, "DATABASE_TIMEOUT": "5"})
    with running(app):
        yield app


@pytest.fixture(params=["sqlite", "postgresql"])
def history_app(request: pytest.FixtureRequest) -> ChatApp:
    """The shared app on its SQLite history, then the one on PostgreSQL."""
    fixture = "chat_app" if request.param == "sqlite" else "pg_app"
    app: ChatApp = request.getfixturevalue(fixture)
    return app


@pytest.fixture(scope="session")
def vllm(shared_stack: tuple[VllmServer, ChatApp]) -> VllmServer:
    return shared_stack[0]


@pytest.fixture(scope="session")
def chat_app(shared_stack: tuple[VllmServer, ChatApp]) -> ChatApp:
    return shared_stack[1]


@pytest.fixture(scope="session")
def small_vllm(small_stack: tuple[VllmServer, ChatApp]) -> VllmServer:
    return small_stack[0]


@pytest.fixture(scope="session")
def small_app(small_stack: tuple[VllmServer, ChatApp]) -> ChatApp:
    return small_stack[1]


async def greeted_tab(app: ChatApp) -> AsyncIterator[ChatClient]:
    """A connected socket.io session that has been greeted."""
    tab = ChatClient(app.url)
    await tab.connect()
    await tab.greeting()
    yield tab
    await tab.close()


@pytest.fixture
async def client(chat_app) -> AsyncIterator[ChatClient]:
    async for tab in greeted_tab(chat_app):
        yield tab


@pytest.fixture
async def small_client(small_app) -> AsyncIterator[ChatClient]:
    async for tab in greeted_tab(small_app):
        yield tab


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report ends with the last lines the servers logged while it ran (CI shows no files)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed or not LOGS.exists():
        return
    for log in sorted(LOGS.glob("*.log")):
        if log.stat().st_mtime >= call.start:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            report.sections.append((f"last lines of {log.name}", "\n".join(line[:300] for line in tail)))
