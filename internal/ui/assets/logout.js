// The header's "Log out" button: shown when the page runs on a session
// (not with no token configured, nor read-only through api.ui_public);
// it ends the session (POST /ui/logout with the CSRF token) and goes to
// the login form.
import { getSession } from './api.js';

const button = document.getElementById('logout');
if (button) {
  getSession().then((s) => {
    if (!s.csrf) return;
    button.hidden = false;
    button.addEventListener('click', async () => {
      button.disabled = true;
      await fetch('/ui/logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-CSRF-Token': s.csrf } }).catch(() => {});
      location.href = '/ui/login';
    });
  }).catch(() => {});
}
