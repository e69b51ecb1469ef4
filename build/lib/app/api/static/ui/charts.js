/* Hand-written SVG line charts for the dashboard: no library, no build. One call draws one chart:
   Charts.line(parent, {title, unit, series: [{name, color, x: [epoch ms], y: [number|null]}]}).
   The legend shows each series' last value (data-last) so a reader, or a test, can check the
   chart against the stored numbers. */
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const W = 560, H = 220, L = 52, R = 12, T = 10, B = 26;

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
    return String(Math.round(v * 1000) / 1000);
  }

  function fmtTime(ms, spanMs) {
    const d = new Date(ms);
    const hm = d.toISOString().slice(11, 16);
    return spanMs > 36 * 3600e3 ? d.toISOString().slice(5, 10) + " " + hm : hm;
  }

  function line(parent, spec) {
    const box = document.createElement("div");
    box.className = "chart";
    box.dataset.chart = spec.title;
    const h = document.createElement("h3");
    h.textContent = spec.title + (spec.unit ? " (" + spec.unit + ")" : "");
    box.appendChild(h);
    parent.appendChild(box);
    const pts = [];
    for (const s of spec.series) s.x.forEach((x, i) => { if (s.y[i] !== null && s.y[i] !== undefined) pts.push([x, s.y[i]]); });
    if (!pts.length) {
      const p = document.createElement("div");
      p.className = "empty";
      p.textContent = "nothing recorded in this window";
      box.appendChild(p);
      return box;
    }
    let x0 = Math.min(...pts.map(p => p[0])), x1 = Math.max(...pts.map(p => p[0]));
    if (spec.xRange) { x0 = Math.min(x0, spec.xRange[0]); x1 = Math.max(x1, spec.xRange[1]); }
    let y0 = Math.min(0, ...pts.map(p => p[1])), y1 = Math.max(...pts.map(p => p[1]));
    if (x1 === x0) { x0 -= 60e3; x1 += 60e3; }
    if (y1 === y0) y1 = y0 + 1;
    // round the value axis out to four "nice" steps (1, 2, 2.5 or 5 times a power of ten)
    const raw = (y1 - y0) / 4, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(v => v >= raw);
    y0 = Math.floor(y0 / step) * step;
    y1 = y0 + 4 * step;
    while (y1 < Math.max(...pts.map(p => p[1]))) y1 += step;
    const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
    const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": spec.title }, box);
    el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }, svg);
    el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }, svg);
    const ticks = Math.round((y1 - y0) / step);
    for (let k = 0; k <= ticks; k++) {
      const v = y0 + step * k;
      const t = el("text", { x: L - 4, y: sy(v) + 3, "text-anchor": "end", class: "tick" }, svg);
      t.textContent = fmt(v);
      if (k) el("line", { x1: L, y1: sy(v), x2: W - R, y2: sy(v), stroke: "#eef", "stroke-width": 1 }, svg);
    }
    for (let k = 0; k <= 3; k++) {
      const v = x0 + (x1 - x0) * k / 3;
      const t = el("text", { x: sx(v), y: H - 8, "text-anchor": k === 0 ? "start" : k === 3 ? "end" : "middle", class: "tick" }, svg);
      t.textContent = fmtTime(v, x1 - x0);
    }
    const legend = document.createElement("div");
    legend.className = "legend";
    for (const s of spec.series) {
      let d = "", pen = false, last = null;
      s.x.forEach((x, i) => {
        const y = s.y[i];
        if (y === null || y === undefined) { pen = false; return; }
        d += (pen ? "L" : "M") + sx(x).toFixed(1) + "," + sy(y).toFixed(1);
        pen = true;
        last = y;
      });
      if (d) {
        const path = el("path", { d, fill: "none", stroke: s.color, "stroke-width": 1.8, "data-series": s.name }, svg);
        if (s.dash) path.setAttribute("stroke-dasharray", "5,3");
        const title = el("title", {}, path);
        title.textContent = s.name;
      }
      const item = document.createElement("span");
      item.dataset.series = s.name;
      item.dataset.last = last === null ? "" : String(last);
      const swatch = document.createElement("i");
      swatch.style.background = s.color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(s.name + ": " + fmt(last)));
      legend.appendChild(item);
    }
    box.appendChild(legend);
    return box;
  }

  window.Charts = { line, fmt };
})();
