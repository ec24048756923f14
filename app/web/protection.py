"""The app's HTTP protections put around Chainlit: the body limit, the security headers."""

from __future__ import annotations

from typing import Any

from starlette.middleware import Middleware

from app.config import Settings
from app.web import uploads
from app.web.headers import SecurityHeaders
from app.web.limits import BodyLimit, Cap
from app.web.openai_errors import CHAT_COMPLETIONS, error_body

# The chats page's import of a chat export (app/chats/api.py): a body of its own size.
IMPORT_ROUTE = "/chats/api/import"


def body_limit(settings: Settings) -> Middleware:
    """Request bodies capped before anything reads them; an upload and an imported export at their own limits."""
    general = Cap(int(settings.max_request_mb * 1_000_000), settings.max_request_mb, "MAX_REQUEST_MB")
    upload = Cap(uploads.body_limit(settings), settings.upload_max_mb, "UPLOAD_MAX_MB", "File")
    api = Cap(general.max_bytes, general.megabytes, general.setting, shape=openai_too_large)
    export = Cap(settings.import_max_mb * 1_000_000, settings.import_max_mb, "IMPORT_MAX_MB", "Export")
    routes = {uploads.ROUTE: upload, CHAT_COMPLETIONS: api, IMPORT_ROUTE: export}
    return Middleware(BodyLimit, cap=general, routes=routes)


def openai_too_large(sentence: str) -> dict[str, Any]:
    """A body too big for /v1/chat/completions, refused in OpenAI's shape."""
    return error_body(sentence, code="request_too_large")


def security_headers(settings: Settings) -> Middleware:
    """Every response's security headers (the frames allowed to show the chat)."""
    return Middleware(SecurityHeaders, frame_ancestors=settings.frame_ancestor_origins)
