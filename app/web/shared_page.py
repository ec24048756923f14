"""A shared chat's page for a visitor without a login, with links open to anyone: the messages as plain HTML.

Chainlit's page sends every visitor without a login to its login form, so with SHARE_LINKS=anyone the link
serves this page to them; a logged-in visitor still gets Chainlit's own.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from fastapi import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from app.i18n import language_of, text
from app.page import seam

# A plain page of the app's own (a shared chat, the local user's key page): no script, styles inline.
PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>
</head>
<body style="font-family: system-ui, sans-serif; line-height: 1.5; max-width: 48rem; margin: 2rem auto; padding: 1rem">
<h1 style="font-size: 1.4rem">{title}</h1>
<p style="color: #666">{about}</p>
{body}
</body>
</html>
"""
MESSAGE = """<section data-role="{role}" style="margin: 1.5rem 0">
<h2 style="font-size: 0.9rem; color: #666; margin: 0">{who}</h2>
<div style="white-space: pre-wrap">{said}</div>
</section>"""


async def serve(request: Request, thread_id: str, forced_language: str) -> Response:
    """Chainlit's page for a logged-in visitor; for anyone else, the shared chat (or that there is none)."""
    if seam.login_token(dict(request.cookies)) is not None:
        return await seam.chainlit_page(request)
    lang = language_of(forced_language or request.headers.get("accept-language"))
    try:
        thread = await seam.shared_chat(request, thread_id)
    except HTTPException as refusal:  # not shared (any more), or no such chat
        page = PAGE.format(lang=lang, title=text(lang, "shared_none"), about="", body="")
        return HTMLResponse(page, status_code=refusal.status_code)
    return HTMLResponse(render(thread, lang))


def render(thread: Mapping[str, Any], lang: str) -> str:
    """The page of a shared chat, as Chainlit's route gives it (only what may be shown)."""
    names = {"user": text(lang, "user"), "assistant": seam.assistant_name()}
    messages = []
    for step in thread.get("steps") or []:
        role = "user" if step.get("type") == "user_message" else "assistant"
        said = html.escape(str(step.get("output") or ""))
        messages.append(MESSAGE.format(role=role, who=html.escape(names[role]), said=said))
    title = html.escape(str(thread.get("name") or text(lang, "shared_chat")))
    return PAGE.format(lang=lang, title=title, about=text(lang, "shared_about"), body="\n".join(messages))
