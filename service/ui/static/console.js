// errtriage console: plain DOM, no build step, no third-party code. Every value from the service
// is set as text (never parsed as HTML). The admin token lives in sessionStorage only.
"use strict";

const TOKEN_KEY = "errtriage.adminToken";
const VIEWS = ["playground", "rules", "unknowns"];
const SAMPLES = {
  quota: {message: "Error code: 429 - {'error': {'message': 'You exceeded your current quota, please check your plan and billing details.', 'type': 'insufficient_quota', 'code': 'insufficient_quota'}}", type: "RateLimitError", status: 429},
  overloaded: {message: "Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Overloaded'}}"},
  git: {message: "remote: Permission to acme/api.git denied to deploy-bot.\nfatal: unable to access 'https://github.com/acme/api.git/': The requested URL returned error: 403", source: "ci"},
  tool: {raw: {isError: true, content: [{type: "text", text: "Unknown tool: searchWeb"}]}, tool: "searchWeb", context: {available_tools: ["web_search", "fetch_page"]}},
  text: "psycopg.errors.QueryCanceled: canceling statement due to user request",
};

// ---------------------------------------------------------------- helpers
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const $ = (selector) => document.querySelector(selector);
const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
const fmt = (n) => new Intl.NumberFormat().format(n);
const when = (iso) => { const d = new Date(iso); return isNaN(d) ? iso : d.toLocaleString(); };

async function api(path, options = {}) {
  const headers = {...(options.headers || {})};
  if (options.admin && token()) headers.Authorization = `Bearer ${token()}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {method: options.method || "GET", headers, body: options.body});
  } catch (err) {
    return {ok: false, status: 0, problem: {title: "Network error", detail: "The service did not answer: " + err.message}};
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!response.ok) return {ok: false, status: response.status, problem: data || {detail: text}};
  return {ok: true, status: response.status, data};
}

function problemText(problem) {
  if (!problem) return "The request failed.";
  const parts = [problem.detail || problem.title || "The request failed."];
  for (const e of problem.errors || []) parts.push(`${(e.loc || []).join(".")}: ${e.msg || e.message || JSON.stringify(e)}`);
  return parts.join("\n");
}

function tag(text, kind) { return h("span", {class: "tag" + (kind ? " " + kind : "")}, text); }

async function copyText(text, button) {
  let done = false;
  if (navigator.clipboard && window.isSecureContext) {
    try { await navigator.clipboard.writeText(text); done = true; } catch (_) { done = false; }
  }
  if (!done) {  // plain http on a remote host is not a secure context: the old way still works
    const area = h("textarea", {"aria-hidden": "true", class: "offscreen"});
    area.value = text;
    document.body.append(area);
    area.select();
    try { done = document.execCommand("copy"); } catch (_) { done = false; }
    area.remove();
  }
  const label = button.textContent;
  button.textContent = done ? "Copied" : "Copy failed: select the text";
  button.dataset.copied = done ? "yes" : "no";
  setTimeout(() => { button.textContent = label; }, 1800);
}

// ---------------------------------------------------------------- routing
function show(view) {
  if (!VIEWS.includes(view)) view = "playground";
  for (const name of VIEWS) $(`#view-${name}`).hidden = name !== view;
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  document.title = `${view[0].toUpperCase()}${view.slice(1)} · errtriage`;
  if (view === "rules") loadRules();
  if (view === "unknowns") loadUnknowns();
  if (view === "playground") $("#payload").focus();
}
window.addEventListener("hashchange", () => show(location.hash.slice(1)));

function refreshSession() { $("#forget-token").hidden = !token(); }

function tokenForm(container, message, retry) {
  const form = $("#token-form").content.firstElementChild.cloneNode(true);
  const error = form.querySelector(".error");
  if (message) { error.textContent = message; error.hidden = false; }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = form.querySelector("input").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    refreshSession();
    retry();
  });
  container.replaceChildren(form);
  form.querySelector("input").focus();
}

// ---------------------------------------------------------------- playground
function reportFrom(text) {
  const trimmed = text.trim();
  if (!trimmed) return null;
  if (trimmed.startsWith("{")) {
    try { return JSON.parse(trimmed); } catch (_) { /* not JSON: the text is the message */ }
  }
  return {message: text};
}

async function classify(event) {
  if (event) event.preventDefault();
  const errorBox = $("#classify-error");
  const report = reportFrom($("#payload").value);
  errorBox.hidden = true;
  if (!report) { errorBox.textContent = "Paste a report or an error message first."; errorBox.hidden = false; return; }
  const button = $("#classify-button");
  button.disabled = true;
  const result = await api("/v1/classify?explain=true", {method: "POST", body: JSON.stringify(report)});
  button.disabled = false;
  if (!result.ok) { errorBox.textContent = problemText(result.problem); errorBox.hidden = false; return; }
  renderResult(result.data);
}

function renderResult(c) {
  const decided = c.decided_by === "rule" ? tag("rule", "good") : c.decided_by === "fallback"
    ? tag(`fallback ${Math.round(c.confidence * 100)}%`, "warn") : tag("no rule", "bad");
  const r = c.recovery || {};
  const n = (c.explain && c.explain.notification) || {};
  const head = h("div", {class: "card", id: "verdict"},
    h("div", {class: "verdict"},
      h("div", {class: "class", "data-testid": "class"}, c.class, h("span", {class: "reason"}, " / " + c.reason)),
      h("div", {}, decided, " ", c.retryable ? tag("retryable", "accent") : tag("not retryable"))),
    h("div", {class: "facts"},
      h("div", {}, h("h3", {}, "Decision"), h("dl", {},
        h("dt", {}, "Provider"), h("dd", {}, c.provider ? `${c.provider} (${c.provider_kind || "?"})` : "none detected"),
        h("dt", {}, "Rule"), h("dd", {class: "mono"}, c.rule || "—"),
        h("dt", {}, "Details"), h("dd", {class: "mono"}, Object.keys(c.details || {}).length ? JSON.stringify(c.details) : "—"))),
      h("div", {}, h("h3", {}, "Recovery"), h("dl", {},
        h("dt", {}, "Action"), h("dd", {}, h("strong", {}, r.action || "none")),
        h("dt", {}, "Attempts"), h("dd", {}, r.max_attempts ? `${r.attempts_left ?? "?"} left of ${r.max_attempts}` : "—"),
        h("dt", {}, "Backoff"), h("dd", {}, (r.backoff_ms || []).length ? r.backoff_ms.map((ms) => `${ms / 1000} s`).join(", ") : "—"),
        r.retry_hint ? [h("dt", {}, "Hint"), h("dd", {}, r.retry_hint)] : null,
        (r.suggested_tools || []).length ? [h("dt", {}, "Try tool"), h("dd", {class: "mono"}, r.suggested_tools.join(", "))] : null)),
      h("div", {}, h("h3", {}, "Notification"), h("dl", {},
        h("dt", {}, "Route"), h("dd", {class: "mono", "data-testid": "route"}, n.route || "none"),
        n.route ? [h("dt", {}, "Channels"), h("dd", {class: "mono"}, n.channels.join(", ")),
          h("dt", {}, "Throttle"), h("dd", {}, `one per ${n.throttle_seconds / 60} min per group`)]
          : [h("dt", {}, "Why"), h("dd", {}, n.why || "—")]))));
  $("#result").replaceChildren(head, explainCard(c.explain || {}));
  head.scrollIntoView({block: "nearest"});
}

function conditions(row) {
  return Object.entries(row.conditions || {}).map(([field, what]) => h("div", {}, h("span", {class: "muted"}, field + ": "), what));
}

function explainCard(e) {
  const rows = e.rules_tried || [];
  const onlyClose = h("input", {type: "checkbox", id: "only-close"});
  const body = h("tbody");
  const fill = () => {
    const shown = onlyClose.checked ? rows.filter((row) => row.matched || (row.missing || []).length <= 1) : rows;
    body.replaceChildren(...shown.map((row) => h("tr", {class: row.won ? "won" : ""},
      h("td", {class: "mono"}, row.rule),
      h("td", {class: "num"}, row.priority),
      h("td", {}, row.won ? tag("won", "good") : row.excluded_by_not ? tag("vetoed by not", "warn")
        : row.matched ? tag("matched") : tag("missing " + (row.missing || []).join(", "))),
      h("td", {}, conditions(row)),
      h("td", {class: "mono muted hide-narrow"}, row.file))));
    if (!shown.length) body.append(h("tr", {}, h("td", {colspan: 5, class: "muted"}, "No rule came close.")));
  };
  onlyClose.addEventListener("change", fill);
  fill();
  const fb = e.fallback;
  const fallback = fb ? h("p", {class: "muted"}, fb.used
    ? `Learned fallback: ${fb.class}/${fb.reason} at ${Math.round(fb.confidence * 100)}% (needs ${Math.round(fb.min_confidence * 100)}%).`
    : `Learned fallback: not used (${fb.why || "a rule decided"}).`) : null;
  return h("div", {class: "card"},
    h("h2", {}, "Explain: rules tried"),
    h("p", {class: "muted"}, `${rows.length} rule blocks were tried in order (${e.order || "priority, then file, then position"}). Provider ${e.provider ? `${e.provider.id || "none"} by ${e.provider.decided_by}` : "—"}.`),
    fallback,
    h("div", {class: "toolbar"}, h("label", {}, onlyClose, "Only rules that matched or missed one field")),
    h("div", {class: "table-wrap scroll"}, h("table", {id: "explain-table"},
      h("thead", {}, h("tr", {}, h("th", {}, "Rule"), h("th", {class: "num"}, "Priority"), h("th", {}, "Result"),
        h("th", {}, "Conditions"), h("th", {class: "hide-narrow"}, "File"))), body)));
}

// ---------------------------------------------------------------- rules
async function loadRules() {
  const box = $("#rules-body");
  const result = await api("/v1/rules");
  if (!result.ok) { box.replaceChildren(h("p", {class: "error"}, problemText(result.problem))); return; }
  const d = result.data;
  $("#rules-version").textContent = d.version;
  const dead = d.rules.filter((r) => r.matches === 0).length;
  const errors = d.last_reload_errors || [];
  const filter = h("input", {type: "search", placeholder: "Filter by id, class, reason or file", "aria-label": "Filter rules"});
  const onlyDead = h("input", {type: "checkbox", id: "only-dead"});
  const body = h("tbody");
  const fill = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = d.rules.filter((r) => (!onlyDead.checked || r.matches === 0) &&
      (!q || [r.id, r.class, r.reason, r.file].join(" ").toLowerCase().includes(q)));
    body.replaceChildren(...rows.map((r) => h("tr", {class: r.matches === 0 ? "dead" : ""},
      h("td", {class: "mono"}, r.id),
      h("td", {}, h("span", {class: "mono"}, r.class), h("span", {class: "muted"}, " / " + r.reason)),
      h("td", {class: "num"}, r.priority),
      h("td", {class: "num"}, r.matches === 0 ? tag("no matches yet", "warn") : fmt(r.matches)),
      h("td", {class: "mono muted hide-narrow"}, r.file))));
    if (!rows.length) body.append(h("tr", {}, h("td", {colspan: 5, class: "muted"}, "No rule matches the filter.")));
  };
  filter.addEventListener("input", fill);
  onlyDead.addEventListener("change", fill);
  fill();
  const reload = h("button", {type: "button", onclick: () => reloadRules(reload)}, "Reload rules");
  box.replaceChildren(
    h("div", {class: "stats spaced"},
      stat(d.counts.rules, "rules"), stat(d.counts.classes, "classes"), stat(d.counts.providers, "providers"),
      stat(d.counts.examples, "labelled examples"), stat(dead, "rules with no match"),
      h("div", {class: "stat"}, h("b", {}, d.fallback.state), h("span", {}, "learned fallback"))),
    errors.length ? h("div", {class: "card", role: "alert"}, h("h2", {}, "The last reload failed; the rules below keep serving"),
      h("ul", {class: "mono"}, errors.map((e) => h("li", {}, [e.file, e.line ? ":" + e.line : "", e.rule ? ` [${e.rule}]` : "", ": ", e.message].join(""))))) :
      h("p", {class: "muted"}, `Loaded ${when(d.loaded_at)}. The last reload had no errors.`),
    h("div", {class: "card"},
      h("div", {class: "toolbar"}, filter, h("label", {}, onlyDead, "Only rules with no match"), h("span", {class: "push"}, reload)),
      h("p", {class: "reload-note muted", role: "status"}),
      h("div", {class: "table-wrap scroll"}, h("table", {id: "rules-table"},
        h("thead", {}, h("tr", {}, h("th", {}, "Rule"), h("th", {}, "Class / reason"), h("th", {class: "num"}, "Priority"),
          h("th", {class: "num"}, "Matches"), h("th", {class: "hide-narrow"}, "File"))), body))),
    h("div", {class: "card"}, h("h2", {}, "Files"), h("div", {class: "table-wrap"}, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "File"), h("th", {class: "num"}, "Rules"), h("th", {class: "num"}, "Classes"), h("th", {class: "num"}, "Providers"))),
      h("tbody", {}, d.files.map((f) => h("tr", {}, h("td", {class: "mono"}, f.path), h("td", {class: "num"}, f.rules),
        h("td", {class: "num"}, f.classes), h("td", {class: "num"}, f.providers))))))));
}

function stat(value, label) { return h("div", {class: "stat"}, h("b", {}, fmt(value)), h("span", {}, label)); }

async function reloadRules(button) {
  const note = $(".reload-note");
  if (!token()) { tokenForm($("#rules-body"), null, loadRules); return; }
  button.disabled = true;
  const result = await api("/v1/rules/reload", {method: "POST", admin: true});
  button.disabled = false;
  if (result.status === 401 || result.status === 403) { tokenForm($("#rules-body"), problemText(result.problem), loadRules); return; }
  if (!result.ok) { note.textContent = problemText(result.problem); return; }
  await loadRules();
  $(".reload-note").textContent = `Reloaded: ${result.data.rules} rules, version ${result.data.version}.`;
}

// ---------------------------------------------------------------- unknowns
async function loadUnknowns() {
  const box = $("#unknowns-body");
  if (!token()) { tokenForm(box, null, loadUnknowns); return; }
  box.replaceChildren(h("p", {class: "muted"}, "Loading…"));
  const result = await api("/v1/unknowns?limit=50", {admin: true});
  if (result.status === 401 || result.status === 403) {
    if (result.status === 401) sessionStorage.removeItem(TOKEN_KEY);
    refreshSession();
    tokenForm(box, problemText(result.problem), loadUnknowns);
    return;
  }
  if (!result.ok) { box.replaceChildren(h("p", {class: "error"}, problemText(result.problem))); return; }
  const d = result.data;
  const refresh = h("button", {type: "button", onclick: loadUnknowns}, "Refresh");
  const summary = h("div", {class: "toolbar"},
    h("div", {class: "stats"}, stat(d.total_unknown, "reports not decided by a rule"), stat(d.groups.length, "groups shown")),
    h("span", {class: "push"}, refresh));
  if (!d.groups.length) {
    box.replaceChildren(summary, h("div", {class: "card empty"}, h("h2", {}, "Inbox zero"),
      h("p", {class: "muted"}, "Every report posted to /v1/errors since this inbox started was decided by a rule.")));
    return;
  }
  box.replaceChildren(summary, ...d.groups.map(groupCard));
}

function groupCard(g) {
  const s = g.suggested;
  const copy = h("button", {type: "button", class: "primary copy", onclick: () => copyText(g.draft_rule, copy)}, "Copy rule");
  const message = g.example.message || g.example.type || g.example.code || JSON.stringify(g.example).slice(0, 200);
  return h("article", {class: "card group", "data-fingerprint": g.fingerprint},
    h("div", {class: "group-head"},
      h("span", {class: "count", title: "reports in this group"}, fmt(g.count)),
      h("div", {class: "group-title"},
        h("div", {class: "group-message"}, String(message).slice(0, 240)),
        h("div", {class: "muted small"}, `first ${when(g.first_seen)} · last ${when(g.last_seen)} · `,
          h("span", {class: "mono"}, g.fingerprint))),
      s ? tag(`fallback: ${s.class}/${s.reason} ${Math.round(s.confidence * 100)}%`, "warn") : tag("unknown", "bad")),
    h("div", {class: "split"},
      h("div", {}, h("h3", {}, "Example (redacted)"), h("pre", {class: "wrap"}, JSON.stringify(g.example, null, 2))),
      h("div", {}, h("div", {class: "copy-row"}, h("h3", {}, "Drafted rule"), copy),
        h("pre", {class: "draft"}, g.draft_rule))));
}

// ---------------------------------------------------------------- start
document.addEventListener("DOMContentLoaded", () => {
  $("#classify-form").addEventListener("submit", classify);
  $("#payload").addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") classify(event);
  });
  for (const button of document.querySelectorAll("[data-sample]")) {
    button.addEventListener("click", () => {
      const sample = SAMPLES[button.dataset.sample];
      $("#payload").value = typeof sample === "string" ? sample : JSON.stringify(sample, null, 2);
      classify();
    });
  }
  $("#forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    refreshSession();
    if (location.hash === "#unknowns") loadUnknowns();
  });
  refreshSession();
  api("/v1/rules").then((r) => { if (r.ok) $("#rules-version").textContent = r.data.version; });
  show(location.hash.slice(1) || "playground");
});
