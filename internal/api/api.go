// Package api is the admin HTTP API: liveness and readiness probes, the
// metrics mount, and the authenticated /v1/ endpoints that show what is
// being served (status, explain), act on the running server (target and
// pool state overrides, reload) and predict what a change would do
// (simulate). It owns routing, authentication, parameter
// parsing and the JSON wire format; everything it reads or changes goes
// through a Backend, which the node (internal/node) implements.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/qtype"
	"github.com/steer-dns/steer/internal/version"
	"golang.org/x/net/netutil"
)

// ErrNotFound is returned (possibly wrapped) by a Backend for an unknown
// record or pool; the API answers it with 404.
var ErrNotFound = errors.New("not found")

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 64 << 10

// Options configures NewHandler.
type Options struct {
	// Token, when set, is required as "Authorization: Bearer TOKEN" on
	// every endpoint but /healthz, /readyz and /metrics. Empty: no auth.
	Token string
	// Metrics is mounted at GET /metrics when non-nil (unauthenticated).
	Metrics http.Handler
	// Log receives request errors and state changes (nil: discarded).
	Log *slog.Logger
	// RefuseChanges, when set, refuses every PUT, POST and DELETE with
	// 403 and this reason (a node with no token on a non-loopback
	// address). See Handler.SetAuth.
	RefuseChanges string
}

// Public patterns: served without authentication.
const (
	patHealthz = "GET /healthz"
	patReadyz  = "GET /readyz"
	patMetrics = "GET /metrics"
)

type server struct {
	b     Backend
	log   *slog.Logger
	auth  atomic.Pointer[authState]
	mux   *http.ServeMux
	fails authFailures
	sim   simulateState           // POST /v1/simulate (SimulateBackend)
	ui    atomic.Pointer[uiMount] // /ui (SetUI); nil: not mounted
	// uiPublic lets the dashboard's pages and the reads they make be
	// served without the token (api.ui_public; SetUIPublic).
	uiPublic atomic.Bool
}

// authFailureWindow is how often failed authentication attempts are
// logged at most: the first of a window is logged at once, the rest are
// counted and summed up in the next line, so guessing tokens cannot flood
// the log.
const authFailureWindow = 10 * time.Second

// authFailures logs failed authentication attempts at a bounded rate.
type authFailures struct {
	mu         sync.Mutex
	now        func() time.Time // time.Now; tests move it
	loggedAt   time.Time        // the last line was written
	suppressed int              // attempts since, not logged
	total      uint64
}

// failed records one failed attempt and logs it unless a line was written
// less than authFailureWindow ago.
func (s *server) failed(r *http.Request, why string) {
	f := &s.fails
	f.mu.Lock()
	now := time.Now()
	if f.now != nil {
		now = f.now()
	}
	f.total++
	if !f.loggedAt.IsZero() && now.Sub(f.loggedAt) < authFailureWindow {
		f.suppressed++
		f.mu.Unlock()
		return
	}
	suppressed := f.suppressed
	f.loggedAt, f.suppressed = now, 0
	f.mu.Unlock()
	args := []any{"why", why, "remote", r.RemoteAddr, "path", r.URL.Path}
	if suppressed > 0 {
		args = append(args, "not_logged_since_last", suppressed)
	}
	s.log.Warn("admin API: authentication failed", args...)
}

// authState is what a request is checked against; SetAuth swaps it.
type authState struct {
	token  [sha256.Size]byte
	auth   bool
	refuse string
	// gen counts token changes: a dashboard session opened under one
	// generation is not valid under the next (see TokenGeneration).
	gen uint64
}

// Handler is the admin API's http.Handler.
type Handler struct{ s *server }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.s.ServeHTTP(w, r) }

// SetAuth replaces the token and the refusal reason (see Options) for the
// requests that follow; a reload rotates the token with it.
func (h *Handler) SetAuth(token, refuseChanges string) {
	a := &authState{refuse: refuseChanges}
	if token != "" {
		a.auth = true
		a.token = sha256.Sum256([]byte(token))
	}
	for {
		old := h.s.auth.Load()
		a.gen = 0
		if old != nil {
			a.gen = old.gen
			if old.auth != a.auth || old.token != a.token {
				a.gen++
			}
		}
		if h.s.auth.CompareAndSwap(old, a) {
			return
		}
	}
}

// NewHandler returns the admin API handler for b.
func NewHandler(b Backend, o Options) *Handler {
	s := &server{b: b, log: o.Log, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{s}
	h.SetAuth(o.Token, o.RefuseChanges)
	s.mux.HandleFunc(patHealthz, func(w http.ResponseWriter, r *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	s.mux.HandleFunc(patReadyz, s.readyz)
	if o.Metrics != nil {
		s.mux.Handle(patMetrics, o.Metrics)
	}
	s.mux.HandleFunc("GET /v1/status", s.status)
	s.mux.HandleFunc("GET /v1/explain", s.explain)
	s.mux.HandleFunc("PUT /v1/targets/{address}/state", s.targetState)
	s.mux.HandleFunc("PUT /v1/records/{name}/pools/{pool}/state", s.poolState)
	s.mux.HandleFunc("POST /v1/reload", s.reload)
	s.mux.HandleFunc("POST /v1/latency", s.postLatency)
	s.mux.HandleFunc("GET /v1/latency", s.getLatency)
	s.anycastRoutes()
	s.transferRoutes()
	s.simulateRoutes()
	s.fleetRoutes()
	s.dnssecRoutes()
	s.dashboardRoutes()
	s.overrideRoutes()
	s.rumRoutes()
	s.loadRoutes()
	return h
}

// ServeHTTP limits the body, authenticates everything but the public
// patterns (unknown paths included, so nothing is learned without the
// token), and turns the mux's own 404 and 405 into JSON errors.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		limit := int64(MaxBodyBytes)
		switch r.URL.Path {
		case "/v1/latency":
			limit = MaxLatencyBodyBytes
		case "/v1/simulate":
			limit = MaxSimulateBodyBytes
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	if p := r.URL.Path; p == "/ui" || strings.HasPrefix(p, "/ui/") {
		if m := s.ui.Load(); m != nil {
			s.serveUI(w, r, m)
			return
		}
	}
	h, pattern := s.mux.Handler(r)
	switch pattern {
	case patHealthz, patReadyz, patMetrics:
	default:
		if !s.authorized(w, r) {
			return
		}
		if a := s.auth.Load(); a.refuse != "" && pattern != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.log.Warn("admin API: change refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "why", a.refuse)
			writeError(w, http.StatusForbidden, a.refuse)
			return
		}
	}
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// No pattern: 404, 405 (with Allow already set) or a redirect.
	rw := &errorRewriter{w: w}
	h.ServeHTTP(rw, r)
	if rw.code != 0 {
		writeError(w, rw.code, strings.ToLower(http.StatusText(rw.code)))
	}
}

// errorRewriter swallows an error status and body written by the mux so
// that ServeHTTP can answer in JSON; anything below 400 passes through.
type errorRewriter struct {
	w    http.ResponseWriter
	code int
}

func (e *errorRewriter) Header() http.Header { return e.w.Header() }

func (e *errorRewriter) WriteHeader(code int) {
	if code >= 400 {
		e.code = code
		return
	}
	e.w.WriteHeader(code)
}

func (e *errorRewriter) Write(b []byte) (int, error) {
	if e.code != 0 {
		return len(b), nil
	}
	return e.w.Write(b)
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ok, why := s.b.Ready()
	if ok {
		// A degraded node (a zone on its last good copy) still serves:
		// 200, with the reason for whoever reads it.
		msg := "ready"
		if why != "" {
			msg += ", " + why
		}
		writeText(w, http.StatusOK, msg)
		return
	}
	if why == "" {
		why = "not ready"
	}
	writeText(w, http.StatusServiceUnavailable, why)
}

func (s *server) status(w http.ResponseWriter, r *http.Request) {
	st := s.b.Status()
	if st.Build == nil {
		bi := version.Get()
		st.Build = &bi
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *server) explain(w http.ResponseWriter, r *http.Request) {
	req, err := parseExplain(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rep, err := s.b.Explain(req)
	if errors.Is(err, ErrBadInput) {
		// A node param naming no live node of the fleet, or given off one.
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		s.log.Warn("admin API: explain failed", "name", req.Name, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// parseExplain reads name, type (default A), ecs (a prefix or an address),
// from (default 127.0.0.1), dnssec (default true: the query has the DO
// bit) and node (a fleet node to answer as; default this node) from the
// query string.
func parseExplain(r *http.Request) (explain.Request, error) {
	q := r.URL.Query()
	req := explain.Request{Name: strings.TrimSpace(q.Get("name")), Qtype: dns.TypeA}
	if req.Name == "" {
		return req, errors.New("missing name")
	}
	if _, ok := dns.IsDomainName(req.Name); !ok {
		return req, fmt.Errorf("bad name %q", req.Name)
	}
	if t := strings.TrimSpace(q.Get("type")); t != "" {
		qt, err := qtype.Parse(t)
		if err != nil {
			return req, err
		}
		req.Qtype = qt
	}
	if e := strings.TrimSpace(q.Get("ecs")); e != "" {
		p, err := parseSubnet(e)
		if err != nil {
			return req, err
		}
		req.ECS = p
	}
	req.From = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if f := strings.TrimSpace(q.Get("from")); f != "" {
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return req, fmt.Errorf("bad from address %q", f)
		}
		req.From = a
	}
	if n := strings.TrimSpace(q.Get("node")); n != "" {
		if !config.ValidNodeName(n) {
			return req, fmt.Errorf("bad node %q (a fleet node's name)", n)
		}
		req.Node = n
	}
	if d := strings.TrimSpace(q.Get("dnssec")); d != "" {
		do, err := strconv.ParseBool(d)
		if err != nil {
			return req, fmt.Errorf("bad dnssec %q (true or false)", d)
		}
		req.NoDNSSEC = !do
	}
	return req, nil
}

// parseSubnet accepts a prefix (49.36.0.0/24) or a bare address (a full
// length prefix).
func parseSubnet(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("bad ecs prefix %q", s)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("bad ecs prefix %q", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// stateBody is the body of the state endpoints.
type stateBody struct {
	State string `json:"state"`
	// Expires is a Go duration from now ("30m") or an RFC 3339 time;
	// empty: no expiry.
	Expires string `json:"expires,omitempty"`
	// Force applies an override a safety rule refuses (logged with the
	// caller's address).
	Force bool `json:"force,omitempty"`
}

var validStates = map[string]bool{"up": true, "down": true, "drain": true, "auto": true}

// readState decodes and checks a state body, writing the error response
// itself when it fails.
func readState(w http.ResponseWriter, r *http.Request, now time.Time) (state string, expires time.Time, opt OverrideOptions, ok bool) {
	var body stateBody
	dry, err := dryRun(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", time.Time{}, opt, false
	}
	if !decodeStrict(w, r, &body) {
		return "", time.Time{}, opt, false
	}
	state = strings.ToLower(strings.TrimSpace(body.State))
	if !validStates[state] {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bad state %q: want up, down, drain or auto", body.State))
		return "", time.Time{}, opt, false
	}
	expires, err = health.ParseExpires(body.Expires, now)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", time.Time{}, opt, false
	}
	return state, expires, OverrideOptions{Force: body.Force, DryRun: dry, Caller: r.RemoteAddr}, true
}

// noSafety answers 501 for force or dry_run on a Backend without safety
// rules (not an OverrideBackend).
func noSafety(w http.ResponseWriter, opt OverrideOptions) bool {
	if opt.Force || opt.DryRun {
		writeError(w, http.StatusNotImplemented, "this server has no safety rules: force and dry_run do not apply")
		return true
	}
	return false
}

func (s *server) targetState(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("address")
	addr, err := netip.ParseAddr(raw)
	if err != nil || addr.Zone() != "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bad address %q", raw))
		return
	}
	state, expires, opt, ok := readState(w, r, time.Now())
	if !ok {
		return
	}
	if ob, ok := s.b.(OverrideBackend); ok {
		s.applyOverrides(w, ob, []Override{{Target: addr, State: state, Expires: expires}}, opt, false)
		return
	}
	if noSafety(w, opt) {
		return
	}
	if err := s.b.SetTargetState(addr, state, expires); err != nil {
		if pendingAnswer(w, err) {
			s.log.Warn("admin API: target state set on this node only for now", "address", addr, "state", state, "err", err, "remote", r.RemoteAddr)
			return
		}
		code := http.StatusBadRequest
		if errors.Is(err, ErrNotFound) {
			code = http.StatusNotFound
		}
		writeError(w, code, err.Error())
		return
	}
	s.log.Debug("admin API: target state set", "address", addr, "state", state, "expires", expires, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) poolState(w http.ResponseWriter, r *http.Request) {
	record, pool := r.PathValue("name"), r.PathValue("pool")
	state, expires, opt, ok := readState(w, r, time.Now())
	if !ok {
		return
	}
	if ob, ok := s.b.(OverrideBackend); ok {
		s.applyOverrides(w, ob, []Override{{Record: record, Pool: pool, State: state, Expires: expires}}, opt, false)
		return
	}
	if noSafety(w, opt) {
		return
	}
	if err := s.b.SetPoolState(record, pool, state, expires); err != nil {
		if pendingAnswer(w, err) {
			s.log.Warn("admin API: pool state set on this node only for now", "record", record, "pool", pool, "state", state, "err", err, "remote", r.RemoteAddr)
			return
		}
		code := http.StatusBadRequest
		if errors.Is(err, ErrNotFound) {
			code = http.StatusNotFound
		}
		writeError(w, code, err.Error())
		return
	}
	s.log.Debug("admin API: pool state set", "record", record, "pool", pool, "state", state, "expires", expires, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

// pendingAnswer answers 202 when err is a *PendingError: the state is
// applied here, and the store it is shared through has not taken it yet.
func pendingAnswer(w http.ResponseWriter, err error) bool {
	var pe *PendingError
	if !errors.As(err, &pe) {
		return false
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"applied": "this node", "pending": pe.Where, "reason": pe.Reason})
	return true
}

// reload answers 200 with the result when the reload applied, 422 with it
// (and "error" listing the problems) when the configuration was rejected.
func (s *server) reload(w http.ResponseWriter, r *http.Request) {
	force := false
	if v := strings.TrimSpace(r.URL.Query().Get("force")); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bad force %q (1 or 0)", v))
			return
		}
		force = f
	}
	var zones []string
	named, byZone := r.URL.Query()["zone"]
	for _, v := range named {
		for _, z := range strings.Split(v, ",") {
			if z = strings.TrimSpace(z); z != "" {
				zones = append(zones, z)
			}
		}
	}
	if byZone && len(zones) == 0 {
		writeError(w, http.StatusBadRequest, "zone names no zone (zone=NAME, repeated or comma-separated)")
		return
	}
	var res ReloadResult
	var err error
	if zr, ok := s.b.(ZoneReloader); ok && len(zones) > 0 {
		if force {
			writeError(w, http.StatusBadRequest, "force applies to a reload of the configuration, not of zones")
			return
		}
		res, err = zr.ReloadZones(r.Context(), zones)
		switch {
		case errors.Is(err, ErrNotFound):
			writeError(w, http.StatusNotFound, err.Error())
			return
		case errors.Is(err, ErrBadInput):
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	} else if len(zones) > 0 {
		writeError(w, http.StatusNotImplemented, "this server reloads its whole configuration only (no zone=)")
		return
	} else if fr, ok := s.b.(ForceReloader); ok && force {
		res, err = fr.ReloadForced(r.Context(), r.RemoteAddr)
	} else if force {
		writeError(w, http.StatusNotImplemented, "this server has no safety rules: force does not apply")
		return
	} else {
		res, err = s.b.Reload(r.Context())
	}
	if err != nil && !res.Applied && res.Seq == 0 {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, struct {
			Error string `json:"error"`
			ReloadResult
		}{err.Error(), res})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "encoding the response: " + err.Error()})
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeText(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

// Serve listens on the TCP address listen (port 0 picks one) and serves h
// in the background with conservative timeouts, holding at most
// maxConns connections at once when it is positive (more wait in the
// listen backlog until one closes). It returns the bound
// address and stop, which shuts the server down gracefully (closing it
// outright when stop's context ends first) and waits for it to finish.
// ctx bounds only the listen itself.
func Serve(ctx context.Context, listen string, h http.Handler, log *slog.Logger, maxConns int) (addr string, stop func(context.Context) error, err error) {
	return ServeTLS(ctx, listen, h, log, maxConns, nil)
}

// ServeTLS is Serve with HTTPS whenever cert holds a certificate: each
// connection is accepted as TLS with the certificate cert holds then, or
// as plain HTTP when it holds none, so a reload can renew the
// certificate, or turn TLS on or off, without rebinding the address
// (connections already open keep what they were opened with). A nil
// cert is Serve: plain HTTP.
func ServeTLS(ctx context.Context, listen string, h http.Handler, log *slog.Logger, maxConns int, cert *atomic.Pointer[tls.Certificate]) (addr string, stop func(context.Context) error, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return "", nil, fmt.Errorf("admin API: %w", err)
	}
	if maxConns > 0 {
		ln = netutil.LimitListener(ln, maxConns)
	}
	if cert != nil {
		ln = &tlsSwitch{Listener: ln, cert: cert, conf: &tls.Config{
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				if c := cert.Load(); c != nil {
					return c, nil
				}
				return nil, errors.New("admin API: TLS was turned off")
			},
		}}
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Event streams end when the shutdown starts (dashboard_handlers.go).
	closing := make(chan struct{})
	srv.BaseContext = func(net.Listener) context.Context { return withClosing(context.Background(), closing) }
	var closeOnce sync.Once
	srv.RegisterOnShutdown(func() { closeOnce.Do(func() { close(closing) }) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin API stopped", "err", err)
		}
	}()
	addr = ln.Addr().String()
	log.Info("admin API listening", "addr", addr, "tls", cert != nil && cert.Load() != nil)
	stop = func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		if err != nil {
			srv.Close()
		}
		<-done
		return err
	}
	return addr, stop, nil
}

// tlsSwitch accepts connections as TLS while cert holds a certificate,
// as plain TCP while it holds none. (http.Server serves a *tls.Conn as
// HTTPS: it does the handshake and sets Request.TLS.)
type tlsSwitch struct {
	net.Listener
	cert *atomic.Pointer[tls.Certificate]
	conf *tls.Config
}

func (l *tlsSwitch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.cert.Load() == nil {
		return c, err
	}
	return tls.Server(c, l.conf), nil
}
