// The record page (#/record/NAME, and #/record/NAME/pool/POOL, which
// selects that pool's row): GET /v1/records/NAME shown as the record's
// pools (the overview's cells), its configuration as written, its rules
// with each one's share of decisions, a histogram of the ECS scopes it
// returned (the part health widened hatched, with a legend), where the
// scopes are widened, and latency map excerpts. It re-fetches on every
// /v1/events event and every 5 s.
import { route } from './app.js';
import { get, onChange } from './api.js';
import { el, utc, count, pct, bar, histogram, retickAges } from './fmt.js';
import { poolsTable, recordRows, patchBodies, recordHref } from './overview.js';

const REFRESH_MS = 5000;

async function render(main, params) {
  const name = params.name;
  const root = el('section', { class: 'record-page', 'aria-labelledby': 'record-h' },
    el('p', { class: 'crumbs' }, el('a', { href: '#/' }, 'Overview'), ' › ', el('a', { href: recordHref(name) }, name)),
    el('h1', { id: 'record-h' }, name));
  main.append(root);
  const detail = await get(`/v1/records/${encodeURIComponent(name)}`);
  if (!root.isConnected) return;

  const head = el('p', { class: 'record-head' });
  const updated = el('span', { id: 'updated' });
  const pools = poolsTable('pools', 'Pools');
  const config = el('pre', { id: 'record-config', tabindex: 0 });
  const configWhere = el('p', { class: 'config-where' });
  const rules = el('table', { id: 'rules' },
    el('caption', null, 'Rules in order, with each one\u2019s share of decisions'),
    el('thead', null, el('tr', null,
      el('th', { scope: 'col', class: 'num' }, '#'), el('th', { scope: 'col' }, 'Match'), el('th', { scope: 'col' }, 'Action'),
      el('th', { scope: 'col', class: 'rule-share' }, 'Share 5 m'), el('th', { scope: 'col' }, 'Share 1 h'),
      el('th', { scope: 'col', class: 'num' }, 'Decisions 5 m'), el('th', { scope: 'col', class: 'num' }, 'Decisions 1 h'))),
    el('tbody'));
  const scopeBox = el('div', { class: 'scope-box' });
  const widened = el('ul', { id: 'widened' });
  const latency = el('table', { id: 'latency' },
    el('caption', null, 'Latency map excerpts: per client network, the sites best first'),
    el('thead', null, el('tr', null, el('th', { scope: 'col' }, 'Client network'), el('th', { scope: 'col' }, 'Sites, best first'), el('th', { scope: 'col' }, 'Age'))),
    el('tbody'));
  root.append(head, el('p', { class: 'updated' }, 'Updated ', updated),
    el('div', { class: 'table-wrap' }, pools),
    el('h2', null, 'Configuration'), configWhere, config,
    el('h2', null, 'Rules'), el('div', { class: 'table-wrap' }, rules),
    el('h2', null, 'ECS scopes returned (last hour)'), scopeBox,
    el('h2', null, 'Where the scopes are widened'), widened,
    el('h2', null, 'Latency'), el('div', { class: 'table-wrap' }, latency));

  let first = true;
  const show = (d) => {
    const now = Date.now();
    head.replaceChildren(el('span', null, `${d.type || ''} · TTL ${d.ttl ?? ''} s`,
      d.policy ? ` · policy ${d.policy}` : '',
      ` · ${count(d.answers_5m)} answers in 5 m, ${count(d.answers_1h)} in 1 h`));
    updated.textContent = utc(now);
    patchBodies(pools, [recordRows(d, now)]);
    for (const tr of pools.querySelectorAll('tr.pool-row')) tr.classList.toggle('selected', tr.dataset.pool === params.pool);
    const where = d.config_file ? `${d.config_file}${d.config_line ? ':' + d.config_line : ''}` : '';
    configWhere.textContent = where ? `As ${where} says it:` : 'As the configuration says it:';
    config.dataset.file = d.config_file || '';
    config.dataset.line = d.config_line || '';
    if (config.textContent !== (d.config || '')) config.textContent = d.config || '';
    rules.tBodies[0].replaceChildren(...ruleRows(d.rules || []));
    const chart = scopeChart(d.scopes || []);
    scopeBox.replaceChildren(...chart);
    widened.replaceChildren(...(d.widened?.length ? d.widened.map((w) => el('li', null, w))
      : [el('li', { class: 'none' }, 'Nowhere: every scope is as the rules make it.')]));
    latency.tBodies[0].replaceChildren(...(d.latency?.length ? d.latency.map((l) => el('tr', null,
      el('th', { scope: 'row' }, l.network),
      el('td', null, el('ol', { class: 'sites' }, (l.sites || []).map((s) => el('li', null, s)))),
      el('td', null, l.age || '')))
      : [el('tr', { class: 'none' }, el('td', { colspan: 3 }, 'No latency rules, or no measurements yet.'))]));
    if (first && params.pool) {
      const sel = pools.querySelector('tr.pool-row.selected');
      if (sel) { sel.scrollIntoView({ block: 'center' }); sel.focus({ preventScroll: true }); }
    }
    first = false;
  };
  show(detail);

  let inflight = false, again = false;
  const refresh = async () => {
    if (!root.isConnected) return stop();
    if (inflight) { again = true; return; }
    inflight = true;
    try {
      const d = await get(`/v1/records/${encodeURIComponent(name)}`);
      if (root.isConnected) show(d);
    } catch (e) {
      // Keep what is shown; the next refresh tries again.
    } finally {
      inflight = false;
      if (again) { again = false; refresh(); }
    }
  };
  const off = onChange(() => refresh());
  const timer = setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
  // Relative ages ("3 s ago") tick between fetches.
  const ticker = setInterval(() => { if (root.isConnected) retickAges(pools); else stop(); }, 1000);
  function stop() { off(); clearInterval(timer); clearInterval(ticker); }
}

// ruleRows are the rules, a tree's nodes indented by depth.
function ruleRows(rules) {
  if (!rules.length) return [el('tr', { class: 'none' }, el('td', { colspan: 7 }, 'No rules.'))];
  return rules.map((r) => el('tr', { class: 'rule-row', 'data-rule': r.index, 'data-depth': r.depth || 0 },
    el('td', { class: 'num' }, r.index),
    el('td', { class: 'match', style: `padding-left: ${0.5 + 1.5 * (r.depth || 0)}em` },
      r.depth ? el('span', { class: 'tree', 'aria-hidden': 'true' }, '└ ') : null, r.match),
    el('td', { class: 'action' }, el('code', null, r.action)),
    el('td', { class: 'rule-share num', title: `${count(r.decisions_5m)} decisions in the last 5 minutes` }, bar(r.share_5m)),
    el('td', { class: 'rule-share-1h num', title: `${count(r.decisions_1h)} decisions in the last hour` }, pct(r.share_1h)),
    el('td', { class: 'num' }, count(r.decisions_5m)),
    el('td', { class: 'num' }, count(r.decisions_1h))));
}

// scopeChart draws svg#scope-chart: per family, answers by scope length,
// the widened ones hatched (per length when the node says which, else a
// separate "widened" bar of the family) and a legend in words; then a
// line of totals in text.
function scopeChart(scopes) {
  const bins = [];
  const notes = [];
  scopes.forEach((h, fi) => {
    if (fi > 0) bins.push({ label: '', value: null });
    const lengths = h.lengths || [], counts = h.counts || [], wc = h.widened_counts;
    let total = 0;
    lengths.forEach((len, i) => {
      const v = counts[i] || 0;
      total += v;
      bins.push({ label: `/${len}`, value: v, part: wc ? wc[i] || 0 : 0, group: familyName(h.family) });
    });
    if (!wc && h.widened) {
      bins.push({ label: 'widened', value: h.widened, hatched: true, group: familyName(h.family), title: `${familyName(h.family)}: ${count(h.widened)} answers with a scope widened by health` });
    }
    notes.push(`${familyName(h.family)}: ${count(total)} answers, ${count(h.widened || 0)} widened (${pct(total ? (h.widened || 0) / total : 0)})`);
  });
  if (!bins.length) bins.push({ label: 'none', value: 0 });
  const chart = histogram(bins, {
    id: 'scope-chart', width: Math.max(440, Math.min(900, 80 + bins.length * 40)), height: 230,
    title: 'ECS scope prefix lengths of the answers in the last hour, per address family; hatched: widened by health',
    xLabel: 'scope prefix length', legend: [{ label: 'answers by scope length' }, { label: 'widened by health', hatched: true }],
  });
  return [chart, el('p', { class: 'chart-note' }, notes.length ? notes.join(' · ') : 'No ECS answers in the last hour.')];
}

const familyName = (f) => (f === 'ipv4' ? 'IPv4' : f === 'ipv6' ? 'IPv6' : f || '');

route('/record/:name', render);
route('/record/:name/pool/:pool', render);
