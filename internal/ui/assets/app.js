// The dashboard's shell: a hash router. Each page module registers its
// routes with route(); the router calls render(main, params) on each
// navigation. Deep links are the hash: #/record/NAME, #/record/NAME/pool/POOL.
import { live } from './api.js';

const routes = [];

// route registers a page: pattern is a path like "/record/:name/pool/:pool".
export function route(pattern, render) {
  const names = [];
  const re = new RegExp('^' + pattern.replace(/:(\w+)/g, (_, n) => { names.push(n); return '([^/]+)'; }) + '$');
  routes.push({ re, names, render });
}

async function navigate() {
  const path = location.hash.replace(/^#/, '') || '/';
  const main = document.getElementById('main');
  for (const r of routes) {
    const m = path.match(r.re);
    if (!m) continue;
    const params = {};
    r.names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
    main.replaceChildren();
    try {
      await r.render(main, params);
    } catch (e) {
      main.replaceChildren(Object.assign(document.createElement('p'), { className: 'error', textContent: String(e.message || e) }));
    }
    return;
  }
  main.textContent = 'No such page: ' + path;
}

window.addEventListener('hashchange', navigate);

// Page modules are imported after route() exists. No top-level await:
// they import this module, which must have finished evaluating first
// (awaiting them here would wait for ever).
Promise.all(['overview.js', 'record.js', 'explain.js', 'preview.js', 'fleet.js']
  .map((f) => import('./' + f).catch((e) => console.error(f, e))))
  .then(() => { live(); navigate(); });
