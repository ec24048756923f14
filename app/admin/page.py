"""GET /admin: the admin page's HTML (its script, /public/admin/admin.js, reads and changes through the API)."""

from __future__ import annotations

from fastapi import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from app.admin.access import Gate
from app.admin.strings import TEXT
from app.i18n import language_of
from app.page import seam
from app.web.app_pages import Assets, Link, frame, sections

ROUTE = "/admin"
SECTIONS = ("users", "own_limits", "usage", "defaults", "shares", "api_keys", "health", "changes")
REFUSED = """<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title></head>
<body><main><h1>{title}</h1><p>{why}</p><p><a href="/">{back}</a></p></main></body></html>
"""


def page_language(forced: str, request: Request) -> str:
    """The chat's language setting, else the browser's."""
    return language_of(forced or request.headers.get("accept-language"))


def render(lang: str) -> str:
    """The page, with its sections empty until the script fills them."""
    words = TEXT[lang]
    links = [Link("/", words["back"]), Link("/chats", words["chats"]), Link("/account", words["account"])]
    return frame(
        lang, words, links, sections(words, SECTIONS), Assets("/public/admin/admin.js", "/public/admin/admin.css")
    )


def install(gate: Gate, forced_language: str) -> None:
    """Serve the page to admins; others are told it is for admins only (403), or sent to log in."""

    async def admin_page(request: Request, user: seam.LoggedInUser) -> Response:
        lang = page_language(forced_language, request)
        try:
            await gate.admin(request.method, request.headers, user)
        except HTTPException as refusal:
            if refusal.status_code == 401:
                return RedirectResponse("/login", status_code=303)
            words = TEXT[lang]
            refused = REFUSED.format(lang=lang, title=words["title"], why=words["forbidden"], back=words["back"])
            return HTMLResponse(refused, status_code=refusal.status_code)
        return HTMLResponse(render(lang))

    seam.add_route(ROUTE, admin_page)
