"""Logins the server controls: throttled password logins, and sessions that logout, a new password and a
removed user end everywhere, at once.

Chainlit's login is a signed token (a cookie, or a Bearer header) that it accepts until it expires. The gate
checks each token against the history's ended sessions before Chainlit sees the request (REST and the
socket.io handshake), and a sweep closes the open connections of sessions that ended since (on any replica).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import jwt
from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app import metrics
from app.config import Settings
from app.errors import HistoryUnavailable
from app.history.logins import Logins, LoginToken
from app.history.store import ChatStore
from app.page import seam

log = logging.getLogger(__name__)
# What any page may load without a login: no token to check.
OPEN_PATHS = ("/assets/", "/public/", "/favicon", "/logo", "/avatars/")
# Chainlit's socket.io endpoint: a request there with an engine.io session id belongs to an open connection.
SOCKETIO_PATH = "/ws/socket.io/"
# How often the open connections are checked against sessions ended elsewhere (another replica, make user-...).
SWEEP_INTERVAL_S = 5.0


def unchecked(scope: Scope) -> bool:
    """What the gate lets through unchecked: open files, and the polls of an open socket.io connection (its
    handshake was checked; the sweep closes it once its login ends)."""
    polling = scope["path"].startswith(SOCKETIO_PATH) and b"sid=" in scope.get("query_string", b"")
    return bool(scope["path"].startswith(OPEN_PATHS) or polling)


def claims_of(token: str, secret: str) -> dict[str, Any] | None:
    """A valid token's claims (None if it is not one: Chainlit refuses it itself)."""
    try:
        return dict(jwt.decode(token, secret, algorithms=["HS256"]))
    except jwt.InvalidTokenError:
        return None


def request_token(headers: Headers) -> str | None:
    """The login token a request carries: a Bearer header, else the cookie."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token:
        return token.strip()
    return seam.login_token(cookie_parser(headers.get("cookie", "")))


class SessionGate:
    """ASGI middleware: a request with an ended session's token gets 401 (or a refused websocket)."""

    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not unchecked(scope):
            user = await self.sessions.ended_session_user(request_token(Headers(scope=scope)))
            if user is not None:
                log.info("Refused a request of %s: that login was ended (logout or new password)", user)
                metrics.REFUSALS.labels("ended_session").inc()
                await refuse(scope, receive, send)
                return
        await self.app(scope, receive, send)


@dataclass
class Sessions:
    """Which logins have ended, and ending them."""

    logins: Logins
    secret: str
    sweeping: asyncio.Task[None] | None = None

    def login_of(self, token: str | None) -> LoginToken | None:
        """A valid token's login (None: no token, or not one Chainlit would accept)."""
        claims = claims_of(token, self.secret) if token else None
        if token is None or claims is None:
            return None
        return LoginToken(token, str(claims.get("identifier", "")), float(claims.get("iat", 0)))

    async def ended_session_user(self, token: str | None) -> str | None:
        """The user of a token whose session has ended (None: no token, or still valid)."""
        if (login := self.login_of(token)) is None:
            return None
        try:
            ended = await self.logins.ended([login])
        except HistoryUnavailable:  # the database is down: chatting goes on
            return None
        return login.user if ended else None

    async def end(self, token: str | None) -> None:
        """End the session of this token (a logout)."""
        claims = claims_of(token, self.secret) if token else None
        if token is not None and claims is not None:
            await self.logins.end(token, float(claims.get("exp", 0)))
            await self.sweep_once()

    async def sweep_once(self) -> None:
        """Disconnect the open connections whose session has ended, checked in one read."""
        # Connected tabs only: Chainlit keeps a closed tab's session for an hour, and its reconnection passes
        # the gate like any handshake (checking those too cost a read per tab every sweep).
        open_tabs = [
            (tab, login)
            for tab in seam.live_sessions()
            if seam.is_connected(tab) and (login := self.login_of(tab.token))
        ]
        try:
            ended = await self.logins.ended([login for _, login in open_tabs])
        except HistoryUnavailable:  # the next sweep tries again
            return
        for tab, login in open_tabs:
            if login.token in ended:
                log.info("Closed a connection of %s: that login was ended", login.user)
                await seam.disconnect(tab)

    def start_sweeping(self) -> None:
        """Keep closing connections of sessions ended elsewhere (another replica, `make user-remove`)."""

        async def sweep() -> None:
            while True:
                await asyncio.sleep(SWEEP_INTERVAL_S)
                await self.sweep_once()

        self.sweeping = asyncio.create_task(sweep())


async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """A closed handshake for a websocket; for a request, the ended login's cookie cleared, and a page loaded
    again (it then asks to log in), anything else answered 401."""
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 4401})
        return
    request = Request(scope)
    response: Response
    if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
        response = RedirectResponse(request.url.path + (f"?{request.url.query}" if request.url.query else ""), 303)
    else:
        body = json.dumps({"detail": "This login has ended (logged out, or the password changed): log in again"})
        response = Response(body, status_code=401, media_type="application/json")
    seam.clear_login(request, response)
    await response(scope, receive, send)


async def logout_ends_session(sessions: Sessions, params: dict[str, Any], endpoint: seam.Handler) -> Any:
    """Chainlit's logout clears the cookie; the token itself is ended too, wherever it was copied."""
    request: Request = params["request"]
    await sessions.end(request_token(request.headers))
    return await endpoint(**params)


async def throttled_login(logins: Logins, params: dict[str, Any], endpoint: seam.Handler) -> Any:
    """Chainlit's password login, refused (429) before any password is hashed once a name or address failed
    too often; each failure counted."""
    request: Request = params["request"]
    name, address = str(params["form_data"].username), request.client.host if request.client else ""
    wait = math.ceil(await logins.wait_before_trying(name, address))
    if wait > 0:
        log.info("Refused a login for %r from %s: too many failed logins; retry in %d s", name, address, wait)
        metrics.REFUSALS.labels("login_throttled").inc()
        raise HTTPException(
            status_code=429,
            detail=f"Too many failed logins: try again in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    # A login in the second of a password change would carry that second and end with it: it waits.
    await asyncio.sleep(max(0.0, await logins.valid_from(name) - time.time()))
    try:
        return await endpoint(**params)
    except HTTPException as refusal:
        if refusal.status_code == 401:
            await logins.failed(name, address)
        raise


async def no_token_renewal(_params: dict[str, Any]) -> None:
    """A token cannot mint a fresh one (a stolen token would live for ever): log in again instead."""
    raise HTTPException(status_code=403, detail="Token renewal is off: log in again")


def watch_logins(settings: Settings, store: ChatStore, *, passwords: bool, secret: str) -> Sessions:
    """Throttled password logins, and sessions ended by logout, a new password or removal; no token renewal."""
    logins = Logins(store.writer, settings.login_attempts, settings.login_window_minutes * 60)
    if passwords:
        seam.wrap_route("/login", "POST", functools.partial(throttled_login, logins))
    sessions = Sessions(logins, secret)
    seam.wrap_route("/logout", "POST", functools.partial(logout_ends_session, sessions))
    seam.guard_route("/auth/jwt", "POST", no_token_renewal)
    seam.set_login_secret(secret)
    seam.set_login_lifetime(int(settings.login_hours * 3600))
    return sessions
