// The live value table: every field of every dataset writer, first from the
// REST API's last values, then kept current by the WebSocket stream. Only
// the rows in view exist in the DOM (a fixed row height, a spacer as tall as
// all rows, and a pool of row elements that are reused as one scrolls), so
// thousands of fields stay smooth; redraws are batched into animation
// frames, at most a few per second.

import { decode, format, numeric, status, time, typeName } from "./ua.js";
import { Ring, path, svgEl } from "./spark.js";
import { all } from "./api.js";

const HISTORY = 90;     // samples per trend
const ROW_H = 26;       // px, as --row in app.css
const OVERSCAN = 8;     // rows drawn beyond the viewport
const MIN_FRAME = 200;  // ms between redraws while values stream

export class ValueTable {
  constructor(root, { countEl, groupSel, filterInput, badToggle }) {
    this.root = root;
    this.viewport = root.querySelector(".vt-viewport");
    this.spacer = root.querySelector(".vt-spacer");
    this.rowsEl = root.querySelector(".vt-rows");
    this.countEl = countEl;
    this.groupSel = groupSel;
    this.filterInput = filterInput;
    this.badToggle = badToggle;
    this.rows = new Map();   // key → row
    this.order = [];         // rows in configuration order
    this.view = [];          // order, filtered
    this.pool = [];          // row elements
    this.order_ix = new Map(); // "group\0writer" → [groupIndex, writerIndex], from the configuration
    this.fieldIx = new Map();  // key → field index in its writer
    this.meta = new Map();     // "group\0writer" → {field: builtInType}
    this.writerIds = new Map(); // "group\0id" → writer name
    this.updates = 0;
    this.rate = 0;
    this.structural = false;
    this.lastFrame = 0;
    this.viewport.addEventListener("scroll", () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(this.viewport);
    const refilter = () => { this.structural = true; this.schedule(); };
    filterInput.addEventListener("input", refilter);
    groupSel.addEventListener("change", refilter);
    badToggle.addEventListener("change", refilter);
    setInterval(() => { this.rate = this.updates; this.updates = 0; this.writeCount(); }, 1000);
    this.showEmpty("Loading values…");
  }

  // setConfig learns the writer groups (order, writer ids and names) from
  // /api/v1/writer-groups.
  setConfig(groups) {
    this.order_ix.clear();
    this.writerIds.clear();
    this.fieldIx.clear();
    groups.forEach((g, gi) => (g.writers || []).forEach((w, wi) => {
      this.order_ix.set(g.name + "\0" + w.name, [gi, wi]);
      this.writerIds.set(g.name + "\0" + (w.id || wi + 1), w.name);
      (w.fields || []).forEach((f, fi) => this.fieldIx.set(g.name + "\0" + w.name + "\0" + (f.name || f.node), fi));
    }));
    const cur = this.groupSel.value;
    const opts = ['<option value="">All groups</option>'];
    for (const g of groups) opts.push(`<option>${esc(g.name)}</option>`);
    this.groupSel.innerHTML = opts.join("");
    if (groups.some((g) => g.name === cur)) this.groupSel.value = cur;
    this.structural = true;
    this.schedule();
  }

  // load reads every last value from the REST API; fields no longer
  // configured disappear, new ones appear.
  async load() {
    const items = await all("/api/v1/values");
    const seen = new Set();
    for (const it of items) {
      const key = it.group + "\0" + it.writer + "\0" + it.field;
      seen.add(key);
      let r = this.rows.get(key);
      if (!r) r = this.add(it.group, it.writer, it.field);
      r.node = it.node;
      const d = decode(it.value);
      if (!r.streamed) this.apply(r, d, "");
      else if (!r.streamStatus && d.status.code !== r.status.code) { r.status = d.status; r.ver++; } // the stream's Variants carry no status
    }
    for (const key of this.rows.keys()) if (!seen.has(key)) this.rows.delete(key);
    this.structural = true;
    if (!this.rows.size) this.showEmpty("No fields are published yet. Add nodes with the node browser.");
    this.schedule();
  }

  add(group, writer, field) {
    const r = {
      key: group + "\0" + writer + "\0" + field, group, writer, field, node: "",
      value: undefined, type: 0, text: "", status: status(0), ts: "", ring: new Ring(HISTORY),
      changedAt: 0, ver: 0, streamed: false,
    };
    const mt = this.meta.get(group + "\0" + writer);
    if (mt && mt[field]) r.type = mt[field];
    this.rows.set(r.key, r);
    this.structural = true;
    return r;
  }

  apply(r, d, fallbackTs) {
    if (!d.hasStatus) d.status = r.status.level === "bad" ? status(0) : r.status; // a value after a Bad one is Good; Uncertain stays until the REST API says otherwise
    const text = format(d.value, d.type || r.type);
    if (text !== r.text || d.status.code !== r.status.code) r.changedAt = performance.now();
    r.value = d.value;
    r.text = text;
    if (d.type) r.type = d.type;
    r.status = d.status;
    r.ts = d.ts || fallbackTs || r.ts;
    const n = d.status.level === "bad" ? NaN : numeric(d.value);
    if (Number.isFinite(n) || r.ring.n) r.ring.push(n);
    r.ver++;
  }

  writerName(group, dsm) {
    return dsm.DataSetWriterName || this.writerIds.get(group + "\0" + dsm.DataSetWriterId) || String(dsm.DataSetWriterId ?? "");
  }

  // onMessage handles one message of the stream.
  onMessage(m) {
    if (m.MessageType === "ua-data") {
      const group = m.WriterGroupName || "";
      const list = Array.isArray(m.Messages) ? m.Messages : m.Messages ? [m.Messages] : [];
      for (const dsm of list) {
        const mt = dsm.MessageType || "ua-keyframe";
        if ((mt !== "ua-keyframe" && mt !== "ua-deltaframe") || !dsm.Payload) continue;
        const writer = this.writerName(group, dsm);
        for (const [f, v] of Object.entries(dsm.Payload)) {
          const key = group + "\0" + writer + "\0" + f;
          const r = this.rows.get(key) || this.add(group, writer, f);
          const d = decode(v);
          r.streamed = true;
          r.streamStatus = d.hasStatus;
          this.apply(r, d, dsm.Timestamp);
          this.updates++;
        }
      }
      this.schedule();
    } else if (m.MessageType === "ua-metadata" && m.MetaData) {
      const group = m.WriterGroupName || "";
      const writer = this.writerName(group, m);
      const types = {};
      for (const f of m.MetaData.Fields || []) types[f.Name] = f.BuiltInType || 0;
      this.meta.set(group + "\0" + writer, types);
      for (const r of this.rows.values()) if (r.group === group && r.writer === writer && types[r.field]) { r.type = types[r.field]; r.ver++; }
      this.schedule();
    }
  }

  schedule() {
    if (this.raf) return;
    const wait = Math.max(0, MIN_FRAME - (performance.now() - this.lastFrame));
    this.raf = setTimeout(() => requestAnimationFrame(() => { this.raf = 0; this.lastFrame = performance.now(); this.draw(); }), this.structural ? 0 : wait);
  }

  rebuild() {
    const ix = (r) => this.order_ix.get(r.group + "\0" + r.writer) || [1e9, 1e9];
    this.order = [...this.rows.values()].sort((a, b) => {
      const [ag, aw] = ix(a), [bg, bw] = ix(b);
      return ag - bg || a.group.localeCompare(b.group) || aw - bw || a.writer.localeCompare(b.writer) ||
        (this.fieldIx.get(a.key) ?? 1e9) - (this.fieldIx.get(b.key) ?? 1e9) || a.field.localeCompare(b.field);
    });
    const g = this.groupSel.value, q = this.filterInput.value.trim().toLowerCase(), bad = this.badToggle.checked;
    this.view = this.order.filter((r) => (!g || r.group === g) && (!bad || r.status.level !== "good") &&
      (!q || r.field.toLowerCase().includes(q) || r.node.toLowerCase().includes(q) || r.writer.toLowerCase().includes(q)));
    this.spacer.style.height = this.view.length * ROW_H + "px";
    this.structural = false;
    this.writeCount();
  }

  writeCount() {
    const n = this.view.length, total = this.rows.size;
    this.countEl.textContent = (n === total ? `${total.toLocaleString()} fields` : `${n.toLocaleString()} of ${total.toLocaleString()} fields`) +
      ` · ${this.rate.toLocaleString()} updates/s`;
  }

  showEmpty(text) {
    if (this.rows.size) return;
    this.rowsEl.innerHTML = `<div class="vt-empty">${esc(text)}</div>`;
    this.pool = [];
  }

  draw() {
    if (this.structural) this.rebuild();
    if (!this.rows.size) return;
    if (!this.pool.length) this.rowsEl.textContent = "";
    const top = this.viewport.scrollTop, h = this.viewport.clientHeight || 400;
    const start = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const end = Math.min(this.view.length, Math.ceil((top + h) / ROW_H) + OVERSCAN);
    while (this.pool.length < end - start) this.pool.push(this.makeRow());
    this.rowsEl.style.transform = `translateY(${start * ROW_H}px)`;
    const now = performance.now(), showGroup = !this.groupSel.value;
    for (let i = 0; i < this.pool.length; i++) {
      const el = this.pool[i], r = this.view[start + i];
      if (!r) { if (el.isConnected) el.remove(); continue; }
      if (!el.isConnected) this.rowsEl.append(el); // pool order is DOM order: only the tail is ever removed
      this.fill(el, r, showGroup, now);
    }
    // Keep flashing rows fading: one more frame once their flash is over.
    if (this.view.slice(start, end).some((r) => now - r.changedAt < 150)) setTimeout(() => this.schedule(), 250);
  }

  makeRow() {
    const el = document.createElement("div");
    el.className = "vt-row";
    el.innerHTML = '<span class="w"></span><span class="f"><b></b><small></small></span><span class="v"></span><span class="t"></span><span class="s"><span class="pill"></span></span><span class="ts"></span><span class="sp"></span>';
    const svg = svgEl("svg", { viewBox: "0 0 112 18", preserveAspectRatio: "none" });
    svg.append(svgEl("path"));
    el.lastChild.append(svg);
    const c = el.children;
    el._c = { w: c[0], fb: c[1].firstChild, fs: c[1].lastChild, v: c[2], t: c[3], s: c[4].firstChild, ts: c[5], path: svg.firstChild };
    return el;
  }

  fill(el, r, showGroup, now) {
    const c = el._c;
    if (el._key !== r.key || el._showGroup !== showGroup) {
      el._key = r.key; el._showGroup = showGroup; el._ver = -1;
      el.dataset.key = r.group + "/" + r.writer + "/" + r.field;
      c.w.textContent = showGroup ? r.group + " › " + r.writer : r.writer;
      c.w.title = r.group + " › " + r.writer;
      c.fb.textContent = r.field;
    }
    if (el._ver === r.ver) { c.v.classList.toggle("flash", now - r.changedAt < 150); return; }
    el._ver = r.ver;
    if (c.fs.textContent !== r.node) { c.fs.textContent = r.node === r.field ? "" : r.node; el.title = r.node; }
    c.v.textContent = r.text || (r.status.level === "good" ? "" : "—");
    c.v.classList.toggle("badv", r.status.level === "bad");
    c.v.classList.toggle("flash", now - r.changedAt < 150);
    c.t.textContent = typeName(r.type);
    c.s.textContent = r.status.symbol;
    c.s.className = "pill " + r.status.level;
    c.ts.textContent = time(r.ts);
    c.ts.title = r.ts;
    c.path.setAttribute("d", path(r.ring.values(), 112, 18).line);
  }
}

export function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]);
}

// Stream is the WebSocket connection to /ws, reconnecting with backoff.
export class Stream {
  constructor(url, { onMessage, onState }) {
    this.url = url; this.onMessage = onMessage; this.onState = onState; this.delay = 1000;
    this.connect();
  }
  connect() {
    this.onState("connecting");
    let ws;
    try { ws = new WebSocket(this.url()); } catch { this.retry(); return; }
    this.ws = ws;
    ws.onopen = () => { this.delay = 1000; this.onState("live"); };
    ws.onmessage = (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch { return; }
      this.onMessage(m);
    };
    ws.onclose = (ev) => { this.onState("down", ev.reason || (ev.code === 1006 ? "" : "closed " + ev.code)); this.retry(); };
  }
  // restart connects anew (the credentials changed): an open socket is
  // closed, and its onclose connects again; one still in its handshake is
  // closed once it opens (closing it mid-handshake is an error in the
  // browser's console, and its request may predate the new credentials).
  restart() {
    const ws = this.ws;
    this.delay = 1000;
    if (ws?.readyState === WebSocket.OPEN) ws.close();
    else if (ws?.readyState === WebSocket.CONNECTING) ws.addEventListener("open", () => ws.close(), { once: true });
  }
  retry() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), this.delay);
    this.delay = Math.min(this.delay * 2, 15000);
  }
}
