"""Files attached in the page: Debian's chromium, driven by Playwright, against the real app and vLLM."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, Response, expect

from app.config import DEFAULT_SYSTEM_PROMPT
from tests.support.browser import (
    ANSWERS,
    USER_MESSAGES,
    open_chat,
    send,
    set_settings,
    shoot,
    wait_answer_done,
    wait_for_request,
)
from tests.support.files import NOTES, README, SENTENCE, seen
from tests.support.pdfs import pdf
from tests.support.servers import ChatApp, running

pytestmark = pytest.mark.browser
UPLOAD = "/project/file"


def attach(page: Page, *files: Path, uploads: int | None = None) -> list[Response]:
    """Attach files with the clip's file input, as a person picking them does; the uploads the page made."""
    made: list[Response] = []

    def record(response: Response) -> None:
        if response.request.method == "POST" and response.url.split("?")[0].endswith(UPLOAD):
            made.append(response)

    page.on("response", record)
    try:
        page.locator("#upload-button-input").set_input_files([str(file) for file in files])
        expected = len(files) if uploads is None else uploads
        deadline = time.monotonic() + 30
        while len(made) < expected:
            assert time.monotonic() < deadline, f"{len(made)} of {expected} uploads in 30 s"
            page.wait_for_timeout(50)
        page.wait_for_timeout(300)  # an upload the page should not make would show by now
    finally:
        page.remove_listener("response", record)
    return made


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def test_files_attached_in_the_page_are_answered_and_reach_the_model_under_their_names(
    browser, chat_app, vllm, tmp_path
):
    page = open_chat(browser, chat_app.url)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    set_settings(page, max_token_steps=2, system_prompt="FILES")
    files = [
        write(tmp_path, "notes.txt", NOTES.encode()),
        write(tmp_path, "plan.md", README.encode()),
        write(tmp_path, "paper.pdf", pdf(SENTENCE)),
    ]
    assert [response.status for response in attach(page, *files)] == [200, 200, 200]
    seen_before = len(vllm.logged_requests())
    send(page, "What do these files say?")
    wait_answer_done(page, 2)
    wait_for_request(vllm, seen_before)
    question = seen([("notes.txt", NOTES), ("plan.md", README), ("paper.pdf", SENTENCE)], "What do these files say?")
    said = [{"role": "system", "content": "FILES"}, {"role": "user", "content": question}]
    assert vllm.logged_requests()[seen_before]["prompt"] == vllm.render(said)
    for name in ("notes.txt", "plan.md", "paper.pdf"):
        expect(page.locator(USER_MESSAGES).last).to_contain_text(name)
    page.locator(ANSWERS).last.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # the page's smooth scroll
    shoot(page, "file")

    # A binary file gets a line naming it; nothing reaches the model.
    attach(page, write(tmp_path, "photo.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
    seen_before = len(vllm.logged_requests())
    send(page, "And this one?")
    expect(page.get_by_text("photo.txt is not text the model can read")).to_be_visible(timeout=30_000)
    expect(page.locator("#stop-button")).to_have_count(0, timeout=30_000)
    assert len(vllm.logged_requests()) == seen_before

    # Over the size limit: the page refuses it itself, with a message; no upload is made.
    assert attach(page, write(tmp_path, "big.txt", b"x" * 25_000_000), uploads=0) == []
    expect(page.locator("[data-sonner-toast]")).to_contain_text("File is larger than 20 MB")
    page.context.close()


@pytest.mark.app  # an app of its own, with the history off: a document has nowhere to be kept
def test_with_the_history_off_a_file_over_the_window_is_refused_in_the_page_with_its_numbers(
    browser, small_vllm, tmp_path
):
    app = ChatApp(small_vllm, extra_env={"HISTORY": "false"})
    with running(app):
        page = open_chat(browser, app.url)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        long_text = "Every line of this file is long enough to fill the tiny window quickly.\n" * 30
        attach(page, write(tmp_path, "long.txt", long_text.encode()))
        seen_before = len(small_vllm.logged_requests())
        send(page, "Summarize.")
        system = {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
        typed = small_vllm.count_chat_tokens([system, {"role": "user", "content": "Summarize."}])
        with_file = seen([("long.txt", long_text)], "Summarize.")
        whole = small_vllm.count_chat_tokens([system, {"role": "user", "content": with_file}])
        room = 256 - 16 - typed  # the window, less the shortest answer worth asking for
        line = f"long.txt is too long for the model's window: it needs {whole - typed} tokens and only {room} are left"
        expect(page.get_by_text(line)).to_be_visible(timeout=30_000)
        assert len(small_vllm.logged_requests()) == seen_before
        page.context.close()


@pytest.mark.app  # an app of its own, restarted
def test_a_chat_with_files_resumed_after_a_restart_sends_the_model_the_same_turn(browser, vllm, tmp_path):
    app = ChatApp(vllm)
    with running(app):
        page = open_chat(browser, app.url)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        set_settings(page, max_token_steps=0, system_prompt="FILES")
        attach(page, write(tmp_path, "notes.txt", NOTES.encode()), write(tmp_path, "paper.pdf", pdf(SENTENCE)))
        before, question = len(vllm.logged_requests()), "What do these files say?"
        send(page, question)
        wait_answer_done(page, 2)
        first = vllm.logged_requests()[before]["prompt"]
        assert first == vllm.render(
            [
                {"role": "system", "content": "FILES"},
                {"role": "user", "content": seen([("notes.txt", NOTES), ("paper.pdf", SENTENCE)], question)},
            ]
        )
        page.context.close()

        app.stop()
        app.start()
        page = open_chat(browser, app.url)
        past = page.locator("#thread-history").get_by_text("What do these files say?")
        expect(past).to_be_visible(timeout=30_000)
        past.click()
        expect(page.locator(USER_MESSAGES).first).to_contain_text(question, timeout=30_000)
        before = len(vllm.logged_requests())
        send(page, "and after the restart?")
        wait_for_request(vllm, before)
        again = vllm.logged_requests()[before]["prompt"]
        assert again.startswith(first) and again.endswith(
            "<|end_of_sentence|>User: and after the restart?\nAssistant: "
        )
        page.context.close()
