"""The app's HTTP protections put around Chainlit: the body limit outside, the security headers inside."""

from __future__ import annotations

from app import chainlit_seam as seam
from app.config import Settings
from app.web.headers import SecurityHeaders
from app.web.limits import BodyLimit


def protect(settings: Settings) -> None:
    """Cap request bodies before anything reads them; secure every response."""
    seam.add_middleware(SecurityHeaders, innermost=True, frame_ancestors=settings.frame_ancestor_origins)
    seam.add_middleware(BodyLimit, max_bytes=int(settings.max_request_mb * 1_000_000))
