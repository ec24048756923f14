"""Documents in the page: Debian's chromium, driven by Playwright, against the real app, vLLM and history."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import ANSWERS, open_chat, send, set_settings, shoot, wait_answer_done, wait_for_request
from tests.support.documents import ENGLISH_NEEDLE, ENGLISH_QUESTION, NEEDLE_PAGE, english_manual

pytestmark = pytest.mark.browser


def documents_list(page: Page) -> None:
    """The Documents button by the composer, then a message with it: the list of the user's documents."""
    page.get_by_role("button", name="Documents").first.click()
    send(page, "list")
    expect(page.get_by_test_id("library").last).to_be_visible(timeout=30_000)


def test_an_answer_from_a_document_names_its_sources_which_open_and_the_library_reuses_it(
    browser, chat_app, vllm, tmp_path
):
    page = open_chat(browser, chat_app.url)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    set_settings(page, max_token_steps=2)
    manual = tmp_path / "pump-manual.pdf"
    manual.write_bytes(english_manual())
    page.locator("#upload-button-input").set_input_files([str(manual)])
    page.wait_for_timeout(1_000)  # the upload
    send(page, ENGLISH_QUESTION)
    wait_answer_done(page, 3)  # the greeting, the line saying the file is split into passages, the answer
    sources = page.locator(ANSWERS).last.get_by_test_id("source")
    needle = sources.filter(has_text=f"pump-manual.pdf, p. {NEEDLE_PAGE}")
    expect(needle).to_have_count(1, timeout=10_000)
    needle.click()
    expect(page.get_by_text(ENGLISH_NEEDLE)).to_be_visible(timeout=10_000)  # the passage, in the side view
    needle.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # the page's smooth scroll
    shoot(page, "documents")

    page.click("#new-chat-button")
    page.get_by_role("button", name="Confirm", exact=True).click()
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    set_settings(page, max_token_steps=2)
    documents_list(page)
    row = page.get_by_test_id("library-document").filter(has_text="pump-manual.pdf")
    row.get_by_test_id("use-document").click()
    expect(row.get_by_test_id("document-here")).to_be_visible(timeout=10_000)
    seen = len(vllm.logged_requests())
    send(page, ENGLISH_QUESTION)
    wait_answer_done(page, 3)  # the greeting, the list, the answer
    wait_for_request(vllm, seen)
    assert ENGLISH_NEEDLE in vllm.logged_requests()[-1]["prompt"]  # the library's document, searched here too

    row.get_by_test_id("rename-document").click()
    page.get_by_test_id("document-name").fill("Pump manual 2026.pdf")
    page.get_by_test_id("document-name").press("Enter")
    renamed = page.get_by_test_id("library-document").filter(has_text="Pump manual 2026.pdf")
    expect(renamed).to_have_count(1, timeout=10_000)
    renamed.get_by_test_id("delete-document").click()
    expect(page.get_by_test_id("library-document").filter(has_text="Pump manual 2026.pdf")).to_have_count(
        0, timeout=10_000
    )
    page.context.close()
