"""Read-only links to a chat through the running app (REST and socket.io): who opens them, what they show."""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from app.web.share_links import may_view
from tests.support.chat_client import ChatClient
from tests.support.history import answer_of, run_users, started_chat
from tests.support.servers import ChatApp, VllmServer, running
from tests.support.versions import continue_in_a_new_chat, newest_answer, regenerate, switch

FOREIGN = "http://evil.example"


def team(vllm: VllmServer, **settings: str) -> Iterator[ChatApp]:
    """An app with password login and three users: olga shares, vera views, mia is someone else."""
    app = ChatApp(vllm, extra_env=settings)
    for name in ("olga", "vera", "mia"):
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    with running(app):
        yield app


@pytest.fixture(scope="module")
def share_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """Links open for logged-in users (the default)."""
    yield from team(vllm)


@pytest.fixture(scope="module")
def open_share_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """Links open for anyone who has them (SHARE_LINKS=anyone)."""
    yield from team(vllm, SHARE_LINKS="anyone")


async def user(app: ChatApp, name: str, **client: Any) -> ChatClient:
    """A logged-in client of one of the team (no chat opened)."""
    tab = ChatClient(app.url, credentials=(name, f"{name}-password"), **client)
    await tab.log_in()
    return tab


async def shared_chat(app: ChatApp) -> tuple[ChatClient, str, list[str], dict[str, Any]]:
    """olga's chat, its older answer shown, not shared yet: her tab, the chat, the ids shown, the newer answer."""
    olga = await started_chat(app, credentials=("olga", "olga-password"))
    await olga.change_settings({"system_prompt": "OLGAS-PRIVATE-PROMPT"})
    older = answer_of(await olga.ask("the shared question"))
    newer = newest_answer(olga, await regenerate(olga))
    await switch(olga, older["id"])
    await asyncio.sleep(0.3)  # the chat's last writes
    question = next(m["id"] for m in olga.page() if m["type"] == "user_message")
    return olga, olga.thread_id_started, [question, older["id"]], newer


async def share(tab: ChatClient, thread_id: str, shared: bool) -> int:
    """Share or stop sharing a chat as the page's share dialog does; the status."""
    return (await tab.rest("PUT", "/project/thread/share", {"threadId": thread_id, "isShared": shared}))[0]


async def test_a_shared_chat_shows_logged_in_users_its_branch_only_while_shared_and_nothing_private(share_app):
    olga, thread_id, shown, newer = await shared_chat(share_app)
    vera, anonymous = await user(share_app, "vera"), ChatClient(share_app.url)
    link = f"/project/share/{thread_id}"
    assert (await vera.rest("GET", link))[0] == 404  # not shared: the link shows nothing
    assert await share(vera, thread_id, True) in (401, 403, 404)  # not hers to share
    assert (await vera.rest("GET", link))[0] == 404

    status = await share(olga, thread_id, True)
    assert status == 200
    status, viewed = await vera.rest("GET", link)
    assert status == 200 and [s["id"] for s in viewed["steps"]] == shown
    assert set(viewed["metadata"]) <= {"is_shared", "shared_at"} and "userIdentifier" not in viewed
    said = json.dumps(viewed)
    for private in ("OLGAS-PRIVATE-PROMPT", "olga", "chat_settings", newer["id"], "shown_versions"):
        assert private not in said, private
    assert (await anonymous.rest("GET", link))[0] == 401  # logged-in users only

    status = await share(olga, thread_id, False)
    assert status == 200
    assert (await vera.rest("GET", link))[0] == 404
    await olga.close()


async def test_a_shared_link_lets_its_viewer_write_rate_resume_or_continue_nothing_as_the_owner(share_app):
    olga, thread_id, shown, _ = await shared_chat(share_app)
    status = await share(olga, thread_id, True)
    assert status == 200
    vera = await started_chat(share_app, credentials=("vera", "vera-password"))
    answer_of(await vera.ask("a chat of her own"))
    await asyncio.sleep(0.3)
    rating = {"feedback": {"forId": shown[1], "value": 0}, "sessionId": vera.session_id}
    assert (await vera.rest("PUT", "/feedback", rating))[0] == 404
    before = await vera.rest("POST", "/project/threads", {"pagination": {"first": 20}, "filter": {}})
    assert (await vera.click({"name": "fork", "payload": {"id": shown[1]}}))[0] == 200
    assert (await vera.click({"name": "show_version", "payload": {"id": shown[1]}}))[0] == 200
    await asyncio.sleep(0.5)
    assert await vera.rest("POST", "/project/threads", {"pagination": {"first": 20}, "filter": {}}) == before
    into_olgas = ChatClient(share_app.url, credentials=("vera", "vera-password"), thread_id=thread_id)
    with pytest.raises(Exception, match=r"(?i)connect|refused|authori"):
        await into_olgas.connect()  # resume (and so write into) her chat
    status, own = await olga.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200 and [s["id"] for s in own["steps"]] == shown and all("feedback" not in s for s in own["steps"])
    # Olga can still continue her own chat in a new one.
    forked = await continue_in_a_new_chat(olga, shown[1])
    assert forked
    for tab in (olga, vera):
        await tab.close()


async def test_stopping_to_share_holds_when_a_tab_that_opened_the_shared_chat_closes(share_app):
    olga, thread_id, _, _ = await shared_chat(share_app)
    status = await share(olga, thread_id, True)
    assert status == 200
    await olga.close()
    reopened = ChatClient(share_app.url, credentials=("olga", "olga-password"), thread_id=thread_id)
    await reopened.connect()  # Chainlit copies the chat's metadata (shared) into this session
    await reopened.wait_for(lambda: reopened.events_since(0, "resume_thread"), 30)
    status = await share(reopened, thread_id, False)
    assert status == 200
    await reopened.close()  # Chainlit saves the session's copy: it must not share the chat again
    await asyncio.sleep(0.5)
    vera = await user(share_app, "vera")
    assert (await vera.rest("GET", f"/project/share/{thread_id}"))[0] == 404


async def test_a_foreign_page_can_neither_share_nor_read_a_shared_chat(share_app):
    olga, thread_id, _, _ = await shared_chat(share_app)
    status = await share(olga, thread_id, True)
    assert status == 200
    foreign = ChatClient(share_app.url, headers={"Origin": FOREIGN}, cookies=dict(olga.cookies))
    assert await share(foreign, thread_id, False) == 403
    vera = await user(share_app, "vera")
    headers = {"Origin": FOREIGN, **vera.cookie_header}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.get(f"{share_app.url}/project/share/{thread_id}") as reply,
    ):
        assert "access-control-allow-origin" not in {name.lower() for name in reply.headers}  # its script reads nothing
    await olga.close()


async def test_with_links_open_to_anyone_a_shared_chat_shows_without_a_login_only_while_shared(open_share_app):
    olga, thread_id, shown, _ = await shared_chat(open_share_app)
    anonymous, link = ChatClient(open_share_app.url), f"/project/share/{thread_id}"
    assert (await anonymous.rest("GET", link))[0] == 404
    status = await share(olga, thread_id, True)
    assert status == 200
    status, viewed = await anonymous.rest("GET", link)
    assert status == 200 and [s["id"] for s in viewed["steps"]] == shown and "olga" not in json.dumps(viewed)
    # The link's page: Chainlit's would send a visitor without a login to log in; this one shows the chat.
    status, page = await anonymous.rest("GET", f"/share/{thread_id}")
    said = [s["output"] for s in viewed["steps"]]
    assert status == 200 and all(html.escape(text) in page for text in said) and "OLGAS-PRIVATE-PROMPT" not in page
    mia = await user(open_share_app, "mia")
    assert (await mia.rest("GET", link))[0] == 200
    status, page = await mia.rest("GET", f"/share/{thread_id}")
    assert status == 200 and '<div id="root">' in page  # a logged-in visitor gets Chainlit's page
    status = await share(olga, thread_id, False)
    assert status == 200
    assert (await anonymous.rest("GET", link))[0] == 404 and (await mia.rest("GET", link))[0] == 404
    status, page = await anonymous.rest("GET", f"/share/{thread_id}")
    assert status == 404 and not any(html.escape(text) in page for text in said)
    await olga.close()


def test_a_link_shows_a_chat_only_while_shared_and_takes_out_what_is_private():
    def chat(shared: bool) -> Any:
        return {
            "id": "t",
            "name": "the chat",
            "userId": "u-1",
            "userIdentifier": "olga",
            "metadata": {"is_shared": shared, "shared_at": "now", "chat_settings": {"system_prompt": "secret"}},
            "elements": [{"id": "e", "forId": "q"}],
            "steps": [
                {"id": "q", "type": "user_message", "name": "olga", "output": "hi", "metadata": {"follows": ""}},
                {"id": "a", "type": "assistant_message", "name": "ERNIE", "output": "hello", "feedback": {"value": 1}},
            ],
        }

    viewer = object()
    assert not may_view(chat(False), viewer, anyone=True)
    assert may_view(chat(True), viewer, anyone=False) and not may_view(chat(True), None, anyone=False)
    shown = chat(True)
    metadata = shown["metadata"]
    assert may_view(shown, None, anyone=True)
    assert shown["metadata"] is metadata and metadata == {"is_shared": True, "shared_at": "now"}  # in place
    assert "userId" not in shown and "userIdentifier" not in shown and shown["elements"] == []
    assert [(s["name"], s["output"], s["metadata"]) for s in shown["steps"]] == [
        ("User", "hi", {}),
        ("ERNIE", "hello", {}),
    ]
    assert "feedback" not in shown["steps"][1] and "olga" not in json.dumps(shown)
