"""Only the chat's own web pages may use it: socket.io's Origin check, REST CORS and a Host check."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import Receive, Scope, Send

from app import chainlit_seam as seam

log = logging.getLogger(__name__)
DEFAULT_PORTS = {"http": 80, "https": 443}


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
            if name not in self.allowed_hosts and host not in self.refused:
                self.refused.add(host)
                log.warning(
                    "Refused a request for host %r: not a host of ALLOWED_ORIGINS or loopback; "
                    "further refusals of it are not logged",
                    host,
                )
        await super().__call__(scope, receive, send)


def lock(origins: tuple[str, ...], hosts: tuple[str, ...]) -> None:
    """Accept socket.io connections, CORS grants and requests only for the chat's own origins and hosts."""
    opened = "*" in origins
    seam.lock_origins("*" if opened else OriginCheck(origins), ["*"] if opened else [normalized(o) for o in origins])
    seam.add_middleware(HostCheck, allowed_hosts=hosts)
