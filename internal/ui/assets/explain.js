// Explain (#/explain): why does a client get its answer? The form asks
// GET /v1/explain (in a fleet, of the node chosen) and draws the report
// of internal/explain: the input steering used, each steered record's
// geo facts, rules, pools and decision, and the answer. pre#explain-answer
// holds the answer's RRs one per line exactly as `steer explain` prints
// them after "answer:". The form's values are the hash's query string
// (#/explain?name=shop.example.com&subnet=49.36.0.0/24), so a result is
// a link.
import { route } from './app.js';
import { get } from './api.js';
import { el, badge } from './fmt.js';
import { fetchFleet } from './fleet.js';

const TYPES = ['A', 'AAAA', 'CNAME', 'TXT', 'MX', 'NS', 'SOA', 'SRV', 'CAA', 'PTR', 'HTTPS', 'SVCB', 'DS', 'DNSKEY', 'ANY'];

// The fields of the form, as they appear in the hash's query string.
const FIELDS = ['name', 'type', 'subnet', 'from', 'node'];

// hashQuery reads the query string of the hash (#/explain?name=...).
export function hashQuery() {
  const h = location.hash;
  const i = h.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : h.slice(i + 1));
}

// The router matches the hash with its query string; accept both.
route('/explain(?:\\?.*)?', render);

async function render(main) {
  const q = hashQuery();
  const input = (id, label, attrs) => el('label', { for: id }, label, el('input', { id, name: id.replace('explain-', ''), ...attrs }));
  const type = el('select', { id: 'explain-type', name: 'type' },
    TYPES.map((t) => el('option', { value: t, selected: t === (q.get('type') || 'A').toUpperCase() }, t)));
  if (q.get('type') && !TYPES.includes(q.get('type').toUpperCase())) type.append(el('option', { value: q.get('type'), selected: true }, q.get('type')));
  const node = el('select', { id: 'explain-node', name: 'node' });
  const nodeLabel = el('label', { for: 'explain-node', class: 'fleet-only', hidden: true }, 'Node', node);
  const run = el('button', { id: 'explain-run', type: 'submit' }, 'Explain');
  const form = el('form', { id: 'explain-form', class: 'explain-form', 'aria-describedby': 'explain-help' },
    input('explain-name', 'Name', { type: 'text', required: true, value: q.get('name') || '', placeholder: 'shop.example.com', autocomplete: 'off', spellcheck: 'false', size: 32 }),
    el('label', { for: 'explain-type' }, 'Type', type),
    input('explain-subnet', 'Client subnet (ECS)', { type: 'text', value: q.get('subnet') || q.get('ecs') || '', placeholder: '49.36.0.0/24 (none)', autocomplete: 'off', spellcheck: 'false', size: 22 }),
    input('explain-from', 'Resolver address', { type: 'text', value: q.get('from') || '', placeholder: '127.0.0.1', autocomplete: 'off', spellcheck: 'false', size: 18 }),
    nodeLabel,
    run);
  const help = el('p', { id: 'explain-help', class: 'hint' },
    'Runs the query through the node\'s own handler with live health, overrides and latency, as `steer explain` does. ' +
    'Without a client subnet the resolver\'s address steers.');
  const out = el('div', { id: 'explain-output', 'aria-live': 'polite' });
  main.append(el('h1', null, 'Explain'), form, help, out);

  // In a fleet, any node can explain: list them (this node first).
  fetchFleet().then(({ status, body }) => {
    if (status !== 200 || !body || !body.nodes || !body.nodes.length) return;
    const names = body.nodes.map((n) => n.name);
    const self = body.node;
    names.sort((a, b) => (a === self ? -1 : b === self ? 1 : a.localeCompare(b)));
    const want = q.get('node') || self;
    node.replaceChildren(...names.map((n) => el('option', { value: n, selected: n === want }, n === self ? `${n} (this node)` : n)));
    if (want && !names.includes(want)) node.append(el('option', { value: want, selected: true }, `${want} (not in the fleet view)`));
    node.dataset.self = self || '';
    nodeLabel.hidden = false;
  }).catch(() => {});

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    const v = {
      name: form.elements.name.value.trim(), type: type.value,
      subnet: form.elements.subnet.value.trim(), from: form.elements.from.value.trim(),
      // This node answers itself: only another node's name is passed on.
      node: nodeLabel.hidden || node.value === node.dataset.self ? '' : node.value,
    };
    for (const f of FIELDS) if (v[f] && !(f === 'type' && v[f] === 'A')) p.set(f, v[f]);
    const hash = '#/explain?' + p.toString();
    // The link to this result, without re-rendering the page.
    if (location.hash !== hash) history.pushState(null, '', hash);
    explain(v, out, run);
  });
  if (q.get('name')) {
    explain({ name: q.get('name'), type: type.value, subnet: q.get('subnet') || q.get('ecs') || '', from: q.get('from') || '', node: q.get('node') || '' }, out, run);
  } else {
    form.elements.name.focus();
  }
}

async function explain(v, out, run) {
  const p = new URLSearchParams({ name: v.name, type: v.type });
  if (v.subnet) p.set('ecs', v.subnet);
  if (v.from) p.set('from', v.from);
  if (v.node) p.set('node', v.node);
  run.disabled = true;
  out.setAttribute('aria-busy', 'true');
  out.replaceChildren(el('p', { class: 'progress' }, `Explaining ${v.name} ${v.type}…`));
  try {
    const rep = await get('/v1/explain?' + p.toString());
    out.replaceChildren(...report(rep, v));
  } catch (e) {
    out.replaceChildren(el('p', { class: 'error', role: 'alert' }, String(e.message || e)));
  } finally {
    run.disabled = false;
    out.removeAttribute('aria-busy');
  }
}

const dash = (s) => (s === undefined || s === null || s === '' ? '-' : String(s));

// kv renders a definition list of [term, value] pairs, skipping empty ones.
function kv(pairs, cls) {
  const dl = el('dl', { class: cls || 'kv' });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length)) continue;
    dl.append(el('dt', null, k), el('dd', null, v));
  }
  return dl;
}

// report renders an explain.Report.
function report(r, v) {
  const parts = [];
  const ecs = r.input && r.input.ecs ? r.input.ecs + (r.input.truncated ? ' (truncated by ecs.max_source)' : '') : 'none';
  parts.push(el('h2', null, r.query + (v.node ? ` at node ${v.node}` : '')));
  if (r.source) parts.push(el('p', { class: 'source' }, r.source));
  // The answer first: it is what the form asked.
  const answer = (r.answer || []).join('\n');
  parts.push(el('h3', null, 'Answer'),
    kv([
      ['rcode', el('span', { class: r.rcode === 'NOERROR' ? 'rcode' : 'rcode rcode-bad' }, r.rcode)],
      ['ttl', r.ttl === undefined || r.ttl === null ? '' : `${r.ttl} s`],
      ['ECS scope', r.ecs_scope === undefined || r.ecs_scope === null ? '' : `/${r.ecs_scope}`],
    ]),
    el('pre', { id: 'explain-answer', class: 'rr', 'aria-label': 'answer records' }, answer));
  if (!answer) parts.push(el('p', { class: 'hint' }, 'No answer records.'));
  if (r.authority && r.authority.length) {
    parts.push(el('h4', null, 'Authority'), el('pre', { id: 'explain-authority', class: 'rr' }, r.authority.join('\n')));
  }
  parts.push(el('h3', null, 'Input'), kv([
    ['client subnet (ECS)', ecs],
    ['resolver', r.input && r.input.resolver],
    ['input', r.input && r.input.used],
    ['steered by', r.input && r.input.steered_by],
  ]));
  const steps = r.steering || [];
  if (!steps.length) parts.push(el('p', { class: 'hint' }, 'No steered record took part in this answer.'));
  const ol = el('ol', { id: 'explain-steps', class: 'steps' });
  for (const s of steps) ol.append(step(s));
  if (steps.length) parts.push(el('h3', null, 'Steering'), ol);
  if (r.signatures && r.signatures.length) {
    parts.push(el('h3', null, 'Signatures'), el('ul', { class: 'signatures' }, r.signatures.map((s) =>
      el('li', { class: s.verified ? 'sig-ok' : 'sig-bad' },
        `${s.section} ${s.name} ${s.covers}, ${s.algorithm} key ${s.key_tag} of ${s.signer}: `,
        el('strong', null, s.verified ? 'verified' : 'NOT verified'), ` (${s.check}), `,
        s.expires_in === 'expired' ? el('strong', null, 'EXPIRED') : `expires in ${s.expires_in}`,
        ` (${String(s.expiration).replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC')})`))));
  }
  const g = r.guard;
  const extra = [];
  if (g) {
    extra.push(['rate limit', g.rate_limit + (g.rate_limit_class ? ` (as ${g.rate_limit_class}, keyed on ${g.rate_limit_key})` : '')]);
    extra.push(['cookie', g.cookie]);
  }
  if (extra.length) parts.push(el('h3', null, 'Over UDP'), kv(extra));
  if (r.notes && r.notes.length) {
    parts.push(el('h3', null, 'Notes'), el('ul', { class: 'notes' }, r.notes.map((n) => el('li', null, n))));
  }
  parts.push(el('details', { class: 'raw' }, el('summary', null, 'Report as JSON'), el('pre', null, JSON.stringify(r, null, 2))));
  return parts;
}

// step renders one steered record's decision as a list item.
function step(s) {
  const li = el('li', { class: 'step' });
  li.append(el('h4', null, `Steered record ${s.record}, client ${s.client}`));
  const g = s.geo || {};
  const facts = (g.facts || []).map((f) => `${f.key}=${dash(f.value)}`).join(' ');
  li.append(kv([
    ['geo', `${facts}${facts ? ' ' : ''}location=${dash(g.location)}`],
    ['networks', (g.networks || []).join(', ')],
    ['as a client at the node', s.node_geo ? `country=${dash(s.node_geo.country)} continent=${dash(s.node_geo.continent)} location=${dash(s.node_geo.location)}` : ''],
  ]));
  // Rules in order, each with whether it matched and why.
  const rules = el('ol', { class: 'rules' });
  for (const rt of s.rules || []) {
    rules.append(el('li', { class: rt.matched ? 'rule matched' : 'rule', value: rt.rule },
      el('span', { class: rt.matched ? 'match-yes' : 'match-no' }, rt.matched ? 'matches' : 'no match'), ' ',
      `rule ${rt.rule} (line ${rt.line}, ${rt.default ? 'default' : 'match'} on ${rt.source}) → ${rt.action}`,
      rt.why && rt.why.length ? el('ul', { class: 'why' }, rt.why.map((w) => el('li', null, w))) : null));
  }
  li.append(el('h5', null, 'Rules'), rules);
  // Pools as the decision saw them; the state word is the badge's text.
  const pools = el('table', { class: 'explain-pools' },
    el('thead', null, el('tr', null, el('th', { scope: 'col' }, 'pool'), el('th', { scope: 'col' }, 'addresses'), el('th', { scope: 'col' }, 'state'), el('th', { scope: 'col' }, 'chosen'))),
    el('tbody', null, (s.pools || []).map((p) => {
      const word = String(p.state || '').split(' ')[0];
      const why = String(p.state || '').slice(word.length).trim().replace(/^\((.*)\)$/, '$1');
      const chosen = (s.chosen || []).includes(p.name);
      return el('tr', { 'data-pool': p.name, class: chosen ? 'chosen' : null },
        el('th', { scope: 'row' }, p.name), el('td', null, (p.addresses || []).join(' ')),
        el('td', null, badge(word), why ? ` ${why}` : ''), el('td', null, chosen ? 'chosen' : ''));
    })));
  li.append(el('h5', null, 'Pools'), pools);
  if (s.geoproximity && s.geoproximity.length) li.append(kv([['geoproximity', s.geoproximity.join('; ')]]));
  if (s.tree && s.tree.length) {
    const cand = (c) => {
      const st = String(c.state || '');
      const word = st.split(' ')[0];
      return el('li', null, `${c.kind} ${c.name}: `, badge(word), st.length > word.length ? ' ' + st.slice(word.length + 1) : '');
    };
    li.append(el('h5', null, 'Tree'), el('ol', { class: 'tree' }, s.tree.map((t) =>
      el('li', { value: t.level }, `level ${t.level}, ${t.node}: ${t.action} → ${dash(t.chosen)} (${t.why})`,
        el('ul', null, (t.candidates || []).map(cand))))));
  }
  if (s.latency) li.append(latency(s.latency));
  li.append(el('p', { class: 'decision' }, el('strong', null, 'Decision: '), s.decision));
  const scope = [['partition scope', `/${s.partition_scope}`]];
  if (s.scope_widened_by_health) {
    const w = s.scope_widened_by_health;
    scope.push(['widened by health', `/${w.from} to /${w.to}: ${(w.unusable_pools || []).join(', ')} not usable, and every network in ${w.network} gets this answer`]);
  }
  li.append(kv(scope));
  return li;
}

function latency(l) {
  const t = el('table', { class: 'explain-latency' },
    el('caption', null, `Latency (rule ${l.rule}, map update ${l.update}), network ${l.network}`),
    el('thead', null, el('tr', null, ['pool', 'RTT', 'from', 'usable'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', null, (l.candidates || []).map((c) => {
      let from = c.source;
      if (c.key) from += ` (key ${c.key})`;
      if (c.estimate) from += ` (${c.estimate})`;
      return el('tr', null, el('th', { scope: 'row' }, c.pool), el('td', null, c.source !== 'none' ? `${Number(c.rtt_ms || 0).toFixed(1)} ms` : '-'),
        el('td', null, from), el('td', null, c.usable ? 'usable' : 'unusable'));
    })));
  const div = el('div', { class: 'latency-trace' }, t);
  if (l.state) {
    const st = l.state;
    div.append(el('p', null, `anti-flap: current ${dash(st.current)}, challenger ${st.pending ? `${st.pending} for ${st.rounds || 0}/${st.needed} updates` : 'none'}`));
  }
  div.append(el('p', null, `winner: ${dash(l.winner)}: ${l.why}`));
  return div;
}
