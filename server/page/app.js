// The Packages page. Plain JavaScript, no build step. Everything a pack supplies (names,
// descriptions, diagnostics, SKILL.md) is untrusted text: it reaches the DOM only through
// textContent, never as markup.
"use strict";

/** Creates an element with attributes and children (strings become text nodes). */
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// ---------------------------------------------------------------- the token

// A server that listens beyond loopback requires `Authorization: Bearer <token>` on /api/. The
// page asks for the token once (when an answer is 401) and keeps it for this tab only.
const TOKEN_KEY = "nodetool-server-token";
let tokenAsked = null;

function savedToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch (_) {
    return "";
  }
}

function authHeaders() {
  const token = savedToken();
  return token ? { authorization: "Bearer " + token } : {};
}

/** Shows the token form and resolves when it is submitted (one form for all callers). */
function askToken(message) {
  if (!tokenAsked) {
    tokenAsked = new Promise((resolve) => {
      const form = document.getElementById("token-form");
      const input = document.getElementById("token");
      document.getElementById("token-message").textContent = message;
      form.hidden = false;
      input.value = "";
      input.focus();
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const token = input.value.trim();
        try {
          sessionStorage.setItem(TOKEN_KEY, token);
        } catch (_) {
          // Storage refused: the token lasts until the page is reloaded.
        }
        form.hidden = true;
        tokenAsked = null;
        resolve(token);
      }, { once: true });
    });
  }
  return tokenAsked;
}

async function getJson(url, options) {
  for (;;) {
    const headers = { ...((options && options.headers) || {}), ...authHeaders() };
    const response = await fetch(url, { ...(options || {}), headers });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (response.status === 401 && url.startsWith("/api/")) {
      const asked = savedToken() ? "The token was not accepted; enter it again." : "This server requires its token.";
      await askToken(asked);
      // The browser runner was made with the old token: the next run makes a new one.
      if (browserRunner) browserRunner.then((r) => r.close(), () => {});
      browserRunner = null;
      continue;
    }
    return { status: response.status, body, retryAfter: response.headers.get("retry-after") };
  }
}

// ---------------------------------------------------------------- SKILL.md, rendered safely

/** Inline markdown: `code`, **strong**, *emphasis*, and https links. */
function inline(text) {
  const out = [];
  const pattern = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(\[[^\]]+\]\(https:\/\/[^)\s]+\))/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) out.push(text.slice(last, match.index));
    const token = match[0];
    if (match[1]) out.push(el("code", {}, token.slice(1, -1)));
    else if (match[2]) out.push(el("strong", {}, token.slice(2, -2)));
    else if (match[3]) out.push(el("em", {}, token.slice(1, -1)));
    else {
      const close = token.indexOf("](");
      out.push(el("a", { href: token.slice(close + 2, -1), rel: "noopener noreferrer", target: "_blank" },
        token.slice(1, close)));
    }
    last = match.index + token.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** A small, safe markdown renderer: headings, fenced code, lists, paragraphs. */
function renderMarkdown(text) {
  const root = el("div", { className: "markdown" });
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  let list = null;
  const flush = () => {
    if (paragraph.length) root.append(el("p", {}, inline(paragraph.join(" "))));
    paragraph = [];
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w-]*)\s*$/);
    if (fence) {
      flush();
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
      root.append(el("pre", {}, el("code", { "data-lang": fence[2] || null }, body.join("\n"))));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      flush();
      const level = Math.min(6, heading[1].length + 2);
      root.append(el("h" + level, {}, inline(heading[2])));
      continue;
    }
    const item = line.match(/^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/);
    if (item) {
      if (paragraph.length) {
        root.append(el("p", {}, inline(paragraph.join(" "))));
        paragraph = [];
      }
      const tag = item[1] ? "ol" : "ul";
      if (!list || list.tagName.toLowerCase() !== tag) {
        list = el(tag, {});
        root.append(list);
      }
      list.append(el("li", {}, inline(item[2])));
      continue;
    }
    if (line.trim() === "") {
      flush();
      continue;
    }
    if (list && /^\s{2,}\S/.test(line) && list.lastChild) {
      list.lastChild.append(" ", ...inline(line.trim()));
      continue;
    }
    list = null;
    paragraph.push(line.trim());
  }
  flush();
  return root;
}

// ---------------------------------------------------------------- the pack list

/** The import line a body starts with to use `specifier`. */
function importLine(specifier) {
  return `import * as mod from ${JSON.stringify(specifier)};`;
}

/** A button that copies `text`, saying so for a moment. */
function copyButton(text, label) {
  const button = el("button", { type: "button", className: "copy", "data-copy": text, "aria-label": label }, "Copy");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch (_) {
      button.textContent = "Select and copy";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
  return button;
}

function moduleTable(modules) {
  if (!modules.length) return el("p", { className: "muted" }, "No importable module.");
  return el("table", { className: "modules" },
    el("thead", {}, el("tr", {}, el("th", {}, "Import"), el("th", {}, "Kind"), el("th", {}, "What it does"))),
    el("tbody", {}, modules.map((m) => el("tr", { "data-specifier": m.specifier },
      el("td", { className: "import" },
        el("code", { className: "specifier" }, m.specifier), " ",
        copyButton(importLine(m.specifier), "Copy the import line of " + m.specifier)),
      el("td", {}, el("span", { className: "kind kind-" + m.kind }, m.kind)),
      el("td", {}, m.description || "")))));
}

function diagnosticItem(d) {
  return el("li", { className: "diagnostic level-" + d.status, "data-code": d.code },
    el("div", {}, el("span", { className: "level" }, d.status), " ", el("code", {}, d.code),
      d.specifier ? [" ", el("code", { className: "muted specifier" }, d.specifier)] : null),
    el("div", { className: "message" }, d.message),
    d.status === "ready" ? null : el("div", { className: "advice" }, el("strong", {}, "What to do: "), d.advice));
}

/** Problems first, listed; READY notes (nothing to do) folded under their own summary and not
 * counted as diagnostics. */
function diagnosticList(diagnostics) {
  const problems = diagnostics.filter((d) => d.status !== "ready");
  const ready = diagnostics.filter((d) => d.status === "ready");
  return [
    problems.length
      ? el("ul", { className: "diagnostics", "data-count": problems.length }, problems.map(diagnosticItem))
      : null,
    ready.length
      ? el("details", { className: "ready-notes" },
        el("summary", {}, `${ready.length} ready note(s): nothing to do`),
        el("ul", { className: "diagnostics" }, ready.map(diagnosticItem)))
      : null,
  ];
}

function docsPanel(pack) {
  if (!pack.hasDocs) return el("p", { className: "muted" }, "This pack has no valid SKILL.md.");
  const details = el("details", { className: "docs" }, el("summary", {}, "SKILL.md"));
  let loaded = false;
  details.addEventListener("toggle", async () => {
    if (!details.open || loaded) return;
    loaded = true;
    const holder = el("div", {}, el("p", { className: "muted" }, "Loading…"));
    details.append(holder);
    const { status, body } = await getJson("/api/packs/" + encodeURIComponent(pack.name) + "/docs");
    holder.replaceChildren();
    if (status !== 200 || !body) {
      holder.append(el("p", { className: "error" }, (body && body.detail) || "The docs could not be loaded."));
      return;
    }
    holder.append(
      el("p", { className: body.trusted ? "trust trusted" : "trust untrusted" },
        body.trusted ? "Allowed for agents: they read these docs as an ordinary skill."
          : "Not allowed for agents: they read these docs only as untrusted reference data."),
      renderMarkdown(body.skill.body));
  });
  return details;
}

/** How `nodetool packs install` recorded the pack: its install mode, active or not, and
 * whether its install scripts ran; for an inactive pack, the command that trusts it. */
function installLine(pack) {
  const install = pack.install;
  if (!install) return null;
  return el("p", { className: "install", "data-install-mode": install.mode, "data-active": String(install.active) },
    el("span", { className: "chip install-mode", title: "install mode" }, "install mode: " + install.mode),
    " ",
    el("span", { className: "chip " + (install.active ? "active" : "inactive") }, install.active ? "active" : "inactive"),
    " ",
    el("span", { className: "muted" }, `install scripts ${install.scripts} — ${install.meaning}`),
    !install.active && (install.mode === "register" || install.mode === "hybrid")
      ? [" ", el("span", {}, "Rebuild with scripts: "), el("code", {}, `nodetool packs rebuild ${pack.name}`)]
      : null);
}

/** The words for whether agents may use a pack (the legend above the list explains them). */
function agentsLabel(mode) {
  return mode === "trusted" ? "allowed for agents" : "not allowed for agents";
}

function packCard(pack) {
  const searchable = [pack.name, ...pack.modules.map((m) => m.specifier + " " + (m.description || ""))]
    .join(" ").toLowerCase();
  return el("article", { className: "pack", "data-pack": pack.name, "data-mode": pack.mode, "data-search": searchable },
    el("header", {},
      el("h2", {}, pack.name, pack.version ? el("span", { className: "version" }, " " + pack.version) : null),
      el("span", { className: "mode mode-" + pack.mode, title: pack.modeSentence }, agentsLabel(pack.mode))),
    installLine(pack),
    moduleTable(pack.modules),
    diagnosticList(pack.diagnostics),
    docsPanel(pack));
}

async function loadPacks() {
  const section = document.getElementById("packs");
  section.setAttribute("aria-busy", "true");
  const { status, body } = await getJson("/api/packs");
  section.replaceChildren();
  if (status !== 200 || !body) {
    section.append(el("p", { className: "error" }, (body && body.detail) || "The packs could not be loaded."));
  } else {
    document.getElementById("consent").textContent = body.consent;
    // The legend says once what each card's label means, in the server's words.
    const sentences = new Map(body.packs.map((p) => [p.mode, p.modeSentence]));
    if (sentences.has("trusted")) document.getElementById("legend-trusted").textContent = sentences.get("trusted");
    if (sentences.has("untrusted")) document.getElementById("legend-untrusted").textContent = sentences.get("untrusted");
    if (!body.packs.length) {
      section.append(el("div", { className: "empty", id: "empty-state" },
        el("p", {}, "No sandbox pack is on this server's search path."),
        el("p", {}, "Install one with ", el("code", {}, "nodetool packs install NAME"),
          ", or write one (", el("code", {}, "nodetool packs new @scope/name --kind js"),
          ") and serve its root with ", el("code", {}, "nodetool serve --packs DIR"),
          "; then press Reload packs.")));
    }
    for (const pack of body.packs) section.append(packCard(pack));
    applyFilter();
  }
  section.setAttribute("aria-busy", "false");
  section.dataset.loaded = String(Date.now());
}

/** Shows only the cards whose name, specifiers or descriptions hold every word typed. */
function applyFilter() {
  const words = document.getElementById("filter").value.toLowerCase().split(/\s+/).filter(Boolean);
  const cards = [...document.querySelectorAll("article.pack")];
  let shown = 0;
  for (const card of cards) {
    const match = words.every((w) => card.dataset.search.includes(w));
    card.hidden = !match;
    if (match) shown++;
  }
  document.getElementById("filter-count").textContent = words.length ? `${shown} of ${cards.length} pack(s)` : "";
}

async function reload() {
  const status = document.getElementById("reload-status");
  status.textContent = "Reloading…";
  // An operator action: the server accepts it with the token, or from loopback with this header.
  const answer = await getJson("/api/packs/reload", {
    method: "POST",
    headers: { "content-type": "application/json", "x-nodetool-reload": "1" },
    body: "{}",
  });
  if (answer.status === 200) {
    status.textContent = `Reloaded: ${answer.body.modules} module(s), ${answer.body.diagnostics} diagnostic(s).`;
    await loadPacks();
  } else {
    status.textContent = (answer.body && answer.body.detail) || `Reload failed (${answer.status}).`;
  }
}

// ---------------------------------------------------------------- the playground

/** The body with the error's line marked and a caret under its column. */
function sourceWithMark(code, line, column) {
  const lines = code.replace(/\r\n?/g, "\n").split("\n");
  const from = Math.max(1, line - 3);
  const to = Math.min(lines.length, line + 2);
  const width = String(to).length;
  const rows = [];
  for (let n = from; n <= to; n++) {
    const text = lines[n - 1] ?? "";
    const row = el("div", { className: n === line ? "line marked" : "line", "data-line": n },
      el("span", { className: "gutter" }, String(n).padStart(width, " ")), " ", text);
    rows.push(row);
    if (n === line && column) {
      // Columns count code points, as the server's do.
      const lead = [...text].slice(0, column - 1).join("").replace(/[^\t]/g, " ");
      rows.push(el("div", { className: "line caret" },
        el("span", { className: "gutter" }, " ".repeat(width)), " ",
        lead, el("span", { className: "caret-mark" }, "^")));
    }
  }
  return el("pre", { className: "source" }, rows);
}

/** Scrolls a source frame sideways so its caret is in view (a long line would hide it). */
function scrollToCaret(frame) {
  const mark = frame && frame.querySelector(".caret-mark");
  if (!mark) return;
  const left = mark.offsetLeft - frame.clientWidth / 2;
  frame.scrollLeft = Math.max(0, left);
}

function logList(logs) {
  if (!logs || !logs.length) return null;
  return el("div", { className: "logs" }, el("h3", {}, "Logs"),
    el("ul", {}, logs.map((l) => el("li", { className: "log log-" + l.level },
      el("span", { className: "level" }, l.level), " ", l.message))));
}

/** Shows one answer of the run route's shape in `target`; ids get `prefix` ("" or "browser-"). */
function showOutcome(code, answer, target, prefix) {
  const outcome = document.getElementById(target);
  const show = (state, ...parts) => {
    outcome.dataset.state = state;
    // Optional parts (no logs, no position) are null and left out.
    outcome.replaceChildren(...parts.filter((p) => p !== null && p !== undefined));
  };
  const { status, body } = answer;
  if (status === 503) {
    show("busy", el("p", { className: "error" },
      `The server is busy; retry in ${answer.retryAfter || "a few"} second(s).`));
    return;
  }
  if (status !== 200 || !body) {
    show("rejected", el("p", { className: "error" }, (body && body.detail) || `The run was refused (${status}).`));
    return;
  }
  if (body.ok) {
    const text = typeof body.result === "string" ? body.result : JSON.stringify(body.result, null, 2);
    show("ok",
      el("h3", {}, "Result ", el("span", { className: "muted" }, `(${body.durationMs} ms)`)),
      el("pre", { id: prefix + "result", className: "result" }, text === undefined ? "undefined" : text),
      logList(body.logs));
    return;
  }
  const error = body.error;
  const frame = error.line ? sourceWithMark(code, error.line, error.column) : null;
  show("error",
    el("h3", {}, "Error"),
    el("p", { id: prefix + "error", className: "error" }, el("code", {}, error.code), ": ", error.message,
      error.line ? ` (line ${error.line}${error.column ? `, column ${error.column}` : ""})` : ""),
    frame,
    Array.isArray(error.stack) && error.stack.length
      ? el("pre", { className: "stack", "aria-label": "Where it was thrown" }, error.stack.join("\n"))
      : null,
    logList(body.logs));
  scrollToCaret(frame);
}

// ---------------------------------------------------------------- the browser runner

let browserRunner = null;

/** The browser runner (built into /web/ by `npm run build --prefix web`), loaded on first use. */
async function runnerInPage() {
  if (!browserRunner) {
    // The runner's own requests (deliveries, host calls) carry the token too.
    browserRunner = import("/web/runner.js").then((m) => m.createRunner({ headers: authHeaders() }), (e) => {
      browserRunner = null;
      throw e;
    });
  }
  return browserRunner;
}

async function runInBrowser(code, input) {
  let runner;
  try {
    runner = await runnerInPage();
  } catch (_) {
    const probe = await getJson("/web/runner.js").catch(() => null);
    return { status: 404, body: { detail: (probe && probe.body && probe.body.detail) || "The browser runner could not be loaded." } };
  }
  return { status: 200, body: await runner.run({ code, input }) };
}

async function runOnServer(code, input) {
  return getJson("/api/run", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ code, input }),
  });
}

/** What both sides answered, without timings and logs order aside: the same or not. */
function agreement(server, browser) {
  const note = document.getElementById("agreement");
  // Agreement is the result, or the error's code, message and position: all of them.
  const essence = (a) => a.status === 200 && a.body
    ? JSON.stringify(a.body.ok
      ? { ok: true, result: a.body.result }
      : { ok: false, code: a.body.error.code, message: a.body.error.message, line: a.body.error.line ?? null, column: a.body.error.column ?? null })
    : null;
  const s = essence(server);
  const b = essence(browser);
  note.className = s !== null && s === b ? "agree" : "differ";
  note.textContent = s === null || b === null ? "" : s === b
    ? "The server and the browser agree: the same result, or the same error code, message and position."
    : "The server and the browser answered differently.";
}

async function run() {
  const code = document.getElementById("code").value;
  const status = document.getElementById("run-status");
  let input;
  const inputBox = document.getElementById("input");
  const inputError = document.getElementById("input-error");
  try {
    input = JSON.parse(inputBox.value || "{}");
    if (input === null || typeof input !== "object" || Array.isArray(input)) {
      throw new Error("it must be a JSON object, such as {\"text\": \"hi\"}");
    }
  } catch (e) {
    inputBox.setAttribute("aria-invalid", "true");
    inputError.textContent = "inputs is not valid: " + e.message;
    inputError.hidden = false;
    inputBox.focus();
    return;
  }
  inputBox.removeAttribute("aria-invalid");
  inputError.hidden = true;
  inputError.textContent = "";
  status.textContent = "Running…";
  const button = document.getElementById("run");
  button.disabled = true;
  document.getElementById("agreement").textContent = "";
  for (const id of ["outcome", "browser-outcome"]) {
    const node = document.getElementById(id);
    node.dataset.state = "running";
    node.replaceChildren(el("p", { className: "muted" }, "Running…"));
  }
  const server = runOnServer(code, input).then((answer) => {
    showOutcome(code, answer, "outcome", "");
    return answer;
  }, (e) => {
    const answer = { status: 0, body: { detail: "The server could not be reached: " + e.message } };
    showOutcome(code, answer, "outcome", "");
    return answer;
  });
  const browser = runInBrowser(code, input).then((answer) => {
    showOutcome(code, answer, "browser-outcome", "browser-");
    return answer;
  }, (e) => {
    const answer = { status: 0, body: { detail: "The browser runner failed: " + e.message } };
    showOutcome(code, answer, "browser-outcome", "browser-");
    return answer;
  });
  try {
    agreement(await server, await browser);
  } finally {
    status.textContent = "";
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("reload").addEventListener("click", reload);
  document.getElementById("run").addEventListener("click", run);
  document.getElementById("filter").addEventListener("input", applyFilter);
  document.getElementById("code").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) run();
  });
  loadPacks();
});
