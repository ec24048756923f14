"""The HTTP client to the model server: a request it dropped unanswered on a kept-alive connection is sent again."""

from __future__ import annotations

import httpx2
import openai

# openai's own default pool: room for every session's stream at once.
LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)


class ResendOnFreshConnection(httpx2.AsyncBaseTransport):
    """Send a request once more when the server closed the connection without answering it.

    A server may close a kept-alive connection just as the next request goes out on it (llama-server
    did, right after a streamed answer): that request never reached the model, and browsers send it
    again on a new connection. An error after the response has started is not retried.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.RemoteProtocolError:
            return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def http_client() -> httpx2.AsyncClient:
    """The client AsyncOpenAI talks through: openai's defaults, the resending transport."""
    return openai.DefaultAsyncHttpxClient(transport=ResendOnFreshConnection(httpx2.AsyncHTTPTransport(limits=LIMITS)))
