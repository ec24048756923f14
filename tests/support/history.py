"""A chat's history as the tests drive and read it: a started chat, its answers, stored rows, exports, users."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import sqlalchemy as sa

from app.history.database import create_engine, database_url
from app.history.schema import (
    PASSAGE_TERMS,
    chat_documents,
    documents,
    elements,
    feedbacks,
    passages,
    steps,
    threads,
)
from tests.support.chat_client import ChatClient
from tests.support.servers import ROOT, ChatApp, VllmServer, hermetic_environment


def answer_of(produced: list[dict[str, Any]]) -> dict[str, Any]:
    """The (non-error) answer among the messages a turn produced."""
    answers = [m for m in produced if m.get("type") == "assistant_message" and not m.get("isError")]
    assert answers, produced
    return answers[-1]


def unsaved_marks(tab: ChatClient) -> dict[str, str]:
    """The messages this tab shows marked as not saved yet, and each mark's state (from their newest line)."""
    lines = {d["forId"]: d["props"] for e, d in tab.events if e == "element" and d.get("name") == "AnswerStats"}
    return {message: props["unsaved"]["state"] for message, props in lines.items() if props.get("unsaved")}


async def started_chat(app: ChatApp, **client: Any) -> ChatClient:
    """A greeted session with short answers."""
    tab = ChatClient(app.url, **client)
    await tab.connect()
    await tab.greeting()
    await tab.change_settings({"max_tokens": 8})
    return tab


async def reopened_after_a_restart(app: ChatApp, tab: ChatClient) -> ChatClient:
    """Close the tab, restart the app, and open the tab's chat again from the sidebar (resumed)."""
    thread_id = tab.thread_id_started
    await tab.close()
    await asyncio.sleep(0.5)  # the last writes are the app's background tasks
    app.stop()
    app.start()
    again = ChatClient(app.url, thread_id=thread_id)
    await again.connect()
    await again.wait_for(lambda: again.events_since(0, "resume_thread"), 30)
    return again


async def stored_rows(app: ChatApp, thread_id: str) -> dict[str, int]:
    """Rows the history database holds for one chat, per table (read with the app's own engine)."""
    engine = create_engine(database_url(app.extra_env.get("DATABASE_URL", ""), app.data_dir or ROOT))
    try:
        with engine.connect() as connection:
            counts = {}
            for table in (threads, steps, elements, feedbacks):
                column = table.c.id if table is threads else table.c.thread_id
                query = sa.select(sa.func.count()).select_from(table).where(column == thread_id)
                counts[table.name] = int(connection.execute(query).scalar() or 0)
            return counts
    finally:
        engine.dispose()


async def stored_documents(app: ChatApp) -> dict[str, int]:
    """Rows the history database holds for the users' documents, per table, the full-text index included."""
    engine = create_engine(database_url(app.extra_env.get("DATABASE_URL", ""), app.data_dir or ROOT))
    try:
        with engine.connect() as connection:
            counts = {
                table.name: int(connection.execute(sa.select(sa.func.count()).select_from(table)).scalar() or 0)
                for table in (documents, passages, chat_documents)
            }
            vectors = sa.select(sa.func.count()).select_from(passages).where(passages.c.embedding.is_not(None))
            counts["embedded"] = int(connection.execute(vectors).scalar() or 0)
            if connection.dialect.name == "sqlite":
                counts[PASSAGE_TERMS] = int(
                    connection.execute(sa.text(f"SELECT count(*) FROM {PASSAGE_TERMS}")).scalar() or 0
                )
            return counts
    finally:
        engine.dispose()


async def export(tab: ChatClient, name: str) -> str:
    """Click an export button in the newest answer's stats line and download the file it offers."""
    line = [d for e, d in tab.events if e == "element" and (d.get("props") or {}).get("exports")][-1]
    button = next(b for b in line["props"]["exports"] if b["name"] == name)
    mark = len(tab.events)
    status, _ = await tab.click({"name": button["name"], "payload": {}})  # what AnswerStats.jsx posts
    assert status == 200
    await tab.wait_for(lambda: tab.events_since(mark, "element"), 30)
    file = tab.events_since(mark, "element")[0]
    status, content = await tab.rest("GET", f"/project/file/{file['chainlitKey']}?session_id={tab.session_id}")
    assert status == 200
    return content if isinstance(content, str) else json.dumps(content)


def run_users(app: ChatApp, *args: str, password: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m app.history.users ...` on the app's history, the password on standard input."""
    env = hermetic_environment(DATA_DIR=str(app.data_dir), **app.extra_env)
    return subprocess.run(
        [sys.executable, "-m", "app.history.users", *args],
        cwd=ROOT,
        env=env,
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )


def app_with_users(vllm: VllmServer, *names: str) -> ChatApp:
    """An app (not started) with password login for these users, each with the password `<name>-password`."""
    app = ChatApp(vllm)
    for name in names:
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    return app
