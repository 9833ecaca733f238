// The world map: Natural Earth's land (land.js, equirectangular, viewBox
// 0 0 360 180) with the overview's points. A pool is a filled circle, a
// node a ring with a square in it, so they differ in shape as well as
// colour; a state other than up adds a mark (down ×, drain –, disabled
// /, error !, stale ·) and every point has a <title> and an aria-label
// with its label and state word. Points are keyboard-focusable; Enter
// or a click follows the point's link (a pool's record page).
import { LAND } from './land.js';
import { el, svg, stateClass } from './fmt.js';

const R = 2.4; // point radius in degrees

// The map shows latitudes 84° N to 60° S (land.js covers 90° to 90°:
// the rest is Antarctica's interior and the Arctic sea); a point beyond
// is drawn at the edge.
const TOP = 6, HEIGHT = 144;
const px = (p) => Math.max(0, Math.min(360, p.lon + 180));
const py = (p) => Math.max(TOP + R, Math.min(TOP + HEIGHT - R, 90 - p.lat));

// worldMap returns <figure class="map"> holding svg#map and its legend.
// points are api.MapPoint; link(point) returns the href a point opens
// (or null).
export function worldMap(points, link) {
  const map = svg('svg', {
    id: 'map', viewBox: `0 ${TOP} 360 ${HEIGHT}`, role: 'group', 'aria-label': 'World map of pools and nodes',
    preserveAspectRatio: 'xMidYMid meet',
  },
  svg('rect', { class: 'sea', x: 0, y: TOP, width: 360, height: HEIGHT }),
  svg('path', { class: 'land', d: LAND, 'fill-rule': 'evenodd', 'aria-hidden': 'true' }),
  svg('g', { class: 'points' }));
  map.addEventListener('click', (e) => follow(e.target));
  map.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') { if (follow(e.target)) e.preventDefault(); }
  });
  setPoints(map, points, link);
  return el('figure', { class: 'map' }, map, legend());
}

function follow(target) {
  const p = target.closest && target.closest('.point');
  const href = p && p.dataset.href;
  if (!href) return false;
  location.hash = href;
  return true;
}

// key identifies a point across refreshes (to keep focus on it).
const key = (p) => `${p.kind}|${p.label}|${p.lat}|${p.lon}`;

// setPoints replaces the map's points, keeping keyboard focus on the
// point that had it.
export function setPoints(map, points, link) {
  const g = map.querySelector('g.points');
  const focused = document.activeElement && g.contains(document.activeElement) ? document.activeElement.dataset.key : null;
  const nodes = [];
  // Nodes last: they are drawn above the pools at the same place.
  const sorted = [...(points || [])].sort((a, b) => (a.kind === 'node') - (b.kind === 'node'));
  for (const p of sorted) {
    const state = p.state || 'up';
    const words = p.kind === 'node' ? `node ${p.label}: ${state}` : `${p.label}: ${state}` +
      (p.pools && p.pools.length ? ` (${p.pools.join(', ')})` : '');
    const x = px(p), y = py(p);
    const href = link ? link(p) : null;
    const c = svg('circle', {
      class: `point ${stateClass(state)}`, 'data-kind': p.kind, 'data-state': state, 'data-key': key(p),
      'data-href': href, cx: x.toFixed(1), cy: y.toFixed(1), r: p.kind === 'node' ? R * 1.15 : R,
      tabindex: 0, role: href ? 'link' : 'img', 'aria-label': words,
    }, svg('title', { text: words }));
    nodes.push(c);
    if (p.kind === 'node') {
      nodes.push(svg('rect', { class: 'node-mark', x: (x - R * 0.45).toFixed(2), y: (y - R * 0.45).toFixed(2), width: (R * 0.9).toFixed(2), height: (R * 0.9).toFixed(2), 'aria-hidden': 'true' }));
    }
    const m = mark(state, x, y);
    if (m) nodes.push(m);
  }
  g.replaceChildren(...nodes);
  if (focused) {
    const again = g.querySelector(`[data-key="${CSS.escape(focused)}"]`);
    if (again) again.focus({ preventScroll: true });
  }
}

// mark is the state's shape drawn over a point (none for up).
function mark(state, x, y) {
  const r = R * 0.6;
  let d;
  switch (state) {
    case 'down': case 'error': d = `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`; break;
    case 'drain': d = `M${x - r},${y}L${x + r},${y}`; break;
    case 'disabled': d = `M${x - r},${y + r}L${x + r},${y - r}`; break;
    case 'stale': d = `M${x - r},${y}L${x - r / 2},${y}M${x + r / 2},${y}L${x + r},${y}`; break;
    case 'up': return null;
    default: d = `M${x},${y - r}L${x},${y + r / 3}M${x},${y + r * 0.7}L${x},${y + r}`;
  }
  return svg('path', { class: 'state-mark', d: d.replace(/(\d+\.\d{3,})/g, (n) => (+n).toFixed(2)), 'aria-hidden': 'true' });
}

// legend explains the symbols in words (its circles are class "sym",
// not "point": they are not points of the map).
function legend() {
  const item = (label, draw) => el('li', null,
    svg('svg', { class: 'legend-symbol', viewBox: '-4 -4 8 8', width: 16, height: 16, 'aria-hidden': 'true' }, ...draw()), ' ', label);
  const pool = (state) => () => {
    const parts = [svg('circle', { class: `sym ${stateClass(state)}`, 'data-kind': 'pool', r: R })];
    const m = mark(state, 0, 0);
    if (m) parts.push(m);
    return parts;
  };
  return el('figcaption', null, el('ul', { class: 'map-legend' },
    item('pool up', pool('up')),
    item('pool down', pool('down')),
    item('pool drain', pool('drain')),
    item('pool disabled', pool('disabled')),
    item('node', () => [svg('circle', { class: 'sym state-up', 'data-kind': 'node', r: R * 1.15 }),
      svg('rect', { class: 'node-mark', x: -R * 0.45, y: -R * 0.45, width: R * 0.9, height: R * 0.9 })]),
  ));
}
