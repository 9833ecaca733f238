// Requests to the admin API with the session cookie. State-changing
// requests carry the session's CSRF token (X-CSRF-Token), which
// GET /ui/session returns.
let session = null;

export async function getSession() {
  if (!session) {
    const r = await fetch('/ui/session', { credentials: 'same-origin' });
    if (r.status === 401 || r.status === 403) { location.href = '/ui/login'; throw new Error('not logged in'); }
    session = await r.json();
  }
  return session;
}

export async function get(path) {
  const r = await fetch(path, { credentials: 'same-origin' });
  if (r.status === 401 || r.status === 403) { location.href = '/ui/login'; throw new Error('not logged in'); }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

export async function send(method, path, body) {
  const s = await getSession();
  const r = await fetch(path, {
    method, credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  const out = text ? JSON.parse(text) : {};
  if (!r.ok) throw new Error(out.error || r.statusText);
  return out;
}

// live listens to /v1/events and calls every onChange handler on each.
const handlers = new Set();
export function onChange(fn) { handlers.add(fn); return () => handlers.delete(fn); }
export function live() {
  const el = document.getElementById('live');
  const es = new EventSource('/v1/events');
  es.onopen = () => { if (el) el.textContent = 'live'; };
  es.onerror = () => { if (el) el.textContent = 'reconnecting'; };
  es.onmessage = (m) => { for (const fn of handlers) fn(JSON.parse(m.data)); };
}
