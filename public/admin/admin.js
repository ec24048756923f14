// The admin page: reads everything from /admin/api/state, sends each change as JSON, then reads again.
"use strict";

const { el, say, field, form, section, changer, when, stateOf, loaded } = window.appPage;
const T = window.appPage.strings;
const API = "/admin/api";
let state = null;

const change = changer(API, () => load());

function userPicker(id) {
  return field(id, T.user, { tag: "select", required: true });
}

function fillUserPickers() {
  for (const select of document.querySelectorAll("select[name$='-user']")) {
    const chosen = select.value;
    select.replaceChildren(...state.users.map((u) => el("option", { value: u.name }, u.name)));
    if (chosen) select.value = chosen;
  }
}

function numberOrNull(value) {
  return value === "" || value === null ? null : Number(value);
}

function limitsText(limits) {
  const own = Object.entries(limits).filter(([, v]) => v !== null);
  return own.length ? own.map(([k, v]) => `${T[`${k}_short`]}: ${v}`).join(", ") : say("default");
}

// A user's sign-ons, each with its Unlink; for a password account, whether sign-on may link to it by e-mail.
function signOns(u, index) {
  const items = u.sign_ons.map((s) => {
    const what = say("action_of", { action: T.unlink, name: `${u.name} (${s.provider}: ${s.subject})` });
    return el("li", {}, `${s.provider}: ${s.subject} `, el("button", { type: "button", "aria-label": what,
      onclick: () => change("users/unlink-sign-on", { name: u.name, ...s }, what) }, T.unlink));
  });
  const parts = [items.length ? el("ul", { class: "sign-ons" }, items) : ""];
  if (u.password) {
    const id = `may-link-${index}`;
    const what = say("action_of", { action: T.may_link, name: u.name });
    parts.push(el("div", { class: "field check" }, el("input", { type: "checkbox", id, checked: u.sign_on_may_link,
      onchange: (event) => change("users/sign-on-may-link", { name: u.name, allowed: event.target.checked }, what) }),
    el("label", { for: id, title: T.may_link_hint }, T.may_link)));
  }
  return parts;
}

function linkSignOnForm() {
  if (!state.sign_on_providers.length) return el("p", {}, T.no_providers);
  const node = form("link-sign-on", T.link_sign_on, [userPicker("link-sign-on-user"),
    field("link-sign-on-provider", T.provider, { tag: "select", required: true }),
    field("link-sign-on-subject", T.subject, { required: true, maxlength: 255, autocomplete: "off" }, T.subject_hint)],
  T.link_sign_on, (data) => change("users/link-sign-on", { name: data.get("link-sign-on-user"),
    provider: data.get("link-sign-on-provider"), subject: data.get("link-sign-on-subject") },
  `${T.link_sign_on}: ${data.get("link-sign-on-user")}`));
  node.querySelector("select[name=link-sign-on-provider]")
    .append(...state.sign_on_providers.map((p) => el("option", { value: p }, p)));
  return node;
}

function drawUsers() {
  const content = section("users");
  const rows = state.users.map((u, index) => {
    const act = (action, path, body) => el("button", { type: "button", "aria-label": say("action_of", { action, name: u.name }),
      onclick: () => change(path, { name: u.name, ...body }, say("action_of", { action, name: u.name })) }, action);
    const remove = el("button", { type: "button", class: "danger", "aria-label": say("action_of", { action: T.remove, name: u.name }),
      onclick: () => confirm(say("confirm_remove", { name: u.name }))
        && change("users/remove", { name: u.name }, say("action_of", { action: T.remove, name: u.name })) }, T.remove);
    return el("tr", { "data-user": u.name },
      el("th", { scope: "row" }, u.name),
      el("td", {}, u.email || ""),
      el("td", {}, u.admin ? T.admin : ""),
      el("td", {}, u.password ? T.password : u.name === "local" ? T.local : T.sign_on),
      el("td", {}, signOns(u, index)),
      el("td", {}, when(u.last_login_at)),
      el("td", {}, limitsText(u.limits)),
      el("td", {}, u.projects.join(", ")),
      el("td", {}, el("input", { type: "checkbox", checked: u.temporary_only,
        "aria-label": say("action_of", { action: T.temporary_only, name: u.name }),
        onchange: (event) => change("users/temporary", { name: u.name, on: event.target.checked },
          say("action_of", { action: T.temporary_only, name: u.name })) })),
      el("td", { class: "actions" },
        u.admin ? act(T.unmake_admin, "users/admin", { admin: false }) : act(T.make_admin, "users/admin", { admin: true }),
        act(T.end_sessions, "users/end-sessions", {}), remove));
  });
  content.append(el("table", { id: "users-table" }, el("caption", { class: "visually-hidden" }, T.users),
    el("thead", {}, el("tr", {}, [T.name, T.email, T.admin, T.sign_in, T.sign_ons, T.last_login, T.limits, T.projects, T.temporary_only, T.actions].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows)));
  content.append(form("add-user", T.add_user, [
    field("add-user-name", T.name, { required: true, maxlength: 255, autocomplete: "off" }),
    field("add-user-email", T.email, { type: "email", maxlength: 255, autocomplete: "off" }, T.email_hint),
    field("add-user-password", T.password, { type: "password", required: true, minlength: 8,
      autocomplete: "new-password" }, T.password_hint),
    el("div", { class: "field check" }, el("input", { type: "checkbox", id: "add-user-admin", name: "add-user-admin" }),
      el("label", { for: "add-user-admin" }, T.admin)),
  ], T.add, (data) => change("users/add", {
    name: data.get("add-user-name"), password: data.get("add-user-password"),
    email: data.get("add-user-email") || null, admin: data.get("add-user-admin") === "on",
  }, `${T.add_user}: ${data.get("add-user-name")}`)));
  content.append(form("set-password", T.new_password, [userPicker("set-password-user"),
    field("set-password-password", T.password, { type: "password", required: true, minlength: 8, autocomplete: "new-password" })],
  T.save, (data) => change("users/password", { name: data.get("set-password-user"), password: data.get("set-password-password") },
    `${T.new_password}: ${data.get("set-password-user")}`)));
  content.append(form("link-email", T.link_email, [userPicker("link-email-user"),
    field("link-email-email", T.email, { type: "email", maxlength: 255 }, T.email_hint)],
  T.save, (data) => change("users/email", { name: data.get("link-email-user"), email: data.get("link-email-email") || null },
    `${T.link_email}: ${data.get("link-email-user")}`)));
  content.append(linkSignOnForm());
}

function drawLimits() {
  const content = section("own_limits");
  content.append(el("p", {}, T.limits_hint));
  const names = ["answers_at_once", "messages_per_minute", "daily_tokens"];
  const fields = names.map((name) => field(`limits-${name}`, T[name],
    { type: "number", min: name === "daily_tokens" ? 0 : 1, step: 1, placeholder: `${T.default}: ${state.limits[name]}` }));
  const node = form("set-limits", T.own_limits, [userPicker("set-limits-user"), fields], T.save, (data) => {
    const body = { name: data.get("set-limits-user") };
    for (const name of names) body[name] = numberOrNull(data.get(`limits-${name}`));
    return change("users/limits", body, `${T.own_limits}: ${body.name}`);
  });
  const picker = node.querySelector("select");
  picker.addEventListener("change", () => {
    const user = state.users.find((u) => u.name === picker.value);
    for (const name of names) node.querySelector(`#limits-${name}`).value = user?.limits[name] ?? "";
  });
  content.append(node);
}

function drawUsage() {
  const content = section("usage");
  const now = Object.entries(state.answering_now).map(([u, n]) => `${u} ${n}`).join(", ") || T.nobody;
  content.append(el("p", { id: "answering-now" }, say("answering_now", { now })));
  const perDay = new Map();
  for (let i = state.usage_days - 1; i >= 0; i--) {
    perDay.set(new Date(Date.now() - i * 86400000).toISOString().slice(0, 10), 0);
  }
  for (const row of state.usage) {
    if (perDay.has(row.day)) perDay.set(row.day, perDay.get(row.day) + row.prompt_tokens + row.completion_tokens);
  }
  const most = Math.max(1, ...perDay.values());
  const total = [...perDay.values()].reduce((a, b) => a + b, 0);
  const width = 12;
  const chart = el("svg", { id: "usage-chart", role: "img", viewBox: `0 0 ${perDay.size * width} 100`,
    "aria-label": say("usage_chart", { days: state.usage_days, total }) });
  [...perDay.entries()].forEach(([day, tokens], i) => {
    const height = Math.round((tokens / most) * 96);
    chart.append(el("rect", { x: i * width + 1, y: 100 - height, width: width - 2, height },
      el("title", {}, `${day}: ${tokens}`)));
  });
  if (!state.usage.length) {
    content.append(el("p", {}, say("no_usage", { days: state.usage_days })));
    return;
  }
  content.append(chart);
  content.append(el("table", { id: "usage-table" }, el("caption", { class: "visually-hidden" }, T.usage),
    el("thead", {}, el("tr", {}, [T.day, T.user, T.answers, T.prompt_tokens, T.completion_tokens].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, state.usage.map((r) => el("tr", {}, el("td", {}, r.day), el("th", { scope: "row" }, r.user),
      el("td", {}, r.answers), el("td", {}, r.prompt_tokens), el("td", {}, r.completion_tokens))))));
}

function drawDefaults() {
  const content = section("defaults");
  const d = state.defaults;
  const prompt = field("defaults-prompt", T.system_prompt, { tag: "textarea", rows: 4, maxlength: 20000 },
    say("system_prompt_hint", { setting: state.default_system_prompt }));
  prompt.querySelector("textarea").value = d.system_prompt ?? "";
  const presets = el("fieldset", {}, el("legend", {}, T.presets_shown), state.presets.map((name, i) =>
    el("div", { class: "field check" }, el("input", { type: "checkbox", id: `preset-${i}`, name: "preset", value: name,
      checked: !d.hidden_presets.includes(name) }), el("label", { for: `preset-${i}` }, name))));
  const check = (id, name, checked, label) => el("div", { class: "field check" },
    el("input", { type: "checkbox", id, name, checked }), el("label", { for: id }, label));
  const open = check("defaults-open-sign-on", "open", d.open_sign_on, T.open_sign_on);
  const temporary = check("defaults-temporary", "temporary", d.temporary_chats, T.temporary_chats);
  const keys = check("defaults-api-keys", "api_keys", d.api_keys, T.api_keys_on);
  content.append(form("set-defaults", T.defaults, [prompt, presets, open, temporary, keys], T.save, async (data) => {
    const shown = data.getAll("preset");
    await change("defaults", { system_prompt: data.get("defaults-prompt") || null,
      hidden_presets: state.presets.filter((name) => !shown.includes(name)), open_sign_on: data.get("open") === "on",
      temporary_chats: data.get("temporary") === "on", api_keys: data.get("api_keys") === "on" }, T.defaults);
    return false; // the form shows what is saved, read again
  }));
}

function drawShares() {
  const content = section("shares");
  if (!state.shares.length) {
    content.append(el("p", {}, T.no_shares));
    return;
  }
  content.append(el("table", { id: "shares-table" }, el("caption", { class: "visually-hidden" }, T.shares),
    el("thead", {}, el("tr", {}, [T.chat, T.owner, T.since, T.actions].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, state.shares.map((s) => el("tr", { "data-chat": s.id },
      el("th", { scope: "row" }, el("a", { href: `/share/${s.id}` }, s.name || s.id)),
      el("td", {}, s.owner), el("td", {}, s.since ? new Date(s.since).toLocaleString(document.documentElement.lang) : ""),
      el("td", {}, el("button", { type: "button", "aria-label": say("action_of", { action: T.unshare, name: s.name || s.id }),
        onclick: () => change("shares/unshare", { thread_id: s.id }, say("action_of", { action: T.unshare, name: s.name || s.id })) },
      T.unshare)))))));
}

function drawKeys() {
  const content = section("api_keys");
  content.append(el("p", {}, state.defaults.api_keys ? T.api_keys_about : T.api_keys_off));
  if (!state.keys.length) {
    content.append(el("p", {}, T.no_keys));
    return;
  }
  content.append(el("table", { id: "keys-table" }, el("caption", { class: "visually-hidden" }, T.api_keys),
    el("thead", {}, el("tr", {}, [T.key, T.owner, T.made, T.last_used, T.actions].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, state.keys.map((k) => el("tr", { "data-key": k.id },
      el("th", { scope: "row" }, `${k.name} (${k.start}…)`), el("td", {}, k.owner), el("td", {}, when(k.created_at)),
      el("td", {}, when(k.last_used_at)),
      el("td", {}, el("button", { type: "button", class: "danger", "aria-label": say("action_of", { action: T.revoke, name: `${k.owner}: ${k.name}` }),
        onclick: () => confirm(say("confirm_revoke", { name: k.name, owner: k.owner }))
          && change("keys/revoke", { id: k.id }, say("action_of", { action: T.revoke, name: `${k.owner}: ${k.name}` })) },
      T.revoke)))))));
}

function drawHealth() {
  const content = section("health");
  const h = state.health;
  const vllm = [h.vllm.serving ? T.serving : T.not_serving, h.vllm.model, h.vllm.engine,
    h.vllm.window ? say("window", { tokens: h.vllm.window }) : "",
    h.vllm.servers ? say("servers_answering", { answering: h.vllm.servers_answering, total: h.vllm.servers }) : "",
    h.vllm.url].filter(Boolean).join(" · ");
  const replicas = h.replicas.map((r) => `${r.host} (pid ${r.pid}${r.this ? `, ${T.this_server}` : ""}): ${r.recent ? T.recent : T.gone}, ${when(r.seen_at)}`);
  content.append(el("dl", {},
    el("dt", {}, T.vllm), el("dd", { id: "health-vllm" }, vllm),
    el("dt", {}, T.database), el("dd", { id: "health-database" }, `${h.database.kind}: ${h.database.reachable ? T.reachable : T.unreachable}`),
    el("dt", {}, T.replicas), el("dd", { id: "health-replicas" }, el("ul", {}, replicas.map((r) => el("li", {}, r))))));
}

function drawChanges() {
  const content = section("changes");
  content.append(el("table", { id: "changes-table" }, el("caption", { class: "visually-hidden" }, T.changes),
    el("thead", {}, el("tr", {}, [T.when, T.by, T.what].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, state.changes.map((c) => el("tr", {}, el("td", {}, when(c.at)), el("td", {}, c.admin),
      el("td", {}, `${c.action} ${c.target} ${c.detail}`.trim()))))));
}

async function load() {
  state = await stateOf(API, () => T.forbidden);
  if (state === null) return;
  drawUsers();
  drawLimits();
  drawUsage();
  drawDefaults();
  drawShares();
  drawKeys();
  drawHealth();
  drawChanges();
  fillUserPickers();
  loaded();
}

load();
