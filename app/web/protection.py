"""The app's HTTP protections put around Chainlit: the body limit outside, the security headers inside."""

from __future__ import annotations

from app import chainlit_seam as seam
from app import uploads
from app.config import Settings
from app.web.headers import SecurityHeaders
from app.web.limits import BodyLimit, Cap


def protect(settings: Settings) -> None:
    """Cap request bodies before anything reads them (an upload at its own limit); secure every response."""
    seam.add_middleware(SecurityHeaders, innermost=True, frame_ancestors=settings.frame_ancestor_origins)
    general = Cap(int(settings.max_request_mb * 1_000_000), settings.max_request_mb, "MAX_REQUEST_MB")
    upload = Cap(uploads.body_limit(settings), settings.upload_max_mb, "UPLOAD_MAX_MB", "File")
    seam.add_middleware(BodyLimit, cap=general, routes={uploads.ROUTE: upload})
