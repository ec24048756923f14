"""GET /account: the account page's HTML (its script, /public/account/account.js, reads and changes through the API)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from app.account.strings import TEXT
from app.i18n import language_of
from app.page import seam
from app.web.app_pages import Assets, Link, frame, sections

ROUTE = "/account"
SECTIONS = ("memory", "keys")


def render(lang: str, *, admin: bool) -> str:
    """The page, with its sections empty until the script fills them."""
    words = TEXT[lang]
    links = [Link("/", words["back"]), Link("/chats", words["chats"])] + (
        [Link("/admin", words["admin"])] if admin else []
    )
    return frame(lang, words, links, sections(words, SECTIONS), Assets("/public/account/account.js"))


def install(forced_language: str, is_admin: Callable[[str], Awaitable[bool]]) -> None:
    """Serve the page to anyone logged in (others are sent to log in)."""

    async def account_page(request: Request, user: seam.LoggedInUser) -> Response:
        if user is None:
            return RedirectResponse("/login", status_code=303)
        lang = language_of(forced_language or request.headers.get("accept-language"))
        return HTMLResponse(render(lang, admin=await is_admin(str(user.identifier))))

    seam.add_route(ROUTE, account_page)
