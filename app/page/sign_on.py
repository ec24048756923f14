"""Single sign-on: the user a sign-in proxy names in its header, or an OpenID Connect provider (Chainlit's OAuth).

Thin glue: app/identity/claims.py decides who the request says it is, app/history/identities.py which user that is.
"""

from __future__ import annotations

import logging
from typing import Any

import chainlit as cl
from starlette.datastructures import Headers

from app.config import Settings
from app.errors import HistoryUnavailable
from app.history.identities import Identities
from app.history.team import Team
from app.identity.claims import Claim, ProxyHeaders, Refusal, admin_of, from_openid, from_proxy
from app.page import seam

log = logging.getLogger(__name__)


class SignOn:
    """The chat's user for a sign-on claim: by its identity, a verified e-mail, or new when sign-on is open."""

    def __init__(self, settings: Settings, team: Team) -> None:
        self.settings = settings
        self.team = team
        self.identities = Identities(team.writer)

    async def user(self, claim: Claim | Refusal | None) -> cl.User | None:
        """The user for the claim (None: nobody here; a refusal is logged with its reason)."""
        if isinstance(claim, Refusal):
            log.warning("Refused a sign-on: %s", claim.reason)
            return None
        if claim is None:
            return None
        who = f"{claim.provider} {claim.subject}"
        try:
            open_sign_on = bool((await self.team.defaults())["open_sign_on"])
            admin = admin_of(claim.groups, self.settings.sign_on_admin_group)
            outcome = await self.identities.resolve(claim, admin=admin, open_sign_on=open_sign_on)
        except HistoryUnavailable:
            log.warning("Could not sign on %s: the history database does not answer", who)
            return None
        if isinstance(outcome, Refusal):
            log.warning("Refused the sign-on of %s: %s", who, outcome.reason)
            return None
        log.info("Signed on %s as %s (%s)", who, outcome.user, outcome.how)
        return cl.User(identifier=outcome.user, metadata={"provider": claim.provider})


def install(settings: Settings, team: Team) -> bool:
    """Take sign-on headers from the trusted proxies and OpenID Connect when configured; whether either is."""
    sign_on = SignOn(settings, team)
    verified_by = settings.verified_email_providers
    if settings.proxy_networks:
        believed = ProxyHeaders.of(settings)

        @cl.header_auth_callback
        async def proxy_user(headers: Headers) -> cl.User | None:
            """The user the sign-in proxy in front of the chat names."""
            return await sign_on.user(from_proxy(headers, believed, verified_by))

    if seam.oauth_configured():

        @cl.oauth_callback
        async def openid_user(
            provider: str, _token: str, claims: dict[str, Any], _default: cl.User, _id_token: str | None = None
        ) -> cl.User | None:
            """The user an OpenID Connect provider signed in."""
            return await sign_on.user(from_openid(provider, claims, settings.sign_on_groups_claim, verified_by))

    return bool(settings.proxy_networks) or seam.oauth_configured()
