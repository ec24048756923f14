"""What a person sees: Debian's chromium, driven by Playwright, against the real app and vLLM."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
import tomllib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.support.browser import (
    ANSWERS,
    USER_MESSAGES,
    logged_in,
    open_chat,
    send,
    set_settings,
    shoot,
    wait_answer_done,
    wait_for_request,
)
from tests.support.history import run_users
from tests.support.servers import ROOT, ChatApp, VllmServer, running, with_key
from tests.support.versions import as_prompt

pytestmark = pytest.mark.browser


# Installed before sending: records the answer's first two different texts as the page renders
# them and presses stop right after the second, inside the page, with no round trip to the test.
STOP_AFTER_GROWTH = """() => {
    window.grownAnswer = new Promise((resolve, reject) => {
        const seen = [];
        setTimeout(() => reject(new Error("no two partial answers in 60 s: " + JSON.stringify(seen))), 60000);
        const observer = new MutationObserver(() => {
            const answers = document.querySelectorAll("[data-step-type='assistant_message'] .message-content");
            const text = answers.length > 1 ? answers[1].innerText : "";
            if (text.trim() && text !== seen[seen.length - 1]) seen.push(text);
            if (seen.length < 2) return;
            observer.disconnect();
            const stop = document.querySelector("#stop-button");
            if (stop) stop.click();
            resolve({seen, clicked: !!stop});
        });
        observer.observe(document.body, {subtree: true, childList: true, characterData: true});
    });
}"""


def stop_while_growing(browser: Browser, url: str) -> tuple[Page, dict[str, Any]]:
    """Open a chat, ask for a window-long answer, and press stop as soon as the page showed it grow."""
    page = open_chat(browser, url)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    # The tiny model streams ~300 tokens/s: the whole window (~4000 tokens) leaves time to press stop.
    set_settings(page, most_tokens=True)
    page.evaluate(STOP_AFTER_GROWTH)
    send(page, "Tell me everything you know.")
    grown = page.evaluate("() => window.grownAnswer")
    first, second = grown["seen"]
    assert second != first and second.startswith(first.rstrip()[:20]), "the answer grew while streaming"
    assert grown["clicked"], "the stop button was there while the answer streamed"
    expect(page.locator("#stop-button")).to_have_count(0, timeout=10_000)
    return page, grown


def test_answer_grows_while_streaming_and_stop_leaves_it_final(fresh_browser, chat_app, vllm):
    # A page that falls behind the stream (a cold browser on a loaded 2-core machine) can show the
    # answer growing after vLLM has finished it; then the stop comes too late and the case is retried.
    for _attempt in range(3):
        page, _ = stop_while_growing(fresh_browser, chat_app.url)
        stats = page.locator(ANSWERS).nth(1).get_by_test_id("answer-stats")
        expect(stats).to_contain_text("tokens", timeout=30_000)
        if "stopped" in stats.inner_text():
            break
        assert re.search(r"\b40\d\d tokens", stats.inner_text()), "not stopped: the answer ran to its end"
        page.context.close()
    else:
        pytest.fail("in 3 attempts the page never showed a growing answer before vLLM had finished it")
    answer = page.locator(ANSWERS).nth(1).locator(".message-content")
    final = answer.inner_text()
    time.sleep(1.0)
    assert answer.inner_text() == final and final.strip()
    assert vllm.metric("vllm:num_requests_running") == 0
    shoot(page, "stopped")
    page.context.close()


def test_greeting_and_starters_in_english(browser, chat_app):
    page = open_chat(browser, chat_app.url)
    greeting = page.locator(ANSWERS).first
    expect(greeting).to_contain_text("Hello! I'm ernie-tiny", timeout=30_000)
    for label in ("Explain simply", "Write a poem", "Python help"):
        expect(page.get_by_role("button", name=label, exact=True)).to_be_visible()
    shoot(page, "english")
    page.get_by_role("button", name="Write a poem", exact=True).click()
    expect(page.locator(USER_MESSAGES).first).to_contain_text("four-line poem")
    wait_answer_done(page, 2)
    # The sidebar names the chat after the prompt, not after the button's action.
    expect(page.locator("#thread-history").get_by_text("four-line poem").first).to_be_visible(timeout=10_000)
    page.context.close()


def test_settings_from_the_panel_reach_the_model(browser, chat_app, vllm):
    page = open_chat(browser, chat_app.url)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    set_settings(page, temperature_steps=6, max_token_steps=2, system_prompt="BROWSER-SYSTEM-PROMPT")
    shoot(page, "settings")
    send(page, "check my settings")
    wait_answer_done(page, 2)
    logged = vllm.logged_requests()[-1]
    assert logged["prompt"].startswith("<|begin_of_sentence|>BROWSER-SYSTEM-PROMPT\nUser: check my settings\n")
    assert float(logged["temperature"]) == pytest.approx(0.3)
    assert int(logged["max_tokens"]) == 48
    page.context.close()


def test_new_chat_starts_with_an_empty_history(browser, chat_app, vllm):
    page = open_chat(browser, chat_app.url)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    set_settings(page, max_token_steps=0)
    send(page, "the word is PINEAPPLE")  # not "remember …": that offers the memory
    wait_answer_done(page, 2)
    page.click("#new-chat-button")
    page.get_by_role("button", name="Confirm", exact=True).click()
    expect(page.locator(USER_MESSAGES)).to_have_count(0, timeout=10_000)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    send(page, "what was the word?")
    wait_answer_done(page, 2)
    prompt = vllm.logged_requests()[-1]["prompt"]
    assert "PINEAPPLE" not in prompt and prompt.endswith("User: what was the word?\nAssistant: ")
    page.context.close()


def test_chinese_browser_gets_chinese_ui_greeting_and_settings(browser, chat_app):
    page = open_chat(browser, chat_app.url, locale="zh-CN")
    expect(page.locator(ANSWERS).first).to_contain_text("你好！我是 ernie-tiny", timeout=30_000)
    expect(page.get_by_role("button", name="写一首诗", exact=True)).to_be_visible()
    expect(page.locator("#chat-input")).to_have_attribute("placeholder", "在此输入您的消息...")
    shoot(page, "chinese")
    page.click("#chat-settings-open-modal")
    expect(page.locator("#chat-settings")).to_contain_text("温度")
    expect(page.locator("#chat-settings")).to_contain_text("系统提示词")
    page.context.close()


def test_regenerate_and_edit_update_the_history(browser, chat_app, vllm):
    page = open_chat(browser, chat_app.url)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    set_settings(page, temperature_steps=20, max_token_steps=0)
    send(page, "original question")
    wait_answer_done(page, 2)
    before = len(vllm.logged_requests())
    page.get_by_role("button", name="Regenerate", exact=True).click()
    wait_for_request(vllm, before)  # the old answer stays done until the regenerated one replaces it
    expect(page.locator(ANSWERS)).to_have_count(2, timeout=30_000)
    wait_answer_done(page, 2)
    regenerated = vllm.logged_requests()[before:]
    assert len(regenerated) == 1
    assert regenerated[0]["prompt"].count("original question") == 1

    user = page.locator(USER_MESSAGES).last
    user.hover()
    user.locator(".edit-message").click()
    page.fill("#edit-chat-input", "edited question")
    before = len(vllm.logged_requests())
    page.click(".confirm-edit")
    expect(page.locator(USER_MESSAGES).last).to_contain_text("edited question", timeout=10_000)
    wait_for_request(vllm, before)
    wait_answer_done(page, 2)
    prompt = vllm.logged_requests()[-1]["prompt"]
    assert "original question" not in prompt and prompt.endswith("User: edited question\nAssistant: ")
    shoot(page, "edited")
    page.context.close()


def test_html_in_messages_is_shown_as_text(browser, chat_app):
    config = tomllib.loads((ROOT / ".chainlit" / "config.toml").read_text())
    assert config["features"]["unsafe_allow_html"] is False
    page = open_chat(browser, chat_app.url)
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    send(page, "<b>bold</b> <img src=x onerror=\"document.title='owned'\"> <script>alert(1)</script>")
    user = page.locator(USER_MESSAGES).last.locator(".message-content")
    expect(user).to_contain_text("<b>bold</b>")
    assert user.locator("b, img, script").count() == 0
    wait_answer_done(page, 2)
    assert page.title() != "owned"
    page.context.close()


@pytest.fixture(scope="module")
def app_without_vllm() -> Iterator[tuple[ChatApp, VllmServer]]:
    server = VllmServer("browser-readiness")
    app = ChatApp(server)
    with running(app, also_stopped=[server]):
        yield app, server


def test_readiness_message_then_recovery_without_reload(browser, app_without_vllm):
    app, server = app_without_vllm
    page = open_chat(browser, app.url)
    notice = page.locator(ANSWERS).first
    expect(notice).to_contain_text("not answering yet", timeout=30_000)
    expect(notice).to_contain_text("make serve")
    shoot(page, "waiting-for-vllm")
    starter = threading.Thread(target=server.start)
    starter.start()
    starter.join()
    expect(notice).to_contain_text("is ready", timeout=30_000)
    send(page, "hello after start")
    wait_answer_done(page, 2)
    shoot(page, "recovered")
    page.context.close()


@pytest.mark.app  # an app of its own, restarted
def test_a_past_chat_is_in_the_sidebar_and_resumes_after_a_restart(browser, vllm):
    app = ChatApp(vllm)
    with running(app):
        page = open_chat(browser, app.url)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        set_settings(page, temperature_steps=6, max_token_steps=0, system_prompt="Remember pelicans.")
        send(page, "the pelican question")
        wait_answer_done(page, 2)
        send(page, "a second question")
        wait_answer_done(page, 3)
        said = [page.locator(ANSWERS).nth(i).locator(".message-content").inner_text() for i in (1, 2)]
        page.context.close()

        app.stop()
        app.start()
        page = open_chat(browser, app.url)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        past = page.locator("#thread-history").get_by_text("the pelican question")
        expect(past).to_be_visible(timeout=30_000)
        past.click()
        expect(page.locator(USER_MESSAGES)).to_have_count(2, timeout=30_000)
        expect(page.locator(USER_MESSAGES).first).to_contain_text("the pelican question")
        answers = page.locator(ANSWERS)
        for text in said:
            expect(answers.filter(has_text=text.strip()[:30])).to_have_count(1)
        expect(answers.last.get_by_test_id("answer-stats")).to_be_visible()
        export = page.locator(ANSWERS).last.get_by_role("button", name="Export Markdown", exact=True)
        expect(export).to_be_visible(timeout=10_000)
        shoot(page, "history")
        page.click("#chat-settings-open-modal")
        expect(page.locator("#system_prompt")).to_have_value("Remember pelicans.")
        page.keyboard.press("Escape")

        before = len(vllm.logged_requests())
        send(page, "and after the restart?")
        wait_for_request(vllm, before)
        expect(page.locator(USER_MESSAGES)).to_have_count(3, timeout=30_000)
        request = vllm.logged_requests()[-1]
        prompt = request["prompt"]
        assert prompt.startswith("<|begin_of_sentence|>Remember pelicans.")
        positions = [prompt.index(part) for part in ("the pelican question", said[0].strip()[:20], "a second question")]
        assert positions == sorted(positions) and prompt.endswith("User: and after the restart?\nAssistant: ")
        assert request["temperature"] == "0.3"
        export.click()  # AnswerStats.jsx posts the action as Chainlit's own buttons do
        expect(page.get_by_text("This chat as Markdown:")).to_be_visible(timeout=30_000)
        expect(page.get_by_text("chat.md")).to_be_visible()
        page.context.close()


def test_a_message_the_database_has_not_taken_is_marked_until_it_is_saved(browser, vllm):
    app = ChatApp(vllm, extra_env={"DATABASE_TIMEOUT": "1"})
    with running(app):
        page = open_chat(browser, app.url)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        set_settings(page, max_token_steps=0)  # short answers
        send(page, "saved at once")
        wait_answer_done(page, 2)
        other_writer = sqlite3.connect(app.data_dir / "chat.db", isolation_level=None)  # type: ignore[operator]
        other_writer.execute("BEGIN IMMEDIATE")  # holds SQLite's write lock: the app's commits hang
        try:
            send(page, "said while the database hangs")
            wait_answer_done(page, 3)
            mark = page.locator(ANSWERS).last.get_by_test_id("unsaved")
            expect(mark).to_be_visible(timeout=30_000)
            expect(mark).to_contain_text("Not saved yet")
            expect(page.get_by_test_id("unsaved")).to_have_count(2)  # the question and its answer, not the turn before
            shoot(page, "unsaved")
        finally:
            other_writer.execute("ROLLBACK")
            other_writer.close()
        expect(page.get_by_test_id("unsaved")).to_have_count(0, timeout=30_000)
        page.context.close()


def test_the_page_loads_nothing_foreign_and_works_under_its_security_policy(browser, chat_app):
    context = browser.new_context(locale="en-US", viewport={"width": 1100, "height": 800})
    foreign: list[str] = []

    def only_this_machine(route: Route) -> None:
        if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_machine)
    page = context.new_page()
    failed: list[str] = []
    errors: list[str] = []
    # A request the page cancels itself (it reloads after logging in) is not a failed load.
    page.on("requestfailed", lambda r: None if r.failure == "net::ERR_ABORTED" else failed.append(r.url))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(with_key(chat_app.url))
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    send(page, "under the policy")
    wait_answer_done(page, 2)
    page.click("#chat-settings-open-modal")
    expect(page.locator("#system_prompt")).to_be_visible()
    page.keyboard.press("Escape")
    export = page.locator(ANSWERS).last.get_by_role("button", name="Export JSON", exact=True)
    export.click()
    expect(page.get_by_text("This chat as JSON:")).to_be_visible(timeout=30_000)
    expect(page.locator("#thread-history").get_by_text("under the policy")).to_be_visible(timeout=30_000)
    assert page.evaluate("document.fonts.check('16px Inter')")  # the app's own copy of the font
    assert foreign == [] and failed == []
    assert [e for e in errors if "Content Security Policy" in e or "Refused to" in e] == []

    # Another page on this machine (localhost is another origin than 127.0.0.1) puts the chat in a frame.
    framing = context.new_page()
    framing_url = chat_app.url.replace("127.0.0.1", "localhost") + "/framing-page"
    frame = f'<iframe src="{chat_app.url}"></iframe>'
    framing.route(framing_url, lambda route: route.fulfill(body=frame, content_type="text/html"))
    framing.goto(framing_url)
    deadline = time.monotonic() + 15
    while len(framing.frames) < 2 or framing.frames[1].url == "about:blank":
        assert time.monotonic() < deadline, "the frame never loaded"
        framing.wait_for_timeout(100)
    framing.wait_for_timeout(1000)
    assert framing.frames[1].url.startswith("chrome-error://")  # refused: the chat is not shown in the frame
    context.close()


def shown_ids(page: Page, leave_out: str = "") -> list[str]:
    """The ids of the messages on the page, oldest first (`leave_out`: the greeting's)."""
    ids = page.locator("[data-step-type] [id^='step-']").evaluate_all("nodes => nodes.map(n => n.id.slice(5))")
    return [i for i in ids if i != leave_out]


def stored_branch(page: Page, url: str) -> list[dict[str, Any]]:
    """The newest chat's messages as the history gives them to the page (the branch shown), via the page's login."""
    listed = page.context.request.post(url + "/project/threads", data={"pagination": {"first": 1}, "filter": {}})
    thread_id = listed.json()["data"][0]["id"]
    steps = page.context.request.get(f"{url}/project/thread/{thread_id}").json()["steps"]
    return [s for s in steps if s["type"] == "user_message" or s["metadata"].get("turn")]


def version_at(page: Page, message_id: str) -> Any:
    """The "n/m" by a message, to wait for."""
    return expect(page.locator(f"#step-{message_id}").get_by_test_id("version-at"))


def click_version(page: Page, message_id: str, which: str) -> None:
    """The previous- or next-version button by a message."""
    page.locator(f"#step-{message_id}").get_by_test_id(f"{which}-version").click()


@pytest.mark.app  # an app of its own, restarted
def test_versions_flip_in_place_and_the_chat_reopens_on_its_branch_after_a_reload_and_a_restart(browser, vllm):
    app = ChatApp(vllm)
    with running(app):
        page = open_chat(browser, app.url)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        greeting = shown_ids(page)[0]
        set_settings(page, temperature_steps=30, max_token_steps=0, system_prompt="BROWSER-VERSIONS")
        for count, text in ((2, "first question"), (3, "second question")):
            send(page, text)
            wait_answer_done(page, count)
        answers = [shown_ids(page, greeting)[-1]]
        for count in (2, 3):
            before = len(vllm.logged_requests())
            page.get_by_role("button", name="Regenerate", exact=True).click()
            wait_for_request(vllm, before)
            wait_answer_done(page, 3)
            answers.append(shown_ids(page, greeting)[-1])
            version_at(page, answers[-1]).to_have_text(f"{count}/{count}")
        assert len(set(answers)) == 3

        for version in (1, 0):  # back through the versions, each in place of the newer one
            click_version(page, answers[version + 1], "previous")
            version_at(page, answers[version]).to_have_text(f"{version + 1}/3")
            assert shown_ids(page, greeting)[-1] == answers[version] and len(shown_ids(page, greeting)) == 4
        click_version(page, answers[0], "next")
        version_at(page, answers[1]).to_have_text("2/3")
        shoot(page, "versions")

        before = len(vllm.logged_requests())
        send(page, "third question")  # continued from version 2
        wait_for_request(vllm, before)
        wait_answer_done(page, 4)
        branch = stored_branch(page, app.url)
        assert [s["id"] for s in branch] == shown_ids(page, greeting) and branch[3]["id"] == answers[1]
        assert vllm.logged_requests()[-1]["prompt"] == vllm.render(as_prompt(branch[:-1], "BROWSER-VERSIONS"))

        old_branch = shown_ids(page, greeting)
        question = page.locator(USER_MESSAGES).nth(1)  # the second question, which has a branch after it
        question.hover()
        question.locator(".edit-message").click()
        page.fill("#edit-chat-input", "second question, edited")
        page.click(".confirm-edit")
        expect(page.locator(USER_MESSAGES).last).to_contain_text("second question, edited", timeout=10_000)
        wait_answer_done(page, 3)
        edited = shown_ids(page, greeting)[2]
        version_at(page, edited).to_have_text("2/2")
        assert shown_ids(page, greeting)[:2] == old_branch[:2] and len(shown_ids(page, greeting)) == 4
        click_version(page, edited, "previous")  # the old question, with everything that followed it
        version_at(page, old_branch[2]).to_have_text("1/2")
        expect(page.locator(ANSWERS)).to_have_count(4, timeout=10_000)
        assert shown_ids(page, greeting) == old_branch

        for restart in (False, True):  # a reload, then an app restart: the chat opens on the same branch
            page.context.close()
            if restart:
                app.stop()
                app.start()
            page = open_chat(browser, app.url)
            page.locator("#thread-history").get_by_text("first question").click()
            expect(page.locator(USER_MESSAGES)).to_have_count(3, timeout=30_000)
            version_at(page, old_branch[2]).to_have_text("1/2", timeout=10_000)
            version_at(page, answers[1]).to_have_text("2/3")
            assert shown_ids(page) == old_branch
        click_version(page, answers[1], "next")  # every version is still there
        version_at(page, answers[2]).to_have_text("3/3")
        expect(page.locator(USER_MESSAGES)).to_have_count(2)
        page.context.close()


def share_dialog(page: Page) -> Any:
    """Chainlit's share dialog, opened from the header's share button."""
    page.locator("#header button:has(svg.lucide-share-2)").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    return dialog


@pytest.mark.app  # an app of its own, with users
def test_a_shared_link_shows_another_user_the_branch_read_only_until_its_owner_stops_sharing(browser, vllm):
    app = ChatApp(vllm)
    for name in ("olga", "vera"):
        added = run_users(app, "add", name, password=f"{name}-password")
        assert added.returncode == 0
    with running(app):
        owner = logged_in(browser, app.url, "olga")
        owner.context.grant_permissions(["clipboard-read", "clipboard-write"])  # the dialog copies the link
        set_settings(owner, max_token_steps=0, system_prompt="OLGAS-PRIVATE-PROMPT")
        send(owner, "the shared question")
        wait_answer_done(owner, 2)
        older = shown_ids(owner)[-1]
        before = len(vllm.logged_requests())
        owner.get_by_role("button", name="Regenerate", exact=True).click()
        wait_for_request(vllm, before)
        wait_answer_done(owner, 2)
        newer = shown_ids(owner)[-1]
        version_at(owner, newer).to_have_text("2/2")
        click_version(owner, newer, "previous")
        version_at(owner, older).to_have_text("1/2")
        said = owner.locator(ANSWERS).last.locator(".message-content").inner_text()

        dialog = share_dialog(owner)
        link = dialog.locator("span[title*='/share/']").get_attribute("title")
        assert link is not None and link.startswith(app.url + "/share/")
        dialog.get_by_role("button", name="Share", exact=True).click()
        expect(owner.get_by_text("Share link created!")).to_be_visible(timeout=10_000)
        owner.keyboard.press("Escape")

        viewer = logged_in(browser, app.url, "vera")
        viewer.goto(link)
        expect(viewer.locator(USER_MESSAGES)).to_contain_text("the shared question", timeout=30_000)
        expect(viewer.locator(ANSWERS)).to_have_count(1)
        viewed = viewer.locator(ANSWERS).locator(".message-content").inner_text().strip()
        assert viewed and said.startswith(viewed)  # the owner's page has the answer's line under it too
        assert shown_ids(viewer)[-1] == older and newer not in shown_ids(viewer)
        expect(viewer.locator("#chat-input")).to_have_count(0)  # read-only: nothing to write with
        expect(viewer.get_by_text("OLGAS-PRIVATE-PROMPT")).to_have_count(0)
        shoot(viewer, "shared")

        anonymous = open_chat(browser, link)  # links are for logged-in users (the default)
        expect(anonymous.locator("#email")).to_be_visible(timeout=30_000)
        expect(anonymous.get_by_text("the shared question")).to_have_count(0)
        anonymous.context.close()

        dialog = share_dialog(owner)
        dialog.get_by_role("button", name="Unshare", exact=True).click()
        expect(owner.get_by_text("Sharing disabled for this thread")).to_be_visible(timeout=10_000)
        viewer.goto(link)
        expect(viewer.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)  # sent to a chat of her own
        expect(viewer.get_by_text("the shared question")).to_have_count(0)
        for page in (owner, viewer):
            page.context.close()


@pytest.mark.app  # an app of its own, with links open to anyone
def test_with_links_open_to_anyone_a_visitor_without_a_login_reads_the_shared_chat(browser, vllm):
    app = ChatApp(vllm, extra_env={"SHARE_LINKS": "anyone"})
    added = run_users(app, "add", "olga", password="olga-password")
    assert added.returncode == 0
    with running(app):
        owner = logged_in(browser, app.url, "olga")
        set_settings(owner, max_token_steps=0)
        send(owner, "open to anyone")
        wait_answer_done(owner, 2)
        thread_id = owner.context.request.post(
            app.url + "/project/threads", data={"pagination": {"first": 1}, "filter": {}}
        ).json()["data"][0]["id"]

        def share(shared: bool) -> None:
            body = {"threadId": thread_id, "isShared": shared}
            answered = owner.context.request.put(app.url + "/project/thread/share", data=body)
            assert answered.ok

        share(True)
        anonymous = open_chat(browser, f"{app.url}/share/{thread_id}")
        expect(anonymous.locator("section[data-role=user]")).to_contain_text("open to anyone", timeout=30_000)
        expect(anonymous.locator("section[data-role=assistant]")).to_have_count(1)
        expect(anonymous.locator("#email")).to_have_count(0)  # not sent to the login form
        expect(anonymous.locator("#chat-input")).to_have_count(0)
        shoot(anonymous, "shared-to-anyone")
        share(False)
        anonymous.reload()
        expect(anonymous.get_by_text("This link shows nothing")).to_be_visible()
        expect(anonymous.locator("section")).to_have_count(0)
        for page in (owner, anonymous):
            page.context.close()
