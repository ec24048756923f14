"""GET /chats: the chats page's HTML (its script, /public/chats/chats.js, reads and changes through the API)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from app.chats.strings import TEXT
from app.i18n import language_of
from app.page import seam
from app.web.app_pages import Assets, Link, frame, sections

ROUTE = "/chats"
SECTIONS = ("search", "chats", "projects", "archived", "import")


def render(lang: str, *, admin: bool, import_max_mb: int) -> str:
    """The page, with its sections empty until the script fills them."""
    words = TEXT[lang] | {"import_max_mb": str(import_max_mb)}
    links = [Link("/", words["back"]), Link("/account", words["account"])]
    links += [Link("/admin", words["admin"])] if admin else []
    return frame(lang, words, links, sections(words, SECTIONS), Assets("/public/chats/chats.js"))


def install(forced_language: str, is_admin: Callable[[str], Awaitable[bool]], import_max_mb: int) -> None:
    """Serve the page to anyone logged in (others are sent to log in)."""

    async def chats_page(request: Request, user: seam.LoggedInUser) -> Response:
        if user is None:
            return RedirectResponse("/login", status_code=303)
        lang = language_of(forced_language or request.headers.get("accept-language"))
        admin = await is_admin(str(user.identifier))
        return HTMLResponse(render(lang, admin=admin, import_max_mb=import_max_mb))

    seam.add_route(ROUTE, chats_page)
