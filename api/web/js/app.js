// The dashboard: polls the REST API for state and counters, streams values
// over the WebSocket, and drives the node browser and the certificate
// decisions. Every figure shown comes from the gateway; nothing is guessed.

import { get, post, del, all, enc, login, logout, onUnauthorized } from "./api.js";
import { ValueTable, Stream, esc } from "./values.js";
import { NodeBrowser } from "./browser.js";
import { Ring, path } from "./spark.js";
import { shortPolicy } from "./ua.js";

const POLL = 2000, CERT_POLL = 5000, VALUES_RELOAD = 30000;
const $ = (id) => document.getElementById(id);

// ---- toasts and dialogs ----------------------------------------------------
function toast(text, kind = "") {
  const t = document.createElement("div");
  t.className = "toast " + kind;
  t.textContent = text;
  $("toasts").append(t);
  setTimeout(() => t.remove(), kind === "err" ? 9000 : 4000);
}

// askKey shows the sign-in form: the key goes to the gateway once, which
// answers with a session cookie this page cannot read.
function askKey() {
  return new Promise((resolve) => {
    const d = $("dlg-key");
    if (d.open) return resolve();
    $("dlg-key-input").value = "";
    $("dlg-key-error").textContent = "";
    d.onclose = async () => {
      const key = $("dlg-key-input").value.trim();
      $("dlg-key-input").value = "";
      try {
        if (d.returnValue === "save" && key) {
          const who = await login(key);
          toast(`Signed in (${who.role})`);
        }
        if (d.returnValue === "clear") { await logout(); toast("Signed out"); }
      } catch (e) {
        toast(e.message, "err");
      }
      resolve();
      stream?.restart();
      poll();
    };
    d.showModal();
  });
}
onUnauthorized(askKey);
$("btn-key").addEventListener("click", askKey);

function pill(el, level, text, title) {
  el.className = "pill " + level;
  el.textContent = text;
  if (title !== undefined) el.title = title;
}

// ---- formatting ------------------------------------------------------------
const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
function rate(n) {
  if (!Number.isFinite(n)) return "—";
  if (n >= 1e6) return nf.format(n / 1e6) + "M";
  if (n >= 1e4) return nf.format(n / 1e3) + "k";
  return n >= 100 ? Math.round(n).toLocaleString() : nf.format(n);
}
function bytes(n) {
  if (!Number.isFinite(n)) return ["—", ""];
  const u = ["B/s", "KiB/s", "MiB/s", "GiB/s"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return [n >= 100 ? Math.round(n).toString() : nf.format(n), u[i]];
}
function duration(s) {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?$/.exec(s || "");
  if (!m) return s || "—";
  const h = +(m[1] || 0), min = +(m[2] || 0), sec = Math.floor(+(m[3] || 0));
  if (h >= 24) return `${Math.floor(h / 24)}d ${h % 24}h`;
  if (h) return `${h}h ${min}m`;
  if (min) return `${min}m ${sec}s`;
  return `${sec}s`;
}
function ago(iso) {
  if (!iso || iso.startsWith("0001")) return "—";
  const s = (Date.now() - new Date(iso)) / 1000;
  if (s < 1.5) return "now";
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  return new Date(iso).toLocaleString();
}

// ---- rates from counters ---------------------------------------------------
const prev = new Map(); // key → [value, time]
function perSecond(key, value, now) {
  const p = prev.get(key);
  prev.set(key, [value, now]);
  if (!p || value < p[0] || now <= p[1]) return NaN;
  return (value - p[0]) / ((now - p[1]) / 1000);
}

// ---- KPI tiles -------------------------------------------------------------
const kpis = {};
for (const el of document.querySelectorAll(".kpi")) {
  const svg = el.querySelector("svg");
  svg.setAttribute("viewBox", "0 0 200 28");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.innerHTML = '<path class="area"/><path class="line"/>';
  kpis[el.dataset.kpi] = { el, ring: new Ring(90), b: el.querySelector("b"), small: el.querySelector("small") };
}
function kpi(name, value, text, unit, alert = false) {
  const k = kpis[name];
  k.ring.push(value);
  k.b.textContent = text;
  if (unit !== undefined) k.small.textContent = unit;
  k.el.classList.toggle("alert", alert);
  const p = path(k.ring.values(), 200, 28, { area: true, floor: 0 });
  const [area, line] = k.el.querySelectorAll("path");
  area.setAttribute("d", p.area);
  line.setAttribute("d", p.line);
}

// ---- state -----------------------------------------------------------------
let endpoints = [], groups = [], status = null, groupSig = "", selectedGroup = "";

const values = new ValueTable($("val-table"), { countEl: $("val-count"), groupSel: $("val-group"), filterInput: $("val-filter"), badToggle: $("val-bad") });
const browser = new NodeBrowser({
  tree: $("br-tree"), endpointSel: $("br-endpoint"), refresh: $("br-refresh"), form: $("br-add"), targetSel: $("br-target"),
  addBtn: $("br-add-btn"), summary: $("br-selected"), toast,
  onAdded: () => { poll(); setTimeout(() => values.load().catch(() => {}), 1500); },
});
$("val-group").addEventListener("change", () => { selectedGroup = $("val-group").value; renderGroups(); });

const wsURL = () => `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws?kind=data,metadata`;
let stream;

// ---- endpoints -------------------------------------------------------------
function endpointLevel(e) {
  if (e.connected) return ["good", e.state];
  if (e.permanentFailure) return ["bad", e.state === "Disconnected" ? "Failed" : e.state];
  if (e.state === "Connecting" || e.state === "Reconnecting") return [e.lastError ? "bad" : "warn", e.state];
  return ["", e.state];
}
function renderEndpoints() {
  $("ep-count").textContent = endpoints.length ? `${endpoints.filter((e) => e.connected).length} of ${endpoints.length} connected` : "";
  if (!endpoints.length) { $("ep-body").innerHTML = '<tr class="empty"><td colspan="8">No endpoints configured.</td></tr>'; return; }
  $("ep-body").innerHTML = endpoints.map((e) => {
    const [lvl, text] = endpointLevel(e);
    const subs = e.subscriptions || [];
    const items = subs.reduce((a, s) => a + s.items, 0), failed = subs.reduce((a, s) => a + s.failedItems, 0);
    const last = subs.map((s) => s.lastActivity).filter((t) => t && !t.startsWith("0001")).sort().pop();
    const problem = e.permanentFailure || e.lastError || "";
    const trust = /trust/i.test(problem) ? ' <a href="#certs" class="hint">→ review its certificate</a>' : "";
    const sec = e.securityPolicy ? `${esc(shortPolicy(e.securityPolicy))}<span class="sub">${esc(e.securityMode)}</span>` : '<span class="muted">—</span>';
    return `<tr data-endpoint="${esc(e.name)}">
      <td><span class="name">${esc(e.name)}</span><span class="sub" title="${esc(e.url)}">${esc(e.url)}</span></td>
      <td><span class="pill ${lvl}" data-state="${esc(e.state)}">${esc(text)}</span></td>
      <td>${sec}</td>
      <td class="num">${subs.length}</td>
      <td class="num">${items.toLocaleString()}${failed ? ` <span class="pill bad plain" title="items the server refused">${failed} failed</span>` : ""}</td>
      <td class="num">${e.reconnects}</td>
      <td>${ago(last)}</td>
      <td class="problem">${problem ? `<span title="${esc(problem)}">${esc(problem)}</span>${trust}` : ""}</td></tr>`;
  }).join("");
}

// ---- writer groups ---------------------------------------------------------
// leasePill says, with scale-out, which replica serves a group.
function leasePill(name) {
  const so = status?.scaleOut;
  const h = so?.groups?.find((x) => x.name === name);
  if (!h) return "";
  if (h.local) return ` <span class="pill good plain" title="This replica (${esc(so.replicaId)}) holds its lease and serves it">here</span>`;
  if (h.holder) return ` <span class="pill plain" title="Served by replica ${esc(h.holder)}">${esc(h.holder)}</span>`;
  return ' <span class="pill warn plain" title="Nobody holds its lease now">unheld</span>';
}
function renderGroups(now = performance.now(), countRates = false) {
  $("wg-count").textContent = groups.length ? `${groups.length} group${groups.length > 1 ? "s" : ""}` : "";
  if (!groups.length) { $("wg-body").innerHTML = '<tr class="empty"><td colspan="10">No writer groups.</td></tr>'; return; }
  $("wg-body").innerHTML = groups.map((g) => {
    const s = g.status || {};
    const r = (k) => (countRates ? perSecond("g/" + g.name + "/" + k, s[k] ?? NaN, now) : g._r?.[k]);
    g._r = { notificationsIn: r("notificationsIn"), messages: r("messages"), bytes: r("bytes") };
    const fields = (g.writers || []).reduce((a, w) => a + (w.fields || []).length, 0);
    const b = s.bytes || !s.messages ? bytes(g._r.bytes) : ["—", ""]; // a runtime that does not count bytes reports 0
    return `<tr class="clickable${selectedGroup === g.name ? " selected" : ""}" data-group="${esc(g.name)}" title="Show its values">
      <td class="name">${esc(g.name)}${leasePill(g.name)}</td><td>${esc(g.endpoint)}</td>
      <td class="num">${esc(g.publishingInterval || "1s")}</td>
      <td class="num">${(g.writers || []).length}</td><td class="num">${fields.toLocaleString()}</td>
      <td class="num">${rate(g._r.notificationsIn)}</td><td class="num">${rate(g._r.messages)}</td>
      <td class="num">${b[0]} <span class="muted">${b[1]}</span></td>
      <td class="num">${s.unacked ?? "—"}</td>
      <td class="num">${s.errors ? `<span class="pill bad plain">${s.errors}</span>` : s.errors ?? "—"}</td></tr>`;
  }).join("");
}
$("wg-body").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr[data-group]");
  if (!tr) return;
  selectedGroup = selectedGroup === tr.dataset.group ? "" : tr.dataset.group;
  $("val-group").value = selectedGroup;
  $("val-group").dispatchEvent(new Event("change"));
});

// ---- sinks -----------------------------------------------------------------
// backlogOf sums a sink's backlog over the store-and-forward log's streams:
// records, payload bytes, the oldest record's append time.
function backlogOf(name) {
  const out = { messages: 0, bytes: 0, since: "" };
  for (const st of status?.store?.streams || []) {
    for (const r of st.readers || []) {
      if (r.consumer !== name) continue;
      out.messages += r.backlogMessages || 0;
      out.bytes += r.backlogBytes || 0;
      const since = r.backlogSince && !r.backlogSince.startsWith("0001") ? r.backlogSince : "";
      if (since && (!out.since || since < out.since)) out.since = since;
    }
  }
  return out;
}
function renderSinks(now) {
  const sinks = status?.sinks || [];
  const store = status?.store;
  const logNote = store ? ` · log ${bytes(store.bytes)[0]} ${bytes(store.bytes)[1].replace("/s", "")} of ${bytes(store.maxBytes)[0]} ${bytes(store.maxBytes)[1].replace("/s", "")}` : "";
  $("sink-count").textContent = sinks.length ? `${sinks.filter((s) => s.connected).length} of ${sinks.length} connected${logNote}` : "";
  if (!sinks.length) { $("sink-body").innerHTML = '<tr class="empty"><td colspan="6">No sinks.</td></tr>'; return; }
  const nodes = new Map((status?.sparkplug || []).map((n) => [n.name, n]));
  $("sink-body").innerHTML = sinks.map((s) => {
    const sent = perSecond("s/" + s.name, s.sent, now);
    const sp = nodes.get(s.name);
    const b = backlogOf(s.name), bb = bytes(b.bytes);
    const backlog = !store || s.kind === "websocket" || sp ? "—"
      : `<span title="${esc(`${bb[0]} ${bb[1].replace("/s", "")} waiting in the log${b.since ? ", the oldest appended " + ago(b.since) : ""}`)}">${b.messages ? `<b>${b.messages.toLocaleString()}</b>` : "0"}</span>`;
    return `<tr data-sink="${esc(s.name)}"><td><span class="name">${esc(s.name)}</span>${sp ? sparkplugLine(sp) : `<span class="sub">${esc(s.kind || "")}</span>`}</td>
      <td>${sp ? sparkplugPill(sp) : `<span class="pill ${s.connected ? "good" : "bad"}">${s.connected ? "Connected" : "Down"}</span>`}</td>
      <td class="num">${s.queued ? `<b>${s.queued.toLocaleString()}</b>` : "0"}</td>
      <td class="num">${backlog}</td>
      <td class="num">${rate(sent)}</td>
      <td class="num" title="${esc(s.lastError ? "last error: " + s.lastError : "dropped · errors")}">${s.dropped ? `<span class="pill warn plain">${s.dropped.toLocaleString()}</span>` : 0} · ${s.errors ? `<span class="pill bad plain">${s.errors.toLocaleString()}</span>` : 0}</td></tr>`;
  }).join("");
}

// A Sparkplug B node: its state, and under its name (one line, the rest in
// its title) the group and edge node ids, bdSeq, seq, the devices born, and
// the primary host's state.
function sparkplugPill(n) {
  const [level, text] = n.state === "online" ? ["good", "Online"] : n.state === "waiting" ? ["warn", "Waiting"] : ["bad", "Offline"];
  const why = n.state === "waiting" ? `connected; waiting for the primary host ${n.primaryHostId || ""} to be online` : n.lastError || "";
  return `<span class="pill ${level}" title="${esc(why)}">${text}</span>`;
}
function sparkplugLine(n) {
  const host = n.primaryHostId ? ` · host ${esc(n.primaryHostId)} ${n.hostOnline ? "online" : "offline"}` : "";
  const held = n.store?.messages ? ` · ${n.store.messages.toLocaleString()} held` : "";
  const text = `sparkplug ${n.groupId}/${n.edgeNodeId} · bdSeq ${n.bdSeq} · seq ${n.seq} · devices ${n.devicesOnline}/${n.devices}`;
  return `<span class="sub sparkplug" title="${esc(`spBv1.0/${text.slice(10)}`)}${host}${held}">${esc(text)}${host}${held}</span>`;
}

// ---- commands ----------------------------------------------------------------
// The command log (GET /api/v1/commands/log): who wrote, called or read
// what, the value before and after, the result.
let commandState = { enabled: false, rules: 0, log: [] };
async function pollCommands() {
  const [view, log] = await Promise.all([get("/api/v1/commands"), get("/api/v1/commands/log?limit=50")]);
  commandState = { enabled: view.enabled, rules: (view.rules || []).length, log: log.entries || [] };
  renderCommands();
}
function shortValue(v) {
  if (v === undefined || v === null) return "";
  const x = v && typeof v === "object" && "Value" in v ? v.Value : v;
  const s = JSON.stringify(x);
  return s.length > 40 ? s.slice(0, 40) + "…" : s;
}
function renderCommands() {
  const { enabled, rules, log } = commandState;
  $("cmd-count").textContent = `${enabled ? "enabled" : "transports off"} · ${rules} rule${rules === 1 ? "" : "s"}`;
  if (!log.length) { $("cmd-body").innerHTML = '<tr class="empty"><td colspan="5">No commands yet.</td></tr>'; return; }
  $("cmd-body").innerHTML = log.map((e) => {
    const good = !e.error && e.status?.code === 0;
    const result = e.error ? e.error : (e.status?.symbol || "") + (e.duplicate ? " (duplicate)" : "");
    const change = e.op === "write" && (e.oldValue || e.value) ? `${esc(shortValue(e.oldValue))} → ${esc(shortValue(e.value))}` : "";
    return `<tr data-request="${esc(e.requestId || "")}"><td>${esc(new Date(e.at).toLocaleTimeString())}</td>
      <td><span class="name">${esc(e.caller)}</span></td>
      <td>${esc(e.op)} <code>${esc(e.target || "")}</code></td>
      <td><code>${change}</code></td>
      <td><span class="pill ${good ? "good" : e.error ? "bad" : "warn"} plain" title="${esc(result)}">${esc(result.length > 60 ? result.slice(0, 60) + "…" : result)}</span></td></tr>`;
  }).join("");
}

// ---- polling ---------------------------------------------------------------
let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  const now = performance.now();
  try {
    const [st, eps, wgs] = await Promise.all([get("/api/v1/status"), all("/api/v1/endpoints"), all("/api/v1/writer-groups")]);
    status = st; endpoints = eps; groups = wgs;
    pill($("f-api"), "good", "API", "The REST API answers");
    $("f-publisher").textContent = st.publisherId || "—";
    $("f-version").textContent = st.version || "—";
    $("f-uptime").textContent = duration(st.uptime);
    pill($("f-ready"), st.ready ? "good" : "warn", st.ready ? "Ready" : "Not ready");
    renderEndpoints();
    renderGroups(now, true);
    renderSinks(now);
    browser.setEndpoints(eps);
    browser.setGroups(wgs);
    const sig = wgs.map((g) => g.name + ":" + (g.writers || []).map((w) => w.name + "=" + (w.fields || []).length).join(",")).join(";");
    if (sig !== groupSig) {
      const first = !groupSig;
      groupSig = sig;
      values.setConfig(wgs);
      if (!first) values.load().catch((e) => toast("Values: " + e.message, "err"));
    }
    // Throughput and queues.
    const sum = (k) => wgs.reduce((a, g) => a + (g.status?.[k] || 0), 0);
    const notif = perSecond("k/notif", sum("notificationsIn"), now), msgs = perSecond("k/msgs", sum("messages"), now), by = perSecond("k/bytes", sum("bytes"), now);
    kpi("notif", notif, rate(notif));
    kpi("msgs", msgs, rate(msgs));
    const counted = sum("bytes") > 0 || sum("messages") === 0;
    const b = counted ? bytes(by) : ["—", "not reported"];
    kpi("bytes", counted ? by : NaN, b[0], b[1]);
    const queued = st.sinks.reduce((a, s) => a + s.queued, 0);
    kpi("queued", queued, queued.toLocaleString(), `in ${st.sinks.length} sink${st.sinks.length === 1 ? "" : "s"}`, queued > 1000);
    const unacked = sum("unacked");
    kpi("unacked", unacked, unacked.toLocaleString(), undefined, unacked > 0 && wgs.some((g) => g.status && g.status.unacked >= (g.maxUnacked || 64)));
    const dropped = st.sinks.reduce((a, s) => a + s.dropped, 0), errors = st.sinks.reduce((a, s) => a + s.errors, 0) + sum("errors");
    kpi("loss", perSecond("k/loss", dropped + errors, now) || 0, `${dropped.toLocaleString()} · ${errors.toLocaleString()}`, "", dropped + errors > 0);
  } catch (e) {
    pill($("f-api"), "bad", "API down", e.message);
  } finally {
    polling = false;
  }
}

// ---- certificates ----------------------------------------------------------
let certState = { rejected: [], trusted: [] };
// pollCerts reads the gateway's store and every endpoint's. Endpoints often
// share one directory: stores whose listings are the same are taken as one,
// so a certificate shows once, with every endpoint that uses it.
async function pollCerts() {
  const names = ["", ...endpoints.map((e) => e.name)];
  const res = await Promise.allSettled(names.map((s) => get("/api/v1/certificates" + (s ? "?endpoint=" + enc(s) : ""))));
  const stores = new Map(); // listing → {names, data}
  res.forEach((r, i) => {
    if (r.status !== "fulfilled") return;
    const sig = ["own", "trusted", "issuers", "rejected"].map((f) => (r.value[f] || []).map((c) => c.thumbprint + "/" + c.file).sort().join(",")).join(";");
    const st = stores.get(sig) || { names: [], data: r.value };
    st.names.push(names[i]);
    stores.set(sig, st);
  });
  const byTp = { rejected: new Map(), trusted: new Map() };
  for (const st of stores.values()) {
    for (const folder of ["rejected", "trusted"]) {
      for (const c of st.data[folder] || []) {
        const e = byTp[folder].get(c.thumbprint) || { cert: c, stores: [] };
        e.stores.push(st.names);
        byTp[folder].set(c.thumbprint, e);
      }
    }
  }
  certState = { rejected: [...byTp.rejected.values()], trusted: [...byTp.trusted.values()] };
  renderCerts();
}
function cn(subject) {
  const m = /CN=([^,]+)/.exec(subject || "");
  return m ? m[1] : subject || "(no subject)";
}
// storeLabel names the stores (each a list of the endpoints sharing it; ""
// is the gateway's default store).
function storeLabel(stores) {
  return stores.map((names) => {
    const eps = names.filter(Boolean);
    if (!names.includes("")) return eps.join(", ");
    return eps.length ? `gateway's (${eps.join(", ")})` : "gateway's";
  }).join("; ");
}
function certRow(e, folder) {
  const c = e.cert;
  const until = new Date(c.notAfter), expired = until < new Date();
  const act = folder === "rejected"
    ? `<button type="button" class="primary small" data-trust="${esc(c.thumbprint)}">Trust</button>`
    : `<button type="button" class="ghost small danger" data-untrust="${esc(c.thumbprint)}" title="Remove from trusted">Remove</button>`;
  return `<div class="cert ${folder}" data-thumbprint="${esc(c.thumbprint)}">
    <div class="cn" title="${esc(c.subject)}">${esc(cn(c.subject))}${c.selfSigned ? ' <span class="pill plain">self-signed</span>' : ""}${expired ? ' <span class="pill bad plain">expired</span>' : ""}</div>
    <div class="meta" title="${esc(c.applicationUri || "")}">${esc(c.applicationUri || c.issuer)} · ${esc(storeLabel(e.stores))} store</div>
    <div class="meta mono">${esc(c.thumbprint.replace(/(.{4})/g, "$1 ").trim())} · until ${until.toLocaleDateString()}</div>
    <div class="act">${act}</div></div>`;
}
function renderCerts() {
  const showTrusted = $("cert-show-trusted").checked;
  const { rejected, trusted } = certState;
  $("cert-count").innerHTML = rejected.length ? `<span class="pill warn">${rejected.length} awaiting a decision</span>` : `${trusted.length} trusted`;
  let html = "";
  if (rejected.length) html += '<div class="cert-section">Rejected — servers the gateway refused</div>' + rejected.map((e) => certRow(e, "rejected")).join("");
  else html += '<p class="muted pad">No rejected certificates: every server presented a trusted one.</p>';
  if (showTrusted) html += '<div class="cert-section">Trusted</div>' + (trusted.length ? trusted.map((e) => certRow(e, "trusted")).join("") : '<p class="muted pad">None.</p>');
  $("cert-body").innerHTML = html;
}
$("cert-show-trusted").addEventListener("change", renderCerts);
$("cert-body").addEventListener("click", async (ev) => {
  const b = ev.target.closest("button[data-trust],button[data-untrust]");
  if (!b) return;
  const trust = !!b.dataset.trust, tp = b.dataset.trust || b.dataset.untrust;
  const e = certState[trust ? "rejected" : "trusted"].find((x) => x.cert.thumbprint === tp);
  if (!e) return;
  if (trust && !(await confirmTrust(e))) return;
  b.disabled = true;
  try {
    let done = 0;
    for (const names of e.stores) {
      const s = names.find(Boolean) ?? "";
      const q = s ? "?endpoint=" + enc(s) : "";
      try {
        if (trust) await post(`/api/v1/certificates/rejected/${enc(tp)}/trust${q}`);
        else await del(`/api/v1/certificates/trusted/${enc(tp)}${q}`);
        done++;
      } catch (err) {
        if (!(err.status === 404 && done)) throw err; // two names for one directory: already moved
      }
    }
    toast(trust ? `Trusted ${cn(e.cert.subject)}; the endpoint connects at its next attempt` : `Removed ${cn(e.cert.subject)} from trusted`, "ok");
  } catch (err) {
    toast((trust ? "Not trusted: " : "Not removed: ") + err.message, "err");
  }
  pollCerts().catch(() => {});
  poll();
});
function confirmTrust(e) {
  const c = e.cert, d = $("dlg-trust");
  const rows = [["Subject", c.subject], ["Application URI", c.applicationUri || "—"], ["Host names", [...(c.dnsNames || []), ...(c.ipAddresses || [])].join(", ") || "—"],
    ["Issuer", c.selfSigned ? "self-signed" : c.issuer], ["Valid", `${new Date(c.notBefore).toLocaleDateString()} – ${new Date(c.notAfter).toLocaleDateString()}`],
    ["SHA-1 thumbprint", c.thumbprint.replace(/(.{2})(?!$)/g, "$1:")], ["Store", storeLabel(e.stores)]];
  $("dlg-trust-info").innerHTML = rows.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join("");
  return new Promise((resolve) => {
    d.onclose = () => resolve(d.returnValue === "trust");
    d.returnValue = "";
    d.showModal();
  });
}

// ---- start -----------------------------------------------------------------
async function start() {
  await poll();
  values.load().catch((e) => { values.showEmpty("Values: " + e.message); toast("Values: " + e.message, "err"); });
  stream = new Stream(wsURL, {
    onMessage: (m) => values.onMessage(m),
    onState: (s, why) => pill($("f-stream"), s === "live" ? "good live" : s === "down" ? "bad" : "warn", s === "live" ? "Live" : s === "down" ? "Stream down" : "Connecting", why || "The live value stream (WebSocket /ws)"),
  });
  pollCerts().catch(() => {});
  pollCommands().catch(() => {});
  setInterval(poll, POLL);
  setInterval(() => pollCommands().catch(() => {}), POLL);
  setInterval(() => pollCerts().catch(() => {}), CERT_POLL);
  setInterval(() => values.load().catch(() => {}), VALUES_RELOAD);
}
start();
