"""A tiny single sign-on service for tests, as nginx's auth_request sees oauth2-proxy or Authelia (stdlib only).

Run as `python login_service.py PORT`; the users are SSO_USERS, a JSON object of name -> email (SSO_GROUPS:
name -> comma-separated groups).
"""

from __future__ import annotations

import html
import json
import os
import sys
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlsplit

COOKIE = "sso_user"
USERS: dict[str, str] = json.loads(os.environ.get("SSO_USERS") or "{}")
# Groups of some users (name -> comma-separated groups), as oauth2-proxy's X-Auth-Request-Groups gives them.
GROUPS: dict[str, str] = json.loads(os.environ.get("SSO_GROUPS") or "{}")


def signed_in(cookie_header: str) -> str | None:
    """The configured user the Cookie header names, if any."""
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(cookie_header)
    except CookieError:  # another application's odd cookie must not sign anyone out
        return None
    name = cookies[COOKIE].value if COOKIE in cookies else None
    return name if name in USERS else None


def local_path(target: str) -> str:
    """target if it is a path on this site, else / (no open redirect to another site)."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


def page(title: str, body: str) -> bytes:
    """A minimal HTML page."""
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>".encode()


class Handler(BaseHTTPRequestHandler):
    """GET /auth for nginx's subrequest; /sso/login, /sso/sign-in, /sso/sign-out and /sso/signed-out for people."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        """Route a GET."""
        url = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        if url.path == "/auth":
            self.auth()
        elif url.path == "/sso/login":
            links = "".join(
                f'<li><a href="/sso/sign-in?user={quote(name)}&amp;next=/">{html.escape(name)}</a></li>'
                for name in USERS
            )
            self.answer(200, page("Sign in", f"<h1>Sign in as</h1><ul>{links}</ul>"))
        elif url.path == "/sso/sign-in":
            user = query.get("user", "")
            if user not in USERS:
                self.answer(403, page("Unknown user", "<h1>Unknown user</h1>"))
                return
            # The bare name, no signature: a stand-in for a real session, which tests may also forge on purpose.
            cookie = f"{COOKIE}={user}; Path=/; HttpOnly; SameSite=Lax"
            self.answer(302, b"", {"Location": local_path(query.get("next", "/")), "Set-Cookie": cookie})
        elif url.path == "/sso/sign-out":
            cookie = f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
            self.answer(302, b"", {"Location": "/sso/signed-out", "Set-Cookie": cookie})
        elif url.path == "/sso/signed-out":
            self.answer(200, page("Signed out", '<h1>Signed out</h1><a href="/sso/login">Sign in again</a>'))
        else:
            self.answer(404, page("Not found", "<h1>Not found</h1>"))

    def auth(self) -> None:
        """200 with the user's name and email for a signed-in user, else 401 (nginx then sends people to sign in)."""
        user = signed_in(self.headers.get("Cookie", ""))
        if user is None:
            self.answer(401, b"")
        else:
            groups = {"X-Auth-Groups": GROUPS[user]} if user in GROUPS else {}
            self.answer(200, b"", {"X-Auth-User": user, "X-Auth-Email": USERS[user], **groups})

    def answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Send a complete response."""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body:
            self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
