// Answers read aloud by the browser's own speech synthesis, and their ```mermaid blocks drawn as diagrams.
//
// Loaded by public/web-app.js once Chainlit's strings are in (`window.webAppSay`). Nothing leaves the machine:
// speechSynthesis speaks with the browser's voices, and mermaid is the app's own copy (public/vendor/mermaid,
// `make vendor-mermaid`), loaded only once the page shows a mermaid block. It relies on Chainlit 2.12's markup of
// an answer: its copy button in the row under it, a fenced block as a card with its language in the card's header
// and the code under it; tests/test_browser_answers.py is their contract.
(() => {
  const say = (key, values = {}) =>
    Object.entries(values).reduce(
      (text, [name, value]) => text.replace(`{{${name}}}`, value),
      window.webAppSay(`webApp.${key}`) ?? key,
    );
  const root = document.querySelector("meta[property='og:root_path']")?.content ?? "";
  const ANSWERS = "[data-step-type='assistant_message']";
  // An answer's own copy button, in the row under its message (a code block's copy button is inside the message).
  const COPY = ".message-content ~ div > button:has(> svg.lucide-copy, > svg.lucide-check)";
  const SPEAKER = "read-aloud";
  const DIAGRAM = "chat-diagram";
  // An answer is being written while Chainlit shows its stop button: a block is complete once that is gone.
  const writing = () => document.querySelector("#stop-button") !== null;

  // Read aloud. The answer being read is named by its step's id ("": none), so its button, redrawn by React,
  // still shows it pressed.
  const speech = window.speechSynthesis;
  let reading = "";
  const stepOf = (answer) => answer.querySelector("[id^='step-']")?.id ?? "";
  const showPressed = () =>
    document
      .querySelectorAll(`.${SPEAKER}`)
      .forEach((button) => button.setAttribute("aria-pressed", String(button.dataset.step === reading)));
  const stop = () => {
    if (!reading) return;
    reading = "";
    speech.cancel();
    showPressed();
  };
  // Chinese when its Han characters outnumber its Latin words (a Chinese answer may name things in English).
  const languageOf = (text) =>
    (text.match(/\p{Script=Han}/gu)?.length ?? 0) > (text.match(/[A-Za-z]+/g)?.length ?? 0) ? "zh-CN" : "en-US";
  const voiceFor = (language) => {
    const voices = speech.getVoices().map((voice) => [voice, voice.lang.replace("_", "-").toLowerCase()]);
    const wanted = language.toLowerCase();
    const found =
      voices.find(([, lang]) => lang === wanted) ?? voices.find(([, lang]) => lang.startsWith(wanted.slice(0, 3)));
    return found?.[0] ?? null;
  };
  // What is said: the answer's text without its code blocks (or their diagrams), sentence by sentence (one long
  // utterance is cut off by some engines, and a sentence is where a pause goes).
  const SENTENCES = /[^.!?。！？\n]+[.!?。！？]*/gu;
  const sentencesOf = (answer) => {
    const text = answer.querySelector(".message-content .prose")?.cloneNode(true);
    if (!text) return [];
    text.querySelectorAll("pre").forEach((pre) => pre.parentElement.parentElement.remove()); // its whole card
    return (text.textContent.match(SENTENCES) ?? []).map((sentence) => sentence.trim()).filter(Boolean);
  };
  const read = (answer) => {
    const step = stepOf(answer);
    const again = reading === step;
    stop();
    const sentences = sentencesOf(answer);
    if (again || !sentences.length) return; // a second click stops
    const language = languageOf(sentences.join(" "));
    const voice = voiceFor(language);
    reading = step;
    showPressed();
    const done = () => {
      if (reading !== step) return; // stopped already, or another answer is being read
      reading = "";
      showPressed();
    };
    sentences.forEach((sentence, index) => {
      const utterance = new SpeechSynthesisUtterance(sentence);
      utterance.lang = language;
      if (voice) utterance.voice = voice;
      if (index === sentences.length - 1) utterance.addEventListener("end", done);
      utterance.addEventListener("error", done); // the browser has no voice for it, or its engine failed
      speech.speak(utterance);
    });
  };
  const SVG = "http://www.w3.org/2000/svg";
  const speakerIcon = () => {
    const icon = document.createElementNS(SVG, "svg");
    const attributes = { viewBox: "0 0 24 24", width: "24", height: "24", fill: "none", stroke: "currentColor" };
    Object.assign(attributes, { "stroke-width": "2", "stroke-linecap": "round", "stroke-linejoin": "round" });
    for (const [attribute, value] of Object.entries({ ...attributes, "aria-hidden": "true" })) {
      icon.setAttribute(attribute, value);
    }
    for (const shape of ["M4 9h4l5-4v14l-5-4H4z", "M16.5 9a4 4 0 0 1 0 6", "M19.5 6a8 8 0 0 1 0 12"]) {
      const path = document.createElementNS(SVG, "path");
      path.setAttribute("d", shape);
      icon.append(path);
    }
    return icon;
  };
  const speaker = (copy, step) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `${copy.className} ${SPEAKER}`; // looks like the copy button beside it
    button.dataset.step = step;
    button.title = say("readAloud");
    button.setAttribute("aria-label", say("readAloud"));
    button.setAttribute("aria-pressed", String(reading === step));
    button.append(speakerIcon());
    button.addEventListener("click", () => read(button.closest(ANSWERS)));
    return button;
  };
  const addSpeakers = () => {
    if (!speech || writing()) return; // no speech synthesis in this browser: no button
    for (const answer of document.querySelectorAll(ANSWERS)) {
      const copy = answer.querySelector(COPY);
      if (copy && !copy.parentElement.querySelector(`.${SPEAKER}`)) copy.after(speaker(copy, stepOf(answer)));
    }
  };

  // Diagrams. Each code block's card remembers the source drawn in it: drawn once, again only if another version
  // of the answer put another source there.
  const drawn = new WeakMap();
  let library = null;
  const mermaid = () =>
    (library ??= new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = `${root}/public/vendor/mermaid/mermaid.min.js`;
      script.addEventListener("load", () => {
        const theme = document.documentElement.classList.contains("dark") ? "dark" : "default";
        // strict: labels' HTML is sanitized and click callbacks are off, whatever a diagram's directives say.
        window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme });
        resolve(window.mermaid);
      });
      script.addEventListener("error", () => reject(new Error(script.src)));
      document.head.append(script);
    }));
  // A diagram's source -> its SVG (a promise), drawn once: React redraws an answer's blocks as new elements when the
  // page changes, and they get the SVG drawn before.
  const svgs = new Map();
  let sources = 0; // ids for the code blocks the toggles show and hide
  let drawing = Promise.resolve(); // one diagram at a time, in the page's order
  const svgOf = (source) => {
    if (!svgs.has(source)) {
      const id = `${DIAGRAM}-${svgs.size + 1}`;
      const svg = drawing
        .then(async () => {
          const engine = await mermaid();
          await engine.parse(source);
          return (await engine.render(id, source)).svg;
        })
        .catch((error) => {
          document.getElementById(`d${id}`)?.remove(); // what mermaid left in the page for a diagram it gave up
          throw error;
        });
      drawing = svg.catch(() => null);
      svgs.set(source, svg);
    }
    return svgs.get(source);
  };
  const draw = (card, code, source) => {
    card.querySelector(`:scope > .${DIAGRAM}`)?.remove(); // another version's diagram
    card.querySelector(`:scope .${DIAGRAM}-source`)?.remove();
    const figure = document.createElement("div");
    figure.className = DIAGRAM;
    code.before(figure);
    svgOf(source).then(
      (svg) => {
        figure.innerHTML = svg;
        code.id ||= `${DIAGRAM}-code-${++sources}`;
        code.hidden = true;
        const toggle = document.createElement("button");
        toggle.type = "button";
        toggle.className = `${DIAGRAM}-source`;
        toggle.textContent = say("diagramSource");
        toggle.setAttribute("aria-expanded", "false");
        toggle.setAttribute("aria-controls", code.id);
        toggle.addEventListener("click", () => {
          code.hidden = !code.hidden;
          toggle.setAttribute("aria-expanded", String(!code.hidden));
        });
        card.firstElementChild.querySelector("button")?.before(toggle); // by the block's copy button
      },
      (error) => {
        code.hidden = false;
        const line = document.createElement("p");
        line.className = `${DIAGRAM}-error`;
        // Mermaid's parse errors: where (the first line) and what it expected (the last), around a drawing in text.
        const lines = String(error?.message ?? error).split("\n");
        const where = lines.length > 1 ? `${lines[0]} ${lines.at(-1)}` : lines[0];
        line.textContent = say("diagramFailed", { error: where });
        figure.append(line);
      },
    );
  };
  const drawDiagrams = () => {
    if (writing()) return;
    for (const pre of document.querySelectorAll(`${ANSWERS} .message-content pre`)) {
      const code = pre.parentElement;
      const card = code.parentElement;
      const language = card.querySelector(":scope > div > span")?.textContent.trim();
      if (language !== "mermaid" || drawn.get(card) === pre.textContent) continue;
      drawn.set(card, pre.textContent);
      draw(card, code, pre.textContent);
    }
  };

  const style = document.createElement("style");
  style.textContent = `
    .${DIAGRAM} { padding: 0 1rem; overflow-x: auto; }
    .${DIAGRAM} svg { display: block; margin: 0 auto 1rem; height: auto; }
    .${DIAGRAM}-error { color: #b91c1c; font-size: 0.875rem; margin: 0 0 0.5rem; }
    .dark .${DIAGRAM}-error { color: #fca5a5; }
    .${SPEAKER}[aria-pressed="true"] { color: hsl(var(--primary)); }
    .${DIAGRAM}-source { margin-left: auto; margin-right: 0.5rem; padding: 0.125rem 0.5rem; font-size: 0.75rem;
      border: 1px solid hsl(var(--border)); border-radius: 0.375rem; background: transparent; color: inherit; }`;
  document.head.append(style);

  let wasWriting = writing();
  const update = () => {
    const now = writing();
    // A new answer started, or the answer being read left the page (another chat): stop reading.
    if ((now && !wasWriting) || (reading && !document.getElementById(reading))) stop();
    wasWriting = now;
    addSpeakers();
    drawDiagrams();
  };
  new MutationObserver(update).observe(document.documentElement, { subtree: true, childList: true });
  update();
})();
