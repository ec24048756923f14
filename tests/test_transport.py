"""The clients to the model server (aiohttp under the SDK, aiohttp alone for answers): a request dropped unanswered
sent again, errors by cause."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import httpx2
import pytest

from app.chat.transport import LIMITS, AiohttpTransport, Arriving, Streams, http_client

ANSWER = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"ok": true}'
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serving(handler: Handler) -> AsyncIterator[str]:
    """A raw HTTP server on a free port running handler for each connection; yields its URL."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"


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

    async for url in serving(serve):
        yield url, requests_per_connection


async def test_a_request_dropped_on_a_kept_alive_connection_is_answered_on_a_new_one(closes_kept_alive):
    url, requests_per_connection = closes_kept_alive
    async with http_client() as client:
        first = await client.post(url, content=b"{}")
        second = await client.post(url, content=b"{}")  # a POST: aiohttp sends no POST twice itself
    assert first.json() == second.json() == {"ok": True}
    assert requests_per_connection[:2] == [2, 1]  # the second went out on the kept-alive one, then on a new one


async def test_an_answer_dropped_unanswered_on_a_kept_alive_connection_is_asked_again_on_a_new_one(closes_kept_alive):
    url, requests_per_connection = closes_kept_alive
    streams = Streams(connect_s=1.0, read_s=5.0)
    answers = []
    for _ in range(2):
        async with await streams.post(url, b"{}", {"Content-Type": "application/json"}) as response:
            answers.append(await response.json())
    await streams.aclose()
    assert answers == [{"ok": True}] * 2
    assert requests_per_connection[:2] == [2, 1]


async def test_a_request_dropped_unanswered_twice_fails_as_the_server_disconnecting():
    async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    streams = Streams(connect_s=1.0, read_s=5.0)
    async for url in serving(never_answers):
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await streams.post(url, b"{}", {})
    await streams.aclose()


async def test_without_it_that_request_fails_and_reads_as_a_timeout(closes_kept_alive):
    url, _ = closes_kept_alive
    async with httpx2.AsyncClient(transport=AiohttpTransport(limits=LIMITS)) as client:
        await client.post(url, content=b"{}")
        with pytest.raises(httpx2.ConnectTimeout):  # the adapter's own mapping: what by-cause errors correct
            await client.post(url, content=b"{}")


async def test_a_server_refusing_the_connection_is_unreachable_not_slow():
    async def never_called(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise AssertionError

    server = await asyncio.start_server(never_called, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    async with http_client() as client:
        with pytest.raises(httpx2.ConnectError):
            await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=b"{}")


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_an_answer_cut_off_midway_is_a_read_error_not_a_timeout(framing: str):
    head = b"Content-Length: 1000\r\n" if framing == "content-length" else b"Transfer-Encoding: chunked\r\n"
    first_part = b"data: {}\n\n" if framing == "content-length" else b"a\r\ndata: {}\n\n\r\n"

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + head + b"\r\n" + first_part)
        await writer.drain()
        writer.close()

    async for url in serving(cut):
        async with http_client() as client, client.stream("POST", url, content=b"{}") as response:
            received = []
            with pytest.raises(httpx2.ReadError):
                async for chunk in response.aiter_bytes():
                    received.append(chunk)
        assert b"".join(received) == b"data: {}\n\n"  # what came before the cut is read


def trickling(pieces: int, every_s: float) -> Handler:
    """A server streaming `pieces` small chunks `every_s` apart, then holding the connection open."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(pieces):
            writer.write(b"a\r\ndata: {}\n\n\r\n")
            await writer.drain()
            await asyncio.sleep(every_s)
        await asyncio.sleep(5)
        writer.close()

    return serve


async def read_for(url: str, read_s: float) -> tuple[list[bytes], float]:
    """What a streamed answer's body gave before it failed, and how long after its last piece it failed."""
    streams, received = Streams(connect_s=1.0, read_s=read_s), []
    async with await streams.post(url, b"{}", {}) as response:
        with pytest.raises(aiohttp.SocketTimeoutError):
            async for chunk in Arriving(response, read_s):
                received.append((chunk, asyncio.get_running_loop().time()))
        failed_after = asyncio.get_running_loop().time() - received[-1][1]
    await streams.aclose()
    return [chunk for chunk, _ in received], failed_after


async def test_an_answer_that_goes_quiet_times_out_after_the_read_timeout_from_its_last_byte():
    async for url in serving(trickling(pieces=6, every_s=0.15)):
        received, failed_after = await read_for(url, read_s=0.5)
    # Longer in all than the timeout, never quiet that long until the end: every piece read, then the timeout.
    assert b"".join(received) == b"data: {}\n\n" * 6
    assert 0.45 <= failed_after < 1.5
