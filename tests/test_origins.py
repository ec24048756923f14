"""Only the chat's own pages get in: socket.io Origin and Host checks, REST CORS (the running app, real vLLM)."""

from __future__ import annotations

import urllib.error
import urllib.request
from urllib.parse import urlsplit

import aiohttp
import pytest
import socketio

from tests.support.chat_client import ChatClient
from tests.support.servers import LOGS

pytestmark = pytest.mark.app

FOREIGN = "http://evil.example"


def own_origins(url: str) -> list[str]:
    port = urlsplit(url).port
    return [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]


def app_log(chat_app) -> str:
    return (LOGS / f"chainlit-{chat_app.vllm.name}-{chat_app.port}.log").read_text(errors="replace")


@pytest.mark.parametrize("transports", [("websocket",), ("polling", "websocket")], ids=["websocket", "polling-first"])
async def test_the_apps_own_origins_get_a_session_and_an_answer(chat_app, transports):
    for origin in [*own_origins(chat_app.url), None]:  # None: a client that sends no Origin
        tab = ChatClient(chat_app.url, headers={"Origin": origin} if origin else {}, transports=transports)
        await tab.connect()
        assert "ernie-tiny" in await tab.greeting()
        await tab.change_settings({"max_tokens": 3})
        said = await tab.ask("hi")
        assert [m for m in said if m.get("type") == "assistant_message" and not m.get("isError")]
        await tab.close()


@pytest.mark.parametrize(
    "headers",
    [{"Origin": FOREIGN}, {"Origin": "null"}, {"Host": "evil.example"}, {"Host": "rebound.example:7860"}],
    ids=["foreign-origin", "sandboxed-page", "foreign-host", "rebound-host"],
)
async def test_a_foreign_page_gets_no_session(chat_app, vllm, headers):
    requests_before = len(vllm.logged_requests())
    for _attempt in range(3):  # the page would retry; each attempt is refused, the log says so once
        tab = ChatClient(chat_app.url, headers=headers)
        # A foreign Origin is refused from its first write on, the local user's login post included.
        with pytest.raises((socketio.exceptions.ConnectionError, PermissionError)):
            await tab.connect()
        assert tab.events == [] and not tab.sio.connected
    # The page's first request, the polling handshake (python-socketio's client reads its refusal badly).
    polling = urllib.request.Request(chat_app.url + "/ws/socket.io/?EIO=4&transport=polling", headers=headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(polling, timeout=10)
    assert refused.value.code == 400
    assert len(vllm.logged_requests()) == requests_before
    refused = headers.get("Origin") or headers["Host"]
    assert app_log(chat_app).count(f"{refused!r}" if "Host" in headers else f"page at {refused}:") == 1


def cors_grant(url: str, origin: str, method: str = "GET") -> tuple[int, str | None]:
    """Status and Access-Control-Allow-Origin of a request from a page at origin."""
    headers = {"Origin": origin}
    if method == "OPTIONS":
        headers |= {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    request = urllib.request.Request(url + "/project/translations?language=en-US", headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.headers.get("Access-Control-Allow-Origin")
    except urllib.error.HTTPError as refusal:
        return refusal.code, refusal.headers.get("Access-Control-Allow-Origin")


def test_pages_for_a_foreign_host_are_refused(chat_app):
    request = urllib.request.Request(chat_app.url + "/", headers={"Host": "rebound.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400


def test_rest_calls_from_a_foreign_page_get_no_cors_grant(chat_app):
    for method in ("GET", "OPTIONS"):
        _status, granted = cors_grant(chat_app.url, FOREIGN, method)
        assert granted is None, f"{method} from {FOREIGN} was granted {granted}"
    assert cors_grant(chat_app.url, FOREIGN, "OPTIONS")[0] == 400
    for origin in own_origins(chat_app.url):
        assert cors_grant(chat_app.url, origin, "OPTIONS") == (200, origin)


async def test_a_foreign_page_cannot_read_the_chat_list(chat_app):
    # The list needs the login cookie, which the browser would attach to a foreign page's request too.
    tab = ChatClient(chat_app.url)
    await tab.log_in()
    assert (await tab.rest("POST", "/project/threads", {"pagination": {"first": 5}, "filter": {}}))[0] == 200
    preflight = {
        "Origin": FOREIGN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    status, _ = await ChatClient(chat_app.url, headers=preflight, cookies=tab.cookies).rest(
        "OPTIONS", "/project/threads"
    )
    assert status == 400  # the browser never sends the JSON POST itself
    foreign = ChatClient(chat_app.url, headers={"Origin": FOREIGN}, cookies=tab.cookies)
    async with aiohttp.ClientSession(headers={"Origin": FOREIGN, **foreign.cookie_header}) as http:
        body = {"pagination": {"first": 5}, "filter": {}}
        async with http.post(chat_app.url + "/project/threads", json=body) as reply:
            assert "Access-Control-Allow-Origin" not in reply.headers  # a browser hides the answer from the page
