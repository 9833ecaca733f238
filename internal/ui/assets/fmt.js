// Shared formatting and drawing helpers of the dashboard's pages: DOM
// building, times in UTC with their relative age, percentages, state
// badges (the word beside the colour) and small inline SVG charts.

const SVG = 'http://www.w3.org/2000/svg';

// el builds an element: el('td', {class: 'state', title: 'x'}, 'text', child).
// Attributes: class, text, on* (listeners), dataset keys as data-*, others
// as attributes; null/undefined/false attributes and children are skipped.
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// svg builds an SVG element the same way.
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') node.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

// toDate accepts a Date, an RFC 3339 string or milliseconds; it returns
// null for Go's zero time and anything unparsable.
export function toDate(t) {
  if (t === null || t === undefined || t === '') return null;
  const d = t instanceof Date ? t : new Date(t);
  if (isNaN(d.getTime()) || d.getUTCFullYear() <= 1) return null;
  return d;
}

const pad = (n) => String(n).padStart(2, '0');

// utc formats a time as "2026-12-02 19:57:42 UTC" ("" for none).
export function utc(t) {
  const d = toDate(t);
  if (!d) return '';
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

// duration formats seconds as "12 s", "3 m", "2 h 5 m", "4 d 3 h".
export function duration(sec) {
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return `${sec} s`;
  const m = Math.floor(sec / 60);
  if (m < 60) return `${m} m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} m` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

// ago formats a time's age relative to now: "3 m ago", "in 20 s".
export function ago(t, now = Date.now()) {
  const d = toDate(t);
  if (!d) return '';
  const s = (now - d.getTime()) / 1000;
  if (Math.abs(s) < 1) return 'now';
  return s >= 0 ? `${duration(s)} ago` : `in ${duration(-s)}`;
}

// when renders a <time> with the UTC time and its age:
// "2026-12-02 19:57:42 UTC (3 m ago)", the age in a span.age (which a
// table may put on its own line); empty for no time. retickAges updates
// the ages inside root.
export function when(t, now = Date.now()) {
  const d = toDate(t);
  if (!d) return el('time');
  return el('time', { datetime: d.toISOString(), title: d.toISOString() }, `${utc(d)} `, el('span', { class: 'age' }, `(${ago(d, now)})`));
}

export function retickAges(root, now = Date.now()) {
  for (const s of root.querySelectorAll('time[datetime] > span.age')) {
    const txt = `(${ago(s.parentNode.getAttribute('datetime'), now)})`;
    if (s.textContent !== txt) s.textContent = txt;
  }
}

// pct formats a 0..1 share as "62.1 %" ("" for a missing value).
export function pct(x, digits = 1) {
  if (x === null || x === undefined || isNaN(x)) return '';
  return `${(x * 100).toFixed(digits)} %`;
}

// count formats a count with thin groupings: 12345 → "12,345".
export function count(n) {
  return n === null || n === undefined ? '' : Number(n).toLocaleString('en-US');
}

// STATES are the known state words; stateClass maps any state to its
// colour class ("state-up", ...). Unknown states get "state-other".
export const STATES = ['up', 'down', 'drain', 'disabled', 'error', 'stale'];
export function stateClass(state) {
  return STATES.includes(state) ? `state-${state}` : 'state-other';
}

// badge renders a state as a word with its colour class and a shape
// mark, so it reads without colour: <span class="badge state-down">down</span>.
export function badge(state, tag = 'span') {
  return el(tag, { class: `badge ${stateClass(state)}` }, state || '?');
}

// bar renders a share (0..1) as its percentage followed by a small
// horizontal SVG bar: <span class="share"><span class="share-text">62.1 %
// </span><svg class="bar" aria-hidden="true">…</svg></span>, so the text
// (and textContent) is the percentage alone.
export function bar(share, { width = 48, height = 8, label = true } = {}) {
  const w = Math.max(0, Math.min(1, share || 0)) * width;
  const s = svg('svg', { class: 'bar', width, height, viewBox: `0 0 ${width} ${height}`, 'aria-hidden': 'true' },
    svg('rect', { class: 'bar-bg', x: 0, y: 0, width, height }),
    svg('rect', { class: 'bar-fg', x: 0, y: 0, width: w.toFixed(1), height }));
  return label ? el('span', { class: 'share' }, el('span', { class: 'share-text' }, pct(share)), s) : s;
}

// histogram draws a bar chart into a new <svg class="chart">.
//   bins: [{label, value, part?, hatched?, title?, group?}]: a hatched bin
//   is drawn in the pattern fill, so it differs without colour; part (<=
//   value) is the hatched top portion of a bin (e.g. "of which widened");
//   a bin with value null is a gap; group labels a run of bins below
//   their own labels (e.g. the address family)
//   opts: {width, height, title (for <title>), xLabel, yLabel, id, legend:
//   [{label, hatched?}] }
// The chart has role="img" and an aria-label; each bar a <title>.
export function histogram(bins, opts = {}) {
  const W = opts.width || 480, H = opts.height || 200;
  const m = { l: 44, r: 8, t: opts.legend ? 22 : 8, b: bins.some((b) => b.group) || opts.xLabel ? 34 : 22 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  const max = Math.max(1, ...bins.map((b) => b.value || 0));
  const uid = opts.id || `chart-${++chartSeq}`;
  const root = svg('svg', {
    id: opts.id, class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': opts.title || 'chart',
  });
  root.append(svg('title', { text: opts.title || '' }), hatchDefs(uid));
  // Axes and a few y gridlines.
  const ticks = niceTicks(max);
  for (const v of ticks) {
    const y = m.t + ph - (v / ticks[ticks.length - 1]) * ph;
    root.append(svg('line', { class: 'grid', x1: m.l, x2: W - m.r, y1: y, y2: y }),
      svg('text', { class: 'tick', x: m.l - 4, y: y + 4, 'text-anchor': 'end', text: shortNum(v) }));
  }
  const top = ticks[ticks.length - 1];
  const bw = bins.length ? pw / bins.length : pw;
  const every = Math.max(1, Math.ceil(bins.length / Math.max(1, Math.floor(pw / 28))));
  let group = null;
  bins.forEach((b, i) => {
    const x = m.l + i * bw;
    if (b.group && b.group !== group) {
      group = b.group;
      root.append(svg('text', { class: 'group-label', x: x + 2, y: H - 2, text: b.group }));
    }
    if (b.value === null) return;
    const h = ((b.value || 0) / top) * ph;
    const ph2 = b.part ? (Math.min(b.part, b.value) / top) * ph : 0;
    const title = b.title || `${b.label}: ${count(b.value)}` + (b.part ? ` (${count(b.part)} widened)` : '');
    const bx = (x + bw * 0.1).toFixed(1), bwid = Math.max(1, bw * 0.8).toFixed(1);
    const g = svg('g', { class: 'bin-group' }, svg('title', { text: title }),
      svg('rect', {
        class: b.hatched ? 'bin hatched' : 'bin', x: bx, y: (m.t + ph - h).toFixed(1), width: bwid, height: (h - (b.hatched ? 0 : ph2)).toFixed(1),
        style: b.hatched ? `fill: url(#${uid}-hatch)` : null,
      }));
    if (ph2 > 0 && !b.hatched) {
      g.append(svg('rect', { class: 'bin hatched', x: bx, y: (m.t + ph - ph2).toFixed(1), width: bwid, height: ph2.toFixed(1), style: `fill: url(#${uid}-hatch)` }));
    }
    root.append(g);
    if (i % every === 0) {
      root.append(svg('text', { class: 'tick', x: (x + bw / 2).toFixed(1), y: H - m.b + 14, 'text-anchor': 'middle', text: b.label }));
    }
  });
  root.append(svg('line', { class: 'axis', x1: m.l, x2: W - m.r, y1: m.t + ph, y2: m.t + ph }),
    svg('line', { class: 'axis', x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph }));
  if (opts.xLabel) root.append(svg('text', { class: 'axis-label', x: W - m.r, y: H - 2, 'text-anchor': 'end', text: opts.xLabel }));
  if (opts.legend) legend(root, opts.legend, uid, m.l, 4);
  return root;
}

// lineChart draws series over x into a new <svg class="chart">.
//   series: [{label, points: [[x, y], ...], dash?}] (each series gets a
//   different dash pattern and marker, not only a colour: class
//   series-0, series-1, ...)
//   opts: {width, height, title, id, xFormat(x), yFormat(y), yMax, marks:
//   [{x, label}] (vertical lines, e.g. "safe at")}
export function lineChart(series, opts = {}) {
  const W = opts.width || 480, H = opts.height || 200;
  const m = { l: 48, r: 10, t: 22, b: 30 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  const x0 = xs.length ? Math.min(...xs) : 0, x1 = xs.length ? Math.max(...xs) : 1;
  const ticks = niceTicks(opts.yMax ?? Math.max(1e-9, ...ys));
  const top = ticks[ticks.length - 1];
  const fx = (x) => m.l + (x1 === x0 ? 0 : ((x - x0) / (x1 - x0)) * pw);
  const fy = (y) => m.t + ph - (y / top) * ph;
  const yf = opts.yFormat || shortNum, xf = opts.xFormat || shortNum;
  const uid = opts.id || `chart-${++chartSeq}`;
  const root = svg('svg', {
    id: opts.id, class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': opts.title || 'chart',
  }, svg('title', { text: opts.title || '' }));
  for (const v of ticks) {
    root.append(svg('line', { class: 'grid', x1: m.l, x2: W - m.r, y1: fy(v), y2: fy(v) }),
      svg('text', { class: 'tick', x: m.l - 4, y: fy(v) + 4, 'text-anchor': 'end', text: yf(v) }));
  }
  for (let i = 0; i <= 4; i++) {
    const x = x0 + ((x1 - x0) * i) / 4;
    root.append(svg('text', { class: 'tick', x: fx(x), y: H - m.b + 14, 'text-anchor': 'middle', text: xf(x) }));
  }
  root.append(svg('line', { class: 'axis', x1: m.l, x2: W - m.r, y1: m.t + ph, y2: m.t + ph }),
    svg('line', { class: 'axis', x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph }));
  for (const mk of opts.marks || []) {
    root.append(svg('line', { class: 'mark', x1: fx(mk.x), x2: fx(mk.x), y1: m.t, y2: m.t + ph }),
      svg('text', { class: 'mark-label', x: fx(mk.x) + 3, y: m.t + 10, text: mk.label }));
  }
  series.forEach((s, i) => {
    const d = s.points.map((p, j) => `${j ? 'L' : 'M'}${fx(p[0]).toFixed(1)},${fy(p[1]).toFixed(1)}`).join('');
    root.append(svg('path', { class: `line series-${i % 6}`, d, fill: 'none', 'stroke-dasharray': s.dash ?? DASHES[i % DASHES.length] },
      svg('title', { text: s.label })));
  });
  if (series.length) {
    let x = m.l;
    series.forEach((s, i) => {
      root.append(svg('line', { class: `line series-${i % 6}`, x1: x, x2: x + 18, y1: 10, y2: 10, 'stroke-dasharray': s.dash ?? DASHES[i % DASHES.length] }),
        svg('text', { class: 'legend', x: x + 22, y: 14, text: s.label }));
      x += 30 + s.label.length * 7;
    });
  }
  return root;
}

const DASHES = ['', '6 3', '2 3', '8 3 2 3', '1 2', '10 4'];
let chartSeq = 0;

function hatchDefs(uid) {
  return svg('defs', null,
    svg('pattern', { id: `${uid}-hatch`, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
      svg('rect', { class: 'hatch-bg', width: 6, height: 6 }),
      svg('line', { class: 'hatch-line', x1: 0, y1: 0, x2: 0, y2: 6 })));
}

function legend(root, items, uid, x, y) {
  for (const it of items) {
    root.append(svg('rect', { class: it.hatched ? 'bin hatched' : 'bin', x, y, width: 12, height: 12, style: it.hatched ? `fill: url(#${uid}-hatch)` : null }),
      svg('text', { class: 'legend', x: x + 16, y: y + 10, text: it.label }));
    x += 28 + it.label.length * 7;
  }
}

// niceTicks returns 0 and 3–5 round values up to at least max.
export function niceTicks(max) {
  if (!(max > 0)) return [0, 1];
  const raw = max / 4;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * p).find((s) => s >= raw);
  const out = [];
  for (let v = 0; v < max + step * 0.999; v += step) out.push(+v.toPrecision(12));
  return out;
}

// shortNum formats an axis value: 1200 → "1.2k", 0.25 → "0.25".
export function shortNum(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return +(v / 1e9).toFixed(1) + 'G';
  if (a >= 1e6) return +(v / 1e6).toFixed(1) + 'M';
  if (a >= 1e3) return +(v / 1e3).toFixed(1) + 'k';
  return String(+v.toFixed(3));
}
