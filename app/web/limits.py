"""Request bodies capped before they are read: 413 from Content-Length, or as soon as a streamed body passes it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics

log = logging.getLogger(__name__)


class BodyTooLarge(Exception):
    """A streamed body went past the limit; the 413 is already sent."""


@dataclass(frozen=True)
class Cap:
    """A body limit in bytes, and how the refusal names it: what is refused, megabytes, the setting that sets it."""

    max_bytes: int
    megabytes: float
    setting: str
    what: str = "Request body"
    # How the refusal's sentence is written as JSON (OpenAI's shape for the /v1 routes).
    shape: Callable[[str], dict[str, Any]] = lambda sentence: {"detail": sentence}


class BodyLimit:
    """ASGI middleware: no request body over its cap reaches the app (uploads, REST calls, socket.io polls).

    `routes` give some paths a cap of their own (the file upload's), in place of the general one.
    """

    def __init__(self, app: ASGIApp, cap: Cap, routes: Mapping[str, Cap]) -> None:
        self.app = app
        self.cap = cap
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.routes.get(scope["path"], self.cap)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > cap.max_bytes:
            await self.refuse(scope, send, cap)
            return
        received = 0
        refused = False

        async def counted() -> Message:
            nonlocal received, refused
            message = await receive()
            received += len(message.get("body", b""))
            if received > cap.max_bytes and not refused:
                refused = True
                await self.refuse(scope, send, cap)
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

    async def refuse(self, scope: Scope, send: Send, cap: Cap) -> None:
        """Answer 413 with a sentence, and log the request."""
        log.info("Refused a request body over %g MB: %s %s", cap.megabytes, scope["method"], scope["path"])
        metrics.REFUSALS.labels("body_too_large").inc()
        body = json.dumps(cap.shape(f"{cap.what} over the limit of {cap.megabytes:g} MB ({cap.setting})")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": [*headers, (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
