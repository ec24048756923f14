"""The local user of a chat without users, granted only to the person at this machine (issue 48, T9 and T14).

A proxy or a tunnel on this machine (nginx for TLS, cloudflared, ngrok, tailscale serve) reaches loopback like the
person does: only the key link `make chat` prints makes a browser the local user, an admin. Everything here runs
against the real app started as `make chat` starts it, and Debian's Chromium.
"""

from __future__ import annotations

import html
import re
import stat
import subprocess
import sys
from urllib.parse import urlsplit

import aiohttp
import pytest
from playwright.sync_api import Browser, expect

from app.history.accounts import set_password
from app.history.database import create_engine, database_url
from app.i18n import TEXT
from tests.support.browser import ANSWERS
from tests.support.chat_client import ChatClient
from tests.support.history import run_users
from tests.support.servers import ROOT, ChatApp, VllmServer, hermetic_environment, running

# What a proxy or tunnel on this machine adds to the requests it forwards.
FORWARDED: tuple[dict[str, str], ...] = (
    {},
    {"X-Forwarded-For": "203.0.113.9"},
    {"Forwarded": "for=203.0.113.9", "X-Real-IP": "203.0.113.9"},
)


def jar() -> aiohttp.CookieJar:
    """A cookie jar that keeps cookies of 127.0.0.1 (aiohttp's default drops those of an IP address)."""
    return aiohttp.CookieJar(unsafe=True)


@pytest.mark.parametrize("headers", FORWARDED, ids=["direct", "x-forwarded-for", "forwarded"])
async def test_without_the_key_nobody_is_the_local_user_and_each_refusal_is_logged(chat_app: ChatApp, headers):
    async with aiohttp.ClientSession(headers=headers, cookie_jar=jar()) as http:
        async with http.post(chat_app.url + "/auth/header") as reply:
            assert reply.status == 401 and "access_token" not in reply.cookies
        async with http.get(chat_app.url + "/admin/api/state") as reply:
            assert reply.status == 401
    carried = {name.lower(): value for name, value in headers.items()} or "(no forwarding headers)"
    assert f"Refused the local user to a request from 127.0.0.1 {carried}: no key" in chat_app.log_path.read_text()


async def test_the_key_link_makes_its_browser_the_local_user(chat_app: ChatApp):
    async with aiohttp.ClientSession(cookie_jar=jar()) as http:
        async with http.get(chat_app.key_link + "&x=1", allow_redirects=False) as reply:
            assert reply.status == 303 and reply.headers["Location"] == "/?x=1"  # the key out of the address bar
            cookie = reply.headers["Set-Cookie"]
        assert all(part in cookie for part in ("HttpOnly", "Path=/", "SameSite=strict"))
        async with http.post(chat_app.url + "/auth/header") as reply:
            assert reply.status == 200
        async with http.get(chat_app.url + "/user") as reply:
            assert (await reply.json())["identifier"] == "local"
        async with http.get(chat_app.url + "/admin/api/state") as reply:
            assert reply.status == 200
    async with aiohttp.ClientSession() as http, http.get(chat_app.url + "/?key=an-old-key") as reply:
        assert reply.status == 401 and html.escape(TEXT["en"]["key_wrong"]) in await reply.text()
    assert "a key of another start" in chat_app.log_path.read_text()


@pytest.mark.parametrize(("language", "lang"), [("en-US", "en"), ("zh-CN", "zh")])
async def test_a_page_load_without_login_or_key_says_where_the_link_is(chat_app: ChatApp, language, lang):
    headers = {"Accept": "text/html", "Accept-Language": language}
    async with aiohttp.ClientSession(headers=headers) as http, http.get(chat_app.url + "/admin") as reply:
        page = await reply.text()
        assert reply.status == 401 and TEXT[lang]["key_title"] in page and "<script" not in page
        assert "default-src 'self'" in reply.headers["Content-Security-Policy"]
        assert '<form method="get" action="/admin">' in page


def link_command(data_dir: str) -> subprocess.CompletedProcess[str]:
    """`make link`'s command for a data folder."""
    env = hermetic_environment(DATA_DIR=data_dir)
    argv = [sys.executable, "-m", "app.local_link"]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_the_link_is_printed_and_kept_for_make_link(chat_app: ChatApp, tmp_path):
    printed = re.findall(r"^Chat UI: (\S+)", chat_app.log_path.read_text(), re.MULTILINE)[-1]
    assert printed == chat_app.key_link.replace("127.0.0.1", "localhost")
    assert chat_app.data_dir is not None
    kept = chat_app.data_dir / "local-link"
    assert kept.read_text().strip() == printed and stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert link_command(str(chat_app.data_dir)).stdout.strip() == f"Chat UI: {printed}"
    none = link_command(str(tmp_path))
    assert none.returncode == 1 and "no chat of the local user runs here now" in none.stdout


async def test_the_name_local_is_kept_for_the_local_user(chat_app: ChatApp):
    refused = run_users(chat_app, "add", "local", password="local-password")
    assert refused.returncode != 0 and "'local' is kept for the local user" in refused.stderr
    tab = ChatClient(chat_app.url)
    await tab.log_in()
    status, answer = await tab.rest("POST", "/admin/api/users/add", {"name": "local", "password": "local-password"})
    assert status == 422 and "kept for the local user" in answer["detail"]


@pytest.fixture(scope="module")
def team_with_a_local_named_user(vllm: VllmServer):
    """An app with logins whose history holds a password user named local (the admin page let one be added)."""
    app = ChatApp(vllm, extra_env={"MESSAGES_PER_MINUTE": "1"})
    assert run_users(app, "add", "ann", password="ann-password").returncode == 0
    assert app.data_dir is not None
    set_password(create_engine(database_url("", app.data_dir)), "local", "local-password")
    with running(app):
        yield app


async def test_a_password_user_named_local_is_not_the_local_user(team_with_a_local_named_user: ChatApp):
    app = team_with_a_local_named_user
    with pytest.raises(PermissionError, match="401"):
        await ChatClient(app.url, credentials=("local", "local-password")).log_in()
    assert "Refused a password login: the name 'local' is kept" in app.log_path.read_text()


# Chromium last: its sync API's loop and the async tests' do not mix in one module's order.
def test_in_chromium_the_plain_address_asks_for_the_key_and_the_printed_link_opens_the_chat(
    browser: Browser, chat_app: ChatApp
):
    stranger = browser.new_context(locale="en-US")
    page = stranger.new_page()
    page.goto(chat_app.url)
    expect(page.get_by_role("heading", name=TEXT["en"]["key_title"])).to_be_visible()
    expect(page.locator(ANSWERS)).to_have_count(0)
    page.get_by_label(TEXT["en"]["key_field"]).fill(urlsplit(chat_app.key_link).query.removeprefix("key="))
    page.get_by_role("button", name=TEXT["en"]["key_open"]).click()
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    stranger.close()
    person = browser.new_context(locale="en-US")
    page = person.new_page()
    page.goto(chat_app.key_link)
    expect(page.locator(ANSWERS).first).to_contain_text("admin page", timeout=30_000)  # the local user: an admin
    assert "key=" not in page.url
    person.close()
