"""The page as the browser tests drive it: Debian's chromium, a chat opened in it, its messages, its settings."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

from playwright.sync_api import Browser, Page, expect

from tests.support.servers import ROOT, VllmServer, with_key

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = ROOT / "test-results" / "screenshots"
ANSWERS = "[data-step-type='assistant_message']"
USER_MESSAGES = "[data-step-type='user_message']"


def open_chat(browser: Browser, url: str, locale: str = "en-US", init_script: str = "") -> Page:
    """A fresh tab on the chat (through the key link of a chat without users, as `make chat` prints it), with every
    request to another host blocked (fonts, CDNs); init_script runs in every page before the page's own."""
    context = browser.new_context(locale=locale, viewport={"width": 1100, "height": 800})
    if init_script:
        context.add_init_script(init_script)
    context.route(
        "**/*",
        lambda route: (
            route.continue_() if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost") else route.abort()
        ),
    )
    page = context.new_page()
    page.goto(with_key(url))
    return page


# The screenshots the README shows (make screenshots copies them into docs/).
README_SHOTS = (
    "english",
    "chinese",
    "history",
    "versions",
    "shared",
    "presets",
    "file",
    "documents",
    "admin",
    "chats",
    "chats-dark",
)


def shoot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    if (target := os.environ.get("README_SCREENSHOTS")) and name in README_SHOTS:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(SHOTS / f"{name}.png", Path(target) / f"{name}.png")


def send(page: Page, text: str) -> None:
    page.fill("#chat-input", text)
    page.click("#chat-submit")


def wait_answer_done(page: Page, count: int) -> None:
    """Wait for answer number `count` to end with its stats line."""
    expect(page.locator(ANSWERS)).to_have_count(count, timeout=60_000)
    expect(page.locator(ANSWERS).nth(count - 1).get_by_test_id("answer-stats")).to_be_visible(timeout=60_000)
    expect(page.locator("#stop-button")).to_have_count(0, timeout=30_000)


def wait_for_request(vllm: VllmServer, seen: int, timeout: float = 30) -> None:
    """Wait until vLLM has logged more than `seen` requests."""
    deadline = time.monotonic() + timeout
    while len(vllm.logged_requests()) <= seen:
        assert time.monotonic() < deadline, "no new request reached vLLM"
        time.sleep(0.05)


def set_settings(
    page: Page,
    temperature_steps: int | None = None,
    max_token_steps: int | None = None,
    system_prompt: str | None = None,
    most_tokens: bool = False,
) -> None:
    """Open the settings panel, move sliders from their minimum by whole steps (or max tokens to its
    end), type a prompt, confirm."""
    page.click("#chat-settings-open-modal")
    expect(page.locator("#chat-settings")).to_be_visible()
    for widget, steps in (("temperature", temperature_steps), ("max_tokens", max_token_steps)):
        if steps is not None:
            thumb = page.locator(f"#{widget} [role=slider]")
            thumb.focus()
            thumb.press("Home")
            for _ in range(steps):
                thumb.press("ArrowRight")
    if most_tokens:
        page.locator("#max_tokens [role=slider]").press("End")
    if system_prompt is not None:
        page.fill("#system_prompt", system_prompt)
    page.click("#confirm")
    expect(page.locator("#chat-settings")).to_have_count(0)


def logged_in(browser: Browser, url: str, name: str) -> Page:
    """A fresh browser context logged in as one of the team (password `<name>-password`)."""
    page = open_chat(browser, url)
    page.fill("#email", name)
    page.fill("#password", f"{name}-password")
    page.click("button[type=submit]")
    expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
    return page
