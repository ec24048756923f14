"""The admin page in Debian's chromium against the real app and vLLM: an admin adds a user, limits them, ends
their sessions; nobody else gets it; accessible (Lighthouse), in English and Chinese."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Dialog, Page, Playwright, expect

from app.admin.strings import TEXT
from app.errors import Problem
from app.i18n import text
from tests.support.browser import ANSWERS, logged_in, open_chat, send, shoot, wait_answer_done
from tests.support.history import run_users
from tests.support.lighthouse import audit, debugged_chromium, failing
from tests.support.servers import ChatApp, VllmServer, with_key

EN = TEXT["en"]


@pytest.fixture(scope="module")
def admin_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """An app with password login: root, an admin, and bob."""
    app = ChatApp(vllm)
    assert run_users(app, "add", "root", "--admin", password="root-password").returncode == 0
    assert run_users(app, "add", "bob", password="bob-password").returncode == 0
    app.start()
    yield app
    app.stop()


def admin_page(browser: Browser, app: ChatApp) -> Page:
    """root's admin page, reached from the link in the greeting."""
    page = logged_in(browser, app.url, "root")
    with page.context.expect_page() as opened:  # Chainlit opens a message's links in a new tab
        page.get_by_role("link", name="the admin page").click()
    admin = opened.value
    expect(admin.locator("#users-table")).to_be_visible()
    return admin


def submit(page: Page, form: str) -> None:
    """Send one of the page's forms and wait for its line saying it is done."""
    page.locator(f"#{form} button[type=submit]").click()
    expect(page.locator("#status")).to_contain_text(EN["done"].split("{")[0])


def test_an_admin_adds_a_user_limits_them_and_ends_their_sessions(browser, admin_app):
    admin = admin_page(browser, admin_app)
    admin.fill("#add-user-name", "nell")
    admin.fill("#add-user-password", "nell-password")
    submit(admin, "add-user")
    expect(admin.locator("#users-table tr[data-user=nell]")).to_be_visible()
    nell = logged_in(browser, admin_app.url, "nell")
    send(nell, "Say hello.")
    wait_answer_done(nell, 2)  # the greeting and the answer
    admin.reload()
    admin.select_option("#set-limits-user", "nell")
    admin.fill("#limits-daily_tokens", "1")
    submit(admin, "set-limits")
    expect(admin.locator("#users-table tr[data-user=nell]")).to_contain_text("1")
    send(nell, "And again?")
    quota = text("en", Problem.QUOTA_USED, limit=1, hours=0).split(" 0 ")[0]
    expect(nell.get_by_text(quota[:40])).to_be_visible(timeout=30_000)
    admin.reload()
    expect(admin.locator("#users-table tr[data-user=nell]")).to_contain_text("1")
    shoot(admin, "admin")  # the top of the page: users, adding one
    admin.get_by_role("button", name=EN["action_of"].format(action=EN["end_sessions"], name="nell")).click()
    expect(admin.locator("#status")).to_contain_text(EN["end_sessions"])
    nell.wait_for_timeout(6_000)  # every replica's sweep closes the tab's connection within 5 s
    nell.reload()
    expect(nell.locator("#email")).to_be_visible()  # the tab is logged out: its login page
    admin.context.close()


def test_a_non_admin_has_no_link_and_gets_403(browser, admin_app):
    bob = logged_in(browser, admin_app.url, "bob")
    expect(bob.locator(ANSWERS).first).not_to_contain_text("admin page")
    response = bob.goto(admin_app.url + "/admin")
    assert response is not None and response.status == 403
    expect(bob.locator("h1")).to_have_text(EN["title"])
    expect(bob.locator("#users")).to_have_count(0)
    bob.context.close()


def test_the_admin_page_speaks_chinese(browser, admin_app):
    page = open_chat(browser, admin_app.url, locale="zh-CN")
    page.fill("#email", "root")
    page.fill("#password", "root-password")
    page.click("button[type=submit]")
    expect(page.locator(ANSWERS).first).to_contain_text("管理页面", timeout=30_000)
    page.goto(admin_app.url + "/admin")
    expect(page.locator("h2#users-title")).to_have_text(TEXT["zh"]["users"])
    expect(page.locator("#add-user button[type=submit]")).to_have_text(TEXT["zh"]["add"])
    assert page.evaluate("document.documentElement.lang") == "zh"
    page.context.close()


def test_lighthouse_scores_the_admin_page_accessible(playwright: Playwright, chat_app, tmp_path_factory):
    # The local user (loopback, no users) is an admin: the first visit logs the profile in.
    with debugged_chromium(playwright, tmp_path_factory.mktemp("lighthouse-admin")) as (context, port):
        page = context.new_page()
        page.goto(with_key(chat_app.url))
        expect(page.locator(ANSWERS).first).to_contain_text("admin page", timeout=30_000)
        page.close()
        report = audit(chat_app.url + "/admin", port, "lighthouse-admin")
    score = report["categories"]["accessibility"]["score"]
    assert score >= 0.98, f"accessibility {score}: " + "; ".join(failing(report, "accessibility"))


def test_what_users_typed_is_shown_as_text_never_run(browser, admin_app):
    admin = admin_page(browser, admin_app)
    dialogs: list[str] = []

    def seen(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    admin.on("dialog", seen)
    name = '<img src=x onerror="alert(1)">'
    admin.fill("#add-user-name", name)
    admin.fill("#add-user-password", "a-long-password")
    submit(admin, "add-user")
    expect(admin.locator("#users-table th", has_text=name)).to_be_visible()
    admin.reload()
    expect(admin.locator("#users-table th", has_text=name)).to_be_visible()
    assert admin.locator("#users-table img").count() == 0 and not dialogs
    admin.context.close()
