"""The local user, granted only to the person at this machine: the key link `make chat` prints (Jupyter's way).

A proxy or tunnel on this machine (nginx for TLS, cloudflared, ngrok, tailscale serve) arrives from loopback like
the person does, so loopback proves nothing. A request for any page with ?key=<this start's key> is sent on without
it, the key kept in a cookie (HttpOnly, SameSite=Strict); Chainlit's page then logs in at /auth/header, which grants
the local user only to a request carrying that cookie. A page load with neither a login nor the key gets a page
saying where the link is (Chainlit's would show an empty login form). Each refusal is logged with the peer's address
and the forwarding headers it carried.
"""

from __future__ import annotations

import functools
import html
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app import metrics
from app.i18n import language_of, text
from app.identity.claims import Refusal, local
from app.page import seam
from app.web.login_sessions import Sessions, request_token, unchecked
from app.web.shared_page import PAGE

log = logging.getLogger(__name__)
QUERY = "key"
# Headers by which proxies and tunnels say whom they forward: a refusal logs those a request carried.
FORWARDING = (
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-real-ip",
    "via",
    "cf-connecting-ip",
    "true-client-ip",
)
FORM = """{wrong}
<form method="get" action="{path}">
<label for="key">{field}</label>
<input id="key" name="key" type="password" autocomplete="off" required style="display: block; margin: 0.5rem 0">
<button type="submit">{open}</button>
</form>"""


@dataclass(frozen=True)
class LocalKey:
    """This start's key, and the cookie a browser that opened the link keeps it in."""

    key: str
    # Cookies ignore ports: two chats on one machine keep theirs apart by name.
    cookie: str

    def proof(self, cookies: Mapping[str, str]) -> Refusal | None:
        """Why the request is not the local user's (None: it brings this start's key)."""
        outcome = local(self.key, cookies.get(self.cookie))
        return outcome if isinstance(outcome, Refusal) else None


def refused(request: Request, why: Refusal) -> None:
    """Log a refused request: the peer, the forwarding headers it carried, why (counted)."""
    peer = request.client.host if request.client else "?"
    carried = {name: request.headers[name] for name in FORWARDING if name in request.headers}
    log.warning(
        "Refused the local user to a request from %s %s: %s", peer, carried or "(no forwarding headers)", why.reason
    )
    metrics.REFUSALS.labels("local_key").inc()


class KeyGate:
    """ASGI middleware: the key link turned into its cookie; a page load without login or key gets the key page."""

    def __init__(self, app: ASGIApp, local_key: LocalKey, sessions: Sessions, language: str) -> None:
        self.app = app
        self.local_key = local_key
        self.sessions = sessions
        self.language = language

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or unchecked(scope):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        response: Response | None = None
        if QUERY in request.query_params:
            response = self.exchange(request)
        elif self.page_load(request) and not self.admitted(request):
            response = self.key_page(request, wrong=False)
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)

    def exchange(self, request: Request) -> Response:
        """The link: the key kept in its cookie, the page loaded again without it (a wrong key: the key page)."""
        given = {self.local_key.cookie: request.query_params[QUERY]}
        if (why := self.local_key.proof(given)) is not None:
            refused(request, why)
            return self.key_page(request, wrong=True)
        url = request.url.remove_query_params(QUERY)
        response = RedirectResponse(url.path + (f"?{url.query}" if url.query else ""), status_code=303)
        response.set_cookie(self.local_key.cookie, self.local_key.key, httponly=True, samesite="strict", path="/")
        return response

    @staticmethod
    def page_load(request: Request) -> bool:
        """Whether a browser asks for a page (not the page's own calls)."""
        return request.method == "GET" and "text/html" in request.headers.get("accept", "")

    def admitted(self, request: Request) -> bool:
        """Whether the request is logged in, or brings the key."""
        login = self.sessions.login_of(request_token(request.headers))
        return login is not None or self.local_key.proof(request.cookies) is None

    def key_page(self, request: Request, *, wrong: bool) -> Response:
        """The page saying whose chat this is and where the link is, with a field for its key (401)."""
        lang = language_of(self.language or request.headers.get("accept-language"))
        form = FORM.format(
            wrong=f'<p role="alert">{html.escape(text(lang, "key_wrong"))}</p>' if wrong else "",
            path=html.escape(request.url.path),
            field=html.escape(text(lang, "key_field")),
            open=html.escape(text(lang, "key_open")),
        )
        title, about = html.escape(text(lang, "key_title")), html.escape(text(lang, "key_about"))
        return HTMLResponse(PAGE.format(lang=lang, title=title, about=about, body=form), status_code=401)


async def header_login(local_key: LocalKey, params: dict[str, Any], endpoint: seam.Handler) -> Any:
    """Chainlit's /auth/header, which makes a browser the local user: only with this start's key (401, logged)."""
    request: Request = params["request"]
    if (why := local_key.proof(request.cookies)) is not None:
        refused(request, why)
        raise HTTPException(401, "This chat is the local user's: open the link `make chat` printed (`make link`)")
    return await endpoint(**params)


def install(local_key: LocalKey, sessions: Sessions, language: str) -> Middleware:
    """Guard /auth/header with the key; the middleware that hands out the key's cookie and the key page."""
    seam.wrap_route("/auth/header", "POST", functools.partial(header_login, local_key))
    return Middleware(KeyGate, local_key=local_key, sessions=sessions, language=language)
