"""Every stream to the model server is closed by the answer that opened it: a normal answer logs no traceback."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.chat_client import ChatClient
from tests.support.servers import ChatApp

pytestmark = pytest.mark.app


async def test_normal_answers_leave_the_apps_log_free_of_tracebacks(client: ChatClient, chat_app: ChatApp):
    logged = chat_app.log_path.read_text(errors="replace")
    await client.change_settings({"max_tokens": 24})
    for number in range(4):
        produced = await client.ask(f"question {number}")
        assert [m for m in produced if (m.get("metadata") or {}).get("turn", {}).get("ending") == "complete"]
    await asyncio.sleep(1.0)  # the garbage collector's turn: unclosed streams were reported then
    since = chat_app.log_path.read_text(errors="replace")[len(logged) :]
    assert "Traceback" not in since and "Exception ignored" not in since, since[-3000:]
