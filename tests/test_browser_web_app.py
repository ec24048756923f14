"""The chat as a web app: keyboard shortcuts, a name for every control (Lighthouse, axe), installable.

Debian's chromium driven by Playwright against the real app and vLLM, as in test_browser.py; Lighthouse is the
pinned one `make test-deps` installs into tools/lighthouse (npm ci).
"""

from __future__ import annotations

import json
import re
import time
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
from chainlit.server import build_dir
from PIL import Image
from playwright.sync_api import Locator, Page, Playwright, expect

from app.i18n import language_of, text
from app.web.headers import own_page
from tests.support.browser import (
    ANSWERS,
    ARGS,
    CHROMIUM,
    USER_MESSAGES,
    open_chat,
    send,
    set_settings,
    shoot,
    wait_answer_done,
    wait_for_request,
)
from tests.support.history import run_users
from tests.support.lighthouse import LIGHTHOUSE_DIR, audit, debugged_chromium, failing
from tests.support.servers import ROOT, ChatApp, running, with_key

PUBLIC = ROOT / "public"
AXE = LIGHTHOUSE_DIR / "axe-core" / "axe.min.js"  # the axe-core Lighthouse runs, pinned by the same lock file
# axe's rules about names: every control, image and dialog says what it is, to a screen reader too.
NAME_RULES = [
    "aria-command-name",
    "aria-dialog-name",
    "aria-input-field-name",
    "aria-meter-name",
    "aria-progressbar-name",
    "aria-toggle-field-name",
    "aria-tooltip-name",
    "button-name",
    "frame-title",
    "image-alt",
    "input-button-name",
    "label",
    "link-name",
    "role-img-alt",
    "select-name",
    "svg-img-alt",
]
# What Chainlit opens over the chat: dialogs and menus.
LAYERS = "[role=dialog], [role=alertdialog], [role=menu]"
# Chainlit's icon buttons and the translation (its tooltip's) that names each.
ICON_BUTTONS = {
    "#new-chat-button": "navigation.newChat.dialog.tooltip",
    "#chat-settings-open-modal": "navigation.user.menu.settings",
    "#chat-submit": "chat.input.actions.send",
    "#sidebar-trigger-button": "threadHistory.sidebar.actions.close",  # open at this width
}


def chainlit_string(locale: str, path: str) -> str:
    """One of Chainlit's strings in .chainlit/translations."""
    strings = json.loads((ROOT / ".chainlit" / "translations" / f"{locale}.json").read_text())
    return str(reduce(lambda node, key: node[key], path.split("."), strings))


def test_the_page_links_a_manifest_whose_icons_are_there_in_the_sizes_it_says():
    page = own_page((Path(build_dir) / "index.html").read_text())
    link = re.search(r'<link rel="manifest" href="/public/([^"]+)"', page)
    assert link is not None and 'name="theme-color"' in page
    manifest = json.loads((PUBLIC / link[1]).read_text())
    assert manifest["display"] == "standalone" and manifest["start_url"] == "/" and manifest["short_name"]
    sizes = set()
    for icon in manifest["icons"]:
        with Image.open(PUBLIC / icon["src"].removeprefix("/public/")) as image:
            assert icon["sizes"] == f"{image.width}x{image.height}" and image.format == "PNG"
            sizes.add(icon["sizes"])
    assert {"192x192", "512x512"} <= sizes and "maskable" in {icon["purpose"] for icon in manifest["icons"]}


def answered(page: Page, question: str, versions: bool = False) -> None:
    """A short answer to `question` on the page; `versions`: regenerated once, so it has version buttons."""
    expect(page.locator(ANSWERS).first).to_contain_text("ernie-tiny", timeout=30_000)  # greeted
    set_settings(page, max_token_steps=0)
    send(page, question)
    wait_answer_done(page, 2)
    if versions:
        language = language_of(page.evaluate("navigator.language"))
        page.get_by_role("button", name=text(language, "regenerate"), exact=True).click()
        expect(page.locator(ANSWERS).last.get_by_test_id("version-at")).to_have_text("2/2", timeout=60_000)
        wait_answer_done(page, 2)


def unnamed(page: Page) -> list[str]:
    """axe's findings about names on the page as it is now: one line per control, empty if all have one."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text())  # through DevTools, as a console would: the page's CSP stays as it is
    # The answers' words are the model's (the tiny model's are random: "[]()" renders as an empty link).
    script = "rules => axe.run({exclude: [['.message-content']]}, {runOnly: rules})"
    result = page.evaluate(script, NAME_RULES)
    return [f"{v['id']}: {node['target']} {node['html'][:120]}" for v in result["violations"] for node in v["nodes"]]


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_every_control_has_a_name_in_the_pages_language(browser, chat_app, locale):
    if not AXE.exists():
        pytest.fail("Lighthouse (and its axe-core) is missing: `make install-lighthouse` installs it")
    page = open_chat(browser, chat_app.url, locale=locale)
    answered(page, f"name every control ({locale})", versions=True)
    for selector, path in ICON_BUTTONS.items():
        expect(page.locator(selector)).to_have_attribute("aria-label", chainlit_string(locale, path))
    assert page.evaluate("document.documentElement.lang") == locale
    findings = {"the chat with answers": unnamed(page)}
    # Each layer Chainlit opens over the chat: the settings, the search (Ctrl/Cmd+K), the share dialog, the
    # new-chat confirmation (Ctrl/Cmd+Shift+O), a past chat's menu and the user's menu.
    layers: dict[str, Locator | str] = {
        "settings": page.locator("#chat-settings-open-modal"),
        "search": "Control+k",
        "share": page.locator("#header button:has(svg.lucide-share-2)"),
        "new chat": "Control+Shift+O",
        "a past chat's menu": page.locator("#thread-history #thread-options").first,
        "user menu": page.locator("#user-nav-button"),
    }
    for layer, opener in layers.items():
        if isinstance(opener, str):
            page.keyboard.press(opener)
        else:
            opener.click()
        expect(page.locator(LAYERS).first, f"{layer} opens").to_be_visible()
        findings[layer] = unnamed(page)
        page.keyboard.press("Escape")
        if layer == "a past chat's menu":  # Chainlit's ignores Escape (without the app's script too)
            page.mouse.click(1, 400)
        expect(page.locator(LAYERS), f"Escape closes {layer}").to_have_count(0)
    page.keyboard.press("Control+b")  # the sidebar closed: its toggles' names say they open it
    expect(page.locator("#sidebar-trigger-button")).to_have_count(2)  # one in the sidebar, one in the header
    for toggle in page.locator("#sidebar-trigger-button").all():
        expect(toggle).to_have_attribute("aria-label", chainlit_string(locale, "threadHistory.sidebar.actions.open"))
    findings["sidebar closed"] = unnamed(page)
    assert {layer: found for layer, found in findings.items() if found} == {}, findings
    page.context.close()


@pytest.mark.app  # an app of its own, with users: the login form
@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_the_login_form_names_every_control(browser, vllm, locale):
    app = ChatApp(vllm)
    added = run_users(app, "add", "ada", password="ada-password")
    assert added.returncode == 0
    with running(app):
        page = open_chat(browser, app.url, locale=locale)
        expect(page.locator("#email")).to_be_visible(timeout=30_000)
        eye = page.locator("#password + button")  # shows the password typed, or hides it again
        expect(eye).to_have_attribute("aria-label", chainlit_string(locale, "webApp.showPassword"))
        assert unnamed(page) == []
        eye.click()
        expect(eye).to_have_attribute("aria-label", chainlit_string(locale, "webApp.hidePassword"))
        page.context.close()


# Installed while an answer streams: resolves when the answer has grown by `chars` since, or has ended.
GROWN_OR_ENDED = """chars => new Promise(resolve => {
    const answer = () => document.querySelectorAll("[data-step-type='assistant_message'] .message-content")[1];
    const start = answer().innerText.length;
    const observer = new MutationObserver(() => {
        const ended = !document.querySelector("#stop-button");
        if (ended || answer().innerText.length >= start + chars) {
            observer.disconnect();
            resolve(ended ? "ended" : "grew");
        }
    });
    observer.observe(document.body, {subtree: true, childList: true, characterData: true});
})"""


def test_escape_closes_a_dialog_first_and_then_stops_the_answer(fresh_browser, chat_app, vllm):
    # The tiny model writes a window-long answer in seconds; on a loaded machine it may end before the
    # keys arrive: then the case is tried again.
    for _attempt in range(3):
        page = open_chat(fresh_browser, chat_app.url)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        set_settings(page, most_tokens=True)
        before = len(vllm.logged_requests())
        send(page, "Tell me everything you know.")
        wait_for_request(vllm, before)
        expect(page.locator(ANSWERS).nth(1).locator(".message-content")).not_to_be_empty(timeout=30_000)
        page.click("#search-chats-button")  # Chainlit's search dialog over the answer being written
        expect(page.get_by_role("dialog")).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.get_by_role("dialog")).to_have_count(0)
        after_dialog = page.evaluate(GROWN_OR_ENDED, 200)  # the answer goes on after the dialog closed
        if after_dialog == "grew":
            page.keyboard.press("Escape")
        stats = page.locator(ANSWERS).nth(1).get_by_test_id("answer-stats")
        expect(stats).to_contain_text("tokens", timeout=60_000)
        if after_dialog == "grew" and "stopped" in stats.inner_text():
            break
        assert re.search(r"\b40\d\d tokens", stats.inner_text()), "the Escape that closed the dialog stopped it"
        page.context.close()
    else:
        pytest.fail("in 3 attempts the answer always ended before Escape could stop it")
    expect(page.locator("#stop-button")).to_have_count(0)
    aborted = f"Request {vllm.logged_requests()[-1]['id']} aborted."  # vLLM's log line for a request cut short
    deadline = time.monotonic() + 30
    while aborted not in vllm.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, "vLLM never aborted the stopped answer's request"
        time.sleep(0.1)
    shoot(page, "escape-stopped")
    page.context.close()


def test_shortcuts_open_a_new_chat_and_chainlits_toggle_the_sidebar(browser, chat_app):
    page = open_chat(browser, chat_app.url)
    answered(page, "a chat to leave")
    trigger = page.locator("#sidebar-trigger-button").first  # two while the sidebar is closed
    for state in ("open", "close"):  # Chainlit's Ctrl/Cmd+B, as the README lists it
        page.keyboard.press("Control+b")
        name = chainlit_string("en-US", f"threadHistory.sidebar.actions.{state}")
        expect(trigger).to_have_attribute("aria-label", name)
    page.keyboard.press("Control+Shift+O")
    page.get_by_role("button", name="Confirm", exact=True).click()
    expect(page.locator(USER_MESSAGES)).to_have_count(0, timeout=10_000)
    # A new chat, greeted (that the model then sees it empty: test_browser.py's new-chat test).
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    page.context.close()


def test_chromium_finds_the_chat_installable_with_its_manifest_open_to_anyone(
    playwright: Playwright, chat_app: ChatApp, tmp_path: Path
):
    # A profile on disk: in an incognito-like context (Playwright's usual one) no app can be installed.
    context = playwright.chromium.launch_persistent_context(tmp_path, executable_path=CHROMIUM, args=ARGS)
    page = context.new_page()
    page.goto(with_key(chat_app.url))
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    devtools = context.new_cdp_session(page)
    assert devtools.send("Page.getInstallabilityErrors")["installabilityErrors"] == []
    manifest = devtools.send("Page.getAppManifest")
    assert manifest["url"] == chat_app.url + "/public/manifest.webmanifest" and manifest["errors"] == []
    context.close()
    anyone = playwright.request.new_context()  # no cookie, as a browser fetches a manifest
    reply = anyone.get(manifest["url"])
    assert reply.ok and reply.headers["content-type"] == "application/manifest+json"
    assert "default-src 'self'" in reply.headers["content-security-policy"]
    anyone.dispose()


@pytest.fixture(scope="module")
def lighthouse(playwright: Playwright, chat_app: ChatApp, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Lighthouse's report (accessibility, best practices) on a past chat with answers and versions."""
    # Lighthouse audits in this Chromium, through its debugging port: logged in as the page logged in, so the
    # chat's own address opens the chat (a fresh profile would land on a new chat after logging in).
    with debugged_chromium(playwright, tmp_path_factory.mktemp("lighthouse-profile")) as (context, port):
        page = context.new_page()
        page.goto(with_key(chat_app.url))
        answered(page, "a chat for Lighthouse", versions=True)
        newest = {"pagination": {"first": 1}, "filter": {}}
        listed = page.context.request.post(chat_app.url + "/project/threads", data=newest)
        url = f"{chat_app.url}/thread/{listed.json()['data'][0]['id']}"
        page.close()
        return audit(url, port, "lighthouse")


def test_lighthouse_scores_the_chat_accessible(lighthouse):
    score = lighthouse["categories"]["accessibility"]["score"]
    print("Lighthouse:", {name: c["score"] for name, c in lighthouse["categories"].items()})
    assert score >= 0.98, f"accessibility {score}: " + "; ".join(failing(lighthouse, "accessibility"))
