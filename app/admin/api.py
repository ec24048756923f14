"""The admin page's JSON routes: one to read everything shown, one per change; each change logged."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException
from pydantic import BaseModel, Field
from starlette.requests import Request

from app.admin.access import Gate
from app.chat.backend import Backend
from app.chat.quotas import Limits, Quotas
from app.config import Settings
from app.errors import ChatError
from app.history.accounts import MIN_PASSWORD_CHARS
from app.history.api_keys import ApiKeys
from app.history.identities import Identities, Linked
from app.history.replicas import Replicas
from app.history.store import ChatStore
from app.history.team import Change, EmailLinked, Team
from app.identity.claims import PROXY_PROVIDER, password_name
from app.page import seam
from app.presets.builtin import BUILT_IN
from app.web.app_pages import serve_page_routes
from app.web.login_sessions import Sessions

log = logging.getLogger(__name__)
PREFIX = "/admin/api"
USAGE_DAYS = 28
# A user's name: any printable text (an e-mail from single sign-on too).
NAME = r"^[^\x00-\x1f\x7f]+$"
EMAIL = r"^[^\s@]+@[^\s@]+$"


class Named(BaseModel):
    """A change to one user."""

    name: str = Field(min_length=1, max_length=255, pattern=NAME)


class NewUser(Named):
    password: str = Field(min_length=MIN_PASSWORD_CHARS, max_length=1024)
    admin: bool = False
    email: str | None = Field(None, max_length=255, pattern=EMAIL)


class NewPassword(Named):
    password: str = Field(min_length=MIN_PASSWORD_CHARS, max_length=1024)


class AdminFlag(Named):
    admin: bool


class Email(Named):
    email: str | None = Field(None, max_length=255, pattern=EMAIL)


class SignOnIdentity(Named):
    provider: str = Field(min_length=1, max_length=64, pattern=NAME)
    subject: str = Field(min_length=1, max_length=255, pattern=NAME)


class MayLink(Named):
    allowed: bool


class TemporaryOnly(Named):
    on: bool


class OwnLimits(Named):
    answers_at_once: int | None = Field(None, ge=1, le=1000)
    messages_per_minute: int | None = Field(None, ge=1, le=100_000)
    daily_tokens: int | None = Field(None, ge=0, le=10**12)


class Defaults(BaseModel):
    system_prompt: str | None = Field(None, max_length=20_000)
    hidden_presets: list[str] = Field(default_factory=list, max_length=len(BUILT_IN))
    open_sign_on: bool = False
    temporary_chats: bool = False
    api_keys: bool = True


class Share(BaseModel):
    thread_id: str = Field(min_length=1, max_length=36)


class KeyId(BaseModel):
    id: str = Field(min_length=1, max_length=36)


@dataclass(frozen=True)
class Admin:
    """What the admin page reads and changes."""

    gate: Gate
    team: Team
    settings: Settings
    backend: Backend
    store: ChatStore
    quotas: Quotas
    replicas: Replicas
    sessions: Sessions | None
    identities: Identities
    keys: ApiKeys

    async def state(self, me: str) -> dict[str, Any]:
        """Everything the page shows."""
        sign_ons = await self.identities.linked()
        return {
            "me": me,
            "users": [
                asdict(member)
                | {"admin": member.admin or self.gate.runs_the_place(member.name)}
                | {"sign_ons": sign_ons.get(member.name, [])}
                for member in await self.team.members()
            ],
            "sign_on_providers": self.sign_on_providers(),
            "limits": {
                "answers_at_once": self.quotas.answers_at_once,
                "messages_per_minute": self.quotas.messages_per_minute,
                "daily_tokens": self.quotas.daily_tokens,
            },
            "answering_now": dict(self.quotas.answering_now),
            "usage": await self.team.usage(USAGE_DAYS),
            "usage_days": USAGE_DAYS,
            "defaults": await self.team.defaults(),
            "default_system_prompt": self.settings.system_prompt,
            "presets": [preset.name for preset in BUILT_IN],
            "shares": await self.team.shared_chats(),
            "keys": [asdict(key) for key in await self.keys.listed()],
            "health": await self.health(),
            "changes": await self.team.recent_changes(),
        }

    async def health(self) -> dict[str, Any]:
        """vLLM's model and engine, the database, the replicas seen."""
        vllm: dict[str, Any] = {"url": self.backend.server, "serving": await self.backend.serving()}
        if (servers := await self.backend.servers()) is not None:
            vllm |= {"servers_answering": servers.answering, "servers": servers.total}
        with contextlib.suppress(ChatError):  # not serving: said above
            model = await self.backend.model()
            vllm |= {"model": model.name, "engine": model.engine, "window": model.max_model_len}
        database = await self.store.reachable()
        replicas = await self.replicas.seen() if database else []
        kind = self.store.engine.dialect.name
        return {"vllm": vllm, "database": {"kind": kind, "reachable": database}, "replicas": replicas}

    @staticmethod
    def done(change: Change) -> dict[str, bool]:
        """Say a change is done (it is in the admin log already, with the change in one transaction)."""
        log.info("Admin page: %s: %s %s %s", change.admin, change.action, change.target, change.detail)
        return {"ok": True}

    async def logins_ended(self) -> None:
        """Close this replica's tabs of ended logins now (the others close theirs at their next sweep)."""
        if self.sessions is not None:
            await self.sessions.sweep_once()

    def sign_on_providers(self) -> list[str]:
        """The sign-ons configured here: the trusted proxy's header, Chainlit's OAuth providers."""
        return ([PROXY_PROVIDER] if self.settings.proxy_networks else []) + seam.oauth_providers()

    async def add_user(self, me: str, new: NewUser) -> dict[str, bool]:
        if refusal := password_name(new.name):
            raise HTTPException(422, refusal.reason)
        change = Change(me, "add user", new.name, "admin" if new.admin else "")
        if not await self.team.add(change, new.name.strip(), new.password, admin=new.admin, email=new.email):
            raise HTTPException(409, f"There is a user {new.name} already")
        return self.done(change)

    async def set_password(self, me: str, request: NewPassword) -> dict[str, bool]:
        change = Change(me, "set password", request.name)
        found(await self.team.set_password(change, request.name, request.password), request.name)
        await self.logins_ended()
        return self.done(change)

    async def set_admin(self, me: str, request: AdminFlag) -> dict[str, bool]:
        if not request.admin and request.name == me:
            raise HTTPException(409, "You cannot unmake yourself an admin: ask another admin")
        change = Change(me, "make admin" if request.admin else "unmake admin", request.name)
        found(await self.team.set_admin(change, request.name, request.admin), request.name)
        return self.done(change)

    async def set_email(self, me: str, request: Email) -> dict[str, bool]:
        change = Change(me, "link e-mail", request.name, request.email or "(none)")
        outcome, owner = await self.team.set_email(change, request.name, request.email or None)
        if outcome is EmailLinked.TAKEN:
            raise HTTPException(409, f"{owner} has the e-mail {request.email} already")
        found(outcome is EmailLinked.DONE, request.name)
        return self.done(change)

    async def link_sign_on(self, me: str, request: SignOnIdentity) -> dict[str, bool]:
        if request.provider not in (configured := self.sign_on_providers()):
            choices = ", ".join(configured) or "none"
            raise HTTPException(422, f"No sign-on {request.provider} is configured here (configured: {choices})")
        linked = f"{request.provider}: {request.subject}"
        change = Change(me, "link sign-on", request.name, linked)
        outcome, holder = await self.identities.link(change, request.name, request.provider, request.subject)
        if outcome is Linked.RESERVED:
            raise HTTPException(422, f"{request.name} signs in with this machine's key link, never by sign-on")
        if outcome is Linked.TAKEN:
            raise HTTPException(409, f"{linked} is linked to {holder} already: unlink it there first")
        found(outcome is Linked.DONE, request.name)
        return self.done(change)

    async def unlink_sign_on(self, me: str, request: SignOnIdentity) -> dict[str, bool]:
        linked = f"{request.provider}: {request.subject}"
        change = Change(me, "unlink sign-on", request.name, linked)
        if not await self.identities.unlink(change, request.name, request.provider, request.subject):
            raise HTTPException(404, f"{request.name} has no sign-on {linked}")
        return self.done(change)

    async def set_sign_on_may_link(self, me: str, request: MayLink) -> dict[str, bool]:
        what = "let sign-on link by e-mail" if request.allowed else "keep sign-on from linking by e-mail"
        change = Change(me, what, request.name)
        found(await self.team.set_sign_on_may_link(change, request.name, request.allowed), request.name)
        return self.done(change)

    async def set_temporary_only(self, me: str, request: TemporaryOnly) -> dict[str, bool]:
        what = "make every chat temporary" if request.on else "keep chats again"
        change = Change(me, what, request.name)
        found(await self.team.set_temporary_only(change, request.name, request.on), request.name)
        return self.done(change)

    async def set_limits(self, me: str, request: OwnLimits) -> dict[str, bool]:
        limits = Limits(request.answers_at_once, request.messages_per_minute, request.daily_tokens)
        change = Change(me, "set limits", request.name, str(asdict(limits)))
        found(await self.team.set_limits(change, request.name, limits), request.name)
        return self.done(change)

    async def end_sessions(self, me: str, request: Named) -> dict[str, bool]:
        change = Change(me, "end sessions", request.name)
        found(await self.team.end_sessions(change, request.name), request.name)
        await self.logins_ended()
        return self.done(change)

    async def remove_user(self, me: str, request: Named) -> dict[str, bool]:
        if request.name == me:
            raise HTTPException(409, "You cannot remove yourself: ask another admin")
        change = Change(me, "remove user", request.name)
        found(await self.team.remove(change, request.name), request.name)
        await self.logins_ended()
        return self.done(change)

    async def set_defaults(self, me: str, request: Defaults) -> dict[str, bool]:
        names = {preset.name for preset in BUILT_IN}
        if unknown := set(request.hidden_presets) - names:
            raise HTTPException(422, f"No built-in preset {', '.join(sorted(unknown))}")
        if len(set(request.hidden_presets)) == len(names):
            raise HTTPException(422, "At least one built-in preset stays shown")
        change = Change(me, "set defaults", "everyone", request.model_dump_json())
        await self.team.set_defaults(change, request.model_dump())
        return self.done(change)

    async def unshare(self, me: str, share: Share) -> dict[str, bool]:
        change = Change(me, "unshare chat", share.thread_id)
        if not await self.team.unshare(change, share.thread_id):
            raise HTTPException(404, "No such chat")
        return self.done(change)

    async def revoke_key(self, me: str, key: KeyId) -> dict[str, bool]:
        owner = next((k.owner for k in await self.keys.listed() if k.id == key.id), "")
        change = Change(me, "revoke API key", owner or "(gone)", key.id)
        if not await self.keys.revoke_any(change, key.id):
            raise HTTPException(404, "No such key")
        return self.done(change)


def found(changed: bool, name: str) -> None:
    """A change that named no user is a 404."""
    if not changed:
        raise HTTPException(404, f"No user {name}")


def install(admin: Admin) -> None:
    """Serve the routes: every one checks its caller is an admin on the chat's own page first."""

    async def caller(request: Request, user: seam.LoggedInUser) -> str:
        return await admin.gate.admin(request.method, request.headers, user)

    me = Annotated[str, Depends(caller)]
    serve_page_routes(
        PREFIX,
        me,
        {"state": admin.state},
        {
            "users/add": admin.add_user,
            "users/password": admin.set_password,
            "users/admin": admin.set_admin,
            "users/email": admin.set_email,
            "users/link-sign-on": admin.link_sign_on,
            "users/unlink-sign-on": admin.unlink_sign_on,
            "users/sign-on-may-link": admin.set_sign_on_may_link,
            "users/temporary": admin.set_temporary_only,
            "users/limits": admin.set_limits,
            "users/end-sessions": admin.end_sessions,
            "users/remove": admin.remove_user,
            "defaults": admin.set_defaults,
            "shares/unshare": admin.unshare,
            "keys/revoke": admin.revoke_key,
        },
    )
