package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/uitest"
)

// TestSessionInBrowser: in Chromium, the login form opens the dashboard,
// scripts cannot read the cookie, the CSP refuses inline script, and the
// header's "Log out" ends the session.
func TestSessionInBrowser(t *testing.T) {
	s := newShell(t, token, false)
	b := uitest.Start(t, uitest.Options{})
	p := b.NewPage(t, s.srv.URL)
	p.Login(token)
	if c := uitest.Eval[string](p, "document.cookie"); strings.Contains(c, "steer_session") {
		t.Errorf("a script reads the session cookie: %q", c)
	}
	if s.u.sessions.len() != 1 {
		t.Fatalf("%d sessions after the login, want 1", s.u.sessions.len())
	}
	p.Eval(`(() => { const e = document.createElement('script'); e.textContent = 'window.__inline = 1'; document.head.append(e); })()`)
	time.Sleep(100 * time.Millisecond)
	if ran := uitest.Eval[bool](p, "window.__inline === 1"); ran {
		t.Error("an inline script ran despite the CSP")
	}
	p.WaitFor(5*time.Second, "the Log out button", `!document.getElementById('logout').hidden`)
	p.Eval(`document.getElementById('logout').click()`)
	p.WaitFor(5*time.Second, "the login form after logging out", `location.pathname === '/ui/login' && !!document.querySelector('form#login')`)
	if n := s.u.sessions.len(); n != 0 {
		t.Errorf("%d sessions after logging out, want 0", n)
	}
	p.Navigate("/ui/")
	if body := uitest.Eval[string](p, "document.body.textContent"); !strings.Contains(body, "Log in first") {
		t.Errorf("/ui/ after logging out: %q", body)
	}
}
