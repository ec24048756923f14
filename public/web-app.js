// The chat page's keyboard shortcuts, the accessible names Chainlit's icon buttons lack, and a search result opened
// at the message that matched, its words marked; it loads public/answers.js (read aloud, diagrams).
//
// Loaded by Chainlit's `custom_js` (.chainlit/config.toml): a file from /public, so the CSP's script-src 'self'
// allows it. It relies on Chainlit 2.12's internals: the ids of its buttons and the shape of its translations
// (`/project/translations`, the strings its tooltips show); tests/test_browser_web_app.py is their contract.
(() => {
  // Each icon button and the translation path of the tooltip Chainlit shows for it: the same words, in the
  // page's language, become its accessible name (a tooltip is no name: screen readers announced "button").
  // Paths under webApp are the app's own, in .chainlit/translations: Chainlit has no string for those.
  const NAMES = [
    ["#new-chat-button", "navigation.newChat.dialog.tooltip"],
    ["#search-chats-button", "threadHistory.sidebar.filters.search"],
    ["#chat-settings-open-modal", "navigation.user.menu.settings"],
    ["#chat-submit", "chat.input.actions.send"],
    ["#upload-button, #upload-button-loading", "chat.input.actions.attachFiles"],
    ["button[aria-haspopup='dialog']:has(> svg.lucide-star)", "chat.favorites.use"], // the composer's favourites
    ["#chat-profiles", "webApp.preset"], // the preset list at the top: Chainlit has no string for it
    ["#stop-button", "chat.input.actions.stop"],
    ["#header button:has(svg.lucide-share-2)", "threadHistory.thread.menu.share"],
    ["[class*='positive-feedback-']", "chat.messages.feedback.positive"],
    ["[class*='negative-feedback-']", "chat.messages.feedback.negative"],
    ["button:has(> svg.lucide-copy), button:has(> svg.lucide-check)", "chat.messages.actions.copy.button"],
    [".edit-message", "webApp.editMessage"],
    ["button:has(> svg.lucide-arrow-down)", "webApp.scrollDown"], // back to the newest message
    ["#theme-toggle", "webApp.theme"], // Chainlit's own name is English only
    ["#command-Documents", "webApp.documents"], // the Documents button: its label is hidden on a narrow page
    ["button:has(> .sr-only):has(> svg.lucide-x)", "webApp.close"], // a dialog's X, English only too
    ["#header a[href='/chats']", "webApp.chats"], // the header's link to the chats page (config.toml's header_links)
    ["#header a[href='/account']", "webApp.account"], // and to the account page
  ];
  // The sidebar's toggle (and the rail along its edge) says what it does next, as its tooltip does.
  const SIDEBAR_TOGGLES = "#sidebar-trigger-button, [data-sidebar='rail']";
  const SIDEBAR_OPEN = "[data-state='expanded'] [data-sidebar='sidebar'], [data-mobile='true'][data-sidebar='sidebar']";
  // A setting's slider and its (i) button are named after the setting's label (the app's own words).
  const SETTINGS_LABELS = "[role='dialog'] label[for]";
  // Layers that close on Escape themselves (Radix dialogs, menus, lists): Escape is theirs while one is open.
  const LAYERS = "[role='dialog'], [role='alertdialog'], [role='menu'], [role='listbox']";
  const root = document.querySelector("meta[property='og:root_path']")?.content ?? "";
  let strings = null;

  const say = (path) => path.split(".").reduce((node, key) => node?.[key], strings);

  const name = (element, label) => {
    if (element && label && element.getAttribute("aria-label") !== label) element.setAttribute("aria-label", label);
  };

  // Idempotent: React re-renders replace the buttons, so this runs again after every change of the page.
  const nameAll = () => {
    if (!strings) return;
    // react-dropzone gives the attach button role=presentation, which hides the button (and its name) from
    // screen readers: it is a button.
    document.querySelectorAll("#upload-button[role='presentation']").forEach((b) => b.removeAttribute("role"));
    for (const [selector, path] of NAMES) {
      document.querySelectorAll(selector).forEach((element) => name(element, say(path)));
    }
    const open = document.querySelector(SIDEBAR_OPEN) !== null;
    const toggle = say(`threadHistory.sidebar.actions.${open ? "close" : "open"}`);
    document.querySelectorAll(SIDEBAR_TOGGLES).forEach((element) => name(element, toggle));
    const password = document.querySelector("#password[type='password'], #password[type='text']");
    const eye = password?.nextElementSibling; // the login form's button that shows or hides the password
    if (eye?.matches("button")) name(eye, say(`webApp.${password.type === "password" ? "show" : "hide"}Password`));
    document.querySelectorAll(SETTINGS_LABELS).forEach((label) => {
      const setting = label.firstChild?.textContent?.trim();
      const field = document.getElementById(label.htmlFor);
      if (!setting || !field) return;
      field.querySelectorAll("[role='slider']").forEach((thumb) => name(thumb, setting));
      name(label.querySelector("button:has(svg.lucide-info)"), say("webApp.about")?.replace("{{setting}}", setting));
    });
  };

  // The language Chainlit's page asks its strings in (the browser's, unless config.toml forces one).
  const language = navigator.language || "en-US";
  document.documentElement.lang = language; // Chainlit's index.html says "en" to every screen reader
  const translations = (wanted) =>
    fetch(`${root}/project/translations?language=${encodeURIComponent(wanted)}`).then((reply) => reply.json());
  translations(language)
    // The app's own strings are in English and Chinese only: other languages get the English ones.
    .then(async (body) => ({ ...body.translation, webApp: body.translation.webApp ?? (await translations("en-US")).translation.webApp }))
    .then((translation) => {
      strings = translation;
      nameAll();
      // Answers read aloud and diagrams drawn (public/answers.js), in the same words.
      window.webAppSay = say;
      const answers = document.createElement("script");
      answers.src = `${root}/public/answers.js`;
      document.head.append(answers);
    });
  // A search result opened (the chats page's `?find=words#step-<id>`, or a result of Chainlit's own search dialog):
  // once its chat is on the page, scroll to the message that matched and mark the words in it.
  const FOUND = "found";
  const wanted = { words: [], step: "", path: "" };
  const opened = new URLSearchParams(location.search).get("find");
  if (opened) Object.assign(wanted, { words: opened.split(/\s+/), step: location.hash.replace(/^#/, ""), path: location.pathname });
  const realFetch = window.fetch;
  window.fetch = (input, init) => {
    // Chainlit's search dialog lists chats by POST /project/threads with the words typed: the next chat opened
    // from it is marked with them.
    if (String(input).endsWith("/project/threads") && typeof init?.body === "string") {
      const search = JSON.parse(init.body)?.filter?.search;
      if (search) Object.assign(wanted, { words: search.split(/\s+/).filter((w) => !w.includes(":")), step: "", path: "" });
    }
    return realFetch(input, init);
  };
  // Marked again as the page redraws the message (a redraw replaces the text the ranges were in), for a while.
  const MARK_FOR_MS = 10_000;
  let markedAt = 0;
  const markFound = () => {
    if (!wanted.words.length || !location.pathname.startsWith("/thread/") || !window.CSS?.highlights) return;
    if (wanted.path && wanted.path !== location.pathname) return;
    if (markedAt && Date.now() - markedAt > MARK_FOR_MS) {
      wanted.words = []; // done: the chat is the person's again
      return;
    }
    const steps = [...document.querySelectorAll(wanted.step ? `[id='${CSS.escape(wanted.step)}']` : "[id^='step-']")];
    const ranges = [];
    for (const step of steps) {
      const walker = document.createTreeWalker(step, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node.data.toLowerCase();
        for (const word of wanted.words.map((w) => w.toLowerCase()).filter(Boolean)) {
          for (let at = text.indexOf(word); at >= 0; at = text.indexOf(word, at + word.length)) {
            const range = new Range();
            range.setStart(node, at);
            range.setEnd(node, at + word.length);
            ranges.push(range);
          }
        }
      }
      if (ranges.length) break;
    }
    if (!ranges.length) return;
    CSS.highlights.set(FOUND, new Highlight(...ranges));
    if (!markedAt) ranges[0].startContainer.parentElement.scrollIntoView({ block: "center" });
    markedAt ||= Date.now();
  };
  const style = document.createElement("style");
  style.textContent = `::highlight(${FOUND}) { background: #fde68a; color: #111; }`;
  document.head.append(style);

  new MutationObserver(() => {
    nameAll();
    markFound();
  }).observe(document.documentElement, {
    subtree: true,
    childList: true,
    attributes: true,
    attributeFilter: ["data-state"],
  });

  const click = (selector) => {
    const button = document.querySelector(selector);
    if (!button || button.disabled) return false;
    button.click();
    return true;
  };

  // Capture on window: runs before Radix's own Escape handler (on document), while its dialog is still open.
  window.addEventListener(
    "keydown",
    (event) => {
      if (event.defaultPrevented || event.isComposing || document.querySelector(LAYERS)) return;
      const ctrl = event.ctrlKey || event.metaKey;
      // Escape stops the answer being written, as the stop button does; not while a question is being edited.
      if (event.key === "Escape" && !ctrl && !event.shiftKey && !event.altKey) {
        if (document.activeElement?.id !== "edit-chat-input" && click("#stop-button")) event.preventDefault();
      }
      // Ctrl/Cmd+Shift+O: a new chat, as in ChatGPT (Chainlit binds Ctrl/Cmd+K and Ctrl/Cmd+B, not this).
      if ((event.key ?? "").toLowerCase() === "o" && ctrl && event.shiftKey && !event.altKey) {
        if (click("#new-chat-button")) event.preventDefault();
      }
    },
    true,
  );
})();
