"""The admin page's JSON routes: one to read everything shown, one per change; each change logged."""

from __future__ import annotations

import contextlib
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable
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
from app.history.identities import Identities, Linked
from app.history.replicas import Replicas
from app.history.store import ChatStore
from app.history.team import Team
from app.identity.claims import PROXY_PROVIDER, password_name
from app.page import seam
from app.presets.builtin import BUILT_IN
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


class OwnLimits(Named):
    answers_at_once: int | None = Field(None, ge=1, le=1000)
    messages_per_minute: int | None = Field(None, ge=1, le=100_000)
    daily_tokens: int | None = Field(None, ge=0, le=10**12)


class Defaults(BaseModel):
    system_prompt: str | None = Field(None, max_length=20_000)
    hidden_presets: list[str] = Field(default_factory=list, max_length=len(BUILT_IN))
    open_sign_on: bool = False


class Share(BaseModel):
    thread_id: str = Field(min_length=1, max_length=36)


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

    async def changed(self, me: str, action: str, target: str, detail: str = "") -> dict[str, bool]:
        """Log a change (the app's log and the admin log) and say it is done."""
        log.info("Admin page: %s: %s %s %s", me, action, target, detail)
        await self.team.log(me, action, target, detail)
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
        if not await self.team.add(new.name.strip(), new.password, admin=new.admin, email=new.email):
            raise HTTPException(409, f"There is a user {new.name} already")
        return await self.changed(me, "add user", new.name, "admin" if new.admin else "")

    async def set_password(self, me: str, change: NewPassword) -> dict[str, bool]:
        found(await self.team.set_password(change.name, change.password), change.name)
        await self.logins_ended()
        return await self.changed(me, "set password", change.name)

    async def set_admin(self, me: str, change: AdminFlag) -> dict[str, bool]:
        if not change.admin and change.name == me:
            raise HTTPException(409, "You cannot unmake yourself an admin: ask another admin")
        found(await self.team.set_admin(change.name, change.admin), change.name)
        return await self.changed(me, "make admin" if change.admin else "unmake admin", change.name)

    async def set_email(self, me: str, change: Email) -> dict[str, bool]:
        owner = await self.team.email_owner(change.email) if change.email else None
        if owner not in (None, change.name):
            raise HTTPException(409, f"{owner} has the e-mail {change.email} already")
        found(await self.team.set_email(change.name, change.email or None), change.name)
        return await self.changed(me, "link e-mail", change.name, change.email or "(none)")

    async def link_sign_on(self, me: str, change: SignOnIdentity) -> dict[str, bool]:
        if change.provider not in (configured := self.sign_on_providers()):
            choices = ", ".join(configured) or "none"
            raise HTTPException(422, f"No sign-on {change.provider} is configured here (configured: {choices})")
        outcome, holder = await self.identities.link(change.name, change.provider, change.subject)
        if outcome is Linked.RESERVED:
            raise HTTPException(422, f"{change.name} signs in with this machine's key link, never by sign-on")
        if outcome is Linked.TAKEN:
            linked = f"{change.provider}: {change.subject}"
            raise HTTPException(409, f"{linked} is linked to {holder} already: unlink it there first")
        found(outcome is Linked.DONE, change.name)
        return await self.changed(me, "link sign-on", change.name, f"{change.provider}: {change.subject}")

    async def unlink_sign_on(self, me: str, change: SignOnIdentity) -> dict[str, bool]:
        if not await self.identities.unlink(change.name, change.provider, change.subject):
            raise HTTPException(404, f"{change.name} has no sign-on {change.provider}: {change.subject}")
        return await self.changed(me, "unlink sign-on", change.name, f"{change.provider}: {change.subject}")

    async def set_sign_on_may_link(self, me: str, change: MayLink) -> dict[str, bool]:
        found(await self.team.set_sign_on_may_link(change.name, change.allowed), change.name)
        what = "let sign-on link by e-mail" if change.allowed else "keep sign-on from linking by e-mail"
        return await self.changed(me, what, change.name)

    async def set_limits(self, me: str, change: OwnLimits) -> dict[str, bool]:
        limits = Limits(change.answers_at_once, change.messages_per_minute, change.daily_tokens)
        found(await self.team.set_limits(change.name, limits), change.name)
        return await self.changed(me, "set limits", change.name, str(asdict(limits)))

    async def end_sessions(self, me: str, change: Named) -> dict[str, bool]:
        found(await self.team.end_sessions(change.name), change.name)
        await self.logins_ended()
        return await self.changed(me, "end sessions", change.name)

    async def remove_user(self, me: str, change: Named) -> dict[str, bool]:
        if change.name == me:
            raise HTTPException(409, "You cannot remove yourself: ask another admin")
        found(await self.team.remove(change.name), change.name)
        await self.logins_ended()
        return await self.changed(me, "remove user", change.name)

    async def set_defaults(self, me: str, change: Defaults) -> dict[str, bool]:
        names = {preset.name for preset in BUILT_IN}
        if unknown := set(change.hidden_presets) - names:
            raise HTTPException(422, f"No built-in preset {', '.join(sorted(unknown))}")
        if len(set(change.hidden_presets)) == len(names):
            raise HTTPException(422, "At least one built-in preset stays shown")
        for key, value in change.model_dump().items():
            await self.team.set_default(key, value)
        return await self.changed(me, "set defaults", "everyone", change.model_dump_json())

    async def unshare(self, me: str, share: Share) -> dict[str, bool]:
        if not await self.team.unshare(share.thread_id):
            raise HTTPException(404, "No such chat")
        return await self.changed(me, "unshare chat", share.thread_id)


def found(changed: bool, name: str) -> None:
    """A change that named no user is a 404."""
    if not changed:
        raise HTTPException(404, f"No user {name}")


def install(admin: Admin) -> None:
    """Serve the routes: every one checks its caller is an admin on the chat's own page first."""

    async def caller(request: Request, user: seam.LoggedInUser) -> str:
        return await admin.gate.admin(request.method, request.headers, user)

    me = Annotated[str, Depends(caller)]
    seam.add_route(f"{PREFIX}/state", endpoint(admin.state, me))
    changes: dict[str, Callable[..., Awaitable[dict[str, bool]]]] = {
        "users/add": admin.add_user,
        "users/password": admin.set_password,
        "users/admin": admin.set_admin,
        "users/email": admin.set_email,
        "users/link-sign-on": admin.link_sign_on,
        "users/unlink-sign-on": admin.unlink_sign_on,
        "users/sign-on-may-link": admin.set_sign_on_may_link,
        "users/limits": admin.set_limits,
        "users/end-sessions": admin.end_sessions,
        "users/remove": admin.remove_user,
        "defaults": admin.set_defaults,
        "shares/unshare": admin.unshare,
    }
    for path, change in changes.items():
        seam.add_route(f"{PREFIX}/{path}", endpoint(change, me), "POST")


def endpoint(action: Callable[..., Awaitable[Any]], me: Any) -> Callable[..., Awaitable[Any]]:
    """A FastAPI endpoint for an action: the caller checked first, then a change's body read as its model."""
    names = list(inspect.signature(action).parameters)
    hints = typing.get_type_hints(action)
    parameters = [inspect.Parameter(names[0], inspect.Parameter.KEYWORD_ONLY, annotation=me)]
    parameters += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[name]) for name in names[1:]
    ]

    async def run(**values: Any) -> Any:
        return await action(**values)

    # FastAPI reads the dependency and the body's model off the signature.
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return run
