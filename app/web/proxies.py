"""The sign-in proxy in front of the chat: its sign-on headers believed from it alone, the client's address behind it.

Only the headers the settings name are believed (the user header; the e-mail and groups headers when set), and only
from TRUSTED_PROXIES: a request from anywhere else carrying one is refused and logged, and so is a request from the
proxy with an e-mail or groups header but no user header (a proxy that sets only the user header passes the
client's own through). uvicorn is told to trust no X-Forwarded-For itself (app/__main__.py), so the address checked
is the connection's own; behind a trusted proxy, the client's address is then taken from X-Forwarded-For here.
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
from app.identity.claims import ProxyHeaders

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

    def __init__(self, app: ASGIApp, proxies: Networks, believed: ProxyHeaders) -> None:
        self.app = app
        self.proxies = proxies
        self.headers = raw_names(believed.names())
        self.user = believed.user.lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        peer = (scope.get("client") or ("", 0))[0]
        carried = sorted({name.decode() for name, _ in scope["headers"] if name in self.headers})
        if why := self.refusal(peer, carried):
            log.warning("Refused a request from %s carrying %s: %s", peer, carried, why)
            await refuse(scope, receive, send)
            return
        if within(peer, self.proxies):
            forwarded = Headers(scope=scope).get("x-forwarded-for", "")
            if client := client_behind(forwarded, self.proxies):
                scope = {**scope, "client": (client, 0)}
        await self.app(scope, receive, send)

    def refusal(self, peer: str, carried: list[str]) -> str | None:
        """Why a request carrying these sign-on headers is refused (None: it is not)."""
        if not carried:
            return None
        if not within(peer, self.proxies):
            return "not a trusted proxy (TRUSTED_PROXIES)"
        if self.user not in carried:
            return (
                "no user header from the proxy: it passed the client's own through (have it set them, or empty "
                "TRUSTED_EMAIL_HEADER / TRUSTED_GROUPS_HEADER)"
            )
        return None


async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """403 for a request, a closed handshake for a websocket (counted)."""
    metrics.REFUSALS.labels("sign_on").inc()
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 4403})
        return
    body = json.dumps({"detail": "Sign-on headers are accepted from the sign-in proxy only"})
    await Response(body, status_code=403, media_type="application/json")(scope, receive, send)


def raw_names(names: Iterable[str]) -> frozenset[bytes]:
    """Header names as ASGI gives them: lower case bytes."""
    return frozenset(name.lower().encode("latin-1") for name in names)


def announce(settings: Settings) -> None:
    """One line at start-up: which sign-on headers are believed, from which addresses."""
    if settings.proxy_networks:
        proxies = ", ".join(map(str, settings.proxy_networks))
        log.info("Sign-on headers believed from %s only: %s", proxies, ", ".join(ProxyHeaders.of(settings).names()))
    else:
        log.info("No sign-on header is believed (TRUSTED_PROXIES is empty)")
