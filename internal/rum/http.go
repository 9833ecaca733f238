package rum

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BeaconPath is where the intake takes batches.
const BeaconPath = "/v1/beacons"

// IntakeConfig is what the node configures an Intake with; Configure
// swaps it whole at a reload.
type IntakeConfig struct {
	Token string // the bearer token every batch must carry
	// AllowOrigins are the web origins ("https://www.example.com", or
	// "*" for any) whose pages may post beacons (CORS).
	AllowOrigins []string
	// TrustedProxies are the networks of proxies (a CDN's edge) whose
	// X-Forwarded-For names the relay; from anyone else the header is
	// ignored.
	TrustedProxies []netip.Prefix
	Limits         Limits
}

// Intake is the beacon listener's HTTP handler: POST BeaconPath with a
// bearer token takes a batch (see Parse) into the Store, all or nothing.
type Intake struct {
	store *Store
	met   *Metrics
	log   *slog.Logger
	now   func() time.Time
	cfg   atomic.Pointer[IntakeConfig]
	bufs  sync.Pool // *[]Beacon
}

// NewIntake returns an intake feeding s, counting in met (nil: nowhere).
func NewIntake(s *Store, met *Metrics, log *slog.Logger) *Intake {
	in := &Intake{store: s, met: met, log: log, now: s.o.Now}
	in.cfg.Store(&IntakeConfig{})
	return in
}

// Configure sets the token, origins, proxies and limits (at start and
// at each reload).
func (in *Intake) Configure(c IntakeConfig) {
	c.Limits = c.Limits.WithDefaults()
	in.cfg.Store(&c)
}

// Result is the answer to an accepted batch.
type Result struct {
	Accepted int `json:"accepted"`
}

// rejection is the body of a 4xx.
type rejection struct {
	Error string      `json:"error"`
	Bad   []BadBeacon `json:"bad,omitempty"`
}

// ServeHTTP serves the intake.
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := in.cfg.Load()
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	origin := r.Header.Get("Origin")
	if origin != "" {
		h.Add("Vary", "Origin")
		if !allowed(c.AllowOrigins, origin) {
			in.met.batch("origin")
			reply(w, http.StatusForbidden, rejection{Error: "origin not allowed"})
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if r.URL.Path != BeaconPath {
		reply(w, http.StatusNotFound, rejection{Error: "not found (beacons go to POST " + BeaconPath + ")"})
		return
	}
	switch r.Method {
	case http.MethodOptions: // a CORS preflight
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		h.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		h.Set("Allow", "POST, OPTIONS")
		reply(w, http.StatusMethodNotAllowed, rejection{Error: "method not allowed (POST a batch of beacons)"})
		return
	}
	if !authorized(c.Token, r.Header.Get("Authorization")) {
		in.met.batch("unauthorized")
		h.Set("WWW-Authenticate", `Bearer realm="steer-rum"`)
		reply(w, http.StatusUnauthorized, rejection{Error: "missing or wrong bearer token"})
		return
	}
	lim := c.Limits
	data, err := io.ReadAll(io.LimitReader(r.Body, lim.MaxBytes+1))
	if err != nil {
		reply(w, http.StatusBadRequest, rejection{Error: "reading the batch: " + err.Error()})
		return
	}
	bp, _ := in.bufs.Get().(*[]Beacon)
	if bp == nil {
		bp = new([]Beacon)
	}
	defer in.bufs.Put(bp)
	bs, err := Parse((*bp)[:0], data, relayOf(r, c.TrustedProxies), lim, in.now())
	*bp = bs
	if err != nil {
		var be *BatchError
		if !errors.As(err, &be) {
			reply(w, http.StatusBadRequest, rejection{Error: err.Error()})
			return
		}
		in.met.rejected(be)
		code := http.StatusBadRequest
		if be.Oversized {
			code = http.StatusRequestEntityTooLarge
		}
		in.log.Debug("beacon batch rejected", "err", be.Error())
		reply(w, code, rejection{Error: be.Error(), Bad: be.Bad})
		return
	}
	n := in.store.AddBatch(bs)
	in.met.accepted(n)
	reply(w, http.StatusOK, Result{Accepted: n})
}

// allowed reports whether origin is in the list ("*" allows any).
func allowed(list []string, origin string) bool {
	return slices.Contains(list, "*") || slices.ContainsFunc(list, func(o string) bool { return strings.EqualFold(o, origin) })
}

// authorized compares the bearer token in constant time; an empty
// configured token authorizes nothing.
func authorized(token, header string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	return ok && token != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// relayOf is the address a batch came from: the HTTP peer, or, when the
// peer is a trusted proxy, the rightmost X-Forwarded-For address that is
// not itself a trusted proxy (the left of it is what the client wrote).
func relayOf(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := netip.Addr{}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer = ap.Addr().Unmap()
	} else if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		peer, _ = netip.ParseAddr(h)
	}
	isTrusted := func(a netip.Addr) bool {
		return slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	if !peer.IsValid() || !isTrusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		a = a.Unmap()
		if !isTrusted(a) {
			return a
		}
	}
	return peer
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
}

// Metrics are the RUM metrics (subsystem "rum").
type Metrics struct {
	acc     prometheus.Counter
	rej     *prometheus.CounterVec
	batches *prometheus.CounterVec
	store   atomic.Pointer[Store]
}

var (
	descCells = prometheus.NewDesc("steer_rum_cells", "RUM (network block, site) cells held.", nil, nil)
	descBlks  = prometheus.NewDesc("steer_rum_blocks", "RUM network blocks held (at most rum.max_blocks).", nil, nil)
	descEvict = prometheus.NewDesc("steer_rum_evictions_total", "RUM network blocks evicted, least recently seen first, to stay within rum.max_blocks.", nil, nil)
)

// NewMetrics returns the RUM metrics, registered in reg; the store
// gauges are those of the store last given to SetStore.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		acc: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "steer", Subsystem: "rum", Name: "beacons_accepted_total",
			Help: "Real-user beacons accepted into the RUM store."}),
		rej: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "steer", Subsystem: "rum", Name: "beacons_rejected_total",
			Help: "Real-user beacons rejected, by reason (malformed, client, unknown_site, rtt, future, too_old; batch: a good beacon of a rejected batch; oversized: a whole batch over the limits)."},
			[]string{"reason"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "steer", Subsystem: "rum", Name: "requests_rejected_total",
			Help: "Beacon requests refused before their beacons were read, by reason (unauthorized, origin)."},
			[]string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.acc, m.rej, m.batches, storeCollector{m}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{ReasonMalformed, ReasonClient, ReasonSite, ReasonRTT, ReasonFuture, ReasonOld, ReasonBatch, ReasonOversized} {
		m.rej.WithLabelValues(r)
	}
	return m, nil
}

// SetStore sets the store whose cells, blocks and evictions are reported.
func (m *Metrics) SetStore(s *Store) {
	if m != nil {
		m.store.Store(s)
	}
}

func (m *Metrics) accepted(n int) {
	if m != nil {
		m.acc.Add(float64(n))
	}
}

func (m *Metrics) batch(reason string) {
	if m != nil {
		m.batches.WithLabelValues(reason).Inc()
	}
}

// rejected counts a rejected batch's beacons by reason.
func (m *Metrics) rejected(be *BatchError) {
	if m == nil {
		return
	}
	if be.Oversized {
		m.rej.WithLabelValues(ReasonOversized).Inc()
		return
	}
	for r, n := range be.Reasons {
		m.rej.WithLabelValues(r).Add(float64(n))
	}
	if be.NGood > 0 {
		m.rej.WithLabelValues(ReasonBatch).Add(float64(be.NGood))
	}
}

type storeCollector struct{ m *Metrics }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCells
	ch <- descBlks
	ch <- descEvict
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	var st Stats
	if s := c.m.store.Load(); s != nil {
		st = s.Stats()
	}
	ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(st.Cells))
	ch <- prometheus.MustNewConstMetric(descBlks, prometheus.GaugeValue, float64(st.Blocks))
	ch <- prometheus.MustNewConstMetric(descEvict, prometheus.CounterValue, float64(st.Evictions))
}
