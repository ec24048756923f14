"""Presets and favourite prompts: the store on SQLite and PostgreSQL, and the real app over socket.io and REST."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from chainlit.user import User

from app.chat.preferences import Preferences
from app.config import DEFAULT_SYSTEM_PROMPT, Settings
from app.errors import ChatError, Problem
from app.history.store import Actor, ChatStore
from app.presets.builtin import BY_NAME, preset_name
from app.presets.store import MOST_PRESETS, Outcome, PresetStore
from tests.support.chat_client import ChatClient
from tests.support.history import answer_of, app_with_users
from tests.support.servers import ChatApp, VllmServer, running
from tests.support.stores import step, user_with_chat

TRANSLATE = "Translate zh↔en"


def test_a_presets_name_is_one_short_line_of_text_and_never_a_built_in_ones():
    assert preset_name("  Short \t answers\n") == preset_name("Short\nanswers") == "Short answers"
    for bad in ("", "   ", "x" * 41, "bell\x07", "rtl\u202eoverride", "zero\u200bwidth"):
        with pytest.raises(ChatError) as refused:
            preset_name(bad)
        assert refused.value.problem is Problem.PRESET_NAME, bad
    for built_in in ("Balanced", "precise", "创意", "中英互译", "translate ZH↔EN"):
        with pytest.raises(ChatError) as refused:
            preset_name(built_in)
        assert refused.value.problem is Problem.PRESET_BUILT_IN, built_in


def test_each_built_in_preset_sets_its_sampling_and_its_prompt_in_the_chats_language():
    defaults = Preferences.defaults(Settings())
    assert BY_NAME["Balanced"].preferences(defaults, "en") == defaults
    translate = {lang: BY_NAME[TRANSLATE].preferences(defaults, lang) for lang in ("en", "zh")}
    assert translate["en"].system_prompt.startswith("You are a translator.")
    assert translate["zh"].system_prompt.startswith("你是一名翻译。")
    precise, creative = (BY_NAME[name].preferences(defaults, "en") for name in ("Precise", "Creative"))
    assert precise.temperature < defaults.temperature < creative.temperature
    assert precise.max_tokens == defaults.max_tokens == creative.max_tokens


async def two_users(store: ChatStore) -> tuple[str, str]:
    """alice with her chat t1 and bob with his t2; their users rows' ids."""
    alice = await user_with_chat(store, "alice", name="alice's chat")
    bob = await store.create_user(User(identifier="bob"))
    assert bob is not None
    await store.update_thread("t2", name="bob's chat", user_id=bob.id)
    return alice.id, bob.id


async def test_a_users_presets_are_theirs_alone(store):
    await two_users(store)
    presets, settings = PresetStore(store.writer), {"temperature": 0.3, "system_prompt": "ALICE"}
    assert await presets.save("alice", "Short", settings, []) is Outcome.SAVED
    assert await presets.save("alice", "Short", settings | {"temperature": 0.4}, ["d1"]) is Outcome.REPLACED
    assert await presets.list("bob") == []
    assert await presets.rename("bob", "Short", "Mine") is Outcome.NOT_FOUND
    assert await presets.delete("bob", "Short") is Outcome.NOT_FOUND
    assert await presets.save("bob", "Short", {"temperature": 1.5}, []) is Outcome.SAVED  # his own, beside hers
    assert await presets.rename("alice", "Short", "Brief") is Outcome.RENAMED
    assert await presets.save("alice", "Other", settings, []) is Outcome.SAVED
    assert await presets.rename("alice", "Other", "Brief") is Outcome.NAME_TAKEN
    assert [(p.name, p.preferences["temperature"], p.documents) for p in await presets.list("alice")] == [
        ("Brief", 0.4, ["d1"]),
        ("Other", 0.3, []),
    ]
    assert [(p.name, p.preferences) for p in await presets.list("bob")] == [("Short", {"temperature": 1.5})]
    for number in range(MOST_PRESETS - 2):
        assert await presets.save("alice", f"p{number}", settings, []) is Outcome.SAVED
    assert await presets.save("alice", "one too many", settings, []) is Outcome.TOO_MANY
    assert await presets.save("alice", "Brief", settings, []) is Outcome.REPLACED  # replacing is still possible
    assert await presets.delete("alice", "Brief") is Outcome.DELETED
    assert await presets.get("alice", "Brief") is None and await presets.get("bob", "Short") is not None
    assert await presets.save("nobody", "x", settings, []) is Outcome.NOT_FOUND


async def test_favourite_prompts_are_starred_and_listed_only_by_their_user(store, hooks):
    alice, bob = await two_users(store)
    await store.create_step(step("q1", "t1", "user_message", "alice's prompt", 1))
    await store.create_step(step("a1", "t1", "assistant_message", "an answer", 2))
    await store.create_step(step("q2", "t2", "user_message", "bob's prompt", 3))
    question = step("q1", "t1", "user_message", "alice's prompt", 1)

    hooks.actor = Actor("bob", "t2")  # bob's tab naming alice's message
    await store.set_step_favorite(question, True)
    assert await store.get_favorite_steps(alice) == [] and await store.get_favorite_steps(bob) == []

    hooks.actor = Actor("alice", "t1")
    starred = await store.set_step_favorite(question, True)
    assert starred["metadata"]["favorite"] is True
    await store.set_step_favorite(step("a1", "t1", "assistant_message", "an answer", 2), True)
    assert [s["output"] for s in await store.get_favorite_steps(alice)] == ["alice's prompt"]  # prompts only
    assert await store.get_favorite_steps(bob) == []
    thread = await store.get_thread("t1")
    assert thread is not None and thread["steps"][0]["output"] == "alice's prompt"  # the rest of it as it was

    hooks.actor = Actor("bob", "t2")
    await store.set_step_favorite(question, False)
    assert [s["id"] for s in await store.get_favorite_steps(alice)] == ["q1"]
    hooks.actor = Actor("alice", "t1")
    await store.set_step_favorite(question, False)
    assert await store.get_favorite_steps(alice) == []


# ---- the real app ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def preset_app(vllm: VllmServer) -> Iterator[ChatApp]:
    """An app with password login and two users, alice and bob."""
    with running(app := app_with_users(vllm, "alice", "bob")):
        yield app


def tab(app: ChatApp, user: str, **client: Any) -> ChatClient:
    """A tab of one of the users."""
    return ChatClient(app.url, credentials=(user, f"{user}-password"), **client)


async def started(app: ChatApp, user: str, **client: Any) -> ChatClient:
    """A greeted tab, its answers kept short."""
    chat = tab(app, user, **client)
    await chat.connect()
    await chat.greeting()
    await chat.wait_for(lambda: chat.settings_widgets, 30)
    return chat


async def profiles(chat: ChatClient, language: str = "en-US") -> dict[str, dict[str, Any]]:
    """The presets the page offers this tab's user, by name (as it asks for them before connecting)."""
    if not chat.cookies:
        await chat.log_in()
    status, body = await chat.rest("GET", f"/project/settings?language={language}")
    assert status == 200, body
    return {profile["name"]: profile for profile in body["chatProfiles"]}


async def asked(chat: ChatClient, vllm: VllmServer, text: str) -> dict[str, str]:
    """vLLM's log of the request a question made."""
    before = len(vllm.logged_requests())
    answer_of(await chat.ask(text))
    logged = vllm.logged_requests()
    assert len(logged) > before
    return logged[-1]


async def panel(chat: ChatClient, values: dict[str, Any]) -> list[str]:
    """Confirm the settings panel with these values; the notices it brought, once the panel is sent again."""
    mark = len(chat.events)
    await chat.change_settings(values)
    await chat.wait_for(lambda: chat.events_since(mark, "chat_settings"), 30)
    return [str(data.get("output")) for name, data in chat.events[mark:] if name == "new_message"]


@pytest.mark.app
async def test_a_built_in_preset_picked_at_chat_start_sets_what_vllm_receives(preset_app, vllm):
    chat = await started(preset_app, "alice", chat_profile=TRANSLATE)
    assert {w["id"]: w["initial"] for w in chat.settings_widgets}["temperature"] == 0.2
    await chat.change_settings({"max_tokens": 8})
    request = await asked(chat, vllm, "你好")
    assert request["prompt"].startswith("<|begin_of_sentence|>You are a translator.")
    assert float(request["temperature"]) == 0.2 and float(request["top_p"]) == 0.8
    await chat.close()

    chat = await started(preset_app, "bob", chat_profile="Precise", language="zh-CN")
    await chat.change_settings({"max_tokens": 8})
    request = await asked(chat, vllm, "hello")
    assert request["prompt"].startswith("<|begin_of_sentence|>你是 ERNIE，一个严谨的助手。")
    assert float(request["temperature"]) == 0.2 and float(request["top_p"]) == 0.5
    offered = await profiles(chat, "zh-CN")
    assert list(offered) == ["Balanced", "Precise", "Creative", TRANSLATE]
    assert offered["Balanced"]["default"] and offered[TRANSLATE]["display_name"] == "中英互译"
    await chat.close()


@pytest.mark.app
async def test_a_saved_preset_is_its_users_own_renamed_deleted_and_kept_across_a_restart(preset_app, vllm):
    alice = await started(preset_app, "alice")
    said = await panel(
        alice, {"system_prompt": "ALICE-PRESET", "temperature": 0.35, "max_tokens": 8, "preset_save": " Short "}
    )
    assert any("Saved your preset “Short”" in text for text in said), said
    assert {w["id"]: w.get("initial") for w in alice.settings_widgets}["preset_pick"] == "Short"
    assert "Short" in await profiles(alice)
    bob = await started(preset_app, "bob")
    assert "Short" not in await profiles(bob)

    # bob names alice's preset when he starts a chat: his chat starts with the defaults.
    guess = await started(preset_app, "bob", chat_profile="Short")
    await guess.change_settings({"max_tokens": 8})
    request = await asked(guess, vllm, "whose settings?")
    assert request["prompt"].startswith(f"<|begin_of_sentence|>{DEFAULT_SYSTEM_PROMPT}")
    # ... and asks to rename and delete it: he has no preset of that name.
    said = await panel(bob, {"preset_pick": "Short", "preset_delete": True})
    assert any("no preset named “Short”" in text for text in said), said
    said = await panel(bob, {"preset_pick": "Short", "preset_rename": "Stolen"})
    assert any("no preset named “Short”" in text for text in said), said
    assert "Short" in await profiles(alice)

    mine = await started(preset_app, "alice", chat_profile="Short")
    request = await asked(mine, vllm, "whose settings?")
    assert request["prompt"].startswith("<|begin_of_sentence|>ALICE-PRESET\n")
    assert float(request["temperature"]) == 0.35 and int(request["max_tokens"]) == 8

    await asyncio.sleep(0.3)  # the chat's first write, tagged with its preset
    thread_id = mine.thread_id_started
    status, stored = await mine.rest("GET", f"/project/thread/{thread_id}")
    assert status == 200 and stored["tags"] == ["Short"]
    shared = {"threadId": thread_id, "isShared": True}
    status, _ = await mine.rest("PUT", "/project/thread/share", shared)
    assert status == 200
    status, viewed = await bob.rest("GET", f"/project/share/{thread_id}")
    assert status == 200 and "Short" not in json.dumps(viewed)  # her preset's name stays hers

    said = await panel(mine, {"preset_pick": "Short", "preset_rename": "Brief *answers*"})
    assert any("Renamed your preset to “Brief \\*answers\\*”" in text for text in said), said
    said = await panel(mine, {"preset_save": "Balanced"})
    assert any("name of a built-in preset" in text for text in said), said
    for chat in (alice, bob, guess, mine):
        await chat.close()

    preset_app.stop()
    preset_app.start()
    alice = await started(preset_app, "alice", chat_profile="Brief *answers*")
    assert list(await profiles(alice))[4:] == ["Brief *answers*"]
    request = await asked(alice, vllm, "after a restart")
    assert request["prompt"].startswith("<|begin_of_sentence|>ALICE-PRESET\n")
    said = await panel(alice, {"preset_pick": "Brief *answers*", "preset_delete": True})
    assert any("Deleted your preset" in text for text in said), said
    assert list(await profiles(alice))[4:] == []
    assert "preset_pick" not in {w["id"] for w in alice.settings_widgets}
    await alice.close()


async def favourites(chat: ChatClient) -> list[str]:
    """The favourite prompts Chainlit sends the tab when it asks for them, as the page does on connecting."""
    mark = len(chat.events)
    await chat.sio.call("fetch_favorites")
    await chat.wait_for(lambda: chat.events_since(mark, "set_favorites"), 30)
    return [step["output"] for step in chat.events_since(mark, "set_favorites")[-1]]


async def star(chat: ChatClient, message_id: str, favourite: bool) -> None:
    """The star by a message, as the page sends it; returns once Chainlit's handler has run."""
    await chat.sio.call("message_favorite", {"message": {"id": message_id, "metadata": {"favorite": favourite}}})


@pytest.mark.app
async def test_a_favourite_prompt_is_its_users_own_and_offered_again_after_a_restart(preset_app):
    alice = await started(preset_app, "alice")
    await alice.change_settings({"max_tokens": 8})
    await alice.ask("a prompt worth keeping")
    question = next(m for _, m in alice.sent if m["output"] == "a prompt worth keeping")
    bob = await started(preset_app, "bob")
    await bob.change_settings({"max_tokens": 8})
    await bob.ask("bob's own prompt")

    await star(bob, question["id"], True)  # not in bob's chat: nothing happens
    await star(alice, question["id"], True)
    assert await favourites(alice) == ["a prompt worth keeping"]
    assert await favourites(bob) == []
    await star(bob, question["id"], False)
    for chat in (alice, bob):
        await chat.close()

    preset_app.stop()
    preset_app.start()
    alice = await started(preset_app, "alice")
    assert await favourites(alice) == ["a prompt worth keeping"]
    await alice.close()


@pytest.mark.app
async def test_with_the_history_off_built_in_presets_work_and_saving_one_says_it_needs_the_history(vllm):
    with running(app := ChatApp(vllm, extra_env={"HISTORY": "false"})):
        chat = ChatClient(app.url, chat_profile="Creative")
        await chat.connect()
        await chat.greeting()
        status, config = await chat.rest("GET", "/project/settings?language=en-US")
        assert status == 200 and config["features"]["favorites"] is False
        assert [profile["name"] for profile in config["chatProfiles"]] == list(BY_NAME)
        said = await panel(chat, {"max_tokens": 8, "preset_save": "Mine"})
        assert any("Saving presets needs the chat history" in text for text in said), said
        request = await asked(chat, vllm, "anonymous")
        assert request["prompt"].startswith("<|begin_of_sentence|>You are ERNIE, an imaginative assistant.")
        assert float(request["temperature"]) == 1.1
        await chat.close()
