package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net/http"
	"strings"
)

// Authentication. A request to /v1/ is let in by one of:
//
//   - no token configured (the API is open; changes still follow
//     RefuseChanges);
//   - "Authorization: Bearer TOKEN" (scripts; no CSRF token needed);
//   - the dashboard's session cookie (SessionCookie), which the login
//     form at /ui/login sets; a PUT, POST or DELETE made with it must
//     carry the session's CSRF token in CSRFHeader;
//   - api.ui_public (SetUIPublic), for the reads the dashboard's pages
//     make (GET /v1/overview, /v1/records/NAME, /v1/fleet, /v1/events)
//     and the pages themselves: the exposure of /metrics.
//
// /ui/ is served by the UI SetUI mounts, behind the same checks: without
// a session or the token every page but the login form is refused with
// 403 and a link to it.

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "steer_session"

// CSRFHeader carries a session's CSRF token on state-changing requests.
const CSRFHeader = "X-CSRF-Token"

// Sessions is the dashboard's session store (internal/ui), asked about a
// request that carries no bearer token.
type Sessions interface {
	// Valid reports whether r carries the cookie of a live session
	// (opened under the token in force), and that session's CSRF token.
	Valid(r *http.Request) (csrf string, ok bool)
}

// Access says how a request to /ui/ was let in; the UI reads it with
// AccessFrom.
type Access struct {
	// Via is "open" (no token configured), "bearer", "session" or
	// "public" (api.ui_public, no credentials).
	Via string
	// ReadOnly is set when a change would be refused: public access, or
	// RefuseChanges.
	ReadOnly bool
}

type accessKey struct{}

// AccessFrom returns the Access the API attached to a /ui/ request.
func AccessFrom(ctx context.Context) (Access, bool) {
	a, ok := ctx.Value(accessKey{}).(Access)
	return a, ok
}

type uiMount struct {
	h http.Handler
	s Sessions
}

// SetUI mounts ui at /ui (and below) and consults s about session
// cookies, on /v1/ as on /ui/. The login form and its stylesheet
// (/ui/login, /ui/login.css) reach ui unauthenticated; every other
// request reaches it authorized, with its Access in the context, and
// with the CSRF token checked when it is a change made with the cookie.
func (h *Handler) SetUI(ui http.Handler, s Sessions) {
	h.s.ui.Store(&uiMount{h: ui, s: s})
}

// SetUIPublic sets whether the dashboard's pages and the reads they make
// are served without the token (api.ui_public); changes still need it.
func (h *Handler) SetUIPublic(on bool) { h.s.uiPublic.Store(on) }

// AuthRequired reports whether a token is configured.
func (h *Handler) AuthRequired() bool { return h.s.auth.Load().auth }

// TokenGeneration changes whenever the token does (SetAuth with another
// token): sessions opened under one generation die with it.
func (h *Handler) TokenGeneration() uint64 { return h.s.auth.Load().gen }

// CheckToken compares token with the one in force, in constant time, and
// returns the token's generation; it is false when no token is
// configured.
func (h *Handler) CheckToken(token string) (gen uint64, ok bool) {
	a := h.s.auth.Load()
	got := sha256.Sum256([]byte(token))
	return a.gen, a.auth && subtle.ConstantTimeCompare(got[:], a.token[:]) == 1
}

// AuthFailed logs a failed authentication attempt, at the bounded rate
// of the API's own.
func (h *Handler) AuthFailed(r *http.Request, why string) { h.s.failed(r, why) }

func isChange(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
}

// bearer checks r's Authorization header against a: "" when it holds the
// token, otherwise why not.
func bearer(r *http.Request, a *authState) (why string) {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "missing bearer token"
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
	if subtle.ConstantTimeCompare(got[:], a.token[:]) != 1 {
		return "invalid bearer token"
	}
	return ""
}

// session reports whether r carries a live session cookie, with its CSRF
// token; cookie reports whether it carries the cookie at all.
func (s *server) session(r *http.Request) (csrf string, ok, cookie bool) {
	if _, err := r.Cookie(SessionCookie); err != nil {
		return "", false, false
	}
	m := s.ui.Load()
	if m == nil || m.s == nil {
		return "", false, true
	}
	csrf, ok = m.s.Valid(r)
	return csrf, ok, true
}

// csrfOK compares r's CSRF header with the session's token in constant
// time.
func csrfOK(r *http.Request, csrf string) bool {
	got := r.Header.Get(CSRFHeader)
	return csrf != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) == 1
}

const badCSRF = "missing or bad CSRF token"

// publicRead reports whether r is one of the reads api.ui_public opens:
// what the dashboard's pages show.
func publicRead(r *http.Request) bool {
	if isChange(r) {
		return false
	}
	switch p := r.URL.Path; p {
	case "/v1/overview", "/v1/fleet", "/v1/events":
		return true
	default:
		name, ok := strings.CutPrefix(p, "/v1/records/")
		return ok && name != "" && !strings.Contains(name, "/")
	}
}

// authorized lets r in or answers it: 401 without credentials, 403 for a
// change made with the session cookie but without its CSRF token.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	a := s.auth.Load()
	if !a.auth {
		return true
	}
	why := "missing bearer token"
	if r.Header.Get("Authorization") == "" {
		csrf, ok, cookie := s.session(r)
		switch {
		case ok && isChange(r) && !csrfOK(r, csrf):
			writeError(w, http.StatusForbidden, badCSRF)
			s.failed(r, badCSRF)
			return false
		case ok:
			return true
		case s.uiPublic.Load() && publicRead(r):
			return true
		case cookie:
			why = "unknown or expired session: log in again"
		}
	} else if why = bearer(r, a); why == "" {
		return true
	}
	if why == "invalid bearer token" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="steer", error="invalid_token"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="steer"`)
	}
	writeError(w, http.StatusUnauthorized, why)
	s.failed(r, why)
	return false
}

// UIHeaders are the security headers of every /ui/ response.
var UIHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
	"X-Frame-Options":         "DENY",
	"Referrer-Policy":         "no-referrer",
	"X-Content-Type-Options":  "nosniff",
}

// uiLoginPaths reach the UI without credentials: the login form (GET and
// its POST) and its stylesheet.
var uiLoginPaths = map[string]bool{"/ui/login": true, "/ui/login.css": true}

// serveUI serves /ui/ through m: the login form to anyone, the rest to a
// request with a session (and, for a change, its CSRF token), the token,
// or none needed (no token configured, or api.ui_public for reads).
func (s *server) serveUI(w http.ResponseWriter, r *http.Request, m *uiMount) {
	for k, v := range UIHeaders {
		w.Header().Set(k, v)
	}
	if uiLoginPaths[r.URL.Path] {
		m.h.ServeHTTP(w, r)
		return
	}
	a := s.auth.Load()
	refuse := a.refuse != ""
	var acc Access
	switch {
	case !a.auth:
		acc = Access{Via: "open", ReadOnly: refuse}
	case r.Header.Get("Authorization") != "":
		if why := bearer(r, a); why != "" {
			s.failed(r, why)
			refuseUI(w)
			return
		}
		acc = Access{Via: "bearer", ReadOnly: refuse}
	default:
		csrf, ok, cookie := s.session(r)
		switch {
		case ok && isChange(r) && !csrfOK(r, csrf):
			s.failed(r, badCSRF)
			writeText(w, http.StatusForbidden, badCSRF)
			return
		case ok:
			acc = Access{Via: "session", ReadOnly: refuse}
		case s.uiPublic.Load() && !isChange(r):
			acc = Access{Via: "public", ReadOnly: true}
		default:
			why := "no dashboard session"
			if cookie {
				why = "unknown or expired dashboard session"
			}
			s.failed(r, why)
			refuseUI(w)
			return
		}
	}
	m.h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accessKey{}, acc)))
}

// refuseUI answers a /ui/ request without credentials: 403 and a link to
// the login form, nothing else.
func refuseUI(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, `<!doctype html><meta charset="utf-8"><title>steer: log in</title><p>Log in first: <a href="/ui/login">/ui/login</a></p>`+"\n")
}
