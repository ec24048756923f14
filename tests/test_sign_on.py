"""Single sign-on against real servers: Debian's nginx with auth_request in front of the app (the header it sets
believed from it alone), and a real OpenID Connect provider (oidc-provider) signing people in through Chromium.

Nobody is taken for someone else: a sign-on is its identity's user, never an account of the same name, linked to
an existing account only by a verified e-mail (never a password account's, unless its admin allows) or an admin.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from playwright.sync_api import Browser, expect
from starlette.types import Message, Scope

from app.identity.claims import ProxyHeaders
from app.web.proxies import ProxyGate, client_behind
from tests.support.auth_proxy import AuthProxy
from tests.support.browser import ANSWERS, open_chat
from tests.support.chat_client import ChatClient
from tests.support.history import run_users
from tests.support.oidc import OidcProvider, chainlit_callback
from tests.support.servers import ChatApp, VllmServer, running

PROXY = "127.0.0.2"
PROXY_USERS = {
    "alice": "alice@example.com",
    "bob": "bob@example.org",
    "carol": "carol@example.net",
    "dave": "dave@example.net",
    "kate": "carol@example.net",  # carol's e-mail: the proxy vouches for it (SIGN_ON_VERIFIED_EMAIL_PROVIDERS)
    "root": "mallory@example.net",  # the proxy's user named like the password admin
    "pat": "pat@example.net",
}
PROXY_GROUPS = {"alice": "staff", "dave": "staff,chat-admins"}
# What the app believes from the proxy beside its user header (by default, nothing else).
BELIEVE_EVERYTHING = {
    "TRUSTED_EMAIL_HEADER": "X-Forwarded-Email",
    "TRUSTED_GROUPS_HEADER": "X-Forwarded-Groups",
    "SIGN_ON_VERIFIED_EMAIL_PROVIDERS": "proxy",
}
OIDC_USERS: dict[str, dict[str, Any]] = {
    "alice": {
        "email": "alice@example.com",
        "email_verified": True,
        "name": "Alice",
        "preferred_username": "alice",
        "groups": ["chat-admins"],
    },
    "bob": {
        "email": "bob@example.org",
        "email_verified": True,
        "name": "Bob",
        "preferred_username": "bob",
        "groups": ["staff"],
    },
    # A name of their own choosing: the password admin's.
    "mallory": {"preferred_username": "root", "name": "root", "email": "mallory@example.net", "email_verified": True},
    # The password admin's e-mail, not verified: the claim missing (Entra ID), or the text "false" (Cognito).
    "eve": {"preferred_username": "eve", "email": "root@example.com"},
    "frank": {"preferred_username": "frank", "email": "root@example.com", "email_verified": "false"},
}
ROOT = ("root", "root-password")
OPEN: dict[str, Any] = {"system_prompt": None, "hidden_presets": [], "open_sign_on": True}
CLOSED = {**OPEN, "open_sign_on": False}


# ---- the gate in front of the app (no server) ----------------------------------------------------------------
def test_the_client_behind_trusted_proxies_is_the_nearest_hop_that_is_not_one():
    proxies = (ipaddress.ip_network("10.0.0.0/8"),)
    assert client_behind("203.0.113.9, 10.1.1.1", proxies) == "203.0.113.9"
    assert client_behind("198.51.100.1, 203.0.113.9, 10.1.1.1", proxies) == "203.0.113.9"  # the first is spoofable
    assert client_behind("10.2.2.2", proxies) == "10.2.2.2" and client_behind("", proxies) is None


async def gate(peer: str, headers: dict[str, str]) -> tuple[int, Scope | None]:
    """A request through the ProxyGate: its status, and the scope the app saw (None: refused)."""
    seen: list[Scope] = []

    async def app(scope: Scope, _receive: Any, send: Any) -> None:
        seen.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        sent.append(message)

    networks = (ipaddress.ip_network(PROXY),)
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    scope = {"type": "http", "method": "GET", "path": "/", "headers": raw, "client": (peer, 5000)}
    await ProxyGate(app, networks, ProxyHeaders("X-Forwarded-User", "X-Forwarded-Email"))(scope, receive, send)
    return sent[0]["status"], seen[0] if seen else None


async def test_a_sign_on_header_passes_from_the_proxy_only_and_the_client_is_read_behind_it():
    status, scope = await gate(PROXY, {"X-Forwarded-User": "alice", "X-Forwarded-For": "192.0.2.7"})
    assert status == 200 and scope is not None and scope["client"][0] == "192.0.2.7"
    for peer in ("127.0.0.1", "192.0.2.7"):
        assert await gate(peer, {"x-forwarded-user": "alice"}) == (403, None)
        assert await gate(peer, {"X-Forwarded-Email": "alice@example.com", "X-Forwarded-For": PROXY}) == (403, None)
    status, scope = await gate("127.0.0.1", {"X-Forwarded-For": PROXY})  # no header: passes, address its own
    assert status == 200 and scope is not None and scope["client"][0] == "127.0.0.1"
    # From the proxy, an e-mail without the user header is the client's own, passed through: refused.
    assert await gate(PROXY, {"X-Forwarded-Email": "root@example.com"}) == (403, None)
    status, _ = await gate(PROXY, {"X-Forwarded-User": "pat", "X-Forwarded-Email": "pat@example.com"})
    assert status == 200
    assert (await gate(PROXY, {"X-Forwarded-Groups": "chat-admins"}))[0] == 200  # not believed here: not looked at


# ---- nginx with auth_request in front of the app ----------------------------------------------------------------
@pytest.fixture(scope="module")
def proxied(vllm: VllmServer) -> Iterator[tuple[ChatApp, AuthProxy]]:
    """The app behind the sign-in proxy, which sets all three headers (all believed): root, alice and robert have
    passwords; sign-on is closed."""
    app = ChatApp(vllm)
    proxy = AuthProxy(app.url, PROXY_USERS, groups=PROXY_GROUPS)
    app.extra_env = {
        "TRUSTED_PROXIES": PROXY,
        "ALLOWED_ORIGINS": proxy.url,
        "SIGN_ON_ADMIN_GROUP": "chat-admins",
        **BELIEVE_EVERYTHING,
    }
    assert run_users(app, "add", "root", "--admin", password="root-password").returncode == 0
    assert run_users(app, "add", "alice", password="alice-password").returncode == 0
    assert run_users(app, "add", "robert", password="robert-password").returncode == 0
    with running(app, proxy):
        yield app, proxy


async def header_login(url: str, headers: dict[str, str]) -> tuple[int, str]:
    """POST /auth/header as the page does: status, and the user it logged in ("" if none)."""
    async with aiohttp.ClientSession(headers=headers, cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.post(url + "/auth/header") as reply:
            status = reply.status
        async with http.get(url + "/user") as reply:
            user = (await reply.json()).get("identifier", "") if reply.status == 200 else ""
    return status, user


async def test_a_header_sent_straight_to_the_app_is_refused_whatever_it_claims(proxied):
    app, _ = proxied
    for headers in (
        {"X-Forwarded-User": "alice"},
        {"X-Forwarded-Email": "alice@example.com"},
        {"X-Forwarded-User": "alice", "X-Forwarded-For": PROXY},  # uvicorn would have believed this one
        {"x-forwarded-user": "root", "X-Real-IP": PROXY},
    ):
        assert await header_login(app.url, headers) == (403, ""), headers
    async with aiohttp.ClientSession(headers={"X-Forwarded-User": "alice"}) as http:
        form = {"username": "alice", "password": "alice-password"}
        async with http.post(app.url + "/login", data=form) as reply:  # any route, a right password too
            assert reply.status == 403
    assert "Refused a request from 127.0.0.1 carrying ['x-forwarded-user']" in app.log_path.read_text()


async def test_the_proxy_signs_people_in_by_their_identity_never_by_name(proxied):
    app, proxy = proxied
    root = ChatClient(app.url, credentials=ROOT)  # a script: no Origin
    await root.log_in()

    async def admin(path: str, body: dict[str, Any]) -> int:
        return (await root.rest("POST", f"/admin/api/{path}", body))[0]

    async def through_proxy(name: str) -> tuple[int, str]:
        return await header_login(proxy.url, {"Cookie": f"sso_user={name}"})

    # Named like the password admin, or like a password user: neither, and nobody while sign-on is closed.
    assert await through_proxy("root") == (401, "")
    assert await through_proxy("alice") == (401, "")
    assert "Refused the sign-on of proxy root: not a user here, and sign-on is closed" in app.log_path.read_text()
    # An admin links the proxy's bob to robert's account.
    link = {"name": "robert", "provider": "proxy", "subject": "bob"}
    assert await admin("users/link-sign-on", link) == 200
    assert await through_proxy("bob") == (200, "robert")
    assert await admin("users/link-sign-on", {**link, "name": "alice"}) == 409  # bob is robert's
    assert await admin("users/link-sign-on", {**link, "name": "nobody"}) == 404
    assert await admin("users/link-sign-on", {**link, "provider": "github"}) == 422  # not configured here
    assert await through_proxy("dave") == (200, "dave")  # the admin group: let in, a user of his own
    # alice's verified e-mail: her password account is hers until she (through an admin) allows sign-on to link.
    assert await admin("users/email", {"name": "alice", "email": "alice@example.com"}) == 200
    assert await admin("defaults", OPEN) == 200
    assert await through_proxy("alice") == (401, "")
    assert "an admin may link this sign-on to alice" in app.log_path.read_text()
    assert await admin("users/sign-on-may-link", {"name": "alice", "allowed": True}) == 200
    assert await through_proxy("alice") == (200, "alice")
    # Sign-on open: the proxy's root is a new user of its own; kate has carol's e-mail, which the proxy vouches for.
    assert await through_proxy("root") == (200, "root-2")
    assert await through_proxy("carol") == (200, "carol")
    assert await through_proxy("kate") == (200, "carol")
    state = (await root.rest("GET", "/admin/api/state"))[1]
    users = {user["name"]: user for user in state["users"]}
    assert not users["root-2"]["admin"] and not users["root-2"]["password"] and users["root"]["password"]
    assert users["carol"]["email"] == "carol@example.net" and not users["carol"]["password"]
    assert users["dave"]["admin"] and not users["alice"]["admin"] and not users["carol"]["admin"]
    assert users["robert"]["sign_ons"] == [{"provider": "proxy", "subject": "bob"}]
    assert {"provider": "proxy", "subject": "kate"} in users["carol"]["sign_ons"]
    assert state["sign_on_providers"] == ["proxy"]
    assert await admin("users/unlink-sign-on", link) == 200
    assert await admin("users/unlink-sign-on", link) == 404
    assert await through_proxy("bob") == (200, "bob")  # no longer robert: a new user, sign-on being open
    assert await admin("defaults", CLOSED) == 200


@pytest.fixture(scope="module")
def user_header_only(vllm: VllmServer) -> Iterator[tuple[ChatApp, AuthProxy]]:
    """A proxy that sets only the user header (the client's e-mail and groups headers pass through as they came),
    in front of an app with the default settings (only the user header believed); root is the password admin."""
    app = ChatApp(vllm)
    proxy = AuthProxy(app.url, PROXY_USERS, name="user-only", email_header="", groups_header="")
    app.extra_env = {"TRUSTED_PROXIES": PROXY, "ALLOWED_ORIGINS": proxy.url, "SIGN_ON_ADMIN_GROUP": "chat-admins"}
    assert run_users(app, "add", "root", "--admin", password="root-password").returncode == 0
    with running(app, proxy):
        yield app, proxy


async def test_an_e_mail_or_groups_header_the_proxy_does_not_set_is_not_believed(user_header_only):
    app, proxy = user_header_only
    root = ChatClient(app.url, credentials=ROOT)
    await root.log_in()
    assert (await root.rest("POST", "/admin/api/users/email", {"name": "root", "email": "root@example.com"}))[0] == 200
    assert (await root.rest("POST", "/admin/api/defaults", OPEN))[0] == 200
    claimed = {"X-Forwarded-Email": "root@example.com", "X-Forwarded-Groups": "chat-admins"}  # the client's own
    assert await header_login(proxy.url, {"Cookie": "sso_user=pat", **claimed}) == (200, "pat")
    users = {user["name"]: user for user in (await root.rest("GET", "/admin/api/state"))[1]["users"]}
    assert not users["pat"]["admin"] and users["pat"]["email"] is None
    assert "Sign-on headers believed from 127.0.0.2/32 only: X-Forwarded-User" in app.log_path.read_text()


def test_a_browser_behind_the_proxy_is_signed_in_without_a_password(browser: Browser, proxied):
    _, proxy = proxied
    page = open_chat(browser, proxy.url)
    expect(page).to_have_url(proxy.login_url)  # nginx's auth_request sent it to the login service
    page.get_by_role("link", name="dave").click()
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    me = page.context.request.get(proxy.url + "/user")
    assert me.ok and me.json()["identifier"] == "dave"
    page.context.close()


# ---- OpenID Connect ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def openid(vllm: VllmServer) -> Iterator[tuple[ChatApp, OidcProvider]]:
    """The app with an OpenID Connect provider: members of chat-admins are admins; sign-on is closed; root is the
    password admin. Chainlit names people by their preferred_username, which they choose themselves."""
    app = ChatApp(vllm)
    provider = OidcProvider(OIDC_USERS, redirect_uri=chainlit_callback(app.url))
    assert run_users(app, "add", "root", "--admin", password="root-password").returncode == 0
    with running(provider):
        app.extra_env = {
            **provider.chainlit_env(),
            "OAUTH_GENERIC_USER_IDENTIFIER": "preferred_username",
            "SIGN_ON_ADMIN_GROUP": "chat-admins",
        }
        with running(app):
            yield app, provider


def sign_in_with_the_provider(browser: Browser, app: ChatApp, account: str) -> Any:
    """A fresh browser through the app's login page, the provider's login and consent pages, back to the app."""
    page = open_chat(browser, app.url)
    page.get_by_role("button", name="generic").click()
    page.fill("input[name=login]", account)
    page.fill("input[name=password]", secrets.token_hex(4))  # the dev pages check none
    page.click("button[type=submit]")
    page.get_by_role("button", name="Continue").click()
    return page


def test_openid_connect_signs_in_maps_the_admin_group_and_signs_out(browser: Browser, openid):
    app, _ = openid
    page = sign_in_with_the_provider(browser, app, "alice")
    expect(page.locator(ANSWERS).first).to_contain_text("admin page", timeout=30_000)  # an admin by her group
    me = page.context.request.get(app.url + "/user").json()
    assert me["identifier"] == "alice"  # a new user, named by her preferred_username
    assert page.context.request.get(app.url + "/admin/api/state").ok
    page.locator("#user-nav-button").click()
    page.get_by_role("menuitem", name="Logout").click()
    expect(page.get_by_role("button", name="generic")).to_be_visible()
    assert page.context.request.get(app.url + "/admin/api/state").status == 401
    page.context.close()


def test_openid_connect_refuses_someone_not_added_while_sign_on_is_closed(browser: Browser, openid):
    app, _ = openid
    page = sign_in_with_the_provider(browser, app, "bob")
    expect(page.get_by_role("button", name="generic")).to_be_visible(timeout=30_000)  # back at the login page
    assert page.context.request.get(app.url + "/user").status == 401
    assert "Refused the sign-on of generic bob: not a user here" in app.log_path.read_text()
    page.context.close()


def test_openid_connect_takes_nobody_for_an_account_by_its_name_or_an_unverified_e_mail(browser: Browser, openid):
    app, _ = openid
    root = browser.new_context()

    def admin(path: str, body: dict[str, Any]) -> None:
        assert root.request.post(f"{app.url}/admin/api/{path}", data=body).ok, path

    assert root.request.post(app.url + "/login", form={"username": ROOT[0], "password": ROOT[1]}).ok
    admin("users/email", {"name": "root", "email": "root@example.com"})
    admin("defaults", OPEN)
    try:
        # A preferred_username of root; root's e-mail with email_verified missing, or the text "false".
        for account, becomes in (("mallory", "root-2"), ("eve", "eve"), ("frank", "frank")):
            page = sign_in_with_the_provider(browser, app, account)
            expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
            assert page.context.request.get(app.url + "/user").json()["identifier"] == becomes, account
            assert page.context.request.get(app.url + "/admin/api/state").status == 403, account
            page.context.close()
    finally:
        admin("defaults", CLOSED)
        root.close()
