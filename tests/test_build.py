"""The app built by one function, in this process (no server): its HTTP layers answer in the order written."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import jwt
import pytest

from app.build import App, build
from app.config import Settings
from app.page import seam

SECRET = "a-secret-for-this-test-only-of-at-least-32-bytes"
TOO_BIG = str(10 * 1_000_000)  # past MAX_REQUEST_MB=1


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> App:
    """The app as `make chat` builds it (once per process: Chainlit's server is one), with a history."""
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("CHAINLIT_AUTH_SECRET", SECRET)  # restored when the module's tests are done
        return build(Settings(data_dir=tmp_path_factory.mktemp("data"), max_request_mb=1, metrics_port=0))


@pytest.fixture
async def asgi_client(built: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=seam.asgi_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost:7860") as http:
        yield http


async def ended_login(built: App) -> str:
    """A login token of the local user, ended (as a logout ends it)."""
    now = time.time()
    token = jwt.encode({"identifier": "local", "iat": now - 10, "exp": now + 3600}, SECRET, algorithm="HS256")
    assert built.sessions is not None
    await built.sessions.end(token)
    return token


async def test_an_ended_login_is_refused_by_the_session_gate(built, asgi_client):
    token = await ended_login(built)
    response = await asgi_client.get("/project/settings", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


async def test_a_body_too_big_is_refused_before_the_session_gate_reads_the_request(built, asgi_client):
    token = await ended_login(built)
    headers = {"Authorization": f"Bearer {token}", "Content-Length": TOO_BIG}
    response = await asgi_client.post("/project/threads", headers=headers, content=b"{}")
    assert response.status_code == 413


async def test_another_sites_write_is_refused_before_its_body_is_measured(asgi_client):
    headers = {"Origin": "https://evil.example", "Content-Length": TOO_BIG}
    response = await asgi_client.post("/project/threads", headers=headers, content=b"{}")
    assert response.status_code == 403


async def test_a_foreign_host_is_refused_before_anything(built, asgi_client):
    token = await ended_login(built)
    headers = {
        "Host": "evil.example",
        "Origin": "https://evil.example",
        "Authorization": f"Bearer {token}",
        "Content-Length": TOO_BIG,
    }
    response = await asgi_client.post("/project/threads", headers=headers, content=b"{}")
    assert response.status_code == 400 and response.text == "Invalid host header"


async def test_every_response_carries_the_security_headers(asgi_client):
    response = await asgi_client.get("/ready")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
