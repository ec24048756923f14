// What the app's own pages (/chats, /admin) share: their strings, elements built from data (never from HTML), the
// status line, and changes sent as JSON to their API (the chat's own page only: the server checks the Origin).
"use strict";
window.appPage = (() => {
  const strings = JSON.parse(document.getElementById("page-text").textContent);

  const say = (key, values = {}) => strings[key].replace(/\{(\w+)\}/g, (_, name) => String(values[name] ?? ""));

  // An element with attributes and children (strings become text: nothing the server sends is read as HTML).
  function el(tag, attributes = {}, ...children) {
    const svg = ["svg", "rect", "title"].includes(tag);
    const node = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === false || value === null || value === undefined) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) node.append(child instanceof Node ? child : String(child));
    return node;
  }

  function status(message, failed = false) {
    const line = document.getElementById("status");
    line.textContent = message;
    line.className = failed ? "failed" : "";
  }

  // A request to the page's API: the answer's JSON, or null once the status line says why it failed.
  async function call(path, body) {
    const init = body === undefined ? {} : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
    const response = await fetch(path, init);
    const answer = await response.json().catch(() => ({}));
    if (response.ok) return answer;
    const detail = Array.isArray(answer.detail)
      ? answer.detail.map((d) => `${d.loc.slice(-1)[0]}: ${d.msg}`).join("; ")
      : answer.detail || response.statusText;
    status(say("failed", { why: detail }), true);
    return null;
  }

  function field(id, label, attributes = {}, hint = "") {
    const input = el(attributes.tag || "input", { id, name: id, ...attributes, tag: null });
    const parts = [el("label", { for: id }, label), input];
    if (hint) {
      input.setAttribute("aria-describedby", `${id}-hint`);
      parts.push(el("small", { id: `${id}-hint` }, hint));
    }
    return el("div", { class: "field" }, parts);
  }

  function form(id, title, fields, submitLabel, onSubmit) {
    const node = el("form", { id, "aria-labelledby": `${id}-title` }, el("h3", { id: `${id}-title` }, title), fields,
      el("button", { type: "submit", class: "primary" }, submitLabel));
    node.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (await onSubmit(new FormData(node))) node.reset();
    });
    return node;
  }

  // A section's content, emptied for its new rendering.
  function section(id) {
    const content = document.querySelector(`#${id} .content`);
    content.replaceChildren();
    return content;
  }

  // Sends one change to the page's API, says it was done, then reads the page's state again.
  function changer(api, reload) {
    return async (path, body, what) => {
      if ((await call(`${api}/${path}`, body)) === null) return false;
      status(say("done", { what }));
      await reload();
      return true;
    };
  }

  // The page's state from its API (null once the status line says why not: logged out, or another failure).
  async function stateOf(api, refused = (response) => say("failed", { why: response.statusText })) {
    const response = await fetch(`${api}/state`);
    if (!response.ok) {
      status(response.status === 401 ? strings.login : refused(response), true);
      return null;
    }
    return response.json();
  }

  // Once the page is drawn: the status line no longer says it is loading.
  function loaded() {
    if (document.getElementById("status").textContent === strings.loading) status("");
  }

  const when = (at) => (at ? new Date(typeof at === "number" ? at * 1000 : at).toLocaleString(document.documentElement.lang) : say("never"));

  return { strings, say, el, status, call, field, form, section, changer, when, stateOf, loaded };
})();
