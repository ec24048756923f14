"""Security headers on every response, and a chat page that loads nothing from other hosts.

Chainlit's page links Google's fonts and jsDelivr's KaTeX stylesheet (every page load would tell them someone
is chatting, and offline the page would look different); the app serves both from public/vendor instead, so
the Content-Security-Policy can say default-src 'self'. The page also links the app's web app manifest, so a
browser offers to install the chat as an app (public/manifest.webmanifest; manifest-src is default-src 'self').
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The page's own copies of what Chainlit's index.html takes from other hosts.
LOCAL_STYLESHEETS = ("/public/vendor/inter/inter.css", "/public/vendor/katex/katex.min.css")
# The web app manifest and the colour of the browser's bar, as Chainlit's own light and dark themes have it.
WEB_APP = (
    '<link rel="manifest" href="/public/manifest.webmanifest" />\n'
    '<meta name="theme-color" content="#ffffff" media="(prefers-color-scheme: light)" />\n'
    '<meta name="theme-color" content="#212121" media="(prefers-color-scheme: dark)" />\n'
)
# A <link> to another host (http://, https:// or protocol-relative), across lines as Chainlit writes them.
FOREIGN_LINK = re.compile(r"""<link\b[^>]*?\bhref=["'](?:https?:)?//[^"']*["'][^>]*>\s*""", re.IGNORECASE)
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
# Chainlit compiles custom elements (the stats line) with new Function: 'unsafe-eval', but no inline script
# other than the page's own, by hash. Styles: its components set style attributes, and the diagrams Mermaid draws
# (public/vendor/mermaid) carry a <style> in their SVG, so 'unsafe-inline' styles stay; Mermaid evaluates no code.
POLICY = (
    "default-src 'self'",
    "script-src 'self' 'unsafe-eval'{hashes}",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self' data:",
    "media-src 'self' data: blob:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors {frame_ancestors}",
)


def own_page(html: str) -> str:
    """Chainlit's page with its links to other hosts replaced by the app's own copies, and the manifest linked."""
    local = "".join(f'<link rel="stylesheet" href="{path}" />\n' for path in LOCAL_STYLESHEETS)
    return FOREIGN_LINK.sub("", html).replace("</head>", local + WEB_APP + "</head>", 1)


def policy(frame_ancestors: Iterable[str], html: str = "") -> str:
    """The Content-Security-Policy for a response; a page's inline scripts are allowed by their hashes."""
    hashes = "".join(
        f" 'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
        for script in INLINE_SCRIPT.findall(html)
    )
    ancestors = " ".join(frame_ancestors) or "'none'"
    return "; ".join(POLICY).format(hashes=hashes, frame_ancestors=ancestors)


class SecurityHeaders:
    """ASGI middleware: the headers on every HTTP response; HTML pages rewritten to load nothing foreign."""

    def __init__(self, app: ASGIApp, frame_ancestors: tuple[str, ...]) -> None:
        self.app = app
        self.frame_ancestors = frame_ancestors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        page: list[bytes] = []

        async def secured(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("text/html"):
                    start = message  # sent with the rewritten page
                    return
                self.add_headers(headers, policy(self.frame_ancestors), https=scope["scheme"] == "https")
            elif start is not None:
                page.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                html = own_page(b"".join(page).decode())
                body = html.encode()
                headers = MutableHeaders(scope=start)
                headers["content-length"] = str(len(body))
                self.add_headers(headers, policy(self.frame_ancestors, html), https=scope["scheme"] == "https")
                await send(start)
                message = {"type": "http.response.body", "body": body}
            await send(message)

        await self.app(scope, receive, secured)

    def add_headers(self, headers: MutableHeaders, content_security_policy: str, *, https: bool) -> None:
        """The security headers, over whatever the app set; over HTTPS, cookies only for HTTPS."""
        if https:  # served over HTTPS, directly or behind a proxy that says so (X-Forwarded-Proto)
            cookies = headers.getlist("set-cookie")
            del headers["set-cookie"]
            for cookie in cookies:
                secure = "secure" in (part.strip().lower() for part in cookie.split(";"))
                headers.append("set-cookie", cookie if secure else cookie + "; Secure")
        headers["content-security-policy"] = content_security_policy
        headers["x-content-type-options"] = "nosniff"
        headers["referrer-policy"] = "same-origin"
        headers["cross-origin-opener-policy"] = "same-origin"
        if not self.frame_ancestors:
            headers["x-frame-options"] = "DENY"
