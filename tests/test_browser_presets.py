"""Presets and favourite prompts as a person uses them: Debian's chromium against the real app and vLLM."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import (
    ANSWERS,
    USER_MESSAGES,
    logged_in,
    send,
    shoot,
    wait_answer_done,
    wait_for_request,
)
from tests.support.history import app_with_users
from tests.support.servers import VllmServer, running

pytestmark = pytest.mark.browser
TRANSLATE = "Translate zh↔en"


def pick_preset(page: Page, name: str, *, shot: str = "") -> None:
    """Chainlit's list of presets at the top: pick one (a new chat starts with it)."""
    page.locator("#chat-profiles").click()
    option = page.locator(f"[data-test='select-item:{name}']")
    expect(option).to_be_visible(timeout=10_000)
    if shot:
        option.hover()  # its description shows beside the list
        description = page.locator("#chat-profile-description[data-state=open]")
        expect(description).to_contain_text("Your own preset.")
        expect(page.locator("#chat-profile-description")).to_have_count(1)  # the one before it has faded out
        shoot(page, shot)
    option.click()
    expect(page.locator("#chat-profiles")).to_contain_text(name)


def offered_presets(page: Page) -> list[str]:
    """The names in the list of presets (the list is closed again)."""
    page.locator("#chat-profiles").click()
    items = page.locator("[data-test^='select-item:']")
    expect(items.first).to_be_visible(timeout=10_000)
    names = [str(item.get_attribute("data-test")).removeprefix("select-item:") for item in items.all()]
    trigger = page.locator("#chat-profiles")
    for _ in range(10):  # Escape closes the description beside the list first, if the pointer opened one
        if trigger.get_attribute("aria-expanded") == "false":
            break
        page.keyboard.press("Escape")
        page.wait_for_timeout(200)
    expect(trigger).to_have_attribute("aria-expanded", "false")
    return names


def settings_panel(page: Page, **fields: str) -> None:
    """Open the settings panel, fill text fields by id, confirm."""
    page.click("#chat-settings-open-modal")
    expect(page.locator("#chat-settings")).to_be_visible()
    for widget, value in fields.items():
        page.fill(f"#{widget}", value)
    page.click("#confirm")
    expect(page.locator("#chat-settings")).to_have_count(0)


def expect_temperature(page: Page, value: str) -> None:
    """The settings panel shows this temperature (a new chat's panel comes a moment after its greeting)."""
    deadline = time.monotonic() + 30
    while True:
        page.click("#chat-settings-open-modal")
        shown = page.locator("#temperature [role=slider]").get_attribute("aria-valuenow")
        page.keyboard.press("Escape")
        expect(page.locator("#chat-settings")).to_have_count(0)
        if shown == value:
            return
        assert time.monotonic() < deadline, f"the panel shows temperature {shown}, not {value}"
        page.wait_for_timeout(300)


def short_answers(page: Page) -> None:
    """The max tokens slider at its minimum: answers of the tiny model stay short."""
    page.click("#chat-settings-open-modal")
    page.locator("#max_tokens [role=slider]").press("Home")
    page.click("#confirm")
    expect(page.locator("#chat-settings")).to_have_count(0)


def asked(page: Page, vllm: VllmServer, text: str, count: int) -> dict[str, str]:
    """Send a message; vLLM's log of its request once answer number `count` is done."""
    before = len(vllm.logged_requests())
    send(page, text)
    wait_for_request(vllm, before)
    wait_answer_done(page, count)
    return vllm.logged_requests()[-1]


def favourites_popover(page: Page) -> None:
    """The star in the message box: the list of favourite prompts."""
    page.locator("#message-composer button:has(svg.lucide-star)").click()


@pytest.mark.app  # an app of its own, with users, restarted
def test_presets_picked_saved_renamed_deleted_and_a_favourite_prompt_kept_across_a_restart(browser, vllm):
    with running(app := app_with_users(vllm, "kate", "liam")):
        page = logged_in(browser, app.url, "kate")
        pick_preset(page, TRANSLATE)
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        expect_temperature(page, "0.2")
        short_answers(page)
        request = asked(page, vllm, "a prompt worth keeping", 2)
        assert request["prompt"].startswith("<|begin_of_sentence|>You are a translator.")
        assert float(request["temperature"]) == 0.2 and float(request["top_p"]) == 0.8

        page.locator(USER_MESSAGES).first.hover()
        page.locator(USER_MESSAGES).first.locator(".favorite-message").click()
        expect(page.locator(USER_MESSAGES).first.locator(".favorite-message svg.fill-current")).to_be_visible()

        settings_panel(page, system_prompt="KATE-PRESET", preset_save="Short and sweet")
        expect(page.get_by_text("Saved your preset “Short and sweet”")).to_be_visible(timeout=10_000)
        page.goto(app.url)  # a new chat, and the page reads the list of presets again
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        assert offered_presets(page) == ["Balanced", "Precise", "Creative", TRANSLATE, "Short and sweet"]
        pick_preset(page, "Short and sweet", shot="presets")
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        request = asked(page, vllm, "with my own preset", 2)
        assert request["prompt"].startswith("<|begin_of_sentence|>KATE-PRESET\n")
        assert float(request["temperature"]) == 0.2 and int(request["max_tokens"]) <= 16

        settings_panel(page, preset_rename="Mine")  # the list beside it holds the one preset, picked
        expect(page.get_by_text("Renamed your preset to “Mine”")).to_be_visible(timeout=10_000)
        page.context.close()

        app.stop()
        app.start()
        page = logged_in(browser, app.url, "kate")
        assert offered_presets(page)[4:] == ["Mine"]
        favourites_popover(page)
        kept = page.locator("[cmdk-item]").filter(has_text="a prompt worth keeping")
        expect(kept).to_have_count(1, timeout=10_000)
        kept.click()
        expect(page.locator("#chat-input")).to_have_value("a prompt worth keeping")

        other = logged_in(browser, app.url, "liam")
        assert offered_presets(other)[4:] == []
        favourites_popover(other)
        expect(other.get_by_text("a prompt worth keeping")).to_have_count(0)
        other.context.close()

        page.click("#chat-settings-open-modal")
        page.locator("#preset_delete").click()
        page.click("#confirm")
        expect(page.get_by_text("Deleted your preset “Mine”")).to_be_visible(timeout=10_000)
        page.goto(app.url)  # a new chat, and the page reads the list of presets again
        expect(page.locator(ANSWERS).first).to_contain_text("Hello", timeout=30_000)
        assert offered_presets(page)[4:] == []
        page.context.close()
