package node

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/loadfeed"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
)

// loadWiring is capacity feedback's input side: pools' loads from the
// load files, PUT /v1/load and (in a fleet) the store, each update one
// step of the served table's loop (policy.Live.SetLoad), plus a step
// when a load turns stale, so that a stale pool gets its networks back
// without waiting for the next update.
type loadWiring struct {
	log     *slog.Logger
	current func() *policy.Live

	mu      sync.Mutex
	loads   map[[2]string]policy.Load // by canonical record name and pool
	opts    policy.ShedOptions
	fsys    *config.Config
	files   []string
	stamps  map[string]fileStamp
	last    time.Time
	lastSrc string
	pools   []policy.PoolLoad
	timer   *time.Timer
	stopped bool

	// publish, when set (fleet mode), shares an update with the other
	// nodes (setPublish); it is called without mu held.
	publish func(loads []fleetnode.Load) error

	ratio, shed, stale *prometheus.GaugeVec
	updates            *prometheus.CounterVec
}

func newLoad(log *slog.Logger, current func() *policy.Live, reg prometheus.Registerer) (*loadWiring, error) {
	l := &loadWiring{log: log, current: current, loads: map[[2]string]policy.Load{}, stamps: map[string]fileStamp{}}
	gv := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "steer", Subsystem: "capacity", Name: name, Help: help}, []string{"record", "pool"})
	}
	l.ratio = gv("load_ratio", "A capacity pool's last reported load as a share of its target (1 = at target).")
	l.shed = gv("shed_share", "The share of a capacity pool's answers (over the last step) that its shed networks took.")
	l.stale = gv("load_stale", "1 when a capacity pool's load is older than load.stale_after (ignored), or none was reported.")
	l.updates = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "steer", Subsystem: "capacity", Name: "updates_total",
		Help: "Load updates by source (file, api, fleet, stale) and result (applied, rejected)."}, []string{"source", "result"})
	if reg != nil {
		for _, c := range []prometheus.Collector{l.ratio, l.shed, l.stale, l.updates} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

func (l *loadWiring) count(source string, ok bool) {
	res := "applied"
	if !ok {
		res = "rejected"
	}
	l.updates.WithLabelValues(source, res).Inc()
}

// configure takes snap's load settings after it went live, reads the
// load files that are new or changed, and steps the new table once (its
// shed networks were carried over from the previous table's).
func (l *loadWiring) configure(snap *snapshot.Snapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := snap.Config
	lc := cfg.Load
	l.opts = policy.ShedOptions{MaxShift: lc.MaxShift, LowWater: lc.LowWater, StaleAfter: time.Duration(lc.StaleAfter)}.WithDefaults()
	l.fsys = cfg
	l.files = l.files[:0]
	for _, f := range lc.Files {
		l.files = append(l.files, cfg.LocalPath(f))
	}
	for p := range l.stamps {
		if !slices.Contains(l.files, p) {
			delete(l.stamps, p)
		}
	}
	l.readChanged()
	l.step("configuration")
}

// readChanged applies every load file whose stamp changed; the caller
// holds mu. A file that does not parse, or names an unknown pool, is
// rejected whole (the error names file and item) and the loads stay.
func (l *loadWiring) readChanged() (applied bool) {
	for _, p := range l.files {
		var st fileStamp
		if l.fsys.LocalFS(p) == nil {
			var err error
			if st, err = stampOf(p); err != nil {
				if _, seen := l.stamps[p]; !seen {
					l.log.Error("load file not readable", "file", p, "err", err)
				}
				l.stamps[p] = st
				continue
			}
		}
		if old, ok := l.stamps[p]; ok && old == st {
			continue
		}
		l.stamps[p] = st
		data, err := config.ReadFile(l.fsys.LocalFS(p), p)
		if err == nil {
			var items []api.LoadItem
			if items, err = parseLoad(p, data); err == nil {
				_, err = l.apply(items, time.Now())
			}
		}
		if err != nil {
			l.log.Error("load file rejected; the loads keep their previous values", "err", err)
			l.count("file", false)
			continue
		}
		l.last, l.lastSrc = time.Now(), "file "+p
		l.count("file", true)
		applied = true
	}
	return applied
}

// changed reports whether a load file differs from the one last read.
func (l *loadWiring) changed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.files {
		if l.fsys != nil && l.fsys.LocalFS(p) != nil {
			continue
		}
		st, _ := stampOf(p)
		if old, ok := l.stamps[p]; !ok || old != st {
			return true
		}
	}
	return false
}

// poll applies changed files, each one step.
func (l *loadWiring) poll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readChanged() {
		l.step("load file changed")
	}
}

// parseLoad reads a load file or body (loadfeed.Parse).
func parseLoad(name string, data []byte) ([]api.LoadItem, error) { return loadfeed.Parse(name, data) }

// apply checks items against the served table and, all good, stores
// them; the caller holds mu. Nothing is stored when one is bad.
func (l *loadWiring) apply(items []api.LoadItem, now time.Time) ([]fleetnode.Load, error) {
	live := l.current()
	if live == nil {
		return nil, fmt.Errorf("%w: no table is served yet", api.ErrBadInput)
	}
	t := live.Table()
	type kv struct {
		k [2]string
		v policy.Load
	}
	out := make([]kv, 0, len(items))
	for i, it := range items {
		at := fmt.Sprintf("loads[%d]", i)
		if it.Record == "" || it.Pool == "" {
			return nil, fmt.Errorf("%w: %s: record and pool are required", api.ErrBadInput, at)
		}
		name := dns.CanonicalName(it.Record)
		r := t.Get(name)
		if r == nil {
			return nil, fmt.Errorf("%w: %s: no steered record %q", api.ErrNotFound, at, it.Record)
		}
		var p *policy.Pool
		for _, x := range r.Pools {
			if x.Name == it.Pool {
				p = x
			}
		}
		if p == nil {
			return nil, fmt.Errorf("%w: %s: record %s has no pool %q", api.ErrNotFound, at, it.Record, it.Pool)
		}
		if p.Capacity == nil {
			return nil, fmt.Errorf("%w: %s: pool %s of %s declares no capacity (capacity: { target: N })", api.ErrNotFound, at, it.Pool, it.Record)
		}
		if it.Current == nil {
			return nil, fmt.Errorf("%w: %s: current-load is required", api.ErrBadInput, at)
		}
		v := *it.Current
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("%w: %s: current-load %v is not a number ≥ 0", api.ErrBadInput, at, v)
		}
		ts := now
		if it.Timestamp != "" {
			var err error
			if ts, err = time.Parse(time.RFC3339Nano, it.Timestamp); err != nil {
				return nil, fmt.Errorf("%w: %s: timestamp %q is not RFC 3339", api.ErrBadInput, at, it.Timestamp)
			}
			if ts.After(now.Add(5 * time.Second)) {
				return nil, fmt.Errorf("%w: %s: timestamp %s is in the future", api.ErrBadInput, at, it.Timestamp)
			}
		}
		out = append(out, kv{[2]string{name, it.Pool}, policy.Load{Value: v, At: ts}})
	}
	res := make([]fleetnode.Load, 0, len(out))
	for _, e := range out {
		res = append(res, fleetnode.Load{Record: e.k[0], Pool: e.k[1], Current: e.v.Value, At: e.v.At})
		if old, ok := l.loads[e.k]; ok && old.At.After(e.v.At) {
			continue // an older measurement than the one held
		}
		l.loads[e.k] = e.v
	}
	return res, nil
}

// fromFleet takes the loads in the fleet's store (every node's PUTs):
// those newer than the ones held, of pools the served table has with a
// capacity, are applied as one step.
func (l *loadWiring) fromFleet(loads []fleetnode.Load) {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := l.current()
	if live == nil {
		return
	}
	t := live.Table()
	newer := false
	for _, fl := range loads {
		r := t.Get(fl.Record)
		if r == nil {
			continue // a record this node's table does not have (yet)
		}
		k := [2]string{fl.Record, fl.Pool}
		if old, ok := l.loads[k]; ok && !fl.At.After(old.At) {
			continue
		}
		for _, p := range r.Pools {
			if p.Name == fl.Pool && p.Capacity != nil && !math.IsNaN(fl.Current) && fl.Current >= 0 {
				l.loads[k] = policy.Load{Value: fl.Current, At: fl.At}
				newer = true
			}
		}
	}
	if newer {
		l.last, l.lastSrc = time.Now(), "fleet"
		l.count("fleet", true)
		l.step("fleet")
	}
}

// step runs one step of the served table's loop; the caller holds mu.
func (l *loadWiring) step(why string) {
	live := l.current()
	if live == nil || l.stopped {
		return
	}
	now := time.Now()
	l.pools = live.SetLoad(func(record, pool string) (policy.Load, bool) {
		v, ok := l.loads[[2]string{record, pool}]
		return v, ok
	}, now, l.opts)
	l.ratio.Reset()
	l.shed.Reset()
	l.stale.Reset()
	next := time.Time{}
	for _, p := range l.pools {
		stale := 0.0
		if p.State == "stale" || p.State == "no data" {
			stale = 1
		}
		l.ratio.WithLabelValues(p.Record, p.Pool).Set(p.Ratio())
		l.shed.WithLabelValues(p.Record, p.Pool).Set(p.ShedShare)
		l.stale.WithLabelValues(p.Record, p.Pool).Set(stale)
		if p.Moved != 0 {
			l.log.Info("capacity: networks moved", "record", p.Record, "pool", p.Pool, "moved", p.Moved, "why", why, "reason", p.Reason())
		}
		if stale == 0 {
			if s := p.At.Add(l.opts.StaleAfter); next.IsZero() || s.Before(next) {
				next = s
			}
		}
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if !next.IsZero() {
		l.timer = time.AfterFunc(time.Until(next)+10*time.Millisecond, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.count("stale", true)
			l.step("a load turned stale")
		})
	}
}

// put applies one batch from the admin API (or the fleet store: source
// "fleet") as one step.
func (l *loadWiring) put(body io.Reader, source string) (api.LoadResult, []fleetnode.Load, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return api.LoadResult{}, nil, err
	}
	items, err := parseLoad("body", data)
	if err != nil {
		l.count(source, false)
		return api.LoadResult{}, nil, fmt.Errorf("%w: %v (nothing applied)", api.ErrBadInput, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	loads, err := l.apply(items, time.Now())
	if err != nil {
		l.count(source, false)
		return api.LoadResult{}, nil, fmt.Errorf("%w (nothing applied)", err)
	}
	l.last, l.lastSrc = time.Now(), source
	l.count(source, true)
	l.step(source)
	return api.LoadResult{Applied: len(items), Pools: l.apiPools()}, loads, nil
}

// apiPools is the pools' state for the API; the caller holds mu.
func (l *loadWiring) apiPools() []api.PoolLoad {
	out := make([]api.PoolLoad, 0, len(l.pools))
	for _, p := range l.pools {
		out = append(out, toAPILoad(p))
	}
	return out
}

func toAPILoad(p policy.PoolLoad) api.PoolLoad {
	a := api.PoolLoad{Record: strings.TrimSuffix(p.Record, "."), Pool: p.Pool, Target: p.Target, Load: p.Load, At: p.At,
		Percent: math.Round(1000*p.Ratio()) / 10, State: p.State, Networks: p.Networks, Shed: p.Shed,
		ShedShare: math.Round(1000*p.ShedShare) / 1000, Reason: p.Reason()}
	if !math.IsInf(p.Max, 1) {
		m := p.Max
		a.Max = &m
	}
	return a
}

// status describes the loop for GET /v1/load.
func (l *loadWiring) status() api.LoadStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	pools := l.apiPools()
	if len(pools) == 0 {
		if live := l.current(); live != nil {
			for _, p := range live.Loads() {
				pools = append(pools, toAPILoad(p))
			}
		}
	}
	return api.LoadStatus{Files: slices.Clone(l.files), MaxShift: l.opts.MaxShift, LowWater: l.opts.LowWater,
		StaleAfter: l.opts.StaleAfter.String(), LastUpdate: l.last, LastSource: l.lastSrc, Pools: pools}
}

// setPublish makes every PUT fleet-wide through pub (fleet mode).
func (l *loadWiring) setPublish(pub func([]fleetnode.Load) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.publish = pub
}

// staleAfter is the age past which a load is ignored (load.stale_after).
func (l *loadWiring) staleAfter() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.StaleAfter
}

func (l *loadWiring) publisher() func([]fleetnode.Load) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.publish
}

func (l *loadWiring) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// PutLoad implements api.LoadBackend.
func (b *backend) PutLoad(body io.Reader) (api.LoadResult, error) {
	res, loads, err := b.n.load.put(body, "api")
	if err != nil {
		return res, err
	}
	if pub := b.n.load.publisher(); pub != nil {
		// Fleet-wide: every node (this one again, as a no-op) follows
		// the store.
		if perr := pub(loads); perr != nil {
			return res, &api.PendingError{Where: "fleet", Reason: perr.Error()}
		}
	}
	return res, nil
}

// Loads implements api.LoadBackend.
func (b *backend) Loads() api.LoadStatus {
	st := b.n.load.status()
	if fl := b.n.fl; fl != nil {
		st.Pending = fl.PendingLoads()
	}
	return st
}
