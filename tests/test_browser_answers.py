"""Answers read aloud and their mermaid blocks drawn, in Debian's chromium against the real app (public/answers.js).

The model is the fake OpenAI server answering a fixed text, so an answer holds exactly the Chinese, the English or the
diagram a test needs. The browser's speechSynthesis is its own, with `speak` and `cancel` wrapped to record them:
headless Chromium has no voice (its `speak` fails at once), so the wrapper keeps the utterances, as a long reading
would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.support.browser import ANSWERS, open_chat, send, shoot, wait_answer_done
from tests.support.fake_openai import FakeModel, FakeState, fake_openai_server
from tests.support.servers import ChatApp, running

# Records what the page asks of the speech synthesis, and every Content-Security-Policy violation.
RECORDER = """
window.spoken = [];
window.cancelled = 0;
window.violations = [];
document.addEventListener("securitypolicyviolation", (e) => violations.push(`${e.violatedDirective} ${e.blockedURI}`));
if (window.speechSynthesis) {
  speechSynthesis.speak = (utterance) => spoken.push({ lang: utterance.lang, text: utterance.text });
  const cancel = speechSynthesis.cancel.bind(speechSynthesis);
  speechSynthesis.cancel = () => { cancelled += 1; cancel(); };
}
"""
# A browser without speech synthesis.
MUTE = "delete window.speechSynthesis;"
# What a diagram's script would do, if it ran: set the page's flag.
TRAP = "window.pwned = 0; window.pwn = () => { window.pwned = 2; };"
DIAGRAM = "graph TD\n  A[Question] --> B{Fits the window?}\n  B -->|yes| C[Answer]\n  B -->|no| D[Trim]\n"
# Asks for mermaid's loose mode, a click callback and a link to a script, and hides a script in a label.
HOSTILE = (
    '%%{init: {"securityLevel": "loose"}}%%\n'
    "graph TD\n"
    '  A["<img src=x onerror=window.pwned=1>"] --> B[Next]\n'
    "  click A pwn\n"
    "  click B call pwn()\n"
    "  C[Link] --> D[End]\n"
    '  click C "javascript:window.pwn()"\n'
)
BROKEN = "graph TD\n  A[Question --> B{{\n"
DIAGRAM_NODES = ".chat-diagram svg .node"


@pytest.fixture(scope="module")
def scripted_chat() -> Iterator[tuple[ChatApp, FakeState]]:
    """The app (no users: the local key link) against a fake OpenAI server answering what the test scripts."""
    with fake_openai_server() as (url, state):
        state.window = 4096
        app = ChatApp(FakeModel("answers", url))
        with running(app):
            yield app, state


def answer(browser: Browser, chat: tuple[ChatApp, FakeState], text: str, locale: str = "en-US", init: str = "") -> Page:
    """A new tab whose model answers `text` to its first question; the answer on the page, ended."""
    app, state = chat
    state.reply = [text[: len(text) // 2], text[len(text) // 2 :]]  # streamed in two pieces
    page = open_chat(browser, app.url, locale=locale, init_script=RECORDER + init)
    expect(page.locator(ANSWERS).first).to_contain_text("fake-ernie", timeout=30_000)  # greeted, naming the model
    send(page, "A question.")
    wait_answer_done(page, 2)
    return page


def fenced(source: str) -> str:
    return f"Here it is:\n\n```mermaid\n{source}```\n"


def speaker(page: Page, name: str) -> Locator:
    return page.locator(ANSWERS).nth(1).get_by_role("button", name=name, exact=True)


@pytest.mark.parametrize(
    ("locale", "name", "text", "language", "said"),
    [
        (
            "en-US",
            "Read aloud",
            "Drain the tank before the frost. Then open the valve!\n\n```python\nprint(1)\n```\n",
            "en-US",
            ["Drain the tank before the frost.", "Then open the valve!"],
        ),
        (
            "zh-CN",
            "朗读",
            "冬季气温低于零度时，应打开排水阀门。春天可以播种番茄和 tomato。",
            "zh-CN",
            ["冬季气温低于零度时，应打开排水阀门。", "春天可以播种番茄和 tomato。"],
        ),
    ],
)
def test_the_speaker_reads_an_answer_in_its_language_and_a_second_click_stops_it(
    browser: Browser, scripted_chat, locale, name, text, language, said
):
    page = answer(browser, scripted_chat, text, locale=locale)
    button = speaker(page, name)
    expect(button).to_have_attribute("aria-pressed", "false")
    button.click()
    expect(button).to_have_attribute("aria-pressed", "true")
    shoot(page, f"read-aloud-{locale}")
    spoken = page.evaluate("spoken")
    assert [utterance["text"] for utterance in spoken] == said  # the code block is not read
    assert {utterance["lang"] for utterance in spoken} == {language}
    button.click()
    expect(button).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("cancelled") == 1 and len(page.evaluate("spoken")) == len(said)
    page.context.close()


def test_a_new_answer_stops_the_reading(browser: Browser, scripted_chat):
    page = answer(browser, scripted_chat, "The first answer, read aloud.")
    button = speaker(page, "Read aloud")
    button.click()
    expect(button).to_have_attribute("aria-pressed", "true")
    send(page, "Another question.")
    wait_answer_done(page, 3)
    expect(button).to_have_attribute("aria-pressed", "false")
    assert page.evaluate("cancelled") == 1
    page.context.close()


def test_a_browser_without_speech_synthesis_shows_no_speaker(browser: Browser, scripted_chat):
    page = answer(browser, scripted_chat, "Nothing to say aloud here.", init=MUTE)
    actions = page.locator(ANSWERS).nth(1).get_by_role("button", name="Copy to clipboard")
    expect(actions).to_be_visible()  # the row the speaker would be in
    expect(page.locator(ANSWERS).nth(1).get_by_role("button", name="Read aloud")).to_have_count(0)
    page.context.close()


def test_a_mermaid_block_becomes_a_diagram_with_its_source_one_click_away(browser: Browser, scripted_chat):
    page = answer(browser, scripted_chat, fenced(DIAGRAM))
    reply = page.locator(ANSWERS).nth(1)
    expect(reply.locator(".chat-diagram svg")).to_have_count(1, timeout=30_000)
    expect(reply.locator(DIAGRAM_NODES)).to_have_count(4)
    expect(reply.locator(".chat-diagram svg")).to_contain_text("Fits the window?")
    source = reply.locator("pre")
    expect(source).to_be_hidden()
    toggle = reply.get_by_role("button", name="Diagram source")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(source).to_be_visible()
    expect(source).to_have_text(DIAGRAM)
    expect(toggle).to_have_attribute("aria-expanded", "true")
    toggle.click()
    expect(source).to_be_hidden()
    shoot(page, "diagram")
    # Drawn once: mermaid names each drawing anew (chat-diagram-1, -2 ...), and the page goes on showing the first.
    drawing = reply.locator(".chat-diagram svg").get_attribute("id")
    send(page, "Another question.")
    wait_answer_done(page, 3)
    expect(reply.locator(".chat-diagram svg")).to_have_attribute("id", drawing or "")
    assert page.evaluate("violations") == []  # mermaid drew under the page's Content-Security-Policy
    page.context.close()


def test_a_script_inside_a_diagram_does_not_run(browser: Browser, scripted_chat):
    page = answer(browser, scripted_chat, fenced(HOSTILE), init=TRAP)
    reply = page.locator(ANSWERS).nth(1)
    expect(reply.locator(DIAGRAM_NODES)).to_have_count(4, timeout=30_000)
    for node in reply.locator(DIAGRAM_NODES).all():
        node.click()
    # Every image in the diagram has loaded or failed: an onerror left in a label would have run by then.
    settled = "figure => Promise.all([...figure.querySelectorAll('img')].map(img => img.decode().catch(() => null)))"
    reply.locator(".chat-diagram").evaluate(settled)
    assert page.evaluate("window.pwned") == 0
    assert page.evaluate("location.protocol") == "http:"  # still the chat: no javascript: link followed
    page.context.close()


def test_a_broken_diagram_shows_its_source_and_the_error(browser: Browser, scripted_chat):
    page = answer(browser, scripted_chat, fenced(BROKEN), locale="zh-CN")
    reply = page.locator(ANSWERS).nth(1)
    error = reply.locator(".chat-diagram-error")
    expect(error).to_contain_text("无法绘制此图表：", timeout=30_000)
    expect(error).to_contain_text("error")  # mermaid's own words about what is wrong
    expect(reply.locator("pre")).to_be_visible()
    expect(reply.locator("pre")).to_have_text(BROKEN)
    expect(reply.locator(".chat-diagram svg")).to_have_count(0)
    shoot(page, "diagram-broken")
    page.context.close()
