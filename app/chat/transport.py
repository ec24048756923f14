"""The HTTP client to the model server: aiohttp under the SDK, errors by cause, a dropped request sent again."""

from __future__ import annotations

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
