"""Session-wide real servers (vLLM with the tiny ERNIE-4.5 model, the app against it), the fixtures several modules
share (chromium, an app with users); marks for what tests need."""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import FrameType

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

from app.history.database import create_engine, database_url, upgrade
from app.history.store import ChatStore
from tests.support.browser import ARGS, CHROMIUM
from tests.support.chat_client import ChatClient
from tests.support.history import run_users
from tests.support.postgres import PostgresServer
from tests.support.servers import LOGS, PROJECT_VARIABLES, ChatApp, VllmServer, running
from tests.support.stores import Hooks

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


# What each fixture that starts a server needs (the markers in pyproject.toml), so that `-m` can leave out
# the tests that need what is not installed or running: `make test-fast` runs those that need none of them.
# A test gets the markers of every fixture it uses, directly or through other fixtures.
NEEDS: dict[str, tuple[str, ...]] = {
    # This file's session servers.
    "shared_stack": ("vllm", "app"),  # both start the app too
    "small_stack": ("vllm", "app"),
    "vllm": ("vllm",),
    "small_vllm": ("vllm",),
    "chat_app": ("vllm", "app"),
    "small_app": ("vllm", "app"),
    "client": ("vllm", "app"),
    "small_client": ("vllm", "app"),
    "history_app": ("vllm", "app"),  # chat_app or pg_app, looked up while the test runs
    "pg_app": ("vllm", "app", "postgres"),
    "postgres": ("postgres",),  # and test_databases.py's own cluster of the same name
    # This file's fixtures that several modules share.
    "playwright": ("browser",),  # Debian's chromium, one per module
    "browser": ("browser",),
    "fresh_browser": ("browser",),
    "pair_app": ("vllm", "app"),  # password users ann and ben (test_versions.py, test_files.py)
    # Fixtures of one module.
    "balanced": ("nginx",),  # test_databases.py
    "replicas": ("vllm", "app", "postgres", "nginx"),  # test_replicas.py
    "app_without_vllm": ("vllm", "app"),  # test_browser.py: the app at once, vLLM during the test
    "two_user_app": ("vllm", "app"),  # test_history.py
    "no_history_app": ("vllm", "app"),  # test_versions.py
    "share_app": ("vllm", "app"),  # test_sharing.py
    "open_share_app": ("vllm", "app"),
    "lonely_app": ("vllm", "app"),  # test_recovery.py
    "paced_app": ("app",),  # test_reconnect.py: the app against a fake OpenAI server
    "counting_app": ("app",),  # test_documents_load.py: the app against a fake OpenAI server that counts
    "scripted_chat": ("app",),  # test_browser_answers.py: the app against a fake OpenAI server's fixed answers
    "make_run": ("vllm", "app"),  # test_run.py
    "llama": ("llama",),  # test_llama_cpp.py
    "llama_app": ("llama", "app"),
    "admin_app": ("vllm", "app"),  # test_admin.py, test_browser_admin.py
    "proxied": ("vllm", "app", "nginx"),  # test_sign_on.py
    "user_header_only": ("vllm", "app", "nginx"),
    "openid": ("vllm", "app"),
    "routed": ("vllm", "app"),  # test_router.py: two vLLM servers behind vLLM's router
    "keyed_app": ("vllm", "app"),  # test_api_keys.py
    "memory_app": ("vllm", "app"),  # test_memory.py
    "account_app": ("vllm", "app"),  # test_browser_account.py
}
# Parametrized fixtures whose servers depend on the parameter (they call request.getfixturevalue).
NEEDS_FOR_PARAM: dict[tuple[str, str], tuple[str, ...]] = {
    ("history_app", "postgresql"): ("postgres",),
    ("store", "postgresql"): ("postgres",),  # test_store.py
    ("sign_on_history", "postgresql"): ("postgres",),  # test_identities.py
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with what its fixtures need; marks written in the test modules stay as they are."""
    for item in items:
        needs = {need for name in getattr(item, "fixturenames", ()) for need in NEEDS.get(name, ())}
        callspec = getattr(item, "callspec", None)
        for (fixture, param), more in NEEDS_FOR_PARAM.items():
            if callspec is not None and callspec.params.get(fixture) == param:
                needs.update(more)
        for need in sorted(needs - {mark.name for mark in item.iter_markers()}):
            item.add_marker(need)


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


# ---- Debian's chromium, driven by Playwright ----------------------------------------------------------------
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    # Module scope: Playwright's sync API keeps an event loop running while it is open, which the
    # asyncio tests of other modules must not see.
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is missing: `make test` installs it (apt-get install chromium)")
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    yield browser
    browser.close()


@pytest.fixture
def fresh_browser(playwright: Playwright) -> Iterator[Browser]:
    """A browser of its own for the test that streams the most (a shared one left it sluggish)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    yield browser
    browser.close()


# ---- an app with password users -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """An app with password login and two users, ann and ben."""
    app = ChatApp(vllm)
    for name in ("ann", "ben"):
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    with running(app):
        yield app


# ---- the history's store on each database -------------------------------------------------------------------
STORE_DATABASES = itertools.count()


@pytest.fixture
def hooks() -> Hooks:
    """What the store asks its app, as the test sets it (a REST route that checked, until it says otherwise)."""
    return Hooks()


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, hooks: Hooks) -> AsyncIterator[ChatStore]:
    """A migrated, empty store on each database, with the test's hooks."""
    if request.param == "sqlite":
        url = database_url("", tmp_path)
    else:
        url = database_url(request.getfixturevalue("postgres").new_database(f"store_{next(STORE_DATABASES)}"), tmp_path)
    engine = create_engine(url)
    upgrade(engine)
    chat_store = hooks.store(engine)
    yield chat_store
    await chat_store.close()
