"""A user's account page as the tests drive it: logged in from the chat's own page, their API keys and memory."""

from __future__ import annotations

from typing import Any

from tests.support.chat_client import ChatClient
from tests.support.servers import ChatApp


async def page_login(app: ChatApp, name: str, password: str = "") -> ChatClient:
    """A client logged in (no socket), sending what the chat's own pages send with a change."""
    client = ChatClient(app.url, credentials=(name, password or f"{name}-password"), headers={"Origin": app.url})
    await client.log_in()
    return client


async def account(client: ChatClient) -> dict[str, Any]:
    """What the account page shows the client's user."""
    status, body = await client.rest("GET", "/account/api/state")
    assert status == 200, body
    return dict(body)


async def new_key(client: ChatClient, name: str = "script") -> str:
    """A new API key of the client's user (the one time it is shown)."""
    status, body = await client.rest("POST", "/account/api/keys/create", {"name": name})
    assert status == 200, body
    return str(body["key"])


async def remember(client: ChatClient, *facts: str) -> None:
    """Facts added on the account page, in order."""
    for fact in facts:
        status, body = await client.rest("POST", "/account/api/memory/add", {"text": fact})
        assert status == 200, body
