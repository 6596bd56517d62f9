// Sparklines drawn as SVG paths (no charting library): a fixed-size ring of
// samples per series, scaled to the series' own min and max.

export class Ring {
  constructor(n) { this.buf = new Float64Array(n); this.n = 0; this.at = 0; }
  push(v) {
    this.buf[this.at] = v;
    this.at = (this.at + 1) % this.buf.length;
    if (this.n < this.buf.length) this.n++;
  }
  // values returns the samples oldest first.
  values() {
    const out = new Array(this.n), len = this.buf.length, start = (this.at - this.n + len) % len;
    for (let i = 0; i < this.n; i++) out[i] = this.buf[(start + i) % len];
    return out;
  }
  last() { return this.n ? this.buf[(this.at - 1 + this.buf.length) % this.buf.length] : NaN; }
}

// path returns the "d" of a line through values in a w×h box (and of the
// area below it when area is set), or "" with fewer than two finite points.
export function path(values, w, h, { area = false, cap = 0, floor } = {}) {
  const pts = values.filter(Number.isFinite);
  if (pts.length < 2) return { line: "", area: "" };
  let lo = Math.min(...pts), hi = Math.max(...pts, cap);
  if (floor !== undefined) lo = Math.min(lo, floor);
  if (hi === lo) { hi += 1; lo -= 1; }
  const pad = 1.5, sx = (w - 2 * pad) / (values.length - 1), sy = (h - 2 * pad) / (hi - lo);
  let d = "", first = -1, lastX = 0;
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) return;
    const x = pad + i * sx, y = h - pad - (v - lo) * sy;
    d += (first < 0 ? "M" : "L") + x.toFixed(1) + " " + y.toFixed(1);
    if (first < 0) first = x;
    lastX = x;
  });
  return { line: d, area: area ? d + `L${lastX.toFixed(1)} ${h}L${first.toFixed(1)} ${h}Z` : "" };
}

const NS = "http://www.w3.org/2000/svg";
export function svgEl(name, attrs = {}) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}
