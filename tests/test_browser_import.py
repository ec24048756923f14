"""Importing in Debian's chromium against the real app: ChatGPT's 2026 ZIP uploaded on the chats page fills the
progress bar, says what it imported and names the attachment it did not hold; its branched conversation opens as a
chat whose answer has two versions, 1/2 between its arrows where ChatGPT left it; a file that is no export is refused
with a sentence and imports nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from app.chats.strings import TEXT
from app.errors import Problem
from app.i18n import TEXT as CHAT_TEXT
from tests.support.browser import ANSWERS, USER_MESSAGES, logged_in
from tests.support.exports import branched_chatgpt, chatgpt_zip
from tests.support.fake_openai import FakeModel, fake_openai_server
from tests.support.history import run_users
from tests.support.servers import ChatApp, running

pytestmark = pytest.mark.browser
EN = TEXT["en"]


@pytest.fixture(scope="module")
def app() -> Iterator[ChatApp]:
    """An app with password login for ann, exports up to 1 MB (no answer is asked for: its model is the fake
    server)."""
    with fake_openai_server() as (url, _):
        app = ChatApp(FakeModel("scripted", url), extra_env={"IMPORT_MAX_MB": "1"})
        assert run_users(app, "add", "ann", password="ann-password").returncode == 0
        with running(app):
            yield app


def say(text: str, **values: object) -> str:
    return text.format(**{key: str(value) for key, value in values.items()})


def chats_page(page: Page) -> Page:
    page.locator("#header a[href='/chats']").click()
    expect(page.locator("#import-file")).to_be_visible(timeout=30_000)
    return page


def imported(page: Page, path: str) -> None:
    page.locator("#import-file").set_input_files(path)
    page.locator("#import-form button[type=submit]").click()


def test_a_chatgpt_zip_becomes_chats_and_its_branched_answer_shows_its_two_versions(browser: Browser, app, tmp_path):
    tomatoes = branched_chatgpt()
    tomatoes.mapping["q1"]["message"]["metadata"]["attachments"] = [
        {"id": "file-7Qx", "name": "balcony.jpg", "mime_type": "image/jpeg", "size": 48_213}
    ]
    export = tmp_path / "chatgpt-2026.zip"
    export.write_bytes(chatgpt_zip([tomatoes.document(), branched_chatgpt("Peppers indoors").document()]))
    page = chats_page(logged_in(browser, app.url, "ann"))

    imported(page, str(export))
    summary = page.locator("#import-summary")
    expect(summary).to_contain_text(say(EN["import_done"], chats=2, source="ChatGPT", messages=10, versions=2))
    expect(summary).to_contain_text("balcony.jpg")
    expect(page.locator("#import-progress")).to_have_js_property("value", 100)
    expect(page.locator("#chats")).to_contain_text("Peppers indoors")
    expect(page.locator("#chats")).to_contain_text("Tomatoes on a balcony")

    summary.get_by_role("link", name=EN["import_open"]).click()
    expect(page.locator(USER_MESSAGES)).to_have_count(2, timeout=30_000)
    first = page.locator(ANSWERS).first
    expect(first).to_contain_text("Water them every morning (first version).")
    expect(first.get_by_test_id("version-at")).to_have_text("1/2")
    expect(first.get_by_test_id("previous-version")).to_be_visible()  # the arrows around 1/2
    expect(page.locator(ANSWERS).last).to_contain_text("Twice a day, early and late.")
    first.get_by_test_id("next-version").click()
    expect(page.locator(ANSWERS).first).to_contain_text("(second version)", timeout=10_000)
    expect(page.locator(ANSWERS).first.get_by_test_id("version-at")).to_have_text("2/2")
    expect(page.locator(USER_MESSAGES)).to_have_count(1)  # the follow-up belongs to the first version


def test_a_file_that_is_no_export_is_refused_with_a_sentence_and_nothing_imported(browser: Browser, app, tmp_path):
    foreign = tmp_path / "settings.json"
    foreign.write_text(json.dumps({"model": "gpt-4", "temperature": 1}))
    page = chats_page(logged_in(browser, app.url, "ann"))
    chats = page.locator("#chats li").count()

    imported(page, str(foreign))
    sentence = CHAT_TEXT["en"][Problem.IMPORT_FOREIGN].format(name="settings.json")
    expect(page.locator("#status")).to_have_text(sentence)
    expect(page.locator("#import-summary")).to_be_empty()
    expect(page.locator("#chats li")).to_have_count(chats)

    big = tmp_path / "conversations.json"
    big.write_text(json.dumps([branched_chatgpt("Too big").document()] * 400))  # 1.1 MB, over IMPORT_MAX_MB
    imported(page, str(big))
    expect(page.locator("#status")).to_have_text(say(EN["import_too_big"], name="conversations.json", limit=1))
    expect(page.locator("#chats li")).to_have_count(chats)


def test_the_import_route_takes_only_the_pages_own_upload_and_within_its_limit(browser: Browser, app, tmp_path):
    request = logged_in(browser, app.url, "ann").context.request
    export = chatgpt_zip([branched_chatgpt("From elsewhere").document()])
    url = f"{app.url}/chats/api/import?name=export.zip"
    own, file = {"Origin": app.url}, {"Content-Type": "application/octet-stream"}
    assert request.post(url, data=export, headers=file | {"Origin": "https://evil.example"}).status == 403
    assert request.post(url, data=export, headers=own | {"Content-Type": "text/plain"}).status == 403
    # Over IMPORT_MAX_MB, under MAX_REQUEST_MB (2): the import route's own cap refuses it before it is read.
    assert request.post(url, data=bytes(1_500_000), headers=own | file).status == 413
    assert "From elsewhere" not in request.get(f"{app.url}/chats/api/state").text()
    assert '"chats": 1' in request.post(url, data=export, headers=own | file).text()  # the summary, last
    assert "From elsewhere" in request.get(f"{app.url}/chats/api/state").text()
