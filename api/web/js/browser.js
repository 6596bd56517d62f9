// The node browser: the endpoint's address space from the Objects folder
// down (POST /endpoints/{e}/browse, /browse/next for long lists), variables
// ticked to be added as fields of a dataset writer
// (POST /writer-groups/{g}/writers/{w}/fields).

import { post, enc } from "./api.js";
import { esc } from "./values.js";

const OBJECTS = "i=85";
const MASK = 1 | 2 | 4; // Object, Variable, Method

export class NodeBrowser {
  constructor({ tree, endpointSel, refresh, form, targetSel, addBtn, summary, toast, onAdded }) {
    Object.assign(this, { tree, endpointSel, form, targetSel, addBtn, summary, toast, onAdded });
    this.selected = new Map(); // node id → {node, name}
    this.groups = [];
    this.endpoint = "";
    endpointSel.addEventListener("change", () => this.open(endpointSel.value));
    refresh.addEventListener("click", () => this.open(this.endpoint));
    targetSel.addEventListener("change", () => { this.markPublished(); this.update(); });
    form.addEventListener("submit", (ev) => { ev.preventDefault(); this.add(); });
  }

  // setEndpoints fills the endpoint choice; the first connected one is
  // opened when none is yet.
  setEndpoints(eps) {
    const names = eps.map((e) => e.name);
    const key = eps.map((e) => e.name + (e.connected ? "+" : "-")).join(",");
    if (key !== this.epKey) {
      this.epKey = key;
      this.endpointSel.innerHTML = eps.map((e) => `<option value="${esc(e.name)}">${esc(e.name)}${e.connected ? "" : " (not connected)"}</option>`).join("");
      if (names.includes(this.endpoint)) this.endpointSel.value = this.endpoint;
    }
    const wasDown = this.endpoint && this.lastFailed && eps.find((e) => e.name === this.endpoint)?.connected;
    if (!this.endpoint || !names.includes(this.endpoint)) {
      const first = eps.find((e) => e.connected) || eps[0];
      if (first) { this.endpointSel.value = first.name; this.open(first.name); }
    } else if (wasDown) this.open(this.endpoint); // it came up: browse again
  }

  // setGroups lists the dataset writers the selected endpoint's groups have.
  setGroups(groups) {
    this.groups = groups;
    this.fillTargets();
  }

  fillTargets() {
    const cur = this.targetSel.value;
    const opts = [];
    for (const g of this.groups) {
      if (g.endpoint !== this.endpoint) continue;
      for (const w of g.writers || []) opts.push([g.name + "/" + w.name, `${g.name} › ${w.name} (${(w.fields || []).length} fields)`]);
    }
    const html = opts.length ? opts.map(([v, t]) => `<option value="${esc(v)}">${esc(t)}</option>`).join("") : '<option value="">No dataset writer on this endpoint</option>';
    if (html !== this.targetsHTML) {
      this.targetsHTML = html;
      this.targetSel.innerHTML = html;
      if (opts.some(([v]) => v === cur)) this.targetSel.value = cur;
    }
    this.markPublished();
    this.update();
  }

  target() {
    const v = this.targetSel.value;
    if (!v) return null;
    const [g, w] = v.split("/");
    const grp = this.groups.find((x) => x.name === g);
    const wr = grp && (grp.writers || []).find((x) => x.name === w);
    return wr ? { group: g, writer: w, fields: wr.fields || [] } : null;
  }

  async open(endpoint) {
    this.endpoint = endpoint;
    this.selected.clear();
    this.fillTargets();
    this.tree.textContent = "";
    if (!endpoint) return;
    const root = this.nodeEl({ node: OBJECTS, displayName: "Objects", nodeClass: "Object" }, 0);
    this.tree.append(root.el);
    await this.expand(root);
  }

  nodeEl(ref, depth) {
    const el = document.createElement("div");
    el.className = "node";
    el.setAttribute("role", "treeitem");
    el.dataset.node = ref.node;
    el.style.paddingLeft = 4 + depth * 16 + "px";
    const leaf = ref.nodeClass === "Method";
    const cls = ["Object", "Variable", "Method"].includes(ref.nodeClass) ? ref.nodeClass : "other";
    el.innerHTML = `<button type="button" class="tw${leaf ? " leaf" : ""}" aria-label="expand">▸</button>` +
      (ref.nodeClass === "Variable" ? `<input type="checkbox" aria-label="select ${esc(ref.displayName)}">` : "") +
      `<span class="ic ${cls}" title="${esc(ref.nodeClass)}"></span><span class="dn">${esc(ref.displayName || ref.browseName)}</span>` +
      `<span class="nid">${esc(ref.node)}</span><span class="tag"></span>`;
    const item = { el, ref, depth, kids: null, open: false };
    el.querySelector(".tw").addEventListener("click", () => this.toggle(item));
    el.querySelector(".dn").addEventListener("dblclick", () => this.toggle(item));
    const cb = el.querySelector("input");
    if (cb) cb.addEventListener("change", () => {
      if (cb.checked) this.selected.set(ref.node, { node: ref.node, name: ref.displayName || ref.browseName });
      else this.selected.delete(ref.node);
      this.update();
    });
    return item;
  }

  toggle(item) {
    if (item.open) {
      item.open = false;
      item.el.querySelector(".tw").textContent = "▸";
      if (item.kids) item.kids.hidden = true;
      return;
    }
    this.expand(item);
  }

  async expand(item) {
    item.open = true;
    const tw = item.el.querySelector(".tw");
    tw.textContent = "▾";
    if (item.kids) { item.kids.hidden = false; return; }
    item.kids = document.createElement("div");
    item.kids.setAttribute("role", "group");
    item.el.after(item.kids);
    const loading = this.msg("Browsing…", item.depth + 1);
    item.kids.append(loading);
    try {
      const res = await post(`/api/v1/endpoints/${enc(this.endpoint)}/browse`, { node: item.ref.node, nodeClassMask: MASK });
      this.lastFailed = false;
      loading.remove();
      this.addRefs(item, res);
    } catch (e) {
      this.lastFailed = true;
      loading.remove();
      item.kids.append(this.msg(e.message, item.depth + 1, true));
      item.kids = null; // try again on the next expand
      item.open = false;
      tw.textContent = "▸";
    }
  }

  addRefs(item, res) {
    const refs = (res.references || []).filter((r) => r.isForward !== false);
    if (!refs.length && !res.continuationPoint && item.kids.children.length === 0) {
      item.el.querySelector(".tw").classList.add("leaf");
    }
    for (const r of refs) {
      const child = this.nodeEl(r, item.depth + 1);
      item.kids.append(child.el);
    }
    if (res.continuationPoint) {
      const more = this.msg("", item.depth + 1);
      more.classList.add("more");
      more.innerHTML = '<button type="button">more…</button>';
      more.querySelector("button").addEventListener("click", async () => {
        more.remove();
        try {
          const next = await post(`/api/v1/endpoints/${enc(this.endpoint)}/browse/next`, { continuationPoint: res.continuationPoint });
          this.addRefs(item, next);
        } catch (e) { this.toast(e.message, "err"); }
      });
      item.kids.append(more);
    }
    this.markPublished();
  }

  msg(text, depth, err) {
    const d = document.createElement("div");
    d.className = "node msg" + (err ? " err" : "");
    d.style.paddingLeft = 4 + depth * 16 + 22 + "px";
    d.textContent = text;
    return d;
  }

  // markPublished tags the variables the target writer has as fields.
  markPublished() {
    const t = this.target();
    const have = new Set((t?.fields || []).map((f) => f.node));
    for (const el of this.tree.querySelectorAll(".node[data-node]")) {
      const on = have.has(el.dataset.node);
      el.querySelector(".tag").textContent = on ? "published" : "";
      const cb = el.querySelector("input");
      if (cb) {
        cb.disabled = on;
        if (on && cb.checked) { cb.checked = false; this.selected.delete(el.dataset.node); }
      }
    }
  }

  update() {
    const n = this.selected.size;
    this.summary.textContent = n ? `${n} variable${n > 1 ? "s" : ""} selected: ${[...this.selected.values()].map((s) => s.name).slice(0, 4).join(", ")}${n > 4 ? ", …" : ""}` : "Tick variables to publish them.";
    this.addBtn.disabled = !n || !this.target() || this.busy;
  }

  async add() {
    const t = this.target();
    if (!t || !this.selected.size) return;
    const names = new Set(t.fields.map((f) => f.name || f.node));
    const fields = [];
    for (const s of this.selected.values()) {
      let name = s.name || s.node, i = 2;
      while (names.has(name)) name = `${s.name}_${i++}`;
      names.add(name);
      fields.push({ name, node: s.node });
    }
    this.busy = true;
    this.update();
    try {
      const w = await post(`/api/v1/writer-groups/${enc(t.group)}/writers/${enc(t.writer)}/fields`, { fields });
      this.toast(`Added ${fields.length} field${fields.length > 1 ? "s" : ""} to ${t.group} › ${t.writer}`, "ok");
      for (const cb of this.tree.querySelectorAll(".node input:checked")) cb.checked = false;
      this.selected.clear();
      const g = this.groups.find((x) => x.name === t.group);
      const i = g ? g.writers.findIndex((x) => x.name === t.writer) : -1;
      if (i >= 0 && w) g.writers[i] = w;
      this.fillTargets();
      this.onAdded();
    } catch (e) {
      this.toast(`Not added: ${e.message}`, "err");
    } finally {
      this.busy = false;
      this.update();
    }
  }
}
