// Package ui is the dashboard: the web pages served at /ui on the admin
// API's listener. Its assets are embedded (no CDN, no build step); the
// pages read the API's JSON endpoints (/v1/overview, /v1/records/NAME,
// /v1/fleet, /v1/explain, /v1/simulate, /v1/events) with the session
// cookie the login form sets.
//
// Mount puts the dashboard on an api.Handler: the API authenticates every
// /ui/ request but the login form (see internal/api/auth.go) and asks the
// session store here about the cookie, on /ui/ and /v1/ alike. This
// package serves the login (GET and POST /ui/login), the logout (POST
// /ui/logout), the session's CSRF token (GET /ui/session) and the assets,
// each with an ETag, "Cache-Control: no-cache" (a new binary's assets are
// fetched at once) and gzip when the browser takes it.
package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/api"
)

//go:embed assets
var assets embed.FS

// Assets are the dashboard's files (index.html, *.js, *.css, the map).
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	return sub
}

// UI is the dashboard mounted on one api.Handler.
type UI struct {
	api      *api.Handler
	sessions *sessions
	login    loginLimit
}

// Mount serves the dashboard at /ui on h, with its own session store.
// The assets are read and compressed at the first request for a page,
// not here: a node whose dashboard nobody opens holds none of it.
func Mount(h *api.Handler) *UI {
	u := &UI{api: h, sessions: newSessions(h.TokenGeneration)}
	h.SetUI(u, u.sessions)
	return u
}

// Handler serves the assets alone, under /ui/, with no login: for tests
// of the pages. A node serves the dashboard through Mount.
func Handler() http.Handler {
	files := loadAssets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveAsset(w, r, files) })
}

// ServeHTTP serves /ui and below; the API has authorized the request
// (but for the login form) before it gets here.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ui":
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	case "/ui/login":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			u.loginPage(w, r, http.StatusOK, "")
		case http.MethodPost:
			u.doLogin(w, r)
		default:
			notAllowed(w, "GET, HEAD, POST")
		}
	case "/ui/logout":
		if r.Method != http.MethodPost {
			notAllowed(w, "POST")
			return
		}
		u.sessions.close(r)
		http.SetCookie(w, &http.Cookie{Name: api.SessionCookie, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	case "/ui/session":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			notAllowed(w, "GET, HEAD")
			return
		}
		u.session(w, r)
	default:
		serveAsset(w, r, loadAssets())
	}
}

func notAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
}

// SessionInfo is the body of GET /ui/session.
type SessionInfo struct {
	// CSRF goes in X-CSRF-Token on every change made with the cookie;
	// empty when the page was reached without a session (no token
	// configured, the bearer token, or api.ui_public).
	CSRF string `json:"csrf"`
	// Expires is when the session ends (null without one).
	Expires *time.Time `json:"expires"`
	// ReadOnly: changes would be refused (api.ui_public without a
	// session, or a node that refuses changes).
	ReadOnly bool `json:"read_only"`
}

func (u *UI) session(w http.ResponseWriter, r *http.Request) {
	acc, _ := api.AccessFrom(r.Context())
	info := SessionInfo{ReadOnly: acc.ReadOnly || acc.Via == ""}
	if acc.Via == "session" {
		if s, ok := u.sessions.lookup(r); ok {
			exp := s.expires.UTC()
			info.CSRF, info.Expires = s.csrf, &exp
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(info)
}

// loginPage writes the login form with msg (if any) as its error; it
// names nothing the node serves.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request, code int, msg string) {
	page := loadAssets()["login.html"].raw
	if msg != "" {
		var esc bytes.Buffer
		esc.WriteString(`<p class="error" role="alert">`)
		templateEscape(&esc, msg)
		esc.WriteString(`</p>`)
		page = bytes.Replace(page, []byte("<!--error-->"), esc.Bytes(), 1)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write(page)
	}
}

func templateEscape(b *bytes.Buffer, s string) {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	b.WriteString(r.Replace(s))
}

// doLogin checks the form's token and, when it is the API's, opens a
// session: 303 to /ui/ with the cookie. A wrong token is 401 with the form
// again, logged at the API's bounded rate; too many from one address in
// a row are 429 until they slow down.
func (u *UI) doLogin(w http.ResponseWriter, r *http.Request) {
	if !u.api.AuthRequired() {
		// No token configured: the dashboard is open as the API is.
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	ip := clientIP(r)
	if !u.login.allow(ip, time.Now()) {
		u.api.AuthFailed(r, "dashboard login: too many failed attempts")
		w.Header().Set("Retry-After", "10")
		u.loginPage(w, r, http.StatusTooManyRequests, "Too many failed attempts: wait a few seconds.")
		return
	}
	token := ""
	if err := r.ParseForm(); err == nil {
		token = strings.TrimSpace(r.PostForm.Get("token"))
	}
	gen, ok := u.api.CheckToken(token)
	if !ok {
		u.login.failed(ip, time.Now())
		u.api.AuthFailed(r, "dashboard login: wrong token")
		u.loginPage(w, r, http.StatusUnauthorized, "Wrong token.")
		return
	}
	id, s := u.sessions.open(gen)
	http.SetCookie(w, &http.Cookie{
		Name: api.SessionCookie, Value: id, Path: "/",
		Expires: s.expires, MaxAge: int(time.Until(s.expires) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Login limits: an address gets loginBurst failed attempts, then one
// more every loginEvery.
const (
	loginBurst   = 10
	loginEvery   = time.Second
	loginTracked = 10000 // addresses remembered; past it the table starts over
)

// loginLimit counts failed logins per client address.
type loginLimit struct {
	mu    sync.Mutex
	addrs map[string]*loginBucket
}

type loginBucket struct {
	fails float64 // decays by one every loginEvery
	at    time.Time
}

func (l *loginLimit) bucket(ip string, now time.Time) *loginBucket {
	b := l.addrs[ip]
	if b == nil {
		return nil
	}
	b.fails -= float64(now.Sub(b.at)) / float64(loginEvery)
	b.at = now
	if b.fails < 0 {
		b.fails = 0
	}
	return b
}

func (l *loginLimit) allow(ip string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(ip, now)
	return b == nil || b.fails <= loginBurst-1
}

func (l *loginLimit) failed(ip string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrs == nil || len(l.addrs) >= loginTracked {
		l.addrs = map[string]*loginBucket{}
	}
	b := l.bucket(ip, now)
	if b == nil {
		b = &loginBucket{at: now}
		l.addrs[ip] = b
	}
	b.fails++
}

// asset is one embedded file, ready to serve.
type asset struct {
	raw, gz []byte // gz nil when compressing does not pay
	etag    string
	ctype   string
}

var (
	assetsOnce sync.Once
	assetMap   map[string]*asset
)

// loadAssets reads, hashes and compresses the embedded files once. One
// compressor serves them all: each new one holds about 1 MB of state
// (at start-up, a new one per file made 12 MB of garbage).
func loadAssets() map[string]*asset {
	assetsOnce.Do(func() {
		assetMap = map[string]*asset{}
		fsys := Assets()
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(raw)
			a := &asset{raw: raw, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: contentType(p)}
			b.Reset()
			zw.Reset(&b)
			zw.Write(raw)
			zw.Close()
			if b.Len() < len(raw) {
				a.gz = bytes.Clone(b.Bytes())
			}
			assetMap[p] = a
			return nil
		})
	})
	return assetMap
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".json":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// acceptsGzip reports whether the Accept-Encoding header takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if name = strings.TrimSpace(name); name != "gzip" && name != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// serveAsset serves /ui/NAME from files (/ui/ is index.html).
func serveAsset(w http.ResponseWriter, r *http.Request, files map[string]*asset) {
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	if name == "" {
		name = "index.html"
	}
	a, ok := files[name]
	if !ok || name == "login.html" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		notAllowed(w, "GET, HEAD")
		return
	}
	body, etag := a.raw, a.etag
	h := w.Header()
	h.Set("Vary", "Accept-Encoding")
	if a.gz != nil && acceptsGzip(r) {
		body, etag = a.gz, a.etag[:len(a.etag)-1]+`-gz"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
