"""Who may use the admin page: admins only, from the chat's own pages only; each refusal logged."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NoReturn

from fastapi import HTTPException
from starlette.datastructures import Headers

from app import metrics
from app.errors import HistoryUnavailable
from app.history.team import Team
from app.identity.claims import LOCAL_USER
from app.web.app_pages import from_own_page

log = logging.getLogger(__name__)


def refuse(status: int, detail: str, why: str, *values: object) -> NoReturn:
    """Log one line saying why, count it, and answer the request with the status."""
    log.warning("Admin page: refused " + why, *values)
    metrics.REFUSALS.labels("admin").inc()
    raise HTTPException(status_code=status, detail=detail)


@dataclass(frozen=True)
class Gate:
    """The check every admin route makes first."""

    team: Team
    # Without users (loopback only) the passwordless local user runs the place.
    local_admin: bool

    async def admin(self, method: str, headers: Headers, user: Any) -> str:
        """The admin making the request (raises 401, 403 for anyone else or for another site's page, 503 while the
        database cannot say)."""
        name = str(user.identifier) if user is not None else ""
        if not name:
            refuse(401, "Log in first", "a request without a login")
        if not from_own_page(method, headers):
            refuse(403, "Requests from another site are refused", "%s's %s from another site's page", name, method)
        try:
            admin = self.runs_the_place(name) or await self.team.is_admin(name)
        except HistoryUnavailable:  # nobody can say who is an admin now: not a refusal of this person
            refuse(503, "The history database does not answer just now: try again in a moment", "%s: no database", name)
        if not admin:
            refuse(403, "Admins only", "%s, who is not an admin", name)
        return name

    def runs_the_place(self, name: str) -> bool:
        """Whether this is the passwordless local user of a chat without users (an admin without a flag)."""
        return self.local_admin and name == LOCAL_USER

    async def is_admin(self, name: str) -> bool:
        """Whether the user is an admin now (never while the database cannot say)."""
        if self.runs_the_place(name):
            return True
        try:
            return await self.team.is_admin(name)
        except HistoryUnavailable:
            return False
