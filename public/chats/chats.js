// The chats page: reads the user's projects and chats from /chats/api/state, searches with /chats/api/search, sends
// each change as JSON, then reads again.
"use strict";

const { el, say, status, call, field, form, section, changer, when, stateOf, loaded } = window.appPage;
const T = window.appPage.strings;
const API = "/chats/api";
let state = null;

const change = changer(API, () => load());

const named = (chat) => chat.name || T.untitled;
const projectName = (id) => state.projects.find((p) => p.id === id)?.name;

// The text with every occurrence of the words marked (case aside): built as nodes, never as HTML.
function marked(text, words) {
  const wanted = words.filter(Boolean).map((w) => w.toLowerCase());
  const parts = [];
  let at = 0;
  const lower = text.toLowerCase();
  while (at < text.length) {
    const hits = wanted.map((w) => [lower.indexOf(w, at), w]).filter(([i]) => i >= 0).sort((a, b) => a[0] - b[0]);
    if (!hits.length) break;
    const [start, word] = hits[0];
    parts.push(text.slice(at, start), el("mark", {}, text.slice(start, start + word.length)));
    at = start + word.length;
  }
  parts.push(text.slice(at));
  return parts;
}

// Where a search result opens: its chat, at the message that matched, with the words to mark there.
function opening(result) {
  const find = new URLSearchParams({ find: result.words.join(" ") });
  return `/thread/${encodeURIComponent(result.id)}?${find}${result.step_id ? `#step-${result.step_id}` : ""}`;
}

function drawSearch(query = "", results = null) {
  const content = section("search");
  const input = field("search-words", T.search_label, { type: "search", value: query, maxlength: 1000, autocomplete: "off" }, T.search_hint);
  const node = el("form", { role: "search", class: "inline", "aria-label": T.search_label }, input,
    el("button", { type: "submit", class: "primary" }, T.search_button));
  node.addEventListener("submit", async (event) => {
    event.preventDefault();
    const words = node.querySelector("input").value.trim();
    const answer = words ? await call(`${API}/search?q=${encodeURIComponent(words)}`) : { results: [] };
    if (answer !== null) drawSearch(words, answer.results);
    document.getElementById("search-words")?.focus();
  });
  content.append(node);
  if (results === null) return;
  content.append(el("p", { role: "status" }, results.length ? say("results", { count: results.length }) : T.no_results));
  content.append(el("ul", { class: "rows", id: "search-results" }, results.map((r) => el("li", {},
    el("div", { class: "grow" }, el("a", { href: opening(r) }, named(r)),
      r.snippet ? el("div", { class: "muted" }, marked(r.snippet, r.words)) : ""),
    r.project_id ? el("span", { class: "tag" }, projectName(r.project_id) || "") : "",
    el("small", {}, when(r.said_at))))));
}

function documentsOf(project, index) {
  if (!state.library.length) return el("p", { class: "muted" }, T.no_documents);
  const attached = new Set(project.documents.map((d) => d.id));
  return el("fieldset", {}, el("legend", {}, say("documents", { name: project.name })),
    el("small", {}, T.documents_hint),
    state.library.map((d, n) => {
      const id = `project-${index}-document-${n}`;
      return el("div", { class: "field check" }, el("input", { type: "checkbox", id, checked: attached.has(d.id),
        onchange: (event) => change("projects/documents", { id: project.id, document_id: d.id, attached: event.target.checked },
          say("documents", { name: project.name })) }), el("label", { for: id }, d.name));
    }));
}

function drawProjects() {
  const content = section("projects");
  const open = !state.projects.length;
  content.append(el("details", { class: "card", open }, el("summary", {}, T.new_project), form("new-project", T.new_project, [
    field("new-project-name", T.name, { required: true, maxlength: 255, autocomplete: "off" }),
    field("new-project-instructions", T.instructions, { tag: "textarea", maxlength: 20000 }, T.instructions_hint),
  ], T.create, (data) => change("projects/create", { name: data.get("new-project-name"),
    instructions: data.get("new-project-instructions") }, `${T.new_project}: ${data.get("new-project-name")}`))));
  if (!state.projects.length) {
    content.append(el("p", { class: "muted" }, T.no_projects));
    return;
  }
  state.projects.forEach((project, index) => {
    const title = `project-${index}-title`;
    const edit = form(`project-${index}`, say("change_project", { name: project.name }), [
      field(`project-${index}-name`, T.name, { required: true, maxlength: 255, value: project.name }),
      field(`project-${index}-instructions`, T.instructions, { tag: "textarea", maxlength: 20000 }, T.instructions_hint),
    ], T.save, (data) => change("projects/change", { id: project.id, name: data.get(`project-${index}-name`),
      instructions: data.get(`project-${index}-instructions`) }, say("change_project", { name: project.name })));
    edit.querySelector("textarea").value = project.instructions;
    const remove = el("button", { type: "button", class: "danger", "aria-label": say("action_of", { action: T.delete_project, name: project.name }),
      onclick: () => confirm(say("confirm_delete", { name: project.name }))
        && change("projects/delete", { id: project.id }, say("action_of", { action: T.delete_project, name: project.name })) }, T.delete_project);
    content.append(el("article", { class: "card", "aria-labelledby": title, "data-project": project.name },
      el("h3", { id: title }, project.name, " ", el("span", { class: "tag" }, say("chats_in", { count: project.chats }))),
      el("p", {}, el("a", { class: "button primary", href: `/?project=${encodeURIComponent(project.id)}` },
        say("new_chat_here", { name: project.name }))),
      edit, documentsOf(project, index), remove));
  });
}

function chatRow(chat, index, archived) {
  const name = named(chat);
  const act = (label, path, body) => el("button", { type: "button", "aria-label": say("action_of", { action: label, name }),
    onclick: () => change(path, { id: chat.id, ...body }, say("action_of", { action: label, name })) }, label);
  if (archived) return el("li", { "data-chat": chat.id }, el("a", { class: "grow", href: `/thread/${chat.id}` }, name),
    act(T.restore, "chats/archive", { on: false }));
  const id = `chat-${index}-project`;
  const picker = el("select", { id, "aria-label": say("move", { name }),
    onchange: (event) => change("chats/project", { id: chat.id, project_id: event.target.value || null }, say("move", { name })) },
  el("option", { value: "" }, T.no_project),
  state.projects.map((p) => el("option", { value: p.id, selected: p.id === chat.project_id }, p.name)));
  return el("li", { "data-chat": chat.id },
    el("div", { class: "grow" }, el("a", { href: `/thread/${chat.id}` }, name), " ",
      chat.pinned ? el("span", { class: "tag" }, T.pinned) : ""),
    picker,
    chat.pinned ? act(T.unpin, "chats/pin", { on: false }) : act(T.pin, "chats/pin", { on: true }),
    act(T.archive, "chats/archive", { on: true }));
}

function drawChats() {
  const content = section("chats");
  content.append(state.chats.length ? el("ul", { class: "rows", id: "chat-list" }, state.chats.map((c, i) => chatRow(c, i, false)))
    : el("p", { class: "muted" }, T.no_chats));
  const archived = section("archived");
  archived.append(state.archived.length ? el("ul", { class: "rows", id: "archived-list" }, state.archived.map((c, i) => chatRow(c, i, true)))
    : el("p", { class: "muted" }, T.no_archived));
}

// An export imported: the file sent as the request's body (its upload's progress), then the server's events (reading,
// each chat written, the summary) read as they come, all on one progress bar; the lists read again at the end.
function drawImport() {
  const content = section("import");
  const limit = Number(T.import_max_mb);
  const input = field("import-file", T.import_label, { type: "file", accept: ".zip,.json,application/zip,application/json" },
    say("import_hint", { limit }));
  const bar = el("progress", { id: "import-progress", max: 100, "aria-label": T.import_progress, hidden: true });
  const line = el("p", { id: "import-line", role: "status", "aria-live": "polite" });
  const summary = el("div", { id: "import-summary" });
  const node = el("form", { id: "import-form", "aria-labelledby": "import-title" }, input,
    el("button", { type: "submit", class: "primary" }, T.import_button), bar, line, summary);
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    const file = node.querySelector("input[type=file]").files[0];
    if (!file) return;
    summary.replaceChildren();
    if (file.size > limit * 1_000_000) {
      status(say("import_too_big", { name: file.name, limit }), true);
      return;
    }
    status("");
    const button = node.querySelector("button");
    button.disabled = true;
    sendExport(file, { bar, line, summary }, () => { button.disabled = false; });
  });
  content.append(node);
}

function sendExport(file, { bar, line, summary }, done) {
  const show = (text, percent) => {
    line.textContent = text;
    bar.hidden = false;
    if (percent === null) bar.removeAttribute("value"); // reading: how long is not known
    else bar.value = percent;
  };
  const request = new XMLHttpRequest();
  let read = 0;
  const events = () => {
    const text = request.responseText;
    const end = text.lastIndexOf("\n\n") + 2;
    const fresh = text.slice(read, end).split("\n\n").filter((e) => e.startsWith("data: "));
    read = Math.max(read, end);
    for (const chunk of fresh) onEvent(JSON.parse(chunk.slice(6)));
  };
  const onEvent = (data) => {
    if (data.reading) show(say("import_reading", { name: data.reading }), null);
    if (data.written) show(say("import_writing", { done: data.written, total: data.total }), 50 + (50 * data.written) / data.total);
    if (data.refused) {
      bar.hidden = true;
      line.textContent = "";
      status(data.refused, true);
    }
    if (data.summary) {
      show("", 100);
      drawSummary(summary, data.summary);
    }
  };
  request.open("POST", `${API}/import?name=${encodeURIComponent(file.name)}`);
  request.setRequestHeader("Content-Type", "application/octet-stream");
  request.upload.onprogress = (event) => {
    if (event.lengthComputable) show(say("import_uploading", { name: file.name, percent: Math.round((100 * event.loaded) / event.total) }),
      (50 * event.loaded) / event.total);
  };
  request.onprogress = events;
  request.onloadend = async () => {
    if (request.status === 200) events();
    else {
      bar.hidden = true;
      line.textContent = "";
      const answer = (() => { try { return JSON.parse(request.responseText); } catch { return {}; } })();
      status(say("failed", { why: answer.detail || request.statusText || request.status }), true);
    }
    done();
    await load();
  };
  request.send(file);
}

function drawSummary(node, s) {
  const lines = [el("p", {}, say("import_done", s))];
  if (s.first) lines.push(el("p", {}, el("a", { href: `/thread/${encodeURIComponent(s.first)}` }, T.import_open)));
  if (s.files.length) {
    const more = s.more_files ? ` ${say("import_more", { count: s.more_files })}` : "";
    lines.push(el("p", {}, say("import_files", { names: s.files.join(", ") + more })));
  }
  for (const skipped of s.skipped) lines.push(el("p", {}, say("import_skipped", { name: skipped.name, reason: T[`reason_${skipped.reason}`] })));
  if (s.left_out) lines.push(el("p", {}, say("import_left_out", { count: s.left_out })));
  if (s.not_imported) lines.push(el("p", { class: "failed" }, say("import_stopped", { count: s.not_imported })));
  node.replaceChildren(...lines);
}

async function load() {
  state = await stateOf(API);
  if (state === null) return;
  if (!document.querySelector("#search form")) drawSearch();
  if (!document.querySelector("#import form")) drawImport();
  drawProjects();
  drawChats();
  loaded();
}

load();
