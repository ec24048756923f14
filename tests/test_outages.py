"""Nothing said is lost while the history's database or disk is away: the app, real PostgreSQL and SQLite, faults."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa

from app.history.database import create_engine, database_url
from app.history.schema import steps, threads
from tests.support.chat_client import ChatClient
from tests.support.history import answer_of, run_users, started_chat, unsaved_marks
from tests.support.postgres import PostgresServer
from tests.support.servers import ChatApp, VllmServer, free_port

pytestmark = pytest.mark.app


async def turn(tab: ChatClient, question: str) -> tuple[str, str]:
    """Ask; the question's and the answer's ids."""
    question_id = str(uuid.uuid4())
    produced = await tab.ask(question, message_id=question_id)
    return question_id, answer_of(produced)["id"]


def said(app: ChatApp, thread_id: str) -> list[tuple[str, str]]:
    """A chat's stored messages (kind, text), oldest first, straight from the app's database."""
    engine = create_engine(database_url(app.extra_env.get("DATABASE_URL", ""), app.data_dir or Path()))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.select(steps.c.type, steps.c.output)
                .where(steps.c.thread_id == thread_id)
                .order_by(steps.c.created_at, steps.c.id)
            ).all()
            return [(row.type, row.output) for row in rows]
    finally:
        engine.dispose()


def chat_name(app: ChatApp, thread_id: str) -> str | None:
    """The stored chat's name (None: no row)."""
    engine = create_engine(database_url(app.extra_env.get("DATABASE_URL", ""), app.data_dir or Path()))
    try:
        with engine.connect() as connection:
            return connection.execute(sa.select(threads.c.name).where(threads.c.id == thread_id)).scalar()
    finally:
        engine.dispose()


async def ready(app: ChatApp) -> tuple[int, dict[str, Any]]:
    """GET /ready: its status and body."""
    async with aiohttp.ClientSession() as http, http.get(app.url + "/ready") as reply:
        return reply.status, await reply.json()


async def waiting_in_metrics(port: int) -> tuple[float, float]:
    """The writes waiting and the oldest one's age, as Prometheus reads them."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as reply:
        lines = dict(line.split(" ", 1) for line in (await reply.text()).splitlines() if not line.startswith("#"))
    return float(lines["chat_history_writes_waiting"]), float(lines["chat_history_oldest_waiting_write_seconds"])


async def eventually(check: Any, timeout_s: float = 20) -> None:
    """Wait until check() is true (it may be a coroutine function)."""
    for _ in range(int(timeout_s * 5)):
        outcome = check()
        if asyncio.iscoroutine(outcome):
            outcome = await outcome
        if outcome:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not within {timeout_s} s")


async def test_postgresql_stopped_then_started_gets_every_message_in_order_once_also_across_a_restart(
    vllm: VllmServer, postgres: PostgresServer
):
    metrics_port = free_port()
    settings = {
        "DATABASE_URL": postgres.new_database("outage"),
        "DATABASE_TIMEOUT": "3",
        "METRICS_PORT": str(metrics_port),
    }
    app = ChatApp(vllm, extra_env=settings)
    app.start()
    try:
        tab = await started_chat(app)
        await turn(tab, "said before the outage")
        thread_id = tab.thread_id_started
        postgres.stop(keep_data=True)
        try:
            ids = [await turn(tab, f"said while the database is down {n}") for n in range(3)]
            shown = [message for pair in ids for message in pair]
            await tab.wait_for(lambda: all(unsaved_marks(tab).get(m) == "journaled" for m in shown), 30)
            status, body = await ready(app)
            assert status == 503 and body["database"] == "unavailable" and body["waiting_writes"] >= 6
            waiting, age_s = await waiting_in_metrics(metrics_port)
            assert waiting == body["waiting_writes"] and age_s > 0
            app.running.end(signal.SIGKILL)  # the app dies during the outage with its journal on disk
        finally:
            postgres.start()
        app.start()
        questions = ["said before the outage", *(f"said while the database is down {n}" for n in range(3))]
        await eventually(lambda: [text for kind, text in said(app, thread_id) if kind == "user_message"] == questions)
        stored = said(app, thread_id)
        assert [kind for kind, _ in stored] == ["user_message", "assistant_message"] * 4  # in order, none doubled
        assert all(text for _, text in stored) and chat_name(app, thread_id) == "said before the outage"
        assert (await ready(app))[1]["waiting_writes"] == 0

        again = await started_chat(app)  # the app running through an outage: the marks go once it is back
        await turn(again, "a new chat")
        postgres.stop(keep_data=True)
        try:
            late = await turn(again, "said while it is down, the app running")
            await again.wait_for(lambda: all(unsaved_marks(again).get(m) == "journaled" for m in late), 30)
        finally:
            postgres.start()
        await again.wait_for(lambda: not unsaved_marks(again), 30)
        assert [text for kind, text in said(app, again.thread_id_started) if kind == "user_message"] == [
            "a new chat",
            "said while it is down, the app running",
        ]
        for open_tab in (tab, again):
            await open_tab.close()
    finally:
        app.stop()


@contextlib.contextmanager
def small_disk(folder: Path, megabytes: int) -> Iterator[Path]:
    """A filesystem of its own, this small (tmpfs; the tests run as root, as CI does)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)], check=False)
    assert mounted.returncode == 0, "mounting a small tmpfs needs root"
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def fill(disk: Path) -> Path:
    """Fill the disk to its last byte; SQLite's write-ahead log emptied first, so its next write needs room."""
    database = sqlite3.connect(disk / "chat.db")
    database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    database.close()
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as file:
        for chunk in (1 << 16, 1 << 12, 1 << 9, 1):  # to the last byte
            with contextlib.suppress(OSError):
                while True:
                    file.write(b"\0" * chunk)
    return filler


@pytest.mark.parametrize("journal", ["another disk", "the same disk"])
async def test_a_full_disk_keeps_what_the_journal_can_and_marks_every_message(
    vllm: VllmServer, tmp_path: Path, journal: str
):
    with small_disk(tmp_path / "data", 16) as disk:
        elsewhere = {"JOURNAL_DIR": str(tmp_path / "journal")} if journal == "another disk" else {}
        app = ChatApp(vllm, data_dir=disk, extra_env={"DATABASE_TIMEOUT": "3", **elsewhere})
        app.start()
        try:
            tab = await started_chat(app)
            await turn(tab, "said before the disk filled")
            await asyncio.sleep(1)  # its writes land
            filler = fill(disk)
            ids = [await turn(tab, f"said on a full disk {n}") for n in range(2)]
            expected = "journaled" if journal == "another disk" else "in_memory"
            shown = [message for pair in ids for message in pair]
            await tab.wait_for(lambda: all(unsaved_marks(tab).get(m) == expected for m in shown), 30)
            await turn(tab, "the app keeps serving")
            filler.unlink()
            await tab.wait_for(lambda: not unsaved_marks(tab), 30)
            questions = [text for kind, text in said(app, tab.thread_id_started) if kind == "user_message"]
            assert questions == [
                "said before the disk filled",
                "said on a full disk 0",
                "said on a full disk 1",
                "the app keeps serving",
            ]
            database = sqlite3.connect(disk / "chat.db")
            assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            database.close()
            await tab.close()
        finally:
            app.stop()


def stopped_as_a_deploy_does(app: ChatApp, grace_s: float = 15) -> None:
    """SIGTERM, and SIGKILL if the app has not stopped within the grace period (as `make run` or an orchestrator)."""
    assert app.process is not None
    os.killpg(app.process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        app.process.wait(grace_s)
    app.running.end(signal.SIGKILL)


def cpu_seconds(process: subprocess.Popen[bytes] | None) -> float:
    """The CPU time a process used so far (user and system), from /proc."""
    assert process is not None
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_a_flapping_database_leaves_the_app_idle_while_away_and_every_message_stored_once(
    vllm: VllmServer, postgres: PostgresServer
):
    app = ChatApp(vllm, extra_env={"DATABASE_URL": postgres.new_database("flapping"), "DATABASE_TIMEOUT": "2"})
    app.start()
    try:
        tab = await started_chat(app)
        questions = []
        for flap in range(3):  # away, back until what waited is stored, away again
            postgres.stop(keep_data=True)
            try:
                for n in range(2):
                    questions.append(f"flap {flap}, question {n}")
                    await turn(tab, questions[-1])
                await tab.wait_for(lambda: len(unsaved_marks(tab)) >= 4, 30)
                before = cpu_seconds(app.process)
                await asyncio.sleep(4)
                assert cpu_seconds(app.process) - before < 0.4  # idle while away: retries back off
            finally:
                postgres.start()
            await tab.wait_for(lambda: not unsaved_marks(tab), 30)
        stored = said(app, tab.thread_id_started)
        assert [text for kind, text in stored if kind == "user_message"] == questions  # each once, in order
        assert [kind for kind, _ in stored] == ["user_message", "assistant_message"] * len(questions)
        await tab.close()
    finally:
        app.stop()


async def test_a_chat_deleted_while_another_app_held_its_writes_stays_deleted_when_that_app_returns(
    vllm: VllmServer, postgres: PostgresServer
):
    shared = {"DATABASE_URL": postgres.new_database("two_apps"), "DATABASE_TIMEOUT": "2"}
    first, second = ChatApp(vllm, extra_env=dict(shared)), ChatApp(vllm, extra_env=dict(shared))  # own data folders
    assert run_users(first, "add", "ann", password="ann-password").returncode == 0
    first.start()
    second.start()
    try:
        tab = await started_chat(first, credentials=("ann", "ann-password"))
        await turn(tab, "said before the outage")
        chat = tab.thread_id_started
        postgres.stop(keep_data=True)
        try:
            await tab.change_settings({"temperature": 0.2})  # the chat's settings, kept in the journal
            said_while_away = await turn(tab, "said while the database is away")
            await tab.wait_for(lambda: all(unsaved_marks(tab).get(m) == "journaled" for m in said_while_away), 30)
            first.running.end(signal.SIGKILL)  # killed, holding the chat's writes in its journal
        finally:
            postgres.start()
        other = await started_chat(second, credentials=("ann", "ann-password"))
        status, _ = await other.rest("DELETE", "/project/thread", {"threadId": chat})
        assert status == 200 and chat_name(second, chat) is None
        first.start()  # takes its journal over at once and makes what it can

        async def nothing_waits() -> bool:
            return bool((await ready(first))[1]["waiting_writes"] == 0)

        await eventually(nothing_waits)
        assert chat_name(first, chat) is None and said(first, chat) == []  # nothing of it came back
        await other.close()
    finally:
        first.stop()
        second.stop()


async def test_sigterm_mid_answer_with_the_database_slow_keeps_the_question_and_the_shown_answer(
    vllm: VllmServer, postgres: PostgresServer
):
    app = ChatApp(vllm, extra_env={"DATABASE_URL": postgres.new_database("sigterm"), "DATABASE_TIMEOUT": "30"})
    app.start()
    try:
        tab = await started_chat(app)
        await turn(tab, "said before")
        chat = tab.thread_id_started
        await tab.change_settings({"max_tokens": 4000})
        postgres.pause()  # every commit now hangs
        try:
            mark = await tab.start_answer("said while the database is slow")
            await tab.wait_for(lambda: tab.events_since(mark, "stream_start"), 60)
            await asyncio.sleep(1)  # some of the answer shown; the question's commit still hangs
            shown = tab.replies[tab.events_since(mark, "stream_start")[0]["id"]].streamed
            assert shown
            await asyncio.to_thread(stopped_as_a_deploy_does, app)
        finally:
            postgres.resume()
        app.start()
        await eventually(lambda: len(said(app, chat)) == 4)
        stored = said(app, chat)
        assert [kind for kind, _ in stored] == ["user_message", "assistant_message"] * 2
        assert stored[2][1] == "said while the database is slow"
        assert stored[3][1].startswith(shown)
        await tab.close()
    finally:
        app.stop()
