"""Memory ("About you"): the facts a person keeps reach the request vLLM receives at the prompt's start, byte for byte
turn after turn, within their own token cap; paused ones and temporary chats' requests carry none; "remember …"
keeps a fact only once confirmed, and never from a temporary chat."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from chainlit.context import init_http_context
from chainlit.user import User
from hypothesis import given
from hypothesis import strategies as st

from app.chat.memory import asked_to_remember, recalled, rendered
from app.config import DEFAULT_SYSTEM_PROMPT
from app.history.memories import Kept, Memories
from app.i18n import text
from tests.support.accounts import account, page_login, remember
from tests.support.chat_client import ChatClient
from tests.support.history import answer_of, run_users, started_chat
from tests.support.servers import ChatApp, VllmServer, running

HEADING = text("en", "memory_heading")


@pytest.fixture(scope="module")
def memory_app(vllm: VllmServer):
    """An app with password login for fay, gus and hal."""
    app = ChatApp(vllm)
    for name in ("fay", "gus", "hal"):
        assert run_users(app, "add", name, password=f"{name}-password").returncode == 0
    with running(app):
        yield app


async def prompt_of(vllm: VllmServer, question: str) -> str:
    """The prompt vLLM received with the question (its request log, written as it arrives)."""
    for _ in range(100):
        prompts = [r["prompt"] for r in vllm.logged_requests() if question in r["prompt"]]
        if prompts:
            return prompts[-1]
        await asyncio.sleep(0.1)
    raise AssertionError(f"vLLM received no request with {question!r}")


def asked(question: str) -> str:
    """A question no other test asks."""
    return f"{question} ({uuid.uuid4().hex[:8]})"


async def test_a_memory_starts_every_prompt_vllm_receives_and_no_temporary_chats(memory_app, vllm):
    fay = await page_login(memory_app, "fay")
    await remember(fay, "I am vegetarian.", "I hate tea.", "I live in Lyon.")
    tea = next(f for f in (await account(fay))["facts"] if f["text"] == "I hate tea.")
    status, _ = await fay.rest("POST", "/account/api/memory/change", {"id": tea["id"], "paused": True})
    assert status == 200
    system = f"{HEADING}\n- I am vegetarian.\n- I live in Lyon.\n\n{DEFAULT_SYSTEM_PROMPT}"

    tab = await started_chat(memory_app, credentials=("fay", "fay-password"))
    first, second = asked("What should I cook?"), asked("And for dessert?")
    answer = answer_of(await tab.ask(first))["output"]
    assert await prompt_of(vllm, first) == vllm.render(
        [{"role": "system", "content": system}, {"role": "user", "content": first}]
    )
    await tab.ask(second)
    assert await prompt_of(vllm, second) == vllm.render(
        [
            {"role": "system", "content": system},
            {"role": "user", "content": first},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": second},
        ]
    )

    temporary = ChatClient(memory_app.url, credentials=("fay", "fay-password"), modes={"history": "temporary"})
    await temporary.connect()
    await temporary.greeting()
    await temporary.change_settings({"max_tokens": 8})
    unseen = asked("remember I like jazz")  # a temporary chat writes no memory: an ordinary question there
    assert answer_of(await temporary.ask(unseen))["output"]
    assert await prompt_of(vllm, unseen) == vllm.render(
        [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, {"role": "user", "content": unseen}]
    )
    assert [f["text"] for f in (await account(fay))["facts"]] == ["I am vegetarian.", "I hate tea.", "I live in Lyon."]
    for open_tab in (tab, temporary):
        await open_tab.close()


async def test_remember_in_a_message_keeps_the_fact_only_once_confirmed_and_tells_the_model_nothing(memory_app, vllm):
    gus = await page_login(memory_app, "gus")
    tab = await started_chat(memory_app, credentials=("gus", "gus-password"))

    async def offer(message: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        produced = await tab.ask(message)
        [notice] = [m for m in produced if "the cello" in str(m.get("output"))]
        return notice, {a["name"]: a for a in tab.actions(notice["id"])}

    notice, buttons = await offer("remember I play the cello")
    assert set(buttons) == {"remember_keep", "remember_drop"} and (await account(gus))["facts"] == []
    assert (await tab.click(buttons["remember_drop"]))[0] == 200
    await tab.wait_for(lambda: not tab.actions(notice["id"]), 10)
    assert (await account(gus))["facts"] == []

    notice, buttons = await offer("Remember: I play the cello on Sundays")
    assert (await tab.click(buttons["remember_keep"]))[0] == 200
    await tab.wait_for(lambda: not tab.actions(notice["id"]), 10)
    assert [f["text"] for f in (await account(gus))["facts"]] == ["I play the cello on Sundays"]
    assert not [r for r in vllm.logged_requests() if "the cello" in r["prompt"]]  # no question for the model

    question = asked("What shall I practise?")
    await tab.ask(question)
    assert (await prompt_of(vllm, question)).startswith(
        vllm.render([{"role": "system", "content": f"{HEADING}\n- I play the cello on Sundays\n\n"}])[:-20]
    )
    await tab.close()


async def test_a_memory_past_its_token_cap_keeps_its_oldest_facts(vllm: VllmServer):
    facts = [f"Fact number {n}: I collect {n} stamps from distant countries." for n in range(6)]
    cap = vllm.count_tokens(rendered(HEADING, facts[:3]))  # exactly the first three, as the model's tokenizer counts
    app = ChatApp(vllm, extra_env={"MEMORY_MAX_TOKENS": str(cap)})
    assert run_users(app, "add", "hal", password="hal-password").returncode == 0
    with running(app):
        await remember(await page_login(app, "hal"), *facts)
        tab = await started_chat(app, credentials=("hal", "hal-password"))
        question = asked("What do I collect?")
        await tab.ask(question)
        prompt = await prompt_of(vllm, question)
        assert [fact for fact in facts if fact in prompt] == facts[:3]
        assert rendered(HEADING, facts[:3]) in prompt
        await tab.close()


async def test_with_the_memory_off_remember_is_a_question_for_the_model_and_no_fact_is_told(vllm: VllmServer):
    app = ChatApp(vllm, extra_env={"MEMORY_MAX_TOKENS": "0"})
    assert run_users(app, "add", "ida", password="ida-password").returncode == 0
    with running(app):
        await remember(await page_login(app, "ida"), "I keep bees.")
        tab = await started_chat(app, credentials=("ida", "ida-password"))
        question = asked("remember I play the harp")
        produced = await tab.ask(question)
        offers = [a for m in produced for a in tab.actions(m["id"]) if a["name"].startswith("remember_")]
        assert not offers and answer_of(produced)["output"]  # the model answered it
        prompt = await prompt_of(vllm, question)
        assert "I keep bees." not in prompt and HEADING not in prompt
        await tab.close()


async def words(texts: Sequence[str]) -> list[int]:
    """A tokenizer for the cap's laws: one token per word (fewer than the bytes, as every real one)."""
    return [len(text_.split()) for text_ in texts]


FACTS = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30), max_size=8)


@given(facts=FACTS, new=st.text(min_size=1, max_size=30), cap=st.integers(0, 60))
async def test_a_memory_is_the_most_of_its_oldest_facts_that_fit_and_a_new_fact_never_moves_them(facts, new, cap):
    kept = await recalled(HEADING, facts, cap, words)
    n = next(n for n in range(len(facts) + 1) if kept == (rendered(HEADING, facts[:n]) if n else ""))
    assert (await words([kept]))[0] <= cap or not kept
    assert n == len(facts) or (await words([rendered(HEADING, facts[: n + 1])]))[0] > cap
    assert (await recalled(HEADING, [*facts, new], cap, words)).startswith(kept)


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        ("remember I am vegetarian", "I am vegetarian"),
        ("Please remember that my name is  Ann\n", "my name is Ann"),
        ("REMEMBER: answer in German", "answer in German"),
        ("请记住：我住在北京", "我住在北京"),
        ("记住我喜欢茶", "我喜欢茶"),
        ("remember when we met?", None),
        ("Remembering is hard", None),
        ("Do you remember me", None),
    ],
)
def test_what_a_message_asks_to_remember(message, fact):
    assert asked_to_remember(message) == fact


async def settled(memories: Memories, user: str, facts: list[str]) -> list[str]:
    """The facts the user's answers start on, once the reads behind earlier answers brought these (or 2 s)."""
    for _ in range(200):
        if (now := await memories.for_answer(user)) == facts:
            return now
        await asyncio.sleep(0.01)
    return now


async def test_an_answer_starts_on_the_facts_known_and_reads_them_behind_it(store):
    init_http_context()
    await store.create_user(User(identifier="ann"))
    # Two app servers on one database; here reads behind every answer.
    here, elsewhere = Memories(store.writer, fresh_for=0), Memories(store.writer)
    assert await here.add("ann", "likes tea") is Kept.KEPT
    assert await here.for_answer("ann") == ["likes tea"]  # read now: nothing known yet

    assert await elsewhere.add("ann", "lives in Oslo") is Kept.KEPT
    assert await here.for_answer("ann") == ["likes tea"]  # starts at once on what it knew...
    assert await settled(here, "ann", ["likes tea", "lives in Oslo"]) == ["likes tea", "lives in Oslo"]  # ...then not

    tea = next(fact for fact in await here.listed("ann") if fact.text == "likes tea")
    assert await here.change("ann", tea.id, paused=True)
    assert await here.for_answer("ann") == ["lives in Oslo"]  # a change made here counts at the very next answer
    oslo = next(fact for fact in await here.listed("ann") if fact.text == "lives in Oslo")
    assert await here.delete("ann", oslo.id)
    assert await here.for_answer("ann") == []


async def test_facts_read_stand_for_the_answers_of_a_while_then_are_read_again(store):
    init_http_context()
    await store.create_user(User(identifier="ann"))
    here, elsewhere = Memories(store.writer, fresh_for=1.0), Memories(store.writer)
    assert await here.add("ann", "likes tea") is Kept.KEPT
    assert await here.for_answer("ann") == ["likes tea"]
    read_at = time.monotonic()

    assert await elsewhere.add("ann", "lives in Oslo") is Kept.KEPT
    started_on = set()
    while time.monotonic() - read_at < 0.5:  # answers a second apart no more: no read behind them
        started_on.add(tuple(await here.for_answer("ann")))
        await asyncio.sleep(0.01)
    assert started_on == {("likes tea",)}
    assert await settled(here, "ann", ["likes tea", "lives in Oslo"]) == ["likes tea", "lives in Oslo"]

    tea = next(fact for fact in await here.listed("ann") if fact.text == "likes tea")
    assert await here.change("ann", tea.id, paused=True)
    assert await here.for_answer("ann") == ["lives in Oslo"]  # a change made here counts at once all the same
