package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// The dashboard's read endpoints (dashboard.go has their wire types):
// GET /v1/overview, GET /v1/records/{name} and the server-sent events of
// GET /v1/events, served when the Backend implements DashboardBackend.
// GET /v1/fleet is registered beside them by its own file.

// DefaultMaxEventStreams is how many GET /v1/events streams may be open at
// once; one more is refused with 503 naming the cap. Each holds a
// connection (and, with Serve's maxConns, a slot of it) for as long as a
// browser tab stays open.
const DefaultMaxEventStreams = 16

// eventPing is how often an open event stream gets a comment line, so
// proxies and the browser see it alive and a dead peer is noticed.
const eventPing = 15 * time.Second

// The stream limits a handler is made with (tests change them).
var (
	maxEventStreams = DefaultMaxEventStreams
	eventPingEvery  = eventPing
)

// eventWriteTimeout bounds each write of an event stream: the server's
// WriteTimeout would end a long-lived response, so the stream extends
// its deadline write by write instead.
const eventWriteTimeout = 10 * time.Second

// events is the state of GET /v1/events.
type events struct {
	slots chan struct{} // one token per open stream
	ping  time.Duration // eventPing; tests shorten it
}

// validOverviewStates are the states GET /v1/overview?state= filters on.
var validOverviewStates = map[string]bool{"up": true, "down": true, "drain": true, "disabled": true}

func (s *server) dashboardRoutes() {
	db, ok := s.b.(DashboardBackend)
	if !ok {
		return
	}
	ev := &events{slots: make(chan struct{}, maxEventStreams), ping: eventPingEvery}
	s.mux.HandleFunc("GET /v1/overview", func(w http.ResponseWriter, r *http.Request) { s.overview(db, w, r) })
	s.mux.HandleFunc("GET /v1/records/{name}", func(w http.ResponseWriter, r *http.Request) { s.record(db, w, r) })
	s.mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) { s.eventStream(db, ev, w, r) })
}

// parseOverview reads offset, limit, q and state; an error names the bad
// parameter.
func parseOverview(r *http.Request) (OverviewQuery, error) {
	v := r.URL.Query()
	var q OverviewQuery
	num := func(name string, lo, hi int) (int, error) {
		s := strings.TrimSpace(v.Get(name))
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("bad %s %q: want an integer from %d to %d", name, s, lo, hi)
		}
		return n, nil
	}
	var err error
	if q.Offset, err = num("offset", 0, 1<<30); err != nil {
		return q, err
	}
	if q.Limit, err = num("limit", 0, MaxOverviewLimit); err != nil {
		return q, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultOverviewLimit
	}
	q.Filter = strings.TrimSpace(v.Get("q"))
	if len(q.Filter) > 255 {
		return q, fmt.Errorf("bad q: longer than a domain name (%d bytes)", len(q.Filter))
	}
	q.State = strings.ToLower(strings.TrimSpace(v.Get("state")))
	if q.State != "" && !validOverviewStates[q.State] {
		return q, fmt.Errorf("bad state %q: want up, down, drain or disabled", v.Get("state"))
	}
	return q, nil
}

func (s *server) overview(db DashboardBackend, w http.ResponseWriter, r *http.Request) {
	q, err := parseOverview(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ov, err := db.Overview(q)
	if err != nil {
		s.backendError(w, "overview", err)
		return
	}
	writeJSON(w, http.StatusOK, ov)
}

func (s *server) record(db DashboardBackend, w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PathValue("name"))
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bad name %q", name))
		return
	}
	d, err := db.Record(dns.CanonicalName(name))
	if err != nil {
		s.backendError(w, "record "+name, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// backendError answers a DashboardBackend's error: 404 for ErrNotFound,
// 500 (logged) otherwise.
func (s *server) backendError(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	s.log.Warn("admin API: dashboard read failed", "what", what, "err", err)
	writeError(w, http.StatusInternalServerError, err.Error())
}

// eventStream serves GET /v1/events: "data: {Event}\n\n" per change and a
// comment every ping, until the client goes, the API shuts down (Serve's
// stop) or a write fails.
func (s *server) eventStream(db DashboardBackend, ev *events, w http.ResponseWriter, r *http.Request) {
	select {
	case ev.slots <- struct{}{}:
		defer func() { <-ev.slots }()
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("too many event streams: at most %d at once", cap(ev.slots)))
		return
	}
	rc := http.NewResponseController(w)
	// The request is read: no read deadline may end the stream (the
	// server's ReadTimeout would cancel the request's context).
	rc.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ch, unsubscribe := db.Subscribe(ctx)
	defer unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// A first comment: the client knows the stream is open (and an
	// EventSource fires onopen) before anything changes.
	if !write([]byte(": open\n\n")) {
		return
	}
	ping := time.NewTicker(ev.ping)
	defer ping.Stop()
	closing := closingOf(r.Context())
	for {
		select {
		case <-ctx.Done():
			return
		case <-closing:
			return
		case <-ping.C:
			if !write([]byte(": ping\n\n")) {
				return
			}
		case e := <-ch:
			b, err := json.Marshal(e)
			if err != nil {
				return
			}
			buf := make([]byte, 0, len(b)+8)
			buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
			if !write(buf) {
				return
			}
		}
	}
}

// closingKey is the context key of the channel Serve closes when it starts
// shutting down: long-lived responses (event streams) end on it, so a
// graceful stop does not wait for them.
type closingKey struct{}

// withClosing returns ctx carrying closing.
func withClosing(ctx context.Context, closing <-chan struct{}) context.Context {
	return context.WithValue(ctx, closingKey{}, closing)
}

// closingOf returns the channel of withClosing, or nil (never ready) for a
// request not served by Serve.
func closingOf(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(closingKey{}).(<-chan struct{})
	return c
}
