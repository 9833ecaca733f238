// The overview (#/): every record's pools as a table, a page of 100
// records at a time (GET /v1/overview?offset&limit&q&state), the pools
// and nodes on a world map, and the pools' state counts. It re-fetches on
// every /v1/events event and every 5 s, updating the table in place so
// focus, scroll and the filter stay as they were.
//
// Keyboard: every control is reachable with Tab; "/" focuses the filter;
// j/k or ↓/↑ on a row move between pool rows, Enter opens the pool.
import { route } from './app.js';
import { get, onChange } from './api.js';
import { el, when, ago, utc, bar, count, stateClass, STATES, retickAges } from './fmt.js';
import { worldMap, setPoints } from './map.js';

export const LIMIT = 100;
const REFRESH_MS = 5000;

// The filter and page survive leaving the overview and coming back; the
// hash (#/?q=...&state=...&offset=...) carries them in a link.
const view = { q: '', state: '', offset: 0 };

// recordHref and poolHref are the deep links of a record and a pool.
export const recordHref = (name) => `#/record/${encodeURIComponent(name)}`;
export const poolHref = (name, pool) => `#/record/${encodeURIComponent(name)}/pool/${encodeURIComponent(pool)}`;

// COLUMNS are the table's headings: the record's cells, then the pool's.
const COLUMNS = [
  ['record', 'Record'], ['pool', 'Pool'], ['state', 'State'], ['reason', 'Reason'], ['since', 'Since (UTC)'],
  ['share-5m', 'Share 5 m'], ['share-1h', 'Share 1 h'], ['drain', 'Drain'], ['no-traffic', 'Why no traffic'],
];

// poolsTable returns an empty table (thead, no rows) with the given id.
export function poolsTable(id, caption) {
  return el('table', { id, class: 'pools' },
    caption ? el('caption', null, caption) : null,
    el('thead', null, el('tr', null, COLUMNS.map(([c, t]) => el('th', { scope: 'col', class: c }, t)))));
}

// recordRows returns the <tbody class="record"> of one record: one
// tr.pool-row per pool, the record's cells spanning them.
export function recordRows(rec, now = Date.now()) {
  const pools = rec.pools && rec.pools.length ? rec.pools : [null];
  const body = el('tbody', { class: 'record', 'data-record': rec.name });
  pools.forEach((p, i) => {
    const tr = el('tr', {
      class: p ? 'pool-row' : 'record-row', 'data-record': rec.name, 'data-pool': p ? p.name : null,
      tabindex: p ? -1 : null,
    });
    if (i === 0) {
      const span = pools.length;
      tr.append(
        el('th', { scope: 'rowgroup', class: 'record', rowspan: span },
          el('a', { href: recordHref(rec.name), class: 'record-link' }, breakable(rec.name)),
          el('span', { class: 'record-meta' },
            el('span', { class: 'type' }, rec.type), ' · TTL ', el('span', { class: 'ttl' }, rec.ttl), ' s',
            el('span', { class: 'answers', title: 'answers in the last 5 minutes and hour' }, ` · ${count(rec.answers_5m)} / ${count(rec.answers_1h)} answers`),
            rec.policy ? el('span', { class: 'policy' }, ` · policy ${rec.policy}`) : null)));
    }
    if (p) tr.append(...poolCells(rec, p, now));
    else tr.append(el('td', { class: 'pool empty', colspan: COLUMNS.length - 1 }, 'no pools'));
    body.append(tr);
  });
  return body;
}

// breakable is a name with a line-break opportunity (<wbr>) after each
// dot, so a long name wraps between labels.
function breakable(name) {
  const parts = String(name).split(/(?<=\.)/);
  return parts.flatMap((p, i) => (i < parts.length - 1 ? [p, el('wbr')] : [p]));
}

// poolCells are the cells of one pool (the DOM contract's td.state,
// td.reason, td.since, td.share-5m, td.share-1h, td.drain, td.no-traffic).
export function poolCells(rec, p, now = Date.now()) {
  const reason = [p.reason || '', p.capacity || '']; // capacity: "shed: load 130 % of target (...)"
  if (p.override && !/override/.test(p.reason || '')) reason.push('override');
  const expires = p.override_expires ? el('span', { class: 'expires' }, ` (until ${utc(p.override_expires)}, ${ago(p.override_expires, now)})`) : null;
  return [
    el('td', { class: 'pool' },
      el('a', { href: poolHref(rec.name, p.name), class: 'pool-link' }, p.name),
      p.targets ? el('span', { class: 'targets', title: 'addresses up of all' }, ` ${p.targets_up}/${p.targets} up`) : null),
    el('td', { class: `state ${stateClass(p.state)}` }, p.state || '?'),
    el('td', { class: 'reason' }, reason.filter(Boolean).join(' · '), expires),
    el('td', { class: 'since' }, when(p.since, now)),
    el('td', { class: 'share-5m num', title: `${count(p.answers_5m)} of ${count(rec.answers_5m)} answers in the last 5 minutes` }, bar(p.share_5m)),
    el('td', { class: 'share-1h num', title: `${count(p.answers_1h)} of ${count(rec.answers_1h)} answers in the last hour` }, bar(p.share_1h)),
    el('td', { class: 'drain' }, drainText(p, now)),
    el('td', { class: 'no-traffic' }, p.no_traffic || ''),
  ];
}

// drainText: "drain safe", "draining (last answer 12 s ago)" or "".
export function drainText(p, now = Date.now()) {
  if (p.drain_safe === true) return 'drain safe';
  if (p.drain_safe === false) {
    const last = ago(p.last_answered, now);
    return last ? `draining (last answer ${last})` : 'draining';
  }
  return '';
}

// patchBodies makes table's record bodies those of next: in place, cell by
// cell, when the same records and pools are shown (so a focused link or
// row keeps focus); otherwise replaced, with focus put back on the same
// record and pool where it still is.
export function patchBodies(table, next) {
  const old = [...table.tBodies];
  const sig = (bs) => bs.map((b) => [...b.rows].map((r) => `${r.dataset.record}\u0000${r.dataset.pool || ''}`).join('\u0001')).join('\u0002');
  if (old.length && sig(old) === sig(next)) {
    old.forEach((b, i) => patchNode(b, next[i]));
    return;
  }
  const a = document.activeElement;
  const row = a && table.contains(a) ? a.closest('tr') : null;
  const focus = row && { record: row.dataset.record, pool: row.dataset.pool, href: a.getAttribute('href'), isRow: a === row };
  old.forEach((b) => b.remove());
  table.append(...next);
  if (focus) {
    const sel = `tr[data-record="${CSS.escape(focus.record)}"]` + (focus.pool ? `[data-pool="${CSS.escape(focus.pool)}"]` : '');
    const r = table.querySelector(sel);
    const target = r && (focus.isRow ? r : (focus.href && r.querySelector(`a[href="${CSS.escape(focus.href)}"]`)) || r);
    if (target) target.focus({ preventScroll: true });
  }
}

// patchNode makes a look like b, changing only what differs, so a
// focused element (a link in an unchanged cell) stays in the document.
export function patchNode(a, b) {
  if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) { a.replaceWith(b); return; }
  if (a.nodeType !== Node.ELEMENT_NODE) {
    if (a.nodeValue !== b.nodeValue) a.nodeValue = b.nodeValue;
    return;
  }
  for (const at of [...a.attributes]) if (!b.hasAttribute(at.name)) a.removeAttribute(at.name);
  for (const at of [...b.attributes]) if (a.getAttribute(at.name) !== at.value) a.setAttribute(at.name, at.value);
  const ac = [...a.childNodes], bc = [...b.childNodes];
  if (ac.length !== bc.length) { a.replaceChildren(...bc); return; }
  for (let i = 0; i < ac.length; i++) patchNode(ac[i], bc[i]);
}

// parseHash reads the filter from #/?q=...&state=...&offset=...
function parseHash() {
  const h = location.hash;
  const i = h.indexOf('?');
  if (i < 0) return;
  const p = new URLSearchParams(h.slice(i + 1));
  view.q = p.get('q') || '';
  view.state = STATES.includes(p.get('state')) ? p.get('state') : '';
  view.offset = Math.max(0, parseInt(p.get('offset'), 10) || 0);
}

function writeHash() {
  const p = new URLSearchParams();
  if (view.q) p.set('q', view.q);
  if (view.state) p.set('state', view.state);
  if (view.offset) p.set('offset', view.offset);
  const s = p.toString();
  const hash = s ? `#/?${s}` : '#/';
  if (location.hash !== hash && !(hash === '#/' && location.hash === '')) history.replaceState(null, '', hash);
}

const POOL_STATES = ['up', 'down', 'drain', 'disabled'];

async function render(main) {
  parseHash();
  writeHash(); // a plain #/ shows (and links to) the filter kept from before
  const filter = el('input', {
    id: 'filter', type: 'search', value: view.q, placeholder: 'record name contains…', autocomplete: 'off',
    spellcheck: 'false', 'aria-describedby': 'filter-help',
  });
  const stateSel = el('select', { id: 'state-filter' },
    el('option', { value: '' }, 'any state'),
    POOL_STATES.map((s) => el('option', { value: s, selected: view.state === s }, `a pool ${s}`)));
  const prev = el('button', { id: 'page-prev', type: 'button' }, '‹ Previous');
  const next = el('button', { id: 'page-next', type: 'button' }, 'Next ›');
  const info = el('span', { id: 'page-info', 'aria-live': 'polite' }, '');
  const updated = el('span', { id: 'updated' }, '');
  const summary = el('div', { id: 'summary', class: 'summary', 'aria-live': 'polite' });
  const error = el('p', { id: 'overview-error', class: 'error', role: 'alert', hidden: true });
  const table = poolsTable('records', 'Records and their pools');
  const mapFig = worldMap([], mapLink);
  const root = el('section', { class: 'overview', 'aria-labelledby': 'overview-h' },
    el('div', { class: 'page-head' },
      el('h1', { id: 'overview-h' }, 'Overview'),
      el('p', { class: 'updated' }, 'Updated ', updated)),
    summary, error,
    mapFig,
    el('div', { class: 'controls', role: 'search' },
      el('label', null, 'Filter ', filter),
      el('span', { id: 'filter-help', class: 'hint' }, 'press / to filter'),
      el('label', null, 'Show records with ', stateSel),
      el('span', { class: 'pager' }, prev, ' ', info, ' ', next)),
    el('div', { class: 'table-wrap' }, table));
  main.append(root);

  let seq = 0, inflight = false, again = false, debounce = 0, last = null;
  const load = async () => {
    const my = ++seq;
    const p = new URLSearchParams({ offset: view.offset, limit: LIMIT });
    if (view.q) p.set('q', view.q);
    if (view.state) p.set('state', view.state);
    let ov;
    try {
      ov = await get('/v1/overview?' + p);
    } catch (e) {
      if (my === seq && root.isConnected) { error.textContent = `Could not load the overview: ${e.message || e}`; error.hidden = false; }
      return;
    }
    if (my !== seq || !root.isConnected) return;
    if (!ov.records?.length && ov.total > 0 && view.offset >= ov.total) {
      view.offset = Math.floor((ov.total - 1) / LIMIT) * LIMIT; // the filter shrank the list under this page
      writeHash();
      return load();
    }
    error.hidden = true;
    last = ov;
    show(ov, Date.now());
  };
  // refresh is the live and timed re-fetch: one at a time, and one more
  // after it when something changed meanwhile.
  const refresh = async () => {
    if (!root.isConnected) return stop();
    if (inflight) { again = true; return; }
    inflight = true;
    try { await load(); } finally {
      inflight = false;
      if (again) { again = false; refresh(); }
    }
  };
  const show = (ov, now) => {
    const recs = ov.records || [];
    patchBodies(table, recs.length ? recs.map((r) => recordRows(r, now))
      : [el('tbody', { class: 'empty' }, el('tr', null, el('td', { colspan: COLUMNS.length }, ov.total ? 'No records on this page.' : 'No records match.')))]);
    setPoints(mapFig.querySelector('#map'), ov.map || [], mapLink);
    const first = recs.length ? view.offset + 1 : 0;
    info.textContent = `${first}–${view.offset + recs.length} of ${ov.total ?? 0}`;
    prev.disabled = view.offset <= 0;
    next.disabled = view.offset + LIMIT >= (ov.total ?? 0);
    updated.textContent = utc(now);
    updated.title = ov.generated ? `generated by the node at ${utc(ov.generated)}` : '';
    summary.replaceChildren(...summaryParts(ov));
  };

  filter.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { view.q = filter.value.trim(); view.offset = 0; writeHash(); load(); }, 120);
  });
  filter.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && filter.value) { filter.value = ''; filter.dispatchEvent(new Event('input')); }
  });
  stateSel.addEventListener('change', () => { view.state = stateSel.value; view.offset = 0; writeHash(); load(); });
  prev.addEventListener('click', () => { view.offset = Math.max(0, view.offset - LIMIT); writeHash(); load(); });
  next.addEventListener('click', () => { view.offset += LIMIT; writeHash(); load(); });
  summary.addEventListener('click', (e) => {
    const b = e.target.closest('button[data-state]');
    if (!b) return;
    view.state = view.state === b.dataset.state ? '' : b.dataset.state;
    stateSel.value = view.state;
    view.offset = 0; writeHash(); load();
  });

  const off = onChange(() => refresh());
  const timer = setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
  const onVisible = () => { if (!document.hidden) refresh(); };
  document.addEventListener('visibilitychange', onVisible);
  // Relative ages ("3 s ago") tick between fetches.
  const ticker = setInterval(() => { if (last && root.isConnected && !document.hidden) retickAges(table, Date.now()); }, 1000);
  function stop() {
    off(); clearInterval(timer); clearInterval(ticker); clearTimeout(debounce);
    document.removeEventListener('visibilitychange', onVisible);
  }
  await load();
}

function summaryParts(ov) {
  const states = ov.states || {};
  const names = [...POOL_STATES, ...Object.keys(states).filter((s) => !POOL_STATES.includes(s))];
  const parts = [el('span', { class: 'label' }, 'Pools: ')];
  for (const s of names) {
    parts.push(el('button', {
      type: 'button', class: `count ${stateClass(s)}`, 'data-state': s, 'aria-pressed': String(view.state === s),
      title: `show records with a pool ${s}`,
    }, el('span', { class: 'word' }, s), ' ', el('span', { class: 'n' }, count(states[s] || 0))));
  }
  const where = ov.fleet ? `shares are the fleet's sum over ${ov.fleet_nodes || '?'} nodes`
    : `shares are ${ov.node?.name ? `node ${ov.node.name}` : 'this node'}'s answers`;
  const cov = [];
  if (ov.covered_5m) cov.push(`5 m window covers ${ov.covered_5m}`);
  if (ov.covered_1h) cov.push(`1 h window covers ${ov.covered_1h}`);
  parts.push(el('span', { class: 'where' }, ` ${where}${cov.length ? ` (${cov.join(', ')})` : ''}`));
  return parts;
}

// mapLink is where a map point leads: a pool point to its (first) pool,
// a node to the fleet page.
function mapLink(p) {
  if (p.kind === 'node') return '#/fleet';
  const first = p.pools && p.pools[0];
  if (!first) return null;
  const i = first.lastIndexOf('/');
  return i > 0 ? poolHref(first.slice(0, i), first.slice(i + 1)) : recordHref(first);
}

// Keys: "/" focuses the filter; j/k and ↓/↑ move between pool rows (of
// the overview or a record page), Enter on a row opens its pool.
document.addEventListener('keydown', (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  const typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  if (typing) return;
  if (e.key === '/') {
    const f = document.getElementById('filter');
    if (f) { e.preventDefault(); f.focus(); f.select(); }
    return;
  }
  const row = t && t.closest ? t.closest('tr.pool-row') : null;
  const down = e.key === 'j' || (row && e.key === 'ArrowDown');
  const up = e.key === 'k' || (row && e.key === 'ArrowUp');
  if (down || up) {
    const rows = [...document.querySelectorAll('#main tr.pool-row')];
    if (!rows.length) return;
    let i = row ? rows.indexOf(row) : -1;
    i = row ? i + (down ? 1 : -1) : (down ? 0 : rows.length - 1);
    if (i < 0 || i >= rows.length) return;
    e.preventDefault();
    rows[i].focus();
    rows[i].scrollIntoView({ block: 'nearest' });
    return;
  }
  if (e.key === 'Enter' && row && t === row) {
    e.preventDefault();
    location.hash = poolHref(row.dataset.record, row.dataset.pool);
  }
});

route('/(?:\\?.*)?', render);
