package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/rum"
	"github.com/steer-dns/steer/internal/snapshot"
	"golang.org/x/net/netutil"
)

// rumWiring runs real-user measurements as configured (config.RUM): the
// beacon listener, its own HTTP server apart from the admin API, and
// the rounds that feed the cells changed since the last round into the
// latency map, one update each (so anti-flap counts RUM rounds as it
// counts file versions and pushes). Without a rum section nothing of it
// exists: no store, no listener, no goroutine; a reload that removes the
// section stops them and drops the store.
type rumWiring struct {
	log *slog.Logger
	met *rum.Metrics
	lat *latencyWiring

	mu      sync.Mutex
	cfg     *config.RUM // nil: off
	store   *rum.Store
	opts    rum.Options
	in      *rum.Intake
	listen  string // bound as configured
	bound   string
	srv     *http.Server
	started bool          // the node has started: a configured RUM runs
	tick    *time.Ticker  // the rounds' (nil: not running)
	done    chan struct{} // closed to end the rounds
	rounds  uint64
}

func newRUM(log *slog.Logger, met *rum.Metrics, lat *latencyWiring) *rumWiring {
	w := &rumWiring{log: log, met: met, lat: lat}
	lat.onFresh = w.refeed
	return w
}

// configure takes cfg's rum section and snap's latency sites (the names
// beacons may carry): at New, and at each reload after the swap. Once
// started, a moved listen address is bound anew (a failure keeps the old
// listener and is logged); a new token, origins or limits apply from the
// next request.
func (w *rumWiring) configure(cfg *config.Config, snap *snapshot.Snapshot) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var changed []string
	r := cfg.RUM
	if r == nil {
		if w.cfg != nil {
			changed = append(changed, "rum off")
		}
		w.cfg = nil
		w.stopServerLocked()
		w.stopRoundsLocked()
		w.store, w.in, w.opts = nil, nil, rum.Options{}
		w.met.SetStore(nil)
		return changed
	}
	if o := r.StoreOptions(); w.store == nil || o.MaxBlocks != w.opts.MaxBlocks || o.HalfLife != w.opts.HalfLife {
		if w.store != nil {
			w.log.Info("rum settings changed: starting a fresh beacon store")
		}
		w.opts, w.store = o, rum.NewStore(o)
		w.in = rum.NewIntake(w.store, w.met, w.log)
		w.met.SetStore(w.store)
	}
	lim := r.Limits()
	lim.Sites = map[string]bool{}
	if snap != nil && snap.Policies != nil {
		lim.Sites = snap.Policies.LatencySites()
	}
	if w.cfg != nil && w.cfg.Token != r.Token {
		changed = append(changed, "rum token rotated")
	}
	w.in.Configure(rum.IntakeConfig{Token: r.Token.Value(), AllowOrigins: r.AllowOrigins, TrustedProxies: r.Proxies, Limits: lim})
	w.cfg = r
	if w.started {
		if err := w.bindLocked(); err != nil {
			w.log.Error("rum listener not moved; the old one keeps serving", "err", err)
			changed = append(changed, fmt.Sprintf("rum.listen %s not bound: %v", r.Listen, err))
		}
		w.startRoundsLocked()
	}
	return changed
}

// start binds the listener and starts the rounds, when RUM is configured.
func (w *rumWiring) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started = true
	if w.cfg == nil {
		return nil
	}
	w.startRoundsLocked()
	return w.bindLocked()
}

// startRoundsLocked starts the rounds at cfg's interval, or moves a
// running one to it; the caller holds w.mu and w.cfg is set.
func (w *rumWiring) startRoundsLocked() {
	iv := w.cfg.IntervalOr()
	if w.tick != nil {
		w.tick.Reset(iv)
		return
	}
	w.tick, w.done = time.NewTicker(iv), make(chan struct{})
	go w.loop(w.tick, w.done)
}

func (w *rumWiring) stopRoundsLocked() {
	if w.tick != nil {
		w.tick.Stop()
		close(w.done)
		w.tick, w.done = nil, nil
	}
}

// bindLocked serves the intake on cfg's address when it is not bound
// there already; the caller holds w.mu.
func (w *rumWiring) bindLocked() error {
	if w.cfg == nil || w.cfg.Listen == w.listen && w.srv != nil {
		return nil
	}
	ln, err := net.Listen("tcp", w.cfg.Listen)
	if err != nil {
		return fmt.Errorf("rum.listen: %w", err)
	}
	ln = netutil.LimitListener(ln, w.cfg.MaxConnectionsOr())
	srv := &http.Server{
		// The intake is looked up per request: a reload that replaces
		// the store serves the new one at once.
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			w.mu.Lock()
			h := w.in
			w.mu.Unlock()
			h.ServeHTTP(rw, r)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		// net/http's own messages name the peer's full address (a
		// panic, a bad request line): they are not logged, so no client
		// address finer than its block is.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("rum listener stopped", "err", err)
		}
	}()
	w.stopServerLocked()
	w.srv, w.listen, w.bound = srv, w.cfg.Listen, ln.Addr().String()
	w.log.Info("rum beacon listener", "listen", w.bound, "path", rum.BeaconPath)
	return nil
}

func (w *rumWiring) stopServerLocked() {
	if w.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = w.srv.Shutdown(ctx)
		cancel()
		w.srv, w.listen, w.bound = nil, "", ""
	}
}

// stop ends the listener and the rounds.
func (w *rumWiring) stop(context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopServerLocked()
	w.stopRoundsLocked()
	w.started = false
}

func (w *rumWiring) loop(t *time.Ticker, done chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-t.C:
			w.round()
		}
	}
}

// round feeds the cells changed since the last round, and holding at
// least min_samples decayed beacons, into the latency map as one update.
// Its cost is proportional to the cells changed.
func (w *rumWiring) round() {
	w.mu.Lock()
	r, s := w.cfg, w.store
	w.mu.Unlock()
	if r == nil || s == nil {
		return
	}
	// The blocks evicted go first: one evicted and seen again since is
	// forgotten, then fed anew.
	var ms []latency.Measurement
	for _, p := range s.TakeEvicted() {
		ms = append(ms, latency.Measurement{Key: p.String(), RUM: true, Forget: true})
	}
	ms = append(ms, measurementsOf(s.TakeChanged(), r.MinSamplesOr(), r.QuantileOr())...)
	if len(ms) == 0 {
		return
	}
	w.lat.pushRUM(ms)
	w.mu.Lock()
	w.rounds++
	w.mu.Unlock()
}

// measurementsOf turns aggregates into the latency map's RUM values:
// the configured quantile of each cell with at least minSamples decayed
// beacons as of its newest one (the time since is the latency map's
// staleness to judge), keyed by its block.
func measurementsOf(as []rum.Aggregate, minSamples float64, quantile string) []latency.Measurement {
	ms := make([]latency.Measurement, 0, len(as))
	for _, a := range as {
		// The decay among beacons of one instant is rounding: 3 beacons
		// make 3 samples, not 2.9999.
		if a.Recent+1e-6 < minSamples || a.Recent <= 0 {
			continue
		}
		v := a.P50
		if quantile == "p75" {
			v = a.P75
		}
		ms = append(ms, latency.Measurement{Key: a.Block.String(), Site: a.Site, RTTms: v, Samples: max(1, int(a.Recent+0.5)),
			MeasuredAt: a.Last, RUM: true})
	}
	return ms
}

// refeed returns every cell's value for a fresh latency map, with r's
// settings; called with the latency wiring's lock held, it takes only
// its own and the store's. Its cost is proportional to the cells held,
// once per change of the latency settings.
func (w *rumWiring) refeed(r *config.RUM) []latency.Measurement {
	w.mu.Lock()
	s := w.store
	w.mu.Unlock()
	if s == nil {
		return nil
	}
	return measurementsOf(s.Snapshot(), r.MinSamplesOr(), r.QuantileOr())
}

// addr is the bound listener's address ("" when off).
func (w *rumWiring) addr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bound
}

// status is RUM's part of GET /v1/latency (nil when off).
func (w *rumWiring) status(values, rumValues int) *api.RUMStatus {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg == nil || w.store == nil {
		return nil
	}
	st := w.store.Stats()
	share := 0.0
	if values > 0 {
		share = float64(rumValues) / float64(values)
	}
	o := w.store.Options()
	return &api.RUMStatus{Listen: w.bound, Values: rumValues, Share: share, Weight: w.cfg.WeightOr(), Quantile: w.cfg.QuantileOr(),
		MinSamples: w.cfg.MinSamplesOr(), Interval: w.cfg.IntervalOr().String(), Blocks: st.Blocks, MaxBlocks: o.MaxBlocks,
		Cells: st.Cells, Accepted: st.Accepted, Evictions: st.Evictions, Rounds: w.rounds}
}
