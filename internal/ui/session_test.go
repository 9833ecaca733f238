package ui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/explain"
)

// backend is the least api.Backend: status names a record (so a leak of
// it shows) and pool state changes are recorded.
type backend struct {
	mu    sync.Mutex
	pools []string
}

func (b *backend) Ready() (bool, string) { return true, "" }
func (b *backend) Status() api.Status {
	return api.Status{Node: &api.NodeStatus{Name: "secret-node-fra1"}, Records: []api.RecordStatus{{Name: "shop.example.com."}}}
}
func (b *backend) Explain(explain.Request) (*explain.Report, error) { return &explain.Report{}, nil }
func (b *backend) SetTargetState(netip.Addr, string, time.Time) error {
	return nil
}
func (b *backend) SetPoolState(record, pool, state string, _ time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pools = append(b.pools, record+"/"+pool+"="+state)
	return nil
}
func (b *backend) Reload(context.Context) (api.ReloadResult, error) { return api.ReloadResult{}, nil }
func (b *backend) PushLatency(string, io.Reader) (api.LatencyResult, error) {
	return api.LatencyResult{}, nil
}
func (b *backend) LatencyStatus() api.LatencyStatus { return api.LatencyStatus{} }

const token = "s3cret-token-for-tests"

// shell is an API handler with the dashboard mounted, served by httptest.
type shell struct {
	h   *api.Handler
	u   *UI
	b   *backend
	srv *httptest.Server
}

func newShell(t *testing.T, tok string, useTLS bool) *shell {
	t.Helper()
	b := &backend{}
	h := api.NewHandler(b, api.Options{Token: tok, Metrics: http.NotFoundHandler()})
	s := &shell{h: h, u: Mount(h), b: b}
	if useTLS {
		s.srv = httptest.NewTLSServer(h)
	} else {
		s.srv = httptest.NewServer(h)
	}
	t.Cleanup(s.srv.Close)
	return s
}

// client returns a client with a cookie jar that does not follow
// redirects.
func (s *shell) client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := s.srv.Client()
	return &http.Client{Transport: c.Transport, Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type resp struct {
	code int
	h    http.Header
	body string
}

func do(t *testing.T, c *http.Client, method, u string, body io.Reader, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{r.StatusCode, r.Header, string(b)}
}

// login posts the form and returns the response.
func (s *shell) login(t *testing.T, c *http.Client, tok string) resp {
	t.Helper()
	return do(t, c, "POST", s.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()),
		"Content-Type", "application/x-www-form-urlencoded")
}

func (s *shell) sessionInfo(t *testing.T, c *http.Client) SessionInfo {
	t.Helper()
	r := do(t, c, "GET", s.srv.URL+"/ui/session", nil)
	if r.code != 200 {
		t.Fatalf("GET /ui/session: %d %s", r.code, r.body)
	}
	var info SessionInfo
	if err := json.Unmarshal([]byte(r.body), &info); err != nil {
		t.Fatalf("GET /ui/session: %v: %s", err, r.body)
	}
	return info
}

func sessionCookie(t *testing.T, r resp) *http.Cookie {
	t.Helper()
	for _, line := range r.h.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err == nil && c.Name == api.SessionCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", api.SessionCookie, r.h.Values("Set-Cookie"))
	return nil
}

func checkCookie(t *testing.T, r resp, secure bool) {
	t.Helper()
	if r.code != http.StatusSeeOther || r.h.Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q, want 303 to /ui/", r.code, r.h.Get("Location"))
	}
	c := sessionCookie(t, r)
	raw := strings.Join(r.h.Values("Set-Cookie"), "\n")
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure != secure {
		t.Errorf("cookie %q: want HttpOnly, SameSite=Strict, Path=/, Secure=%v", raw, secure)
	}
	if c.MaxAge <= 0 || c.MaxAge > int(SessionLifetime/time.Second) {
		t.Errorf("cookie %q: Max-Age %d, want 1..%d", raw, c.MaxAge, int(SessionLifetime/time.Second))
	}
	if len(c.Value) < 43 { // 256 bits, base64
		t.Errorf("cookie value %q: shorter than 256 bits", c.Value)
	}
}

func TestLoginCookie(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		s := newShell(t, token, useTLS)
		c := s.client(t)
		checkCookie(t, s.login(t, c, token), useTLS)
		// The cookie opens the API and the pages.
		if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != 200 || !strings.Contains(r.body, "shop.example.com.") {
			t.Errorf("GET /v1/status with the cookie (tls %v): %d %s", useTLS, r.code, r.body)
		}
		for _, p := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
			if r := do(t, c, "GET", s.srv.URL+p, nil); r.code != 200 {
				t.Errorf("GET %s with the cookie: %d", p, r.code)
			}
		}
		info := s.sessionInfo(t, c)
		if len(info.CSRF) < 43 || info.Expires == nil || info.ReadOnly {
			t.Errorf("session %+v: want a CSRF token, an expiry, not read-only", info)
		}
		if d := time.Until(*info.Expires); d <= SessionLifetime-time.Minute || d > SessionLifetime {
			t.Errorf("session expires in %v, want %v", d, SessionLifetime)
		}
	}
}

// TestNoSession: without the cookie or the token, the login form is all
// there is, and it names nothing.
func TestNoSession(t *testing.T) {
	s := newShell(t, token, false)
	c := s.client(t)
	r := do(t, c, "GET", s.srv.URL+"/ui/login", nil)
	if r.code != 200 || !strings.Contains(r.body, `<form id="login"`) || !strings.Contains(r.body, `id="token"`) ||
		!strings.Contains(r.body, `type="password"`) || !strings.Contains(r.body, `name="token"`) || !strings.Contains(r.body, `type="submit"`) {
		t.Fatalf("GET /ui/login: %d\n%s", r.code, r.body)
	}
	checkHeaders(t, "/ui/login", r.h)
	leaks := []string{"shop.example.com", "secret-node-fra1", token}
	noLeak := func(what string, r resp) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(r.body, l) {
				t.Errorf("%s leaks %q:\n%s", what, l, r.body)
			}
		}
		for _, l := range []string{"version", "steer v", "go1."} {
			if strings.Contains(strings.ToLower(r.body), l) {
				t.Errorf("%s names a version (%q):\n%s", what, l, r.body)
			}
		}
	}
	noLeak("the login page", r)
	if r := do(t, c, "GET", s.srv.URL+"/ui/login.css", nil); r.code != 200 || !strings.HasPrefix(r.h.Get("Content-Type"), "text/css") {
		t.Errorf("GET /ui/login.css: %d %s", r.code, r.h.Get("Content-Type"))
	}
	// A wrong token: 401 and the form with p.error, no cookie.
	r = s.login(t, c, "wrong")
	if r.code != http.StatusUnauthorized || !strings.Contains(r.body, `<p class="error"`) || len(r.h.Values("Set-Cookie")) != 0 {
		t.Errorf("wrong token: %d, cookies %v\n%s", r.code, r.h.Values("Set-Cookie"), r.body)
	}
	noLeak("the wrong-token page", r)
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/index.html", "/ui/api.js", "/ui/session", "/ui/nonexistent", "/ui/login.html"} {
		r := do(t, c, "GET", s.srv.URL+p, nil)
		if r.code != http.StatusForbidden || !strings.Contains(r.body, `href="/ui/login"`) || len(r.body) > 200 {
			t.Errorf("GET %s without a session: %d\n%s", p, r.code, r.body)
		}
		checkHeaders(t, p, r.h)
		noLeak(p, r)
	}
	if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/status without a session: %d", r.code)
	}
	// A made-up cookie is no session.
	r = do(t, c, "GET", s.srv.URL+"/v1/status", nil, "Cookie", api.SessionCookie+"=made-up")
	if r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/status with a made-up cookie: %d", r.code)
	}
	// Scripts: the bearer token opens /ui/ too.
	if r := do(t, c, "GET", s.srv.URL+"/ui/app.js", nil, "Authorization", "Bearer "+token); r.code != 200 {
		t.Errorf("GET /ui/app.js with the bearer token: %d", r.code)
	}
}

func checkHeaders(t *testing.T, p string, h http.Header) {
	t.Helper()
	for k, v := range api.UIHeaders {
		if h.Get(k) != v {
			t.Errorf("%s: %s %q, want %q", p, k, h.Get(k), v)
		}
	}
}

func TestCSRF(t *testing.T) {
	s := newShell(t, token, false)
	c := s.client(t)
	s.login(t, c, token)
	csrf := s.sessionInfo(t, c).CSRF
	put := func(hdr ...string) int {
		return do(t, c, "PUT", s.srv.URL+"/v1/records/shop.example.com./pools/mumbai/state", strings.NewReader(`{"state":"drain"}`),
			append([]string{"Content-Type", "application/json"}, hdr...)...).code
	}
	if code := put(); code != http.StatusForbidden {
		t.Errorf("PUT with the cookie, no CSRF token: %d, want 403", code)
	}
	if code := put(api.CSRFHeader, csrf[:len(csrf)-1]+"x"); code != http.StatusForbidden {
		t.Errorf("PUT with the cookie, a bad CSRF token: %d, want 403", code)
	}
	if len(s.b.pools) != 0 {
		t.Fatalf("a refused PUT changed state: %v", s.b.pools)
	}
	if code := put(api.CSRFHeader, csrf); code != http.StatusNoContent || len(s.b.pools) != 1 {
		t.Errorf("PUT with the cookie and the CSRF token: %d, changes %v; want 204", code, s.b.pools)
	}
	// A script with the token needs none.
	jarless := s.srv.Client()
	if r := do(t, jarless, "PUT", s.srv.URL+"/v1/records/shop.example.com./pools/mumbai/state", strings.NewReader(`{"state":"up"}`),
		"Authorization", "Bearer "+token); r.code != http.StatusNoContent {
		t.Errorf("PUT with the bearer token: %d %s", r.code, r.body)
	}
	// Logout needs the CSRF token too, and ends the session.
	if r := do(t, c, "POST", s.srv.URL+"/ui/logout", nil); r.code != http.StatusForbidden {
		t.Errorf("logout without the CSRF token: %d", r.code)
	}
	if r := do(t, c, "POST", s.srv.URL+"/ui/logout", nil, api.CSRFHeader, csrf); r.code != http.StatusNoContent {
		t.Errorf("logout: %d", r.code)
	}
	if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/status after logout: %d", r.code)
	}
}

func TestTokenRotation(t *testing.T) {
	s := newShell(t, token, false)
	c := s.client(t)
	s.login(t, c, token)
	s.h.SetAuth(token, "") // the same token: the session lives on
	if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != 200 {
		t.Fatalf("after SetAuth with the same token: %d", r.code)
	}
	s.h.SetAuth("another-token", "")
	if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != http.StatusUnauthorized {
		t.Errorf("after the token changed: %d, want 401", r.code)
	}
	if r := do(t, c, "GET", s.srv.URL+"/ui/", nil); r.code != http.StatusForbidden {
		t.Errorf("/ui/ after the token changed: %d, want 403", r.code)
	}
	// Back to the first token: the old session stays dead.
	s.h.SetAuth(token, "")
	if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != http.StatusUnauthorized {
		t.Errorf("after the token changed back: %d, want 401", r.code)
	}
	if r := s.login(t, c, "another-token"); r.code != http.StatusUnauthorized {
		t.Errorf("login with the replaced token: %d", r.code)
	}
	checkCookie(t, s.login(t, c, token), false)
	if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != 200 {
		t.Errorf("after logging in again: %d", r.code)
	}
}

func TestUIPublic(t *testing.T) {
	s := newShell(t, token, false)
	c := s.client(t)
	// Off: no reads.
	if r := do(t, c, "GET", s.srv.URL+"/ui/", nil); r.code != http.StatusForbidden {
		t.Errorf("GET /ui/ without ui_public: %d", r.code)
	}
	if r := do(t, c, "GET", s.srv.URL+"/v1/records/shop.example.com.", nil); r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/records/NAME without ui_public: %d", r.code)
	}
	s.h.SetUIPublic(true)
	for _, p := range []string{"/ui/", "/ui/app.js"} {
		if r := do(t, c, "GET", s.srv.URL+p, nil); r.code != 200 {
			t.Errorf("GET %s with ui_public: %d", p, r.code)
		}
	}
	if info := s.sessionInfo(t, c); !info.ReadOnly || info.CSRF != "" {
		t.Errorf("session with ui_public: %+v, want read-only and no CSRF token", info)
	}
	// The dashboard's reads pass authentication (these routes are the
	// dashboard helper's: 404 until they are there, never 401).
	for _, p := range []string{"/v1/overview", "/v1/records/shop.example.com.", "/v1/fleet"} {
		if r := do(t, c, "GET", s.srv.URL+p, nil); r.code == http.StatusUnauthorized || r.code == http.StatusForbidden {
			t.Errorf("GET %s with ui_public: %d", p, r.code)
		}
	}
	// Everything else, and every change, still needs the token.
	if r := do(t, c, "GET", s.srv.URL+"/v1/status", nil); r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/status with ui_public: %d", r.code)
	}
	if r := do(t, c, "GET", s.srv.URL+"/v1/explain?name=shop.example.com.", nil); r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/explain with ui_public: %d", r.code)
	}
	if r := do(t, c, "PUT", s.srv.URL+"/v1/records/shop.example.com./pools/mumbai/state", strings.NewReader(`{"state":"down"}`)); r.code != http.StatusUnauthorized || len(s.b.pools) != 0 {
		t.Errorf("PUT with ui_public: %d, changes %v", r.code, s.b.pools)
	}
	if r := do(t, c, "POST", s.srv.URL+"/ui/logout", nil); r.code != http.StatusForbidden {
		t.Errorf("POST /ui/logout with ui_public, no session: %d", r.code)
	}
}

// TestOpen: with no token the dashboard is open as the API is, and
// changes follow RefuseChanges.
func TestOpen(t *testing.T) {
	s := newShell(t, "", false)
	c := s.client(t)
	if r := do(t, c, "GET", s.srv.URL+"/ui/", nil); r.code != 200 || !strings.Contains(r.body, "app.js") {
		t.Errorf("GET /ui/ open: %d", r.code)
	}
	if r := s.login(t, c, "anything"); r.code != http.StatusSeeOther || len(r.h.Values("Set-Cookie")) != 0 {
		t.Errorf("login open: %d %v", r.code, r.h.Values("Set-Cookie"))
	}
	if info := s.sessionInfo(t, c); info.ReadOnly {
		t.Errorf("open session read-only: %+v", info)
	}
	s.h.SetAuth("", "changes refused: test")
	if info := s.sessionInfo(t, c); !info.ReadOnly {
		t.Errorf("session with changes refused: %+v, want read-only", info)
	}
}

func TestSessionCap(t *testing.T) {
	gen := uint64(7)
	st := newSessions(func() uint64 { return gen })
	st.max = 50
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	st.now = func() time.Time { return now }
	req := func(id string) *http.Request {
		r := httptest.NewRequest("GET", "/v1/status", nil)
		r.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: id})
		return r
	}
	var ids []string
	for range 51 {
		id, _ := st.open(gen)
		ids = append(ids, id)
		now = now.Add(time.Second)
	}
	if st.len() != 50 {
		t.Errorf("%d sessions held, want 50", st.len())
	}
	if _, ok := st.Valid(req(ids[0])); ok {
		t.Error("the oldest session outlived the cap")
	}
	for _, id := range ids[1:] {
		if _, ok := st.Valid(req(id)); !ok {
			t.Fatal("a newer session was pushed out")
		}
	}
	// Expiry.
	now = now.Add(SessionLifetime)
	if _, ok := st.Valid(req(ids[len(ids)-1])); ok {
		t.Error("a session outlived its lifetime")
	}
	id, _ := st.open(gen)
	if st.len() != 1 {
		t.Errorf("%d sessions held after the others expired, want 1", st.len())
	}
	gen++
	if _, ok := st.Valid(req(id)); ok {
		t.Error("a session outlived its token")
	}
}

// TestSessionCapHTTP: logins past MaxSessions end the oldest sessions.
func TestSessionCapHTTP(t *testing.T) {
	s := newShell(t, token, false)
	first := s.client(t)
	s.login(t, first, token)
	for range MaxSessions - 1 {
		s.login(t, s.client(t), token)
	}
	if r := do(t, first, "GET", s.srv.URL+"/v1/status", nil); r.code != 200 {
		t.Fatalf("the first of %d sessions: %d", MaxSessions, r.code)
	}
	s.login(t, s.client(t), token)
	if r := do(t, first, "GET", s.srv.URL+"/v1/status", nil); r.code != http.StatusUnauthorized {
		t.Errorf("the first session after %d more logins: %d, want 401", MaxSessions, r.code)
	}
	if n := s.u.sessions.len(); n != MaxSessions {
		t.Errorf("%d sessions held, want %d", n, MaxSessions)
	}
}

func TestLoginLimit(t *testing.T) {
	s := newShell(t, token, false)
	c := s.client(t)
	codes := map[int]int{}
	for range loginBurst + 5 {
		codes[s.login(t, c, "guess").code]++
	}
	if codes[http.StatusUnauthorized] != loginBurst || codes[http.StatusTooManyRequests] != 5 {
		t.Errorf("failed logins answered %v, want %d × 401 then 429", codes, loginBurst)
	}
	// Even the right token waits.
	if r := s.login(t, c, token); r.code != http.StatusTooManyRequests {
		t.Errorf("right token while limited: %d", r.code)
	}
}

func TestAssetCaching(t *testing.T) {
	s := newShell(t, token, false)
	c := s.client(t)
	s.login(t, c, token)
	r := do(t, c, "GET", s.srv.URL+"/ui/app.js", nil, "Accept-Encoding", "gzip")
	if r.code != 200 || r.h.Get("Content-Encoding") != "gzip" || r.h.Get("Cache-Control") != "no-cache" ||
		r.h.Get("ETag") == "" || !strings.HasPrefix(r.h.Get("Content-Type"), "text/javascript") {
		t.Fatalf("GET /ui/app.js: %d %v", r.code, r.h)
	}
	checkHeaders(t, "/ui/app.js", r.h)
	if r2 := do(t, c, "GET", s.srv.URL+"/ui/app.js", nil, "Accept-Encoding", "gzip", "If-None-Match", r.h.Get("ETag")); r2.code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", r2.code)
	}
	plain := do(t, c, "GET", s.srv.URL+"/ui/app.js", nil, "Accept-Encoding", "identity")
	if plain.h.Get("Content-Encoding") != "" || plain.h.Get("ETag") == r.h.Get("ETag") || !strings.Contains(plain.body, "import") {
		t.Errorf("identity: %v", plain.h)
	}
	if r := do(t, c, "GET", s.srv.URL+"/ui", nil); r.code != http.StatusMovedPermanently || r.h.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d %q", r.code, r.h.Get("Location"))
	}
}
