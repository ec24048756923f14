"""Single sign-on: the user a sign-in proxy names in its header, or an OpenID Connect provider (Chainlit's OAuth)."""

from __future__ import annotations

import logging
from typing import Any

import chainlit as cl
from starlette.datastructures import Headers

from app.config import Settings
from app.errors import HistoryUnavailable
from app.history.team import Team
from app.page import seam

log = logging.getLogger(__name__)


def groups_of(value: Any) -> set[str]:
    """Groups as a claim or a header gives them: a list, or text separated by commas."""
    if isinstance(value, str):
        return {group.strip() for group in value.split(",") if group.strip()}
    if isinstance(value, list):
        return {str(group) for group in value}
    return set()


class SignOn:
    """Who a signed-on identity is in the chat: linked by e-mail or name, added when sign-on is open."""

    def __init__(self, settings: Settings, team: Team) -> None:
        self.settings = settings
        self.team = team

    def admin_of(self, groups: set[str]) -> bool | None:
        """Admin by the identity provider's groups (None: no admin group set, the admin page decides)."""
        wanted = self.settings.sign_on_admin_group.strip()
        return wanted in groups if wanted else None

    async def user(self, name: str, email: str | None, groups: set[str], provider: str) -> cl.User | None:
        """The chat's user for this identity (None: not a user here, and sign-on is closed to new people)."""
        try:
            open_sign_on = bool((await self.team.defaults())["open_sign_on"])
            identifier = await self.team.sign_on(name, email, admin=self.admin_of(groups), open_sign_on=open_sign_on)
        except HistoryUnavailable:
            log.warning("Could not sign on %s: the history database does not answer", name)
            return None
        if identifier is None:
            log.warning("Refused the sign-on of %s (%s): not a user here, and sign-on is closed", name, provider)
            return None
        log.info("Signed on %s as %s (%s)", name, identifier, provider)
        return cl.User(identifier=identifier, metadata={"provider": provider})

    async def from_proxy(self, headers: Headers) -> cl.User | None:
        """The user the trusted proxy names (the ProxyGate let only its requests carry the header)."""
        name = headers.get(self.settings.trusted_user_header, "").strip()
        email = headers.get(self.settings.trusted_email_header, "").strip() or None
        if not (name or email):
            return None
        groups = groups_of(headers.get(self.settings.trusted_groups_header, ""))
        return await self.user(name or str(email), email, groups, "proxy")

    async def from_openid(self, provider: str, claims: dict[str, Any], default: cl.User) -> cl.User | None:
        """The user an OpenID Connect provider vouches for; an e-mail it says is unverified links nobody."""
        email = claims.get("email")
        if claims.get("email_verified") is False:
            log.warning("Refused the sign-on of %s (%s): its e-mail is not verified", default.identifier, provider)
            return None
        groups = groups_of(claims.get(self.settings.sign_on_groups_claim))
        return await self.user(default.identifier, str(email) if email else None, groups, provider)


def install(settings: Settings, team: Team) -> bool:
    """Take sign-on headers from the trusted proxies and OpenID Connect when configured; whether either is."""
    sign_on = SignOn(settings, team)
    if settings.proxy_networks:

        @cl.header_auth_callback
        async def proxy_user(headers: Headers) -> cl.User | None:
            """The user the sign-in proxy in front of the chat names."""
            return await sign_on.from_proxy(headers)

    if seam.oauth_configured():

        @cl.oauth_callback
        async def openid_user(
            provider: str, _token: str, claims: dict[str, Any], default: cl.User, _id_token: str | None = None
        ) -> cl.User | None:
            """The user an OpenID Connect provider signed in."""
            return await sign_on.from_openid(provider, claims, default)

    return bool(settings.proxy_networks) or seam.oauth_configured()
