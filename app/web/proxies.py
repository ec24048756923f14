"""The sign-in proxy in front of the chat: its sign-on headers believed from it alone, the client's address behind it.

A sign-on header is believed only from TRUSTED_PROXIES: a request from anywhere else carrying one is refused and
logged. uvicorn is told to trust no X-Forwarded-For itself (app/__main__.py), so the address checked is the
connection's own; behind a trusted proxy, the client's address is then taken from X-Forwarded-For here.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app import metrics
from app.config import Settings

log = logging.getLogger(__name__)
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def within(address: str, networks: Networks) -> bool:
    """Whether the address is one of the networks' (a name or garbage is not)."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_behind(forwarded_for: str, proxies: Networks) -> str | None:
    """The client's address in X-Forwarded-For: the nearest hop that is not a trusted proxy."""
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not within(hop, proxies):
            return hop
    return hops[0] if hops else None


class ProxyGate:
    """ASGI middleware: sign-on headers only from the trusted proxies; behind them, the client's own address."""

    def __init__(self, app: ASGIApp, proxies: Networks, headers: Iterable[str]) -> None:
        self.app = app
        self.proxies = proxies
        self.headers = frozenset(name.lower().encode("latin-1") for name in headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        peer = (scope.get("client") or ("", 0))[0]
        if within(peer, self.proxies):
            forwarded = Headers(scope=scope).get("x-forwarded-for", "")
            if client := client_behind(forwarded, self.proxies):
                scope = {**scope, "client": (client, 0)}
        elif carried := sorted(name.decode() for name, _ in scope["headers"] if name in self.headers):
            log.warning("Refused a request from %s carrying %s: not a trusted proxy (TRUSTED_PROXIES)", peer, carried)
            metrics.REFUSALS.labels("sign_on").inc()
            await refuse(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """403 for a request, a closed handshake for a websocket."""
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 4403})
        return
    body = json.dumps({"detail": "Sign-on headers are accepted from the sign-in proxy only"})
    await Response(body, status_code=403, media_type="application/json")(scope, receive, send)


def sign_on_headers(settings: Settings) -> tuple[str, ...]:
    """The headers only a trusted proxy may send."""
    return (settings.trusted_user_header, settings.trusted_email_header, settings.trusted_groups_header)
