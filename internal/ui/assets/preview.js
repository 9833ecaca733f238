// Change preview (#/preview, #/preview/NAME from a record page): choose a
// record and a change (drain a pool, set a pool's weight, take a pool
// down), predict what users will see with POST /v1/simulate, then apply
// it as a separate, confirmed action through the pool state endpoint.
//
// The simulation plays a modest default population against the served
// configuration: client groups drawn from the geo databases by country,
// ISP resolvers without ECS, a big public resolver with ECS and one
// without, for one hour with the change at 10 minutes, 10 runs. The
// scenario posted is shown under the result.
import { route } from './app.js';
import { get, send, getSession } from './api.js';
import { el, svg, badge, pct, utc, duration } from './fmt.js';
import { fetchFleet } from './fleet.js';

route('/preview(?:\\?.*)?', render);
route('/preview/:record', render);

// The scenario's shape: one hour, one-minute bins, the change at 10 min.
const DURATION_S = 3600, BIN_S = 60, CHANGE_S = 600, RUNS = 10;
// Client groups by region; countries the geo databases lack are dropped
// (the API names them) and the request is made again.
const GROUPS = [
  { name: 'asia', countries: ['IN', 'JP', 'SG'] },
  { name: 'europe', countries: ['DE', 'GB', 'FR'] },
  { name: 'americas', countries: ['US', 'BR', 'CA'] },
  { name: 'oceania-africa', countries: ['AU', 'ZA'] },
];

// How many records the selector lists at once (the filter finds others).
const LIST_LIMIT = 200;

const KINDS = [
  { value: 'drain', label: 'drain a pool' },
  { value: 'weight', label: 'set a pool\'s weight' },
  { value: 'down', label: 'take a pool down' },
];

function hashQuery() {
  const h = location.hash;
  const i = h.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : h.slice(i + 1));
}

async function render(main, params) {
  const q = hashQuery();
  const want = { record: (params.record || q.get('record') || '').split('?')[0], kind: q.get('kind') || 'drain', pool: q.get('pool') || '', weight: q.get('weight') || '' };
  main.append(el('h1', null, 'Change preview'));
  const status = el('p', { class: 'hint', role: 'status' }, 'Loading the records…');
  main.append(status);

  // The records to choose from: a page of the overview's (with pools and
  // their states; the filter asks for others), plus the deep link's.
  let records = [], total = 0;
  try {
    const ov = await get(`/v1/overview?limit=${LIST_LIMIT}`);
    records = ov.records || [];
    total = ov.total || records.length;
  } catch (e) {
    status.replaceChildren(el('span', { class: 'error' }, `Could not list the records: ${e.message || e}`));
  }
  if (want.record && !records.some((r) => sameName(r.name, want.record))) {
    try {
      records.unshift(await get('/v1/records/' + encodeURIComponent(want.record)));
    } catch (e) {
      const r = await fromExplain(want.record);
      if (r) records.unshift(r);
      else status.replaceChildren(el('span', { class: 'error' }, `${want.record}: ${e.message || e}`));
    }
  }
  if (!records.length) {
    if (!status.querySelector('.error')) status.replaceChildren('No steered records: nothing to preview.');
    return;
  }
  const listed = () => {
    status.replaceChildren(total > records.length ? `${records.length} of ${total} records listed: filter by name to find another.` : '');
    status.hidden = !status.textContent;
  };
  listed();

  const recSel = el('select', { id: 'preview-record', name: 'record' },
    records.map((r) => el('option', { value: r.name, selected: sameName(r.name, want.record) }, r.name)));
  const filter = el('input', { id: 'preview-record-filter', type: 'search', placeholder: 'name contains…', autocomplete: 'off', spellcheck: 'false', size: 18 });
  const kindSel = el('select', { id: 'preview-kind', name: 'kind' },
    KINDS.map((k) => el('option', { value: k.value, selected: k.value === want.kind }, k.label)));
  const poolSel = el('select', { id: 'preview-pool', name: 'pool' });
  const weight = el('input', { id: 'preview-weight', name: 'weight', type: 'number', min: 0, max: 1000000, step: 1, value: want.weight, size: 6, inputmode: 'numeric' });
  const weightLabel = el('label', { for: 'preview-weight' }, 'New weight', weight);
  const run = el('button', { id: 'preview-run', type: 'submit' }, 'Preview');
  const current = el('p', { id: 'preview-current', class: 'hint' });
  const form = el('form', { id: 'preview-form', class: 'preview-form' },
    total > records.length ? el('label', { for: 'preview-record-filter' }, 'Find record', filter) : null,
    el('label', { for: 'preview-record' }, 'Record', recSel),
    el('label', { for: 'preview-kind' }, 'Change', kindSel),
    el('label', { for: 'preview-pool' }, 'Pool', poolSel),
    weightLabel, run);
  const progress = el('p', { id: 'preview-progress', class: 'progress', role: 'status', 'aria-live': 'polite' });
  const result = el('div', { id: 'preview-result', 'aria-live': 'polite' });
  const apply = el('button', { id: 'preview-apply', type: 'button' }, 'Apply…');
  const applyNote = el('p', { id: 'preview-apply-note', class: 'hint' });
  const applyStatus = el('p', { id: 'preview-status', role: 'status', 'aria-live': 'polite' });
  const applyBox = el('section', { class: 'preview-apply', 'aria-labelledby': 'preview-apply-h' },
    el('h2', { id: 'preview-apply-h' }, 'Apply'), applyNote, apply, applyStatus);
  main.append(form, current, progress, result, applyBox);

  let detail = null; // GET /v1/records/NAME of the chosen record, when it answers
  let ran = null; // the choice the shown result is for
  const record = () => records.find((r) => r.name === recSel.value);
  const choice = () => ({ record: recSel.value, kind: kindSel.value, pool: poolSel.value, weight: weight.value.trim() });

  const fillPools = () => {
    const r = record();
    const keep = poolSel.value || want.pool;
    poolSel.replaceChildren(...(r.pools || []).map((p) =>
      el('option', { value: p.name, selected: p.name === keep }, p.state ? `${p.name} (${p.state})` : p.name)));
  };
  const loadDetail = async () => {
    const name = recSel.value;
    detail = null;
    try {
      const d = await get('/v1/records/' + encodeURIComponent(name));
      if (recSel.value === name) detail = d;
    } catch { /* the record page's endpoint is optional here */ }
    describe();
  };
  // describe says what the chosen change does now and sets up Apply.
  const describe = () => {
    const c = choice();
    weightLabel.hidden = c.kind !== 'weight';
    const r = record();
    const p = (r.pools || []).find((x) => x.name === c.pool);
    const parts = [];
    if (p) parts.push(`Pool ${p.name} is `, badge(p.state), p.reason ? ` (${p.reason})` : '', '. ');
    if (c.kind === 'weight') {
      const splits = splitsWith(detail, c.pool);
      if (splits.length) parts.push(`Its weights now: ${splits.map((s) => `rule ${s.rule}: ${s.entries.map((e) => `${e.pool} ${e.weight}`).join(', ')}`).join('; ')}.`);
      else if (detail) parts.push(`No split of ${r.name} names ${c.pool}: a weight changes nothing.`);
    }
    current.replaceChildren(...parts);
    const stale = ran && JSON.stringify(ran) !== JSON.stringify(c);
    if (c.kind === 'weight') {
      apply.disabled = true;
      applyNote.replaceChildren('Weights live in the configuration: the API cannot change them. To apply, put this in the record\'s configuration and reload:',
        el('pre', { id: 'preview-yaml', class: 'yaml' }, weightYAML(r, detail, c)));
    } else {
      apply.disabled = false;
      applyNote.replaceChildren(c.kind === 'drain'
        ? `Sets the operator's drain on pool ${c.pool} of ${c.record}: new answers stop naming it; resolvers keep cached answers until their TTL ends.`
        : `Sets the operator's override "down" on pool ${c.pool} of ${c.record}: answers stop naming it at once, whatever its health checks say.`,
      stale || !ran ? el('span', { class: 'warn' }, ran ? ' The prediction shown is for another choice.' : ' No prediction was run for it yet.') : '');
    }
  };

  recSel.addEventListener('change', () => { fillPools(); describe(); loadDetail(); });
  let seq = 0, debounce = 0;
  filter.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(async () => {
      const n = ++seq;
      try {
        const ov = await get(`/v1/overview?limit=${LIST_LIMIT}&q=${encodeURIComponent(filter.value.trim())}`);
        if (n !== seq) return;
        const keep = record();
        records = ov.records || [];
        total = ov.total || records.length;
        if (keep && !records.some((r) => r.name === keep.name)) records.unshift(keep);
        recSel.replaceChildren(...records.map((r) => el('option', { value: r.name, selected: keep && r.name === keep.name }, r.name)));
        listed();
      } catch (e) {
        status.replaceChildren(el('span', { class: 'error' }, `Could not list the records: ${e.message || e}`));
        status.hidden = false;
      }
    }, 250);
  });
  kindSel.addEventListener('change', describe);
  poolSel.addEventListener('change', describe);
  weight.addEventListener('input', describe);
  fillPools();
  describe();
  loadDetail();

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const c = choice();
    if (c.kind === 'weight' && !/^\d+$/.test(c.weight)) {
      progress.replaceChildren(el('span', { class: 'error' }, 'weight: give a whole number of 0 or more'));
      weight.focus();
      return;
    }
    const r = record();
    run.disabled = true;
    result.setAttribute('aria-busy', 'true');
    const t0 = Date.now();
    const tick = () => progress.replaceChildren(`Simulating ${RUNS} runs of ${duration(DURATION_S)} of ${r.name}… ${Math.round((Date.now() - t0) / 1000)} s`);
    tick();
    const timer = setInterval(tick, 1000);
    try {
      const out = await simulate(r, c);
      ran = c;
      progress.replaceChildren(`Simulated in ${((Date.now() - t0) / 1000).toFixed(1)} s (${out.result.runs} runs, ${out.result.bins.length} bins of ${duration(out.result.bin_s)}).`);
      result.replaceChildren(...show(out, c, r));
    } catch (err) {
      progress.replaceChildren(el('span', { class: 'error', role: 'alert' }, err.message));
      if (err.unavailable) result.replaceChildren();
    } finally {
      clearInterval(timer);
      run.disabled = false;
      result.removeAttribute('aria-busy');
      describe();
    }
  });

  // In a fleet an override is shared through the store: the confirmation
  // says so.
  let fleetNodes = 0;
  fetchFleet().then(({ status: st, body }) => { if (st === 200 && body && body.nodes) fleetNodes = body.nodes.length; }).catch(() => {});

  // #/preview/NAME?kind=drain&pool=P&run=1 runs the prediction at once.
  if (q.get('run') === '1' && want.pool) form.requestSubmit();

  apply.addEventListener('click', async () => {
    const c = choice();
    if (c.kind === 'weight') return;
    const state = c.kind === 'drain' ? 'drain' : 'down';
    const what = state === 'drain'
      ? `Drain pool "${c.pool}" of ${c.record}?\n\nThis sets the operator's state "drain" on it (PUT /v1/records/${c.record}/pools/${c.pool}/state): steer stops answering with ${c.pool} from now on.`
      : `Take pool "${c.pool}" of ${c.record} down?\n\nThis sets the operator's state "down" on it (PUT /v1/records/${c.record}/pools/${c.pool}/state): steer stops answering with ${c.pool} at once, whatever its health checks say.`;
    const where = fleetNodes ? `\n\nThis node shares the override with the fleet's ${fleetNodes} nodes through the store.` : '';
    if (!confirm(what + where)) {
      applyStatus.replaceChildren('Not applied (cancelled).');
      return;
    }
    apply.disabled = true;
    applyStatus.replaceChildren(`Applying ${state} to ${c.pool}…`);
    try {
      const out = await send('PUT', `/v1/records/${encodeURIComponent(c.record)}/pools/${encodeURIComponent(c.pool)}/state`, { state });
      const at = utc(new Date());
      if (out && out.pending) {
        applyStatus.replaceChildren(el('span', { class: 'warn' }, `applied on this node; pending fleet: ${out.pending}${out.reason ? ` (${out.reason})` : ''}`), ` — ${state} ${c.pool} at ${at}`);
      } else {
        applyStatus.replaceChildren(el('span', { class: 'ok' }, 'applied'), `: pool ${c.pool} of ${c.record} set to ${state} at ${at}`);
      }
      // The pool's state in the selector follows.
      const p = (record().pools || []).find((x) => x.name === c.pool);
      if (p) { p.state = state; p.reason = 'override'; fillPools(); }
    } catch (err) {
      applyStatus.replaceChildren(el('span', { class: 'error', role: 'alert' }, `not applied: ${err.message || err}`));
    } finally {
      describe();
    }
  });
}

// fromExplain describes a steered record from GET /v1/explain (its pools
// and their states), for a node that serves no dashboard reads.
async function fromExplain(name) {
  for (const type of ['A', 'AAAA']) {
    try {
      const rep = await get(`/v1/explain?name=${encodeURIComponent(name)}&type=${type}`);
      const st = (rep.steering || [])[0];
      if (!st) continue;
      const [rname, rtype] = st.record.split(' ');
      return { name: rname, type: rtype, pools: (st.pools || []).map((p) => ({ name: p.name, state: String(p.state).split(' ')[0] })) };
    } catch { /* next type */ }
  }
  return null;
}

const sameName = (a, b) => !!a && !!b && a.replace(/\.$/, '').toLowerCase() === b.replace(/\.$/, '').toLowerCase();

// scenario builds the posted scenario for record r and change c, with the
// client groups given.
export function scenario(r, c, groups) {
  const ev = { at: `${CHANGE_S}s` };
  if (c.kind === 'drain') ev.drain = c.pool;
  else if (c.kind === 'down') ev.fail = c.pool;
  else ev.set_weights = { [c.pool]: Number(c.weight) };
  const sc = {
    duration: `${DURATION_S}s`, bin: `${BIN_S}s`, runs: RUNS, seed: 1,
    record: r.name,
    clients: groups.map((g) => ({ name: g.name, from_geodb: { countries: g.countries, subnets: 200 }, rate: 100 })),
    // Each region's ISP resolvers sit among their users (steered by
    // their own address); two big public resolvers serve everybody.
    resolvers: [
      ...groups.map((g) => ({ name: `isp-${g.name}`, groups: [g.name], share: 0.6, count: 10, caches: 1, ecs: false })),
      { name: 'public-ecs', share: 0.3, count: 1, caches: 4, address: '8.8.8.8', ecs: true },
      { name: 'public-no-ecs', share: 0.1, count: 1, caches: 1, address: '1.1.1.1', ecs: false },
    ],
    events: [ev],
  };
  if (r.type === 'AAAA') sc.type = 'AAAA';
  return sc;
}

// simulate posts the scenario; when the geo databases lack some of the
// groups' countries (the API names them), it drops those and asks again.
async function simulate(r, c) {
  let groups = GROUPS.map((g) => ({ ...g, countries: [...g.countries] }));
  for (let attempt = 0; attempt < 3; attempt++) {
    const sc = scenario(r, c, groups);
    const { status, body } = await post('/v1/simulate', sc);
    if (status === 200) return { ...body, scenario: sc };
    const msg = (body && body.error) || `HTTP ${status}`;
    if (status === 404 || status === 501 || status === 405) {
      throw Object.assign(new Error(`Simulation is unavailable on this node (${status}${body && body.error ? ': ' + body.error : ''}).`), { unavailable: true });
    }
    if (status === 429) throw new Error(`Another simulation is running on this node; try again in a few seconds. (${msg})`);
    const missing = [...msg.matchAll(/client group ([\w-]+): the geo databases \(.*?\) have no IPv4 \/24 of ([A-Z, ]+)/g)];
    if (status === 400 && missing.length) {
      for (const [, name, list] of missing) {
        const g = groups.find((x) => x.name === name);
        if (g) g.countries = g.countries.filter((cc) => !list.split(/,\s*/).includes(cc));
      }
      groups = groups.filter((g) => g.countries.length);
      if (groups.length) continue;
      throw new Error('The geo databases place no IPv4 networks in any country the preview draws clients from: run a scenario of your own with steer simulate.');
    }
    throw new Error(`The simulation failed (${status}): ${msg}`);
  }
  throw new Error('The simulation failed: the geo databases lack the clients\' countries.');
}

// post sends JSON with the session's CSRF token and returns the status
// with the body (api.js's send() hides the status, which tells "not
// available" and "busy" apart from a bad scenario).
async function post(path, body) {
  const s = await getSession();
  const r = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf, Accept: 'application/json' },
    body: JSON.stringify(body),
  });
  if (r.status === 401 || r.status === 403) {
    const t = await r.text();
    if (/csrf/i.test(t)) return { status: r.status, body: { error: t } };
    location.href = '/ui/login';
    throw new Error('not logged in');
  }
  let out = null;
  try { out = await r.json(); } catch { /* a plain-text 404 */ }
  return { status: r.status, body: out };
}

const clock = (s) => {
  const m = Math.floor(s / 60), sec = Math.round(s % 60);
  return `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}${sec ? ':' + String(sec).padStart(2, '0') : ''}`;
};
const plus = (s) => `+${duration(s)}`;

function median(xs) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// show renders the result: chart, "safe at", summary table, text.
function show(out, c, r) {
  const res = out.result;
  const parts = [];
  const changeLabel = c.kind === 'drain' ? `drain ${c.pool}` : c.kind === 'down' ? `${c.pool} down` : `${c.pool} weight ${c.weight}`;
  parts.push(el('h2', null, `Predicted share of user queries: ${changeLabel} at ${clock(CHANGE_S)}`));
  parts.push(chart(res, CHANGE_S, changeLabel, c));
  parts.push(safeAt(res, c));
  parts.push(summary(res, c));
  parts.push(el('details', { class: 'sim-text' }, el('summary', null, 'steer simulate\'s summary'), el('pre', null, out.summary || '')));
  parts.push(el('details', { class: 'sim-scenario' }, el('summary', null, 'The scenario simulated (run it yourself with steer simulate --scenario)'),
    el('pre', null, JSON.stringify(out.scenario, null, 2))));
  return parts;
}

// safeAt says when a drained (or downed) pool stops getting queries.
function safeAt(res, c) {
  const p = el('p', { id: 'safe-at', class: 'safe-at' });
  if (c.kind === 'drain') {
    const d = (res.drains || []).find((x) => x.pool === c.pool) || (res.drains || [])[0];
    if (!d) { p.append('No drain prediction in the result.'); return p; }
    const s = d.safe_at_s;
    p.append(el('strong', null, 'Safe at: '));
    if (d.never >= res.runs) {
      p.append(`not within the simulated ${duration(res.duration_s)}: ${c.pool} still gets more than 1 % of user queries at the end of every run.`);
      return p;
    }
    p.append(`${plus(s.p50)} after the drain (${clock(d.at_s + s.p50)} on the simulated clock; p5–p95 ${plus(s.p5)}…${plus(s.p95)}): from then on at most 1 % of user queries reach ${c.pool}.`);
    const lq = d.last_query_s;
    if (lq) p.append(` The last user query reaches it ${plus(lq.p50)} after the drain (p5–p95 ${plus(lq.p5)}…${plus(lq.p95)}).`);
    if (d.never) p.append(` ${d.never} of ${res.runs} runs were never safe before the end.`);
    return p;
  }
  if (c.kind === 'down') {
    const i = res.pools.indexOf(c.pool);
    const after = res.bins.filter((b) => b.start_s >= CHANGE_S);
    const k = after.findIndex((b, j) => after.slice(j).every((x) => (x.share[i] || {}).p95 <= 0.01));
    p.append(el('strong', null, 'Safe at: '), k < 0
      ? `${c.pool} gets more than 1 % of user queries until the end in some runs.`
      : `${plus(after[k].start_s - CHANGE_S)} after it goes down, every minute has at most 1 % of user queries reaching ${c.pool} (p95 over runs).`);
    return p;
  }
  p.hidden = true; // a weight change drains nothing
  return p;
}

// summary is a table of each pool's share before and after the change.
function summary(res, c) {
  const before = res.bins.filter((b) => b.start_s < CHANGE_S);
  // "after" skips the first few TTL-long minutes so caches have turned over.
  const settle = res.bins.filter((b) => b.start_s >= CHANGE_S + 10 * BIN_S);
  const after = settle.length ? settle : res.bins.filter((b) => b.start_s >= CHANGE_S);
  const rows = res.pools.map((name, i) => {
    const med = (bins) => median(bins.map((b) => b.share[i].p50));
    const cfg = (bins) => median(bins.map((b) => (b.configured || [])[i] ?? NaN));
    const peak = Math.max(0, ...res.bins.filter((b) => b.start_s >= CHANGE_S).map((b) => b.share[i].p95));
    return el('tr', { 'data-pool': name, class: name === c.pool ? 'changed' : null },
      el('th', { scope: 'row' }, name, name === c.pool ? ' (changed)' : ''),
      el('td', { class: 'num' }, pct(cfg(before))), el('td', { class: 'num' }, pct(med(before))),
      el('td', { class: 'num' }, pct(cfg(after))), el('td', { class: 'num' }, pct(med(after))),
      el('td', { class: 'num' }, pct(peak)));
  });
  const th = (t) => el('th', { scope: 'col' }, t);
  return el('table', { id: 'preview-summary', class: 'data' },
    el('caption', null, `Share of user queries per pool: median minute before the change and from ${duration(10 * BIN_S)} after it; configured is what steer's decisions give without caches. Peak is the highest p95 minute after the change.`),
    el('thead', null, el('tr', null, th('pool'), th('configured before'), th('predicted before'), th('configured after'), th('predicted after'), th('peak after (p95)'))),
    el('tbody', null, rows));
}

// chart draws each pool's predicted share over time: the median as a
// line (a dash pattern and a label per pool, so it reads without
// colour), the p5–p95 band over runs behind it, and the change marked.
function chart(res, changeS, changeLabel, c) {
  const W = 800, H = 320, m = { l: 52, r: 160, t: 34, b: 40 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  const bins = res.bins;
  const mid = (b) => b.start_s + res.bin_s / 2;
  const xMax = res.duration_s || (bins.length ? bins[bins.length - 1].start_s + res.bin_s : 1);
  const yTop = Math.min(1, Math.max(0.05, ...bins.flatMap((b) => b.share.map((s) => s.p95))) * 1.05);
  const step = yTop > 0.5 ? 0.2 : yTop > 0.2 ? 0.1 : yTop > 0.1 ? 0.05 : 0.02;
  const top = Math.min(1, Math.ceil(yTop / step - 1e-9) * step);
  const fx = (s) => m.l + (s / xMax) * pw;
  const fy = (v) => m.t + ph - (Math.min(v, top) / top) * ph;
  const root = svg('svg', {
    id: 'preview-chart', class: 'chart preview-chart', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img',
    'aria-label': `Predicted share of user queries per pool over ${duration(xMax)}, ${changeLabel} at ${clock(changeS)}`,
  }, svg('title', { text: `Predicted share per pool (median line, p5–p95 band over ${res.runs} runs)` }));
  // Grid and axes.
  for (let v = 0; v <= top + 1e-9; v += step) {
    root.append(svg('line', { class: 'grid', x1: m.l, x2: m.l + pw, y1: fy(v), y2: fy(v) }),
      svg('text', { class: 'tick', x: m.l - 6, y: fy(v) + 4, 'text-anchor': 'end', text: `${Math.round(v * 100)} %` }));
  }
  const xStep = xMax <= 3600 ? 600 : xMax <= 6 * 3600 ? 3600 : 6 * 3600;
  for (let s = 0; s <= xMax + 1e-9; s += xStep) {
    root.append(svg('text', { class: 'tick', x: fx(s), y: m.t + ph + 16, 'text-anchor': 'middle', text: clock(s) }));
  }
  root.append(svg('line', { class: 'axis', x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph }),
    svg('line', { class: 'axis', x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph }),
    svg('text', { class: 'axis-label', x: m.l + pw / 2, y: H - 4, 'text-anchor': 'middle', text: 'simulated time (hh:mm)' }));
  // The change.
  root.append(svg('line', { class: 'change-mark', x1: fx(changeS), x2: fx(changeS), y1: m.t - 4, y2: m.t + ph }),
    svg('text', { class: 'mark-label', x: fx(changeS) + 4, y: m.t + 10, text: `${changeLabel} (${clock(changeS)})` }));
  if (c.kind === 'drain') {
    const d = (res.drains || []).find((x) => x.pool === c.pool);
    if (d && d.never < res.runs) {
      const x = fx(d.at_s + d.safe_at_s.p50);
      root.append(svg('line', { class: 'safe-mark', x1: x, x2: x, y1: m.t + 14, y2: m.t + ph }),
        svg('text', { class: 'mark-label', x: x + 4, y: m.t + 40, text: `safe at ${plus(d.safe_at_s.p50)}` }));
    }
  }
  // Bands first, then lines over them.
  const order = res.pools.map((_, i) => i);
  for (const i of order) {
    if (!bins.length) break;
    const up = bins.map((b) => `${fx(mid(b)).toFixed(1)},${fy(b.share[i].p95).toFixed(1)}`);
    const down = bins.map((b) => `${fx(mid(b)).toFixed(1)},${fy(b.share[i].p5).toFixed(1)}`).reverse();
    root.append(svg('path', { class: `band pv-${i % 6}`, d: `M${up.join('L')}L${down.join('L')}Z` },
      svg('title', { text: `${res.pools[i]}: p5–p95 over runs` })));
  }
  const labels = [];
  for (const i of order) {
    if (!bins.length) break;
    const d = bins.map((b, j) => `${j ? 'L' : 'M'}${fx(mid(b)).toFixed(1)},${fy(b.share[i].p50).toFixed(1)}`).join('');
    root.append(svg('path', { class: `median pv-${i % 6}`, d, fill: 'none', 'stroke-dasharray': DASHES[i % DASHES.length], 'data-pool': res.pools[i] },
      svg('title', { text: `${res.pools[i]}: median share` })));
    const last = bins[bins.length - 1].share[i].p50;
    labels.push({ i, y: fy(last), text: `${res.pools[i]} ${pct(last, 0)}` });
  }
  // Direct labels at the right end, pushed apart so they do not overlap.
  labels.sort((a, b) => a.y - b.y);
  for (let k = 1; k < labels.length; k++) labels[k].y = Math.max(labels[k].y, labels[k - 1].y + 13);
  const over = labels.length ? labels[labels.length - 1].y - (m.t + ph + 4) : 0;
  if (over > 0) for (const l of labels) l.y -= over;
  for (const l of labels) {
    root.append(svg('text', { class: `direct-label pv-${l.i % 6}`, x: m.l + pw + 6, y: l.y + 4, text: l.text }));
  }
  // Legend: a sample of each line's dash pattern with the pool's name.
  let x = m.l;
  res.pools.forEach((name, i) => {
    root.append(svg('line', { class: `median pv-${i % 6}`, x1: x, x2: x + 24, y1: 12, y2: 12, 'stroke-dasharray': DASHES[i % DASHES.length] }),
      svg('text', { class: 'legend', x: x + 28, y: 16, text: name }));
    x += 40 + name.length * 7;
  });
  return root;
}

const DASHES = ['none', '8 4', '2 3', '10 3 2 3', '4 4', '1 3'];

// splitsWith finds the record's splits that name pool, from the record
// detail's rules (actions such as "split us-east 95, us-east-canary 5" or
// "weighted mumbai:3 frankfurt:1").
function splitsWith(detail, pool) {
  if (!detail || !detail.rules) return [];
  const out = [];
  for (const r of detail.rules) {
    const m = /^(split|weighted)\s+(.*)$/.exec(r.action || '');
    if (!m) continue;
    const entries = [];
    for (const [, p, w] of m[2].matchAll(/([\w.-]+)[\s:]+(\d+)/g)) entries.push({ pool: p, weight: Number(w) });
    if (entries.some((e) => e.pool === pool)) out.push({ rule: r.index, entries });
  }
  return out;
}

// weightYAML is the configuration to write for a weight change.
function weightYAML(r, detail, c) {
  const w = /^\d+$/.test(c.weight) ? Number(c.weight) : 'WEIGHT';
  const splits = splitsWith(detail, c.pool);
  const name = r.name.replace(/\.$/, '');
  if (!splits.length) {
    return `# in the record ${name}, each split naming ${c.pool}:\nsplit:\n  - { pool: ${c.pool}, weight: ${w} }\n  # ...the split's other pools as they are`;
  }
  return splits.map((s) => `# ${name}, rule ${s.rule}:\nsplit:\n` +
    s.entries.map((e) => `  - { pool: ${e.pool}, weight: ${e.pool === c.pool ? w : e.weight} }`).join('\n')).join('\n\n');
}
