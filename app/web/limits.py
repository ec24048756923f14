"""Request bodies capped before they are read: 413 from Content-Length, or as soon as a streamed body passes it."""

from __future__ import annotations

import json
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics

log = logging.getLogger(__name__)


class BodyTooLarge(Exception):
    """A streamed body went past the limit; the 413 is already sent."""


class BodyLimit:
    """ASGI middleware: no request body over `max_bytes` reaches the app (uploads, REST calls, socket.io polls)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self.refuse(scope, send)
            return
        received = 0
        refused = False

        async def counted() -> Message:
            nonlocal received, refused
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes and not refused:
                refused = True
                await self.refuse(scope, send)
                raise BodyTooLarge
            return message

        async def unless_refused(message: Message) -> None:
            if not refused:  # the app's own answer to a body cut short is not sent after the 413
                await send(message)

        try:
            await self.app(scope, counted, unless_refused)
        except BodyTooLarge:
            pass
        except Exception:
            if not refused:  # the app may turn BodyTooLarge into an error of its own
                raise

    async def refuse(self, scope: Scope, send: Send) -> None:
        """Answer 413 with a sentence, and log the request."""
        limit_mb = self.max_bytes / 1_000_000
        log.info("Refused a request body over %g MB: %s %s", limit_mb, scope["method"], scope["path"])
        metrics.REFUSALS.labels("body_too_large").inc()
        body = json.dumps({"detail": f"Request body over the limit of {limit_mb:g} MB (MAX_REQUEST_MB)"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": [*headers, (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
