"""The app's own pages beside Chainlit's (/chats, /admin): one frame in the chat's theme, their sections filled by
their scripts from their JSON routes; and the check that a change comes from one of them."""

from __future__ import annotations

import html
import inspect
import json
import logging
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.requests import Request

from app import metrics
from app.errors import HistoryRefused, HistoryUnavailable
from app.page import seam

log = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD"})
FRAME = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="/favicon">
<link rel="stylesheet" href="/public/pages/page.css">{styles}
<script src="/public/pages/theme.js"></script>
<script type="application/json" id="page-text">{strings}</script>
<script src="/public/pages/page.js" defer></script>
<script src="{script}" defer></script>
</head>
<body>
<a class="skip" href="#main">{skip}</a>
<header class="bar">
<h1>{title}</h1>
<nav aria-label="{pages}"><ul>{links}</ul></nav>
</header>
<main id="main" tabindex="-1">
<p id="status" role="status" aria-live="polite">{loading}</p>
{body}
</main>
</body>
</html>
"""


@dataclass(frozen=True)
class Link:
    """A link in the pages' bar to another page: where, what it says."""

    href: str
    label: str

    def item(self) -> str:
        """The link as an item of the bar's list."""
        return f'<li><a href="{html.escape(self.href)}">{html.escape(self.label)}</a></li>'


@dataclass(frozen=True)
class Assets:
    """A page's own script, and its own stylesheet if any."""

    script: str
    style: str = ""


def frame(lang: str, words: dict[str, str], links: Sequence[Link], body: str, assets: Assets) -> str:
    """A page of the app's own: its bar, a status line, the body; its script reads `words` as its strings."""
    bar = "".join(link.item() for link in links)
    # Inside a <script> element, "</" would end it early: JSON may say it as "<\/".
    strings = json.dumps(words, ensure_ascii=False).replace("</", "<\\/")
    return FRAME.format(
        lang=lang,
        title=html.escape(words["title"]),
        styles=f'\n<link rel="stylesheet" href="{html.escape(assets.style)}">' if assets.style else "",
        strings=strings,
        script=html.escape(assets.script),
        skip=html.escape(words["skip"]),
        pages=html.escape(words["pages"]),
        links=bar,
        loading=html.escape(words["loading"]),
        body=body,
    )


def sections(words: dict[str, str], keys: Sequence[str]) -> str:
    """Empty sections, each titled, for the page's script to fill."""
    return "\n".join(
        f'<section id="{key}" aria-labelledby="{key}-title"><h2 id="{key}-title">{html.escape(words[key])}</h2>'
        f'<div class="content"></div></section>'
        for key in keys
    )


def from_own_page(method: str, headers: Headers, body_type: str = "application/json") -> bool:
    """Whether a request that changes something comes from the chat's own pages (never another site's).

    Browsers send Origin (and Sec-Fetch-Site) with every such request; a page of another site cannot send
    JSON (nor an application/octet-stream file, the other body type a page's route takes) without a CORS preflight,
    which the app grants only to its own origins.
    """
    if method in SAFE_METHODS:
        return True
    origin, site = headers.get("origin"), headers.get("sec-fetch-site")
    if origin is not None and urlsplit(origin).netloc != headers.get("host", ""):
        return False
    if site is not None and site not in ("same-origin", "none"):
        return False
    return headers.get("content-type", "").split(";")[0].strip() == body_type


def page_user(request: Request, user: seam.LoggedInUser) -> str:
    """The logged-in user asking, from the chat's own pages (401 without a login, 403 from another site)."""
    return page_sender(request, user, "application/json")


def page_sender(request: Request, user: Any, body_type: str) -> str:
    """The logged-in user asking, from the chat's own pages with a body of this type (401, 403 otherwise)."""
    if user is None:
        raise HTTPException(401, "Log in first")
    if not from_own_page(request.method, request.headers, body_type):
        log.warning("Refused %s's %s of %s from another site's page", user.identifier, request.method, request.url.path)
        metrics.REFUSALS.labels("origin").inc()
        raise HTTPException(403, "Requests from another site are refused")
    return str(user.identifier)


def endpoint(action: Callable[..., Awaitable[Any]], me: Any) -> Callable[..., Awaitable[Any]]:
    """A FastAPI endpoint for an action: the caller checked first, then a change's body read as its model; the
    database away is 503, a conflict with a change made meanwhile 409."""
    names = list(inspect.signature(action).parameters)
    hints = typing.get_type_hints(action)
    parameters = [inspect.Parameter(names[0], inspect.Parameter.KEYWORD_ONLY, annotation=me)]
    parameters += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[name]) for name in names[1:]
    ]

    async def run(**values: Any) -> Any:
        try:
            return await action(**values)
        except HistoryRefused as refused:  # a change made meanwhile, e.g. the same name or e-mail given twice
            raise HTTPException(
                409, "This conflicts with a change made meanwhile: reload the page and try again"
            ) from refused
        except HistoryUnavailable as away:
            raise HTTPException(503, "The history database does not answer just now: try again in a moment") from away

    # FastAPI reads the dependency and the body's model off the signature.
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return run


def serve_page_routes(
    prefix: str,
    me: Any,
    reads: Mapping[str, Callable[..., Awaitable[Any]]],
    changes: Mapping[str, Callable[..., Awaitable[Any]]],
) -> None:
    """A page's JSON routes under its prefix, each an endpoint for its caller `me`: reads by GET, changes by POST."""
    for path, read in reads.items():
        seam.add_route(f"{prefix}/{path}", endpoint(read, me))
    for path, change in changes.items():
        seam.add_route(f"{prefix}/{path}", endpoint(change, me), "POST")
