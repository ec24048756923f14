"""Who a request says it is (app/identity/claims.py), as one table: each source's input, and the outcome."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.datastructures import Headers

from app.identity.claims import Claim, ProxyHeaders, Refusal, from_openid, from_proxy, local, password_name

KEY = "this-start's-key"
BELIEVED = ProxyHeaders("X-Forwarded-User")  # the defaults: the user header alone
ALL_BELIEVED = ProxyHeaders("X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Groups")
ROOT_MAIL = {"X-Forwarded-Email": "root@example.com", "X-Forwarded-Groups": "chat-admins"}


def proxy(headers: dict[str, str], believed: ProxyHeaders = BELIEVED, verified: str = "") -> Any:
    return from_proxy(Headers(headers), believed, frozenset(filter(None, [verified])))


def oidc(claims: dict[str, Any], provider: str = "generic", verified: str = "") -> Any:
    return from_openid(provider, claims, "groups", frozenset(filter(None, [verified])))


# Each case: what, the decision's outcome, the outcome expected (a refusal's reason: a part of the one given).
CASES: list[tuple[str, Any, Claim | Refusal | None]] = [
    # The local user: only with this start's key.
    ("local: the key", local(KEY, KEY), Claim("local", "local", "local")),
    ("local: no key", local(KEY, None), Refusal("no key")),
    ("local: a key of another start", local(KEY, "an-old-key"), Refusal("another start")),
    ("local: a process started without one", local("", KEY), Refusal("no key: start the chat")),
    # Password users: never by a name kept for the local user.
    ("password: alice", password_name("alice"), None),
    ("password: local", password_name("local"), Refusal("kept for the local user")),
    ("password: ' Local '", password_name(" Local "), Refusal("kept for the local user")),
    # The proxy: its user header names the subject; e-mail and groups only when believed.
    ("proxy: no user header", proxy({}), None),
    ("proxy: the user header", proxy({"X-Forwarded-User": "pat"}), Claim("proxy", "pat", "pat")),
    (
        "proxy: a client's own e-mail and groups, not believed by default",
        proxy({"X-Forwarded-User": "pat", **ROOT_MAIL}),
        Claim("proxy", "pat", "pat"),
    ),
    (
        "proxy: believed e-mail and groups, the e-mail unverified",
        proxy({"X-Forwarded-User": "pat", **ROOT_MAIL}, ALL_BELIEVED),
        Claim("proxy", "pat", "pat", "root@example.com", False, frozenset({"chat-admins"})),
    ),
    (
        "proxy: believed e-mail, verified by the setting",
        proxy({"X-Forwarded-User": "pat", "X-Forwarded-Email": "pat@example.com"}, ALL_BELIEVED, "proxy"),
        Claim("proxy", "pat", "pat", "pat@example.com", True),
    ),
    ("proxy: an e-mail alone names nobody", proxy(ROOT_MAIL, ALL_BELIEVED), None),
    # OpenID Connect: the subject is sub (id, oid); the e-mail verified only when the provider says so.
    (
        "oidc: sub, preferred_username named root, e-mail verified",
        oidc({"sub": "u-1", "preferred_username": "root", "email": "m@example.net", "email_verified": True}),
        Claim("generic", "u-1", "root", "m@example.net", True),
    ),
    (
        "oidc: email_verified missing",
        oidc({"sub": "u-2", "email": "root@example.com"}),
        Claim("generic", "u-2", "root@example.com", "root@example.com", False),
    ),
    (
        "oidc: email_verified the text false",
        oidc({"sub": "u-3", "email": "root@example.com", "email_verified": "false"}),
        Claim("generic", "u-3", "root@example.com", "root@example.com", False),
    ),
    (
        "oidc: email_verified the text TRUE",
        oidc({"sub": "u-4", "name": "Eve", "email": "e@example.com", "email_verified": "TRUE"}),
        Claim("generic", "u-4", "Eve", "e@example.com", True),
    ),
    (
        "oidc: email_verified False",
        oidc({"sub": "u-5", "email": "e@example.com", "email_verified": False}),
        Claim("generic", "u-5", "e@example.com", "e@example.com", False),
    ),
    (
        "oidc: Google's verified_email",
        oidc({"sub": "g-1", "email": "g@gmail.com", "verified_email": True}, "google"),
        Claim("google", "g-1", "g@gmail.com", "g@gmail.com", True),
    ),
    (
        "oidc: a provider trusted to verify e-mails",
        oidc({"oid": "e-1", "email": "x@corp.example"}, "azure-ad", verified="azure-ad"),
        Claim("azure-ad", "e-1", "x@corp.example", "x@corp.example", True),
    ),
    (
        "github: id and login, groups from the claim",
        oidc({"id": 42, "login": "octo", "groups": ["staff"]}, "github"),
        Claim("github", "42", "octo", None, False, frozenset({"staff"})),
    ),
    ("oidc: no subject", oidc({"email": "x@example.com", "email_verified": True}), Refusal("no subject")),
    ("oidc: a subject too long", oidc({"sub": "s" * 256}), Refusal("longer than 255")),
    ("oidc: the subject as the name", oidc({"sub": "only-sub"}), Claim("generic", "only-sub", "only-sub")),
]


@pytest.mark.parametrize(("case", "outcome", "expected"), CASES, ids=[case for case, _, _ in CASES])
def test_who_a_request_says_it_is(case: str, outcome: Any, expected: Claim | Refusal | None):
    if isinstance(expected, Refusal):
        assert isinstance(outcome, Refusal) and expected.reason in outcome.reason, (case, outcome)
    else:
        assert outcome == expected, case
