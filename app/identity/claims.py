"""Who a request says it is, decided in one place: the local user's key, a password login's name, the trusted
proxy's headers, an OpenID Connect provider's claims.

Pure decisions without I/O. Each source gives a Claim (provider, subject ...) or a Refusal whose reason the
caller logs; the history then resolves a Claim to a user by (provider, subject) alone, never by name
(app/history/identities.py).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.config import Settings

# The passwordless user of a chat without users (loopback only), and the names nobody else may have.
LOCAL_USER = "local"
RESERVED_NAMES = frozenset({LOCAL_USER})
LOCAL_PROVIDER = "local"
# The provider name of the trusted proxy's user header.
PROXY_PROVIDER = "proxy"
# Where providers put who someone is for good: OpenID Connect's sub, GitHub's id, Entra ID's oid.
SUBJECT_CLAIMS = ("sub", "id", "oid")
# Where they suggest a name, best first.
NAME_CLAIMS = ("preferred_username", "login", "name", "email")
# Claims saying the e-mail is verified: OpenID Connect's, and Google's v2 userinfo's.
VERIFIED_CLAIMS = ("email_verified", "verified_email")
LONGEST = 255


@dataclass(frozen=True)
class Claim:
    """Who a provider says a person is: `subject` names them for good, the rest is a suggestion."""

    provider: str
    subject: str
    name: str
    email: str | None = None
    email_verified: bool = False
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Refusal:
    """Why a request is nobody here (logged)."""

    reason: str


@dataclass(frozen=True)
class ProxyHeaders:
    """The trusted proxy's headers the app believes (an empty name: that header is not believed)."""

    user: str
    email: str = ""
    groups: str = ""

    @classmethod
    def of(cls, settings: Settings) -> ProxyHeaders:
        """The sign-on headers the settings name: only a trusted proxy may send them."""
        return cls(
            settings.trusted_user_header.strip(),
            settings.trusted_email_header.strip(),
            settings.trusted_groups_header.strip(),
        )

    def names(self) -> tuple[str, ...]:
        """The believed headers' names."""
        return tuple(name for name in (self.user, self.email, self.groups) if name)


def local(key: str, proof: str | None) -> Claim | Refusal:
    """The local user for a request that brings this start's key (its cookie, set by the key link)."""
    if not key:
        return Refusal("this process has no key: start the chat with `make chat` or `make run`, which print its link")
    if not proof:
        return Refusal("no key: open the link `make chat` or `make run` printed (`make link` prints it again)")
    if not hmac.compare_digest(proof.encode(), key.encode()):
        return Refusal("a key of another start: the chat was restarted (`make link` prints the new link)")
    return Claim(LOCAL_PROVIDER, LOCAL_USER, LOCAL_USER)


def reserved(name: str) -> bool:
    """Whether the name is kept for the local user (in any case, with any spaces around it)."""
    return name.strip().casefold() in RESERVED_NAMES


def password_name(name: str) -> Refusal | None:
    """A password user's name refused (None: it may be one)."""
    if reserved(name):
        return Refusal(f"the name {name.strip()!r} is kept for the local user of a chat without users: choose another")
    return None


def groups_of(value: Any) -> frozenset[str]:
    """Groups as a claim or a header gives them: a list, or text separated by commas."""
    if isinstance(value, str):
        return frozenset(group.strip() for group in value.split(",") if group.strip())
    if isinstance(value, list):
        return frozenset(str(group) for group in value)
    return frozenset()


def admin_of(groups: frozenset[str], admin_group: str) -> bool | None:
    """Admin by the provider's groups (None: no admin group set, the admin page decides)."""
    wanted = admin_group.strip()
    return wanted in groups if wanted else None


def says_true(value: Any) -> bool:
    """A claim that is true: True, or the text "true" in any case (some providers send text)."""
    return value is True or (isinstance(value, str) and value.strip().casefold() == "true")


def from_proxy(headers: Mapping[str, str], believed: ProxyHeaders, verified_by: frozenset[str]) -> Claim | None:
    """The person the trusted proxy names in its user header (None: it names nobody).

    The ProxyGate let only the proxy's requests carry these headers, and none with an e-mail or groups but no user.
    """
    user = headers.get(believed.user, "").strip()
    if not user:
        return None
    email = headers.get(believed.email, "").strip() or None if believed.email else None
    groups = groups_of(headers.get(believed.groups, "")) if believed.groups else frozenset()
    verified = email is not None and PROXY_PROVIDER in verified_by
    return Claim(PROXY_PROVIDER, user[:LONGEST], user[:LONGEST], email, verified, groups)


def from_openid(
    provider: str, claims: Mapping[str, Any], groups_claim: str, verified_by: frozenset[str]
) -> Claim | Refusal:
    """The person an OpenID Connect (or OAuth) provider signed in, from its user data."""
    subject = first_text(claims, SUBJECT_CLAIMS)
    if subject is None:
        return Refusal(f"{provider} sent no subject ({', '.join(SUBJECT_CLAIMS)}) to know the person by")
    if len(subject) > LONGEST:
        return Refusal(f"{provider} sent a subject longer than {LONGEST} characters")
    email = first_text(claims, ("email",))
    verified = email is not None and (
        provider in verified_by or any(says_true(claims.get(claim)) for claim in VERIFIED_CLAIMS)
    )
    name = (first_text(claims, NAME_CLAIMS) or subject)[:LONGEST]
    return Claim(provider, subject, name, email, verified, groups_of(claims.get(groups_claim)))


def first_text(claims: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    """The first of these claims that holds text or a number, stripped (None: none does)."""
    for name in names:
        value = claims.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None
