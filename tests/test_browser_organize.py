"""Organizing chats in Debian's chromium against the real app: a project's instructions and documents reach the
model until its chat moves out, pin and archive order the chats page and the sidebar, a search finds a Chinese word
inside a longer one in an answer three chats back and opens that message with the word marked; the chats page is
accessible, in the chat's theme, light or dark."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Playwright, expect

from app.chats.strings import TEXT
from tests.support.browser import ANSWERS, logged_in, send, set_settings, shoot, wait_answer_done, wait_for_request
from tests.support.documents import ENGLISH_NEEDLE, ENGLISH_QUESTION, english_manual
from tests.support.fake_openai import FakeModel, FakeState, fake_openai_server
from tests.support.history import run_users
from tests.support.lighthouse import accessible_once_logged_in
from tests.support.servers import ChatApp, VllmServer, running

pytestmark = pytest.mark.browser
EN = TEXT["en"]
DONE = EN["done"].split("{")[0]
THREAD = re.compile(r"/thread/([0-9a-f-]+)")


@pytest.fixture(scope="module")
def team_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """An app with password login: ann and ben."""
    app = ChatApp(vllm)
    for name in ("ann", "ben"):
        assert run_users(app, "add", name, password=f"{name}-password").returncode == 0
    with running(app):
        yield app


@pytest.fixture(scope="module")
def scripted_app() -> Iterator[tuple[ChatApp, FakeState]]:
    """An app whose model answers what the test scripts (the fake OpenAI server), with password login for ann."""
    with fake_openai_server() as (url, state):
        app = ChatApp(FakeModel("scripted", url))
        assert run_users(app, "add", "ann", password="ann-password").returncode == 0
        with running(app):
            yield app, state


def chats_page(page: Page) -> Page:
    """The chats page, from the link in the chat's header."""
    page.locator("#header a[href='/chats']").click()
    expect(page.locator("#search-words")).to_be_visible(timeout=30_000)
    return page


def done(page: Page) -> None:
    expect(page.locator("#status")).to_contain_text(DONE)


def answered(page: Page, question: str) -> None:
    """Ask, and wait for the answer (one more on the page)."""
    before = page.locator(ANSWERS).count()
    send(page, question)
    wait_answer_done(page, before + 1)


def new_chat(page: Page) -> None:
    page.click("#new-chat-button")
    page.get_by_role("button", name="Confirm", exact=True).click()
    expect(page.locator(ANSWERS)).to_have_count(1, timeout=30_000)  # the greeting


def test_a_projects_instructions_and_document_reach_the_model_until_its_chat_moves_out(
    browser: Browser, team_app: ChatApp, vllm: VllmServer, tmp_path
):
    page = logged_in(browser, team_app.url, "ann")
    set_settings(page, max_token_steps=2)
    manual = tmp_path / "pump-manual.pdf"
    manual.write_bytes(english_manual())
    page.locator("#upload-button-input").set_input_files([str(manual)])
    page.wait_for_timeout(1_000)  # the upload
    send(page, "Keep this manual.")
    wait_answer_done(page, 3)  # the greeting, the line saying it is split into passages (ann's library), the answer

    chats_page(page)
    page.fill("#new-project-name", "Garden")
    page.fill("#new-project-instructions", "INSTRUCTIONS-OF-GARDEN: answer as Rosa, the gardener.")
    page.locator("#new-project button[type=submit]").click()
    done(page)
    card = page.locator("article[data-project='Garden']")
    card.get_by_label("pump-manual.pdf").check()
    done(page)
    card.get_by_role("link", name="New chat in Garden").click()
    expect(page.locator(ANSWERS).first).to_contain_text("Garden", timeout=30_000)  # the greeting names it
    set_settings(page, max_token_steps=2)
    seen = len(vllm.logged_requests())
    answered(page, ENGLISH_QUESTION)
    wait_for_request(vllm, seen)
    prompt = vllm.logged_requests()[-1]["prompt"]
    assert prompt.index("INSTRUCTIONS-OF-GARDEN") < prompt.index(ENGLISH_QUESTION) and ENGLISH_NEEDLE in prompt
    expect(page).to_have_url(THREAD, timeout=10_000)
    chat = THREAD.search(page.url).group(1)  # type: ignore[union-attr]

    page.goto(f"{team_app.url}/chats")
    row = page.locator(f"li[data-chat='{chat}']")
    row.locator("select").select_option(label=EN["no_project"])
    done(page)
    page.goto(f"{team_app.url}/thread/{chat}")  # opened again: filed nowhere now
    expect(page.locator(ANSWERS)).to_have_count(1, timeout=30_000)
    seen = len(vllm.logged_requests())
    answered(page, ENGLISH_QUESTION)
    wait_for_request(vllm, seen)
    prompt = vllm.logged_requests()[-1]["prompt"]
    assert "INSTRUCTIONS-OF-GARDEN" not in prompt and ENGLISH_NEEDLE not in prompt
    page.context.close()


def test_pinned_chats_come_first_and_archived_ones_leave_the_sidebar_until_restored(browser: Browser, team_app):
    page = logged_in(browser, team_app.url, "ben")
    set_settings(page, max_token_steps=2)
    chats = []
    for fruit in ("pears", "plums", "figs"):
        answered(page, f"Tell me about {fruit}.")
        expect(page).to_have_url(THREAD, timeout=10_000)
        chats.append(THREAD.search(page.url).group(1))  # type: ignore[union-attr]
        new_chat(page)
    pears, plums, figs = chats
    chats_page(page)
    listed = page.locator("#chat-list > li")
    expect(listed).to_have_count(3)
    assert listed.evaluate_all("rows => rows.map(r => r.dataset.chat)") == [figs, plums, pears]  # newest first
    page.locator(f"li[data-chat='{pears}']").get_by_role("button", name=f"Pin: {'Tell me about pears.'}").click()
    done(page)
    expect(listed.first).to_have_attribute("data-chat", pears)  # pinned: first
    page.locator(f"li[data-chat='{plums}']").get_by_role("button", name="Archive: Tell me about plums.").click()
    done(page)
    expect(page.locator(f"#archived-list li[data-chat='{plums}']")).to_be_visible()
    page.evaluate("scrollTo(0, 0)")
    shoot(page, "chats")
    page.evaluate("localStorage.setItem('vite-ui-theme', 'dark')")  # as the chat's theme switch keeps it
    page.reload()
    expect(page.locator("html")).to_have_class("dark")
    expect(page.locator("#chat-list > li")).to_have_count(2)
    shoot(page, "chats-dark")

    page.goto(team_app.url)
    sidebar = page.locator("#thread-history")
    expect(sidebar.locator(f"#thread-{pears}")).to_be_visible(timeout=30_000)
    expect(sidebar.locator(f"#thread-{plums}")).to_have_count(0)  # archived: not in the sidebar
    page.goto(f"{team_app.url}/chats")
    page.locator(f"#archived-list li[data-chat='{plums}']").get_by_role("button", name=re.compile("Restore")).click()
    done(page)
    page.goto(team_app.url)
    expect(page.locator("#thread-history").locator(f"#thread-{plums}")).to_be_visible(timeout=30_000)
    page.context.close()


def test_a_chinese_word_inside_a_longer_word_three_chats_back_is_found_and_opened_marked(
    browser: Browser, scripted_app
):
    app, model = scripted_app
    page = logged_in(browser, app.url, "ann")
    answers = (
        "冬季气温低于零度时，应打开排水阀门，排空水箱里的水。",
        "春天可以播种番茄和黄瓜。",
        "夏天要注意浇水。",
        "秋天收获南瓜。",
    )
    for n, answer in enumerate(answers):
        model.reply = [answer[:6], answer[6:]]
        answered(page, f"第{n + 1}个问题")
        if n < len(answers) - 1:
            new_chat(page)
    chats_page(page)
    page.fill("#search-words", "排水")
    page.locator("#search form button[type=submit]").click()
    results = page.locator("#search-results > li")
    expect(results).to_have_count(1)  # the one chat whose answer holds it, inside 排水阀门
    expect(results.first.locator("mark")).to_have_text("排水")
    results.first.get_by_role("link").click()
    expect(page.locator(ANSWERS).last).to_contain_text("排水阀门", timeout=30_000)
    marked = "() => [...(CSS.highlights.get('found') || [])].map(r => r.toString())"
    page.wait_for_function(f"({marked})().length > 0", timeout=10_000)
    assert page.evaluate(marked) == ["排水"]
    in_view = "() => { const r = [...CSS.highlights.get('found')][0].getBoundingClientRect();"
    in_view += " return r.top >= 0 && r.bottom <= innerHeight; }"
    assert page.evaluate(in_view)
    page.context.close()


def test_lighthouse_scores_the_chats_page_accessible(playwright: Playwright, team_app, tmp_path_factory):
    accessible_once_logged_in(playwright, team_app.url, "/chats", "ann", tmp_path_factory.mktemp("lighthouse-chats"))
