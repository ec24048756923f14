"""The account page in Debian's chromium against the real app: from the chat's header a person adds a fact about
themselves and makes an API key, shown once, that a script can use until they revoke it; the page is accessible."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Dialog, Page, Playwright, expect

from app.account.strings import TEXT
from tests.support.browser import logged_in
from tests.support.history import run_users
from tests.support.lighthouse import accessible_once_logged_in
from tests.support.servers import ChatApp, VllmServer, running

pytestmark = pytest.mark.browser
EN = TEXT["en"]


@pytest.fixture(scope="module")
def account_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """An app with password login for cal."""
    app = ChatApp(vllm)
    assert run_users(app, "add", "cal", password="cal-password").returncode == 0
    with running(app):
        yield app


def models_status(app: ChatApp, key: str) -> int:
    """The status of GET /v1/models with the key, as a script would ask."""
    request = urllib.request.Request(f"{app.url}/v1/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.load(response)["data"]
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def account_page(page: Page) -> Page:
    """The account page, from the link in the chat's header (named for screen readers too)."""
    link = page.locator("#header a[href='/account']")
    expect(link).to_have_attribute("aria-label", "About you and API keys")
    link.click()
    expect(page.locator("#new-fact-text")).to_be_visible(timeout=30_000)
    return page


def test_a_person_adds_a_fact_and_makes_a_key_shown_once_that_works_until_revoked(browser: Browser, account_app):
    page = account_page(logged_in(browser, account_app.url, "cal"))
    page.fill("#new-fact-text", "I live in Lyon.")
    page.locator("#new-fact-text").press("Enter")
    expect(page.locator("#facts li")).to_have_count(1)
    expect(page.locator("#facts input").first).to_have_value("I live in Lyon.")

    page.fill("#new-key-name", "nightly report")
    page.get_by_role("button", name=EN["make"]).click()
    key = page.locator("#new-key-value").inner_text(timeout=30_000).strip()
    assert key.startswith("ek-")
    expect(page.locator("#keys-list li")).to_have_count(1)
    assert models_status(account_app, key) == 200

    page.reload()
    expect(page.locator("#keys-list li")).to_have_count(1)
    assert page.locator("#new-key-value").count() == 0 and key not in page.content()  # shown once, kept hashed

    page.once("dialog", Dialog.accept)
    page.get_by_role("button", name=EN["action_of"].format(action=EN["revoke"], name="nightly report")).click()
    expect(page.locator("#keys-list li")).to_have_count(0)
    assert models_status(account_app, key) == 401
    page.context.close()


def test_lighthouse_scores_the_account_page_accessible(playwright: Playwright, account_app, tmp_path_factory):
    accessible_once_logged_in(
        playwright, account_app.url, "/account", "cal", tmp_path_factory.mktemp("lighthouse-account")
    )
