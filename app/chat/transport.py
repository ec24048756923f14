"""The HTTP clients to the model server: aiohttp under the SDK for lookups, aiohttp alone for the streamed answers;
errors by cause, a request dropped unanswered sent again."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import NoReturn

import aiohttp
import httpx2
import openai

# The SDK's own aiohttp adapter (what openai.DefaultAioHttpClient builds), imported to wrap it. Why aiohttp: reading
# a stream through httpx's anyio sockets costs two system calls a read; aiohttp's protocol does none, and one app
# process then carries about a quarter more tokens a second to its tabs (docs/scaling.md).
from openai._vendor.httpx_aiohttp.transport import AiohttpTransport as AiohttpTransport

# openai's own default pool: room for every session's stream at once.
LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)


def raise_by_cause(exc: Exception) -> NoReturn:
    """Raise the httpx error aiohttp's failure is: the adapter reads every lost connection as a connect timeout."""
    cause = exc.__cause__ if isinstance(exc, httpx2.TransportError) else exc
    if not isinstance(cause, aiohttp.ClientError) or isinstance(cause, TimeoutError):  # timeouts are mapped right
        raise exc
    if isinstance(cause, aiohttp.ClientConnectorError):  # refused, unresolvable: nothing was sent
        raise httpx2.ConnectError(str(cause)) from cause
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        raise httpx2.RemoteProtocolError(str(cause)) from cause  # closed before any answer, as httpx says it
    raise httpx2.ReadError(str(cause) or type(cause).__name__) from cause


class ModelServerTransport(httpx2.AsyncBaseTransport):
    """aiohttp's transport, with its errors by cause and a request dropped unanswered sent once more.

    A server may close a kept-alive connection just as the next request goes out on it (llama-server
    did, right after a streamed answer): that request never reached the model, and browsers send it
    again on a new connection. An error after the response has started is not retried.
    """

    def __init__(self) -> None:
        self._inner = AiohttpTransport(limits=LIMITS)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._send(request)
        except httpx2.RemoteProtocolError:
            return await self._send(request)

    async def _send(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except (httpx2.TransportError, aiohttp.ClientError) as exc:
            raise_by_cause(exc)

    async def aclose(self) -> None:
        await self._inner.aclose()


def http_client() -> httpx2.AsyncClient:
    """The client AsyncOpenAI talks through: openai's defaults over aiohttp, errors by cause."""
    return openai.DefaultAioHttpClient(transport=ModelServerTransport())


class Streams:
    """Streamed POSTs straight through aiohttp, each answer's body read as it arrives.

    The SDK's request building and httpx's response wrapped around aiohttp's cost the app's one core about a
    millisecond an answer and three generators a network chunk (docs/scaling.md). A request dropped unanswered on
    a kept-alive connection is sent once more, as above.
    """

    def __init__(self, connect_s: float, read_s: float) -> None:
        # read_s: the longest without a byte from the server (and, with the wait for a free connection, to the
        # answer's start: the one timeout around the POST bounds both).
        self.read_s = read_s
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_s)
        self._session: aiohttp.ClientSession | None = None

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> aiohttp.ClientResponse:
        """The response, its body unread (the caller closes it); aiohttp's errors, and TimeoutError, as they are."""
        try:
            return await self._post(url, body, headers)
        except aiohttp.ServerDisconnectedError:  # closed before answering: the request never reached the model
            return await self._post(url, body, headers)

    async def _post(self, url: str, body: bytes, headers: Mapping[str, str]) -> aiohttp.ClientResponse:
        if self._session is None:  # made in the event loop that uses it
            connector = aiohttp.TCPConnector(limit=LIMITS.max_connections or 0)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        async with asyncio.timeout(self.read_s):  # to the answer's start; its body has Arriving's timer
            return await self._session.post(url, data=body, headers=headers, allow_redirects=False)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


class Arriving:
    """A response's body, a piece per network chunk, failed with aiohttp's read timeout after `read_s` without one.

    aiohttp's own read timeout moves a timer at every chunk, 8 000 times a second for 256 answers streaming (7 % of
    the app's core, docs/scaling.md); this timer moves only when it fires, once per `read_s`.
    """

    def __init__(self, response: aiohttp.ClientResponse, read_s: float) -> None:
        self._content = response.content
        self._read_s = read_s
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._timer = self._loop.call_at(self._last + read_s, self._check)

    def __aiter__(self) -> Arriving:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._content.readany()
        except BaseException:  # failed, timed out or cancelled (a stop): nothing more is read
            self.close()
            raise
        if not chunk:
            self.close()
            raise StopAsyncIteration
        self._last = self._loop.time()
        return chunk

    def _check(self) -> None:
        """The body has said nothing for read_s: failed as aiohttp fails it; else checked again when it may be."""
        if self._loop.time() - self._last >= self._read_s:
            self._content.set_exception(aiohttp.SocketTimeoutError(f"no byte for {self._read_s:g} s"))
        else:
            self._timer = self._loop.call_at(self._last + self._read_s, self._check)

    def close(self) -> None:
        """No more reading: the timer goes."""
        self._timer.cancel()
