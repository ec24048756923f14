// The account page: reads the user's memory and API keys from /account/api/state, sends each change as JSON, then
// reads again. A new key is shown once, from the answer that made it; the server keeps only its hash.
"use strict";

const { el, say, status, call, field, form, section, changer, when, stateOf, loaded } = window.appPage;
const T = window.appPage.strings;
const API = "/account/api";
const BASE = `${location.origin}/v1`;
let state = null;
let made = null; // the key just made: shown until the page is left

const change = changer(API, () => load());

function factRow(fact, index) {
  const number = index + 1;
  const name = fact.text;
  const edit = form(`fact-${index}`, say("edit_fact", { number }), [
    field(`fact-${index}-text`, T.fact, { required: true, maxlength: state.fact_max_chars, value: fact.text, autocomplete: "off" }),
  ], T.save, (data) => change("memory/change", { id: fact.id, text: data.get(`fact-${index}-text`) }, say("edit_fact", { number })));
  edit.classList.add("inline");
  const act = (label, path, body, confirmation) => el("button", { type: "button", class: path.endsWith("delete") ? "danger" : "",
    "aria-label": say("action_of", { action: label, name }),
    onclick: () => (!confirmation || confirm(confirmation)) && change(path, body, say("action_of", { action: label, name })) }, label);
  return el("li", { "data-fact": fact.id, class: fact.paused ? "paused" : "" },
    el("div", { class: "grow" }, edit, fact.paused ? el("span", { class: "tag" }, T.paused) : ""),
    fact.paused ? act(T.resume, "memory/change", { id: fact.id, paused: false }) : act(T.pause, "memory/change", { id: fact.id, paused: true }),
    act(T.delete, "memory/delete", { id: fact.id }, say("confirm_delete_fact", { text: fact.text })));
}

function drawMemory() {
  const content = section("memory");
  content.append(el("p", {}, say("memory_about", { tokens: state.memory_tokens })));
  if (!state.memory_on) content.append(el("p", { class: "muted" }, T.memory_off));
  content.append(state.facts.length ? el("ol", { class: "rows", id: "facts" }, state.facts.map(factRow))
    : el("p", { class: "muted" }, T.no_facts));
  content.append(form("new-fact", T.new_fact, [
    field("new-fact-text", T.fact, { required: true, maxlength: state.fact_max_chars, autocomplete: "off" }, T.fact_hint),
  ], T.add, (data) => change("memory/add", { text: data.get("new-fact-text") }, T.new_fact)));
}

function example(key) {
  return `curl ${BASE}/chat/completions -H "Authorization: Bearer ${key}" -H "Content-Type: application/json" \\\n`
    + `  -d '{"model": "<GET ${BASE}/models>", "messages": [{"role": "user", "content": "Hello"}]}'`;
}

function drawKeys() {
  const content = section("keys");
  content.append(el("p", {}, say("keys_about", { base: BASE })));
  if (!state.keys_on) content.append(el("p", { class: "failed", role: "note" }, T.keys_off));
  if (made) {
    content.append(el("div", { class: "card", id: "new-key" }, el("p", {}, say("new_key_shown", { name: made.name })),
      el("pre", {}, el("code", { id: "new-key-value" }, made.key)),
      el("p", {}, T.example), el("pre", {}, el("code", {}, example(made.key)))));
  }
  content.append(state.keys.length ? el("ul", { class: "rows", id: "keys-list" }, state.keys.map((key) => el("li", { "data-key": key.id },
    el("div", { class: "grow" }, el("strong", {}, key.name), " ",
      el("small", {}, say("key_line", { start: key.start, made: when(key.created_at), used: when(key.last_used_at) }))),
    el("button", { type: "button", class: "danger", "aria-label": say("action_of", { action: T.revoke, name: key.name }),
      onclick: () => confirm(say("confirm_revoke", { name: key.name }))
        && change("keys/revoke", { id: key.id }, say("action_of", { action: T.revoke, name: key.name })) }, T.revoke))))
    : el("p", { class: "muted" }, T.no_keys));
  if (state.keys_on && state.keys.length < state.most_keys) {
    content.append(form("new-key-form", T.new_key, [
      field("new-key-name", T.key_name, { required: true, maxlength: 255, autocomplete: "off" }, T.key_name_hint),
    ], T.make, async (data) => {
      const name = data.get("new-key-name");
      const answer = await call(`${API}/keys/create`, { name });
      if (answer === null) return false;
      made = answer;
      status(say("done", { what: `${T.new_key}: ${name}` }));
      await load();
      document.getElementById("new-key-value")?.focus();
      return true;
    }));
  }
}

async function load() {
  state = await stateOf(API);
  if (state === null) return;
  drawMemory();
  drawKeys();
  loaded();
}

load();
