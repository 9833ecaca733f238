// Fleet (#/fleet): every node of the fleet with the bundle it serves, how
// old its view of the store is, how it decides health and what is wrong;
// every health-check target with each observer's verdict and the fleet's.
// GET /v1/fleet answers 404 off a fleet. The page refreshes on every
// /v1/events event and every 5 s while shown.
import { route } from './app.js';
import { onChange } from './api.js';
import { el, badge, utc, ago, toDate, stateClass } from './fmt.js';

// fetchFleet asks GET /v1/fleet and returns {status, body} (body null when
// it is not JSON): the pages tell "not in a fleet" (404) from errors.
export async function fetchFleet() {
  const r = await fetch('/v1/fleet', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  if (r.status === 401 || r.status === 403) { location.href = '/ui/login'; throw new Error('not logged in'); }
  let body = null;
  try { body = await r.json(); } catch { /* not JSON: a plain 404 */ }
  return { status: r.status, body };
}

route('/fleet', render);

const REFRESH_MS = 5000;

async function render(main) {
  const status = el('p', { class: 'fleet-status', role: 'status' });
  const box = el('div', { id: 'fleet' });
  main.append(el('h1', null, 'Fleet'), status, box);
  let busy = false, again = false;
  const refresh = async () => {
    if (busy) { again = true; return; }
    busy = true;
    try {
      do {
        again = false;
        await load(box, status);
      } while (again && main.contains(box));
    } finally { busy = false; }
  };
  // Stop refreshing once the router shows another page.
  const off = onChange(() => { if (gone()) stop(); else refresh(); });
  const timer = setInterval(() => { if (gone()) stop(); else refresh(); }, REFRESH_MS);
  const gone = () => !box.isConnected;
  const stop = () => { off(); clearInterval(timer); };
  await refresh();
}

async function load(box, status) {
  let res;
  try {
    res = await fetchFleet();
  } catch (e) {
    status.replaceChildren(el('span', { class: 'error' }, `Could not fetch the fleet: ${e.message || e}`));
    return;
  }
  const fetched = new Date();
  if (res.status === 404) {
    box.replaceChildren(el('p', { class: 'notice', id: 'not-fleet' }, 'This node is not in a fleet.'));
    status.replaceChildren(`Checked ${utc(fetched)}.`);
    return;
  }
  if (res.status !== 200 || !res.body) {
    status.replaceChildren(el('span', { class: 'error' }, `GET /v1/fleet: ${(res.body && res.body.error) || 'HTTP ' + res.status}`));
    return;
  }
  const f = res.body;
  status.replaceChildren(`As node ${f.node} sees the fleet${f.prefix ? ` (store prefix ${f.prefix})` : ''}; fetched `,
    el('time', { datetime: fetched.toISOString() }, utc(fetched)), '.');
  const parts = [];
  if ((f.errors && f.errors.length) || (f.warnings && f.warnings.length)) {
    parts.push(el('ul', { class: 'fleet-errors', role: 'alert' },
      (f.errors || []).map((e) => el('li', { class: 'error' }, el('strong', null, 'error: '), e)),
      (f.warnings || []).map((w) => el('li', { class: 'warn' }, el('strong', null, 'warning: '), w))));
  }
  parts.push(el('h2', null, 'Nodes'), nodes(f, fetched), el('h2', null, 'Health-check targets'), targets(f));
  box.replaceChildren(...parts);
}

const th = (text, attrs) => el('th', { scope: 'col', ...attrs }, text);

function nodes(f, now) {
  const rows = (f.nodes || []).map((n) => {
    const at = toDate(n.view_at);
    const age = at ? ago(at, now.getTime()) : (n.view_age || 'never');
    const problems = [];
    if (n.error) problems.push(el('span', { class: 'node-error' }, el('strong', null, 'error: '), n.error));
    if (n.warning) problems.push(el('span', { class: 'node-warning' }, el('strong', null, 'warning: '), n.warning));
    const mode = n.health_mode || '';
    const self = n.self || n.name === f.node;
    const heard = toDate(n.heard_at);
    const viewTitle = [at ? `complete view at ${utc(at)}` : 'no complete view yet', n.view_age && `(${n.view_age} old when asked)`, heard && `status last heard ${utc(heard)}`].filter(Boolean).join(' ');
    return el('tr', { 'data-node': n.name, class: self ? 'self' : null },
      el('th', { scope: 'row', class: 'name' }, n.name, self ? el('span', { class: 'self-mark' }, ' (this node)') : null),
      el('td', { class: 'region' }, n.region || ''),
      el('td', { class: 'digest', title: n.digest || 'no bundle' }, n.digest ? el('code', null, n.digest.replace(/^sha256:/, '').slice(0, 12)) : '—'),
      el('td', { class: 'serial num' }, String(n.serial ?? '')),
      el('td', { class: 'canary' }, n.canary ? 'canary' : ''),
      el('td', { class: 'view-age', title: viewTitle }, at ? el('time', { datetime: at.toISOString() }, age) : age),
      el('td', { class: 'health-mode ' + (mode === 'quorum' ? 'mode-quorum' : 'mode-other') }, mode),
      el('td', { class: 'error' }, problems.length ? problems.flatMap((p, i) => (i ? [el('br'), p] : [p])) : ''),
      el('td', { class: 'pending num' }, n.pending ? String(n.pending) : ''));
  });
  return el('table', { id: 'nodes', class: 'data' },
    el('caption', null, `${(f.nodes || []).length} nodes; view age is how old each node's last complete view of the store is (UTC in the tooltip)`),
    el('thead', null, el('tr', null, th('node'), th('region'), th('bundle digest'), th('serial'), th('canary'), th('view age'), th('health mode'), th('error / warning'), th('pending'))),
    el('tbody', null, rows));
}

function targets(f) {
  // A column per node, in the nodes table's order, then observers the
  // nodes list lacks (a node that left but whose observations remain).
  const cols = (f.nodes || []).map((n) => n.name);
  for (const t of f.targets || []) for (const o of t.observers || []) if (!cols.includes(o.node)) cols.push(o.node);
  const rows = (f.targets || []).map((t) => {
    const by = new Map((t.observers || []).map((o) => [o.node, o]));
    return el('tr', { 'data-target': t.target },
      el('th', { scope: 'row', class: 'target' }, el('code', null, t.target)),
      cols.map((c) => {
        const o = by.get(c);
        if (!o) return el('td', { class: 'observer none', 'data-observer': c, title: `${c} has no observation of ${t.target}` }, '');
        const title = [`${c}${o.own ? ' (this node\'s own check)' : ''}: ${o.state}`, o.reason, utc(o.at) && `observed ${utc(o.at)} (${ago(o.at)})`, o.stale && 'stale: older than the fleet counts'].filter(Boolean).join('\n');
        return el('td', { class: `observer ${stateClass(o.state)}${o.stale ? ' stale' : ''}`, 'data-observer': c, 'data-stale': o.stale ? 'true' : null, title }, o.state);
      }),
      el('td', { class: 'verdict', title: [t.reason, toDate(t.since) && `since ${utc(t.since)}`].filter(Boolean).join('\n') || null }, badge(t.verdict)));
  });
  if (!rows.length) rows.push(el('tr', { class: 'empty' }, el('td', { colspan: cols.length + 2, class: 'hint' }, 'No health-check targets are observed.')));
  return el('table', { id: 'targets', class: 'data' },
    el('caption', null, 'Each observer\'s verdict on each target ("stale": an observation too old to count), and the fleet\'s verdict'),
    el('thead', null, el('tr', null, th('target'), cols.map((c) => th(c, { class: 'observer-col' })), th('fleet verdict'))),
    el('tbody', null, rows));
}
