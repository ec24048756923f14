"""Only the chat's own web pages may use it: socket.io's Origin check, REST CORS, writes and a Host check."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app import metrics
from app.page import seam

log = logging.getLogger(__name__)
DEFAULT_PORTS = {"http": 80, "https": 443}
# Methods that change nothing, which any page may send (a link, an image).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def normalized(origin: str) -> str:
    """An origin as browsers send it: lower case, no trailing slash, no default port."""
    parts = urlsplit(origin.strip().lower().rstrip("/"))
    if not parts.scheme or not parts.hostname:
        return origin.strip()  # "*", or "null" from a sandboxed page
    netloc = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if parts.port is not None and parts.port != DEFAULT_PORTS.get(parts.scheme):
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}"


class OriginCheck:
    """python-socketio's cors_allowed_origins callable: allowed origins pass, others are logged once each."""

    def __init__(self, origins: Iterable[str]) -> None:
        self.origins = frozenset(normalized(origin) for origin in origins)
        self.refused: set[str] = set()

    def __call__(self, origin: str | None, _environ: dict[str, Any] | None = None) -> bool:
        if not origin:  # no Origin header (a polling request of the page itself): nothing to grant
            return False
        if normalized(origin) in self.origins:
            return True
        metrics.REFUSALS.labels("origin").inc()
        if origin not in self.refused:
            self.refused.add(origin)
            log.warning(
                "Refused the web page at %s: not one of ALLOWED_ORIGINS (%s); further refusals of it are not logged",
                origin,
                ", ".join(sorted(self.origins)),
            )
        return False


class HostCheck(TrustedHostMiddleware):
    """Starlette's Host check (against DNS rebinding), logging each refused host name once."""

    def __init__(self, app: Any, allowed_hosts: Iterable[str]) -> None:
        super().__init__(app, allowed_hosts=list(allowed_hosts), www_redirect=False)
        self.refused: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.allow_any and scope["type"] in ("http", "websocket"):
            host = Headers(scope=scope).get("host", "")
            name = urlsplit(f"//{host}").hostname or ""
            if name not in self.allowed_hosts:
                metrics.REFUSALS.labels("host").inc()
            if name not in self.allowed_hosts and host not in self.refused:
                self.refused.add(host)
                log.warning(
                    "Refused a request for host %r: not a host of ALLOWED_ORIGINS or loopback; "
                    "further refusals of it are not logged",
                    host,
                )
        await super().__call__(scope, receive, send)


class ForeignWriteCheck:
    """ASGI middleware: a request that changes something, sent by another site's page, is refused (403).

    Browsers send Origin with every POST, PUT, PATCH and DELETE, form posts included (/logout, /auth/header).
    """

    def __init__(self, app: ASGIApp, check: OriginCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            foreign = not self.check(origin) if origin else headers.get("sec-fetch-site") == "cross-site"
            if foreign:
                await PlainTextResponse("Requests from another site are refused", status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def lock(origins: tuple[str, ...]) -> OriginCheck | None:
    """Accept socket.io connections and CORS grants for the chat's own origins only; the check (None: `*`)."""
    if "*" in origins:
        seam.lock_origins("*", ["*"])
        return None
    check = OriginCheck(origins)
    seam.lock_origins(check, [normalized(o) for o in origins])
    return check
