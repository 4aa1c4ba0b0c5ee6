// The a2abus dashboard. Plain JavaScript, no framework: every datum comes
// from the edge's API with the credentials its user entered, kept in this
// tab's sessionStorage. Views are chosen by the URL's hash.
"use strict";

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
};

const KEY = "a2abus.credential";
const TERMINAL = ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"];
const INTERRUPTED = ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"];
const STATES = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", ...INTERRUPTED, ...TERMINAL];

const app = {
  agents: [], // GET /a2a/agents entries
  admin: false,
  backlog: null, // admins: agent → {pending, inFlight, oldest} from /metrics' a2a_agent_backlog_* gauges
  tasks: new Map(), // task id → {taskId, contextId, agent, state, timestamp}
  feed: null, // AbortController of the task feed
  view: null, // AbortController of the open view's streams
};

// ---- the API ----

// authHeaders are the credentials as the edge expects them: a bearer
// token (a JWT, or one typed with its "Bearer " prefix) in Authorization,
// an API key in X-API-Key.
function authHeaders() {
  const cred = sessionStorage.getItem(KEY) || "";
  if (!cred) return {};
  if (/^bearer /i.test(cred)) return { Authorization: cred };
  if (/^[\w-]+\.[\w-]+\.[\w-]+$/.test(cred)) return { Authorization: "Bearer " + cred };
  return { "X-API-Key": cred };
}

async function get(path) {
  const r = await fetch(path, { headers: authHeaders(), cache: "no-store" });
  if (!r.ok) throw httpError(r.status, await r.text());
  return path === "/metrics" ? r.text() : r.json();
}

function httpError(status, text) {
  const e = new Error(`HTTP ${status}: ${text.slice(0, 200)}`);
  e.status = status;
  return e;
}

let rpcID = 0;
function rpcRequest(agent, method, params, signal, stream) {
  return fetch("/agents/" + encodeURIComponent(agent), {
    method: "POST",
    signal,
    headers: {
      ...authHeaders(),
      "Content-Type": "application/json",
      "A2A-Version": "1.0",
      Accept: stream ? "text/event-stream" : "application/json",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcID, method, params }),
  });
}

function rpcError(err) {
  const e = new Error(`${err.message} (${err.code})`);
  e.code = err.code;
  return e;
}

// rpc calls a unary A2A method of agent and returns its result.
async function rpc(agent, method, params) {
  const r = await rpcRequest(agent, method, params);
  const text = await r.text();
  let body;
  try { body = JSON.parse(text); } catch { throw httpError(r.status, text); }
  if (body.error) throw rpcError(body.error);
  if (!r.ok) throw httpError(r.status, text);
  return body.result;
}

// rpcStream calls a streaming method and calls each(result) for every
// event, until the stream ends (resolves) or fails (rejects). fetch, not
// EventSource: an EventSource cannot send the credentials' header.
async function rpcStream(agent, method, params, signal, each, opened) {
  const r = await rpcRequest(agent, method, params, signal, true);
  if (!(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
    const text = await r.text();
    let body;
    try { body = JSON.parse(text); } catch { throw httpError(r.status, text); }
    throw body.error ? rpcError(body.error) : httpError(r.status, text);
  }
  if (opened) opened();
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (!data) continue; // a keep-alive comment
      const msg = JSON.parse(data);
      if (msg.error) throw rpcError(msg.error);
      each(msg.result);
    }
  }
}

// ---- presentation helpers ----

const short = (s) => (s ? s.slice(0, 8) : "");
const stateName = (s) => (s || "").replace("TASK_STATE_", "");
function stateClass(s) {
  if (s === "TASK_STATE_COMPLETED" || s === "online") return "good";
  if (s === "TASK_STATE_WORKING" || s === "TASK_STATE_SUBMITTED") return "busy";
  if (INTERRUPTED.includes(s) || s === "degraded" || s === "maintenance") return "wait";
  if (TERMINAL.includes(s) || s === "offline") return "bad";
  return "";
}
function badge(node, value, label) {
  node.textContent = label || stateName(value);
  node.className = "badge " + stateClass(value);
  node.dataset.state = value || "";
}
const fmtTime = (t) => (t ? new Date(t).toLocaleTimeString() : "");
const textOf = (parts) => (parts || []).filter((p) => p.text != null).map((p) => p.text).join("");

// renderPart shows one part by its kind and media type: text, JSON,
// images inline, other files as downloads (blob: URLs, never navigated to).
function renderPart(p) {
  if (p.text != null) return el("pre", { text: p.text });
  if (p.data !== undefined) return el("pre", { text: JSON.stringify(p.data, null, 2) });
  const type = p.mediaType || "application/octet-stream";
  const name = p.filename || "file";
  if (p.raw != null) {
    const bytes = Uint8Array.from(atob(p.raw), (c) => c.charCodeAt(0));
    const url = URL.createObjectURL(new Blob([bytes], { type }));
    if (type.startsWith("image/")) return el("img", { src: url, alt: name });
    return el("a", { href: url, download: name, text: `download ${name} (${type}, ${bytes.length} bytes)` });
  }
  if (p.url != null) {
    if (/^data:image\//.test(p.url)) return el("img", { src: p.url, alt: name });
    return el("a", { href: p.url, rel: "noopener noreferrer", target: "_blank", text: `${name} (${type}): ${p.url}` });
  }
  return el("pre", { text: JSON.stringify(p) });
}

// ---- sign in ----

async function signIn(cred) {
  sessionStorage.setItem(KEY, cred);
  // The agent list needs no credentials; ListTasks does, so it checks them.
  const list = await get("/a2a/agents");
  app.agents = list.agents || [];
  if (app.agents.length) await rpc(app.agents[0].agent, "ListTasks", { pageSize: 1 });
  try {
    await get("/metrics");
    app.admin = true;
  } catch {
    app.admin = false; // 401/403: not an admin; the admin panels stay hidden
  }
  document.body.classList.toggle("admin", app.admin);
  $("#who").textContent = app.admin ? "signed in (admin)" : "signed in";
  $("#nav").hidden = false;
  $("#signout").hidden = false;
  startFeed();
  pollAgents();
  if (app.admin) pollMetrics();
}

$("#signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  $("#signin-error").textContent = "";
  try {
    await signIn($("#key").value.trim());
    if (!location.hash || location.hash === "#/" || location.hash === "#/signin") location.hash = "#/agents";
    route();
  } catch (e) {
    sessionStorage.removeItem(KEY);
    $("#signin-error").textContent = "Not accepted: " + e.message;
  }
});

$("#signout").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  location.hash = "";
  location.reload();
});

// ---- agents ----

let agentsTimer = 0;
async function pollAgents() {
  clearTimeout(agentsTimer);
  try {
    app.agents = (await get("/a2a/agents")).agents || [];
    renderAgents();
  } catch (e) {
    $("#agent-list").textContent = "Cannot read the agents: " + e.message;
  }
  agentsTimer = setTimeout(pollAgents, 2000);
}

function renderAgents() {
  const list = $("#agent-list");
  list.replaceChildren(...app.agents.map((a) => {
    const health = el("span");
    badge(health, a.health, a.health);
    const workers = a.workers ?? 0;
    const card = el("div", { class: "card", "data-agent": a.agent },
      el("h3", {}, a.agent + " ", health),
      el("p", { class: "hint" }, `${a.kind}${a.version ? " · v" + a.version : ""} · `,
        el("span", { class: "workers", "data-workers": String(workers), text: `workers: ${workers}` })),
      a.description ? el("p", { text: a.description }) : null,
      a.maintenance ? el("p", { class: "error", text: "maintenance: " + a.maintenance }) : null,
      (a.skills || []).length ? el("p", { text: "skills: " + a.skills.map((s) => s.name || s.id).join(", ") }) : null,
      a.remote ? el("p", { class: "hint", text: `remote ${a.remote.url || ""}${a.remote.lastError ? " · " + a.remote.lastError : ""}` }) : null,
      backlogLine(app.backlog && app.backlog[a.agent]));
    return card;
  }));
  for (const sel of ["#filter-agent", "#send-agent"]) {
    const s = $(sel);
    const keep = s.value;
    const first = sel === "#filter-agent" ? [el("option", { value: "", text: "all" })] : [];
    s.replaceChildren(...first, ...app.agents.map((a) => el("option", { value: a.agent, text: a.agent })));
    if ([...s.options].some((o) => o.value === keep)) s.value = keep;
  }
}

// backlogLine is an agent's backlog as an admin's /metrics reads it
// (a2a_agent_backlog_*; the edge reads the queues at most every 2 s), or
// nothing: for others, and for an agent the last scrape did not read.
function backlogLine(b) {
  if (!b) return null;
  const n = (v) => String(Math.round(v ?? 0));
  const oldest = b.pending > 0 && b.oldest != null ? fmtAge(b.oldest) : "–";
  return el("p", { class: "hint backlog", "data-pending": n(b.pending), "data-in-flight": n(b.inFlight),
    text: `pending ${n(b.pending)} · in flight ${n(b.inFlight)} · oldest ${oldest}` });
}

function fmtAge(s) {
  if (s < 120) return Math.round(s) + "s";
  if (s < 7200) return Math.round(s / 60) + "m";
  return Math.round(s / 3600) + "h";
}

// ---- the metrics chart (admins) ----

// parseMetrics reads the Prometheus text format: family → [{labels, value}].
// Labels are matched by name, in whatever order a series writes them (the
// library writes them in name order), quoted values unescaped and
// skipped over whole, so a "}" or "," in one ends nothing; values are
// Go's floats (1e+06, +Inf, NaN). Families it does not use (go_*,
// process_*) are read and ignored.
function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(/(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = unescapeLabel(l[2]);
    (out[m[1]] ||= []).push({ labels, value: promNumber(m[3]) });
  }
  return out;
}

const unescapeLabel = (v) => v.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));

// promNumber reads a sample value or an "le" bound: JavaScript's Number
// reads Go's exponents (1e+06) but not +Inf, -Inf or Inf.
function promNumber(v) {
  if (/^\+?Inf$/.test(v)) return Infinity;
  if (v === "-Inf") return -Infinity;
  return Number(v);
}

const samples = []; // {t, rate, p50, p95}
let lastScrape = null;
let metricsTimer = 0;

async function pollMetrics() {
  clearTimeout(metricsTimer);
  try {
    const fams = parseMetrics(await get("/metrics"));
    const now = performance.now() / 1000;
    const total = (fams.a2a_rpc_requests_total || []).reduce((n, s) => n + s.value, 0);
    // Buckets by their bound as a number: "1e+06" and "1000000" are one.
    const buckets = {};
    for (const s of fams.a2a_rpc_request_duration_seconds_bucket || []) {
      const le = String(promNumber(s.labels.le));
      buckets[le] = (buckets[le] || 0) + s.value;
    }
    const backlog = {};
    for (const [fam, key] of [["a2a_agent_backlog_pending", "pending"], ["a2a_agent_backlog_in_flight", "inFlight"], ["a2a_agent_backlog_oldest_age_seconds", "oldest"]]) {
      for (const s of fams[fam] || []) (backlog[s.labels.agent] ||= {})[key] = s.value;
    }
    app.backlog = backlog;
    if (currentView() === "agents") renderAgents();
    if (lastScrape) {
      const dt = now - lastScrape.t;
      const delta = {};
      for (const [le, n] of Object.entries(buckets)) delta[le] = n - (lastScrape.buckets[le] || 0);
      samples.push({ t: now, rate: Math.max(0, (total - lastScrape.total) / dt), p50: quantile(delta, 0.5), p95: quantile(delta, 0.95) });
      if (samples.length > 60) samples.shift();
      drawChart();
    }
    lastScrape = { t: now, total, buckets };
  } catch (e) {
    app.backlog = null; // shown stale, it would mislead
    $("#chart-legend").textContent = "Cannot read /metrics: " + e.message;
  }
  metricsTimer = setTimeout(pollMetrics, 3000);
}

// quantile estimates q of a histogram's counts by upper bound (le, keyed
// as String(number): the last is "Infinity"), by linear interpolation
// within the bucket that holds it.
function quantile(counts, q) {
  const les = Object.keys(counts).map(Number).filter((le) => le !== Infinity).sort((a, b) => a - b);
  const total = counts[String(Infinity)] || 0;
  if (total <= 0) return null;
  const rank = q * total;
  let prevLe = 0, prevN = 0;
  for (const le of les) {
    const n = counts[String(le)] ?? 0;
    if (n >= rank) return prevLe + (le - prevLe) * ((rank - prevN) / Math.max(n - prevN, 1e-9));
    prevLe = le; prevN = n;
  }
  return prevLe;
}

function drawChart() {
  const c = $("#chart");
  const g = c.getContext("2d");
  const w = c.width, h = c.height, pad = 4;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#d9dde5";
  g.lineWidth = 1;
  g.strokeRect(0.5, 0.5, w - 1, h - 1);
  const line = (key, color) => {
    const vals = samples.map((s) => s[key] ?? 0);
    const top = Math.max(...vals, 1e-9);
    g.strokeStyle = color;
    g.lineWidth = 2;
    const at = (v, i) => [pad + (i * (w - 2 * pad)) / 59, h - pad - (v / top) * (h - 2 * pad)];
    g.beginPath();
    vals.forEach((v, i) => (i ? g.lineTo(...at(v, i)) : g.moveTo(...at(v, i))));
    g.stroke();
    g.fillStyle = color;
    vals.forEach((v, i) => {
      const [x, y] = at(v, i);
      g.fillRect(x - 2, y - 2, 4, 4);
    });
    return top;
  };
  line("rate", "#2453c7");
  line("p95", "#cf222e");
  const last = samples[samples.length - 1];
  const ms = (v) => (v == null ? "–" : (v * 1000).toFixed(1) + " ms");
  $("#chart-legend").textContent = `blue: requests/s (now ${last.rate.toFixed(1)}) · red: p95 latency (now ${ms(last.p95)}, p50 ${ms(last.p50)}) · last ${samples.length * 3}s, each line on its own scale`;
}

// ---- the live task list ----

// startFeed opens the task feed first and lists the tasks once it is
// open, so no change falls between the two; a feed that ends is opened
// again, and the list read again.
async function startFeed() {
  if (app.feed) app.feed.abort();
  const ctl = new AbortController();
  app.feed = ctl;
  const state = $("#feed-state");
  while (!ctl.signal.aborted) {
    // The feed is called at a local agent's endpoint (any serves it:
    // allAgents), one whose worker runs here.
    const first = app.agents.find((a) => a.kind === "local") || app.agents[0];
    if (!first) {
      badge(state, "", "no agents");
      await new Promise((r) => setTimeout(r, 2000));
      continue;
    }
    try {
      await rpcStream(first.agent, "a2abus.WatchTasks", { allAgents: true }, ctl.signal, (res) => {
        if (res.taskChange) noteTask(res.taskChange);
      }, () => {
        badge(state, "TASK_STATE_COMPLETED", "live");
        listTasks();
      });
    } catch (e) {
      if (ctl.signal.aborted) return;
      badge(state, "offline", "reconnecting");
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function listTasks() {
  for (const a of app.agents) {
    try {
      const res = await rpc(a.agent, "ListTasks", { pageSize: 100 });
      for (const t of res.tasks || []) {
        noteTask({ taskId: t.id, contextId: t.contextId, agent: a.agent, state: t.status.state, timestamp: t.status.timestamp });
      }
    } catch (e) {
      /* an agent gone meanwhile */
    }
  }
}

function noteTask(ch) {
  const old = app.tasks.get(ch.taskId);
  if (old && old.timestamp && ch.timestamp && new Date(old.timestamp) > new Date(ch.timestamp)) return;
  app.tasks.set(ch.taskId, { ...old, ...ch });
  if (currentView() === "tasks") renderTasks();
}

function renderTasks() {
  const agent = $("#filter-agent").value, state = $("#filter-state").value, ctx = $("#filter-context").value.trim();
  const rows = [...app.tasks.values()]
    .filter((t) => (!agent || t.agent === agent) && (!state || t.state === state) && (!ctx || (t.contextId || "").includes(ctx)))
    .sort((a, b) => new Date(b.timestamp || 0) - new Date(a.timestamp || 0))
    .slice(0, 200);
  $("#task-table tbody").replaceChildren(...rows.map((t) => {
    const st = el("span");
    badge(st, t.state);
    return el("tr", { "data-task": t.taskId },
      el("td", { text: fmtTime(t.timestamp) }),
      el("td", { text: t.agent }),
      el("td", {}, st),
      el("td", {}, el("a", { href: `#/task/${encodeURIComponent(t.agent)}/${t.taskId}`, text: short(t.taskId) })),
      el("td", { class: "opt", text: short(t.contextId) }));
  }));
}

for (const s of STATES) $("#filter-state").append(el("option", { value: s, text: stateName(s) }));
$("#task-filter").addEventListener("input", renderTasks);
$("#task-filter").addEventListener("submit", (e) => e.preventDefault());

// ---- one task ----

const taskView = { agent: "", task: null, following: false };

async function openTask(agent, id, signal) {
  taskView.agent = agent;
  taskView.task = null;
  $("#task-error").textContent = "";
  $("#timeline").replaceChildren();
  $("#messages").replaceChildren();
  $("#artifacts").replaceChildren();
  $("#task-id").textContent = id;
  $("#task-agent").textContent = agent;
  try {
    const t = await rpc(agent, "GetTask", { id });
    if (signal.aborted) return;
    showTask(t);
    addTimeline(t.status);
    if (!TERMINAL.includes(t.status.state)) follow(agent, id, signal);
  } catch (e) {
    $("#task-error").textContent = e.message;
  }
}

// follow streams the task's events into the page until it is terminal:
// one subscription at a time, which stays open through input rounds.
function follow(agent, id, signal) {
  taskView.following = true;
  rpcStream(agent, "SubscribeToTask", { id }, signal, (ev) => {
    const t = taskView.task;
    if (TERMINAL.includes(t.status.state)) return; // a terminal state absorbs what comes after
    if (ev.task) {
      showTask(ev.task);
    } else if (ev.statusUpdate) {
      t.status = ev.statusUpdate.status;
      if (t.status.message) (t.history ||= []).push(t.status.message);
      addTimeline(t.status);
      showTask(t);
    } else if (ev.artifactUpdate) {
      mergeArtifact(t, ev.artifactUpdate);
      showTask(t);
    }
  }).catch((e) => {
    if (!signal.aborted) $("#task-error").textContent = "The live stream ended: " + e.message;
  }).finally(() => {
    taskView.following = false;
  });
}

function mergeArtifact(t, u) {
  const list = (t.artifacts ||= []);
  const i = list.findIndex((a) => a.artifactId === u.artifact.artifactId);
  if (i < 0) list.push(u.artifact);
  else if (u.append) list[i] = { ...list[i], parts: [...(list[i].parts || []), ...(u.artifact.parts || [])] };
  else list[i] = u.artifact;
}

function addTimeline(status) {
  const last = $("#timeline").lastElementChild;
  if (last && last.dataset.state === status.state && last.dataset.at === (status.timestamp || "")) return;
  const b = el("span");
  badge(b, status.state);
  const li = el("li", {}, el("span", { text: fmtTime(status.timestamp) + " " }), b,
    status.message ? el("span", { text: " " + textOf(status.message.parts) }) : null);
  li.dataset.state = status.state;
  li.dataset.at = status.timestamp || "";
  $("#timeline").append(li);
}

function showTask(t) {
  taskView.task = t;
  $("#task-context").textContent = t.contextId;
  badge($("#task-state"), t.status.state);
  $("#task-cancel").hidden = TERMINAL.includes(t.status.state);
  // A task held for an approver takes no answer from its caller: its
  // status message says whom it waits for (metadata a2abus.approval).
  const held = ((t.status.message || {}).metadata || {})["a2abus.approval"];
  $("#answer-form").hidden = !INTERRUPTED.includes(t.status.state) || !!held;
  $("#messages").replaceChildren(...(t.history || []).map((m) =>
    el("div", { class: "msg" }, el("div", { class: "role", text: m.role === "ROLE_USER" ? "user" : "agent" }), ...(m.parts || []).map(renderPart))));
  $("#artifacts").replaceChildren(...(t.artifacts || []).map((a) =>
    el("div", { class: "artifact msg" }, el("div", { class: "role", text: a.name || a.artifactId }), ...(a.parts || []).map(renderPart))));
}

$("#task-cancel").addEventListener("click", async () => {
  const t = taskView.task;
  $("#task-error").textContent = "";
  try {
    const res = await rpc(taskView.agent, "CancelTask", { id: t.id });
    showTask({ ...t, ...res });
    addTimeline(res.status);
  } catch (e) {
    $("#task-error").textContent = e.message;
  }
});

$("#answer-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const t = taskView.task;
  const text = $("#answer-text").value;
  $("#task-error").textContent = "";
  try {
    // returnImmediately: the subscription shows what the answer does.
    const res = await rpc(taskView.agent, "SendMessage", {
      message: { role: "ROLE_USER", messageId: crypto.randomUUID(), taskId: t.id, contextId: t.contextId, parts: [{ text }] },
      configuration: { returnImmediately: true },
    });
    $("#answer-text").value = "";
    // The subscription, open through the input round, brings what the
    // answer does; the answer's own snapshot may be older than its events,
    // which may even have finished the task (and ended the subscription)
    // before this answer arrived: a finished task is never shown older.
    const shown = taskView.task;
    if (res.task && !taskView.following && app.view && !(shown && shown.id === res.task.id && TERMINAL.includes(shown.status.state))) {
      showTask(res.task);
      follow(taskView.agent, t.id, app.view.signal);
    }
  } catch (e) {
    $("#task-error").textContent = e.message;
  }
});

// ---- send a message ----

$("#send-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const agent = $("#send-agent").value;
  const out = $("#send-output");
  out.textContent = "";
  $("#send-error").textContent = "";
  $("#send-task").textContent = "";
  badge($("#send-state"), "", "");
  const arts = {};
  const show = () => (out.textContent = Object.values(arts).map((a) => (a.parts || []).map((p) => (p.text != null ? p.text : JSON.stringify(p.data ?? p))).join("")).join("\n"));
  const note = (task) => {
    $("#send-task").textContent = short(task.id || task.taskId);
    $("#send-task").href = `#/task/${encodeURIComponent(agent)}/${task.id || task.taskId}`;
  };
  try {
    await rpcStream(agent, "SendStreamingMessage", {
      message: { role: "ROLE_USER", messageId: crypto.randomUUID(), parts: [{ text: $("#send-text").value }] },
    }, app.view && app.view.signal, (ev) => {
      if (ev.task) {
        note(ev.task);
        badge($("#send-state"), ev.task.status.state);
        for (const a of ev.task.artifacts || []) arts[a.artifactId] = a;
        show();
      } else if (ev.statusUpdate) {
        note(ev.statusUpdate);
        badge($("#send-state"), ev.statusUpdate.status.state);
        if (ev.statusUpdate.status.message) out.textContent += (out.textContent ? "\n" : "") + textOf(ev.statusUpdate.status.message.parts);
      } else if (ev.artifactUpdate) {
        const u = ev.artifactUpdate, a = arts[u.artifact.artifactId];
        arts[u.artifact.artifactId] = a && u.append ? { ...a, parts: [...a.parts, ...u.artifact.parts] } : u.artifact;
        show();
      } else if (ev.message) {
        badge($("#send-state"), "TASK_STATE_COMPLETED", "replied");
        out.textContent = textOf(ev.message.parts);
      }
    });
  } catch (e) {
    $("#send-error").textContent = e.message;
  }
});

// ---- approvals (admins and approvers) ----

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { ...authHeaders(), "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!r.ok) throw httpError(r.status, await r.text());
  return r.json();
}

async function showApprovals() {
  const body = $("#approval-table tbody");
  $("#approval-error").textContent = "";
  let list;
  try {
    list = (await get("/a2a/admin/approvals?limit=200")).approvals || [];
  } catch (e) {
    body.replaceChildren();
    $("#approval-error").textContent = e.status === 403 ? "Only admins and the edge's approvers see approvals." : e.message;
    return;
  }
  if (!list.length) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: "8", class: "hint", text: "no approvals pending" })));
    return;
  }
  body.replaceChildren(...list.map((a) => {
    const reason = el("input", { placeholder: "reason", spellcheck: "false", "aria-label": "reason for " + a.taskId });
    const decide = async (decision) => {
      try {
        await post("/a2a/admin/approvals/" + encodeURIComponent(a.taskId), { decision, reason: reason.value });
        showApprovals();
      } catch (e) {
        $("#approval-error").textContent = e.message;
        if (e.status === 409) showApprovals();
      }
    };
    const approve = el("button", { type: "button", class: "approve", text: "Approve" });
    const deny = el("button", { type: "button", class: "deny", text: "Deny" });
    approve.addEventListener("click", () => decide("approve"));
    deny.addEventListener("click", () => decide("deny"));
    return el("tr", { "data-task": a.taskId },
      el("td", { text: new Date(a.requestedAt).toLocaleString() }),
      el("td", { text: a.agent }),
      el("td", { text: a.owner || a.origin || "" }),
      el("td", { text: a.trust || "" }),
      el("td", { class: "wrap", text: (a.reasons || []).join("; ") }),
      el("td", { text: new Date(a.expiresAt).toLocaleString() }),
      el("td", {}, el("a", { href: `#/task/${encodeURIComponent(a.agent)}/${a.taskId}`, text: short(a.taskId) })),
      el("td", {}, reason, approve, deny));
  }));
}

// ---- dead letters (admins) ----

async function showDeadLetters() {
  for (const kind of ["work", "push"]) {
    const body = $(`#dlq-${kind} tbody`);
    try {
      const list = (await get(`/a2a/admin/dead-letters?kind=${kind}&limit=100`)).deadLetters || [];
      body.replaceChildren(...list.map((d) => el("tr", {},
        el("td", { text: new Date(d.at).toLocaleString() }),
        el("td", { text: kind === "work" ? d.agent || "" : short(d.taskId) }),
        el("td", { text: kind === "work" ? short(d.taskId) : d.configId || "" }),
        el("td", { class: "wrap", text: d.reason }))));
      if (!list.length) body.replaceChildren(el("tr", {}, el("td", { colspan: "4", class: "hint", text: "none" })));
    } catch (e) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: "4", class: "error", text: e.message })));
    }
  }
}

// ---- views ----

function currentView() {
  const v = (location.hash.replace(/^#\//, "").split("/")[0]) || "agents";
  return sessionStorage.getItem(KEY) === null ? "signin" : v;
}

function route() {
  if (app.view) app.view.abort();
  app.view = new AbortController();
  const view = currentView();
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== view;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.getAttribute("href") === "#/" + view);
  if (view === "tasks") renderTasks();
  if (view === "agents") renderAgents();
  if (view === "dead-letters") showDeadLetters();
  if (view === "approvals") showApprovals();
  if (view === "task") {
    const [, agent, id] = location.hash.replace(/^#\//, "").split("/");
    openTask(decodeURIComponent(agent || ""), id || "", app.view.signal);
  }
  if (!document.querySelector(".view:not([hidden])")) $("#agents").hidden = false;
}

window.addEventListener("hashchange", route);

(async () => {
  const cred = sessionStorage.getItem(KEY);
  if (cred !== null) {
    try {
      await signIn(cred);
    } catch {
      sessionStorage.removeItem(KEY);
    }
  }
  route();
})();
