"""A request the server drops unanswered on a kept-alive connection is sent again on a new one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest

from app.chat.transport import LIMITS, http_client

ANSWER = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"ok": true}'


@pytest.fixture
async def closes_kept_alive() -> AsyncIterator[tuple[str, list[int]]]:
    """A server answering the first request of each connection and closing it, unanswered, at the second."""
    requests_per_connection: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests_per_connection.append(0)
        try:
            while (await reader.readuntil(b"\r\n\r\n")) and requests_per_connection[-1] == 0:
                requests_per_connection[-1] += 1
                writer.write(ANSWER)
                await writer.drain()
            requests_per_connection[-1] += 1  # read, never answered
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/v1/models", requests_per_connection


async def test_a_request_dropped_on_a_kept_alive_connection_is_answered_on_a_new_one(closes_kept_alive):
    url, requests_per_connection = closes_kept_alive
    async with http_client() as client:
        first = await client.get(url)
        second = await client.get(url)
    assert first.json() == second.json() == {"ok": True}
    assert requests_per_connection[:2] == [2, 1]  # the second went out on the kept-alive one, then on a new one


async def test_without_it_that_request_fails(closes_kept_alive):
    url, _ = closes_kept_alive
    async with httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(limits=LIMITS)) as client:
        await client.get(url)
        with pytest.raises(httpx2.RemoteProtocolError):
            await client.get(url)
