// Package node owns a running steer node: it loads the configuration and
// every file it names, opens the DNS listeners, and runs what feeds the
// answers beside them (health checks, the latency map, the health feed,
// geo database watchers, the query log, the admin API, metrics, the
// anycast speaker and the renewal of DNSSEC signatures). Every change of
// configuration reaches the served snapshot through one serialised reload
// path (see reload.go) and one swap (plan.go); so does a renewal of
// signatures (signing.go), which reads no file. cmd/steer only parses flags, turns signals into calls of
// this package and prints. In a fleet, the membership (the pushed bundle,
// status, shared health, overrides) is an internal/fleetnode.Member the
// node wires in.
//
// Each part is built from what it needs (a logger, a function returning
// the served snapshot, the server it configures), not from the node; only
// the admin API's adapter (backend.go) holds the node. Parts that keep
// state across restarts are given a path in the one state directory
// (config.Config.StatePath, made at New), never one derived from another
// setting: health.json, zones/, secondary/, xfr-serials.json, fleet/.
//
// Lifecycle, as Caddy's App: steer check (Check), New and a reload share
// one plan, which prepares every part from the configuration and collects
// every problem; check aborts it, New commits it without binding a
// listener, a reload swaps and commits it. Start opens and starts the
// parts in order and, when a later part fails, stops those already
// started; Shutdown stops them in reverse order.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/rum"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/traffic"
	"github.com/steer-dns/steer/internal/xfr"
)

// Options configures New.
type Options struct {
	// ConfigPath is the configuration file; empty serves the embedded demo.
	ConfigPath string
	// Listen, when not empty, replaces the configuration's listen
	// addresses (at start and at every reload).
	Listen []string
	// Log receives the node's log; nil discards it.
	Log *slog.Logger
	// WatchInterval is how often geo database, latency and feed files are
	// polled for changes (default 5 s).
	WatchInterval time.Duration
	// Version is reported by status and logs.
	Version string
	// AfterReload, when set, is called after every reload with its result
	// (before waiters are told): tests observe reloads through it.
	AfterReload func(Result)
	// HealthDial, when set, opens the connections of TCP and HTTP(S)
	// health checks: tests route each node's probes through its own proxy.
	HealthDial health.DialFunc
}

// Result is the outcome of one reload.
type Result = api.ReloadResult

// Node is one running steer node.
type Node struct {
	opts   Options
	log    *slog.Logger
	source string // the config file, or "embedded demo"

	srv *dnsserver.Server
	// serving is srv, published once New has made it: the transfer
	// service is made first and reads the served snapshot from its own
	// goroutines (servedSnapshot), which must not read srv unsynchronised.
	serving atomic.Pointer[dnsserver.Server]
	met     *metrics.Metrics
	tr      *traffic.Recorder    // answers per pool, rule and scope over windows (the dashboard)
	reg     *prometheus.Registry // every subsystem's metrics, served at /metrics
	hc      *healthWiring
	lat     *latencyWiring
	rum     *rumWiring
	load    *loadWiring
	ql      *queryLog
	api     *apiWiring
	ac      *anycastWiring
	feed    *health.Feed
	grd     *guardWiring
	fl      *fleetnode.Member // nil: not in a fleet
	// asNode keeps the policies compiled to explain as another node of
	// the fleet (fleetview.go).
	asNode nodeExplainCache
	// fellBack: New found the newest bundle unservable (fleetFallback).
	fellBack bool
	xfr      *xfrWiring
	dash     dashboard // the dashboard's reads and events (dashboard.go)
	// stateDir is the state directory (config.Config.StatePath) of the
	// file the node was started from, made at New; "" keeps nothing (the
	// embedded demo). It holds, in the layout of config's State*
	// constants, the health state, the last good zone copies, the
	// secondary copies, the exported serials and a fleet member's bundle
	// cache and health view. It stays the same until the next restart.
	stateDir string

	// copies writes the served zones' last good copies (copies.go).
	copies copyKeeper

	// first is the plan New prepared and Start serves.
	first *plan
	// geoWatch polls the geo database files, from a baseline taken
	// right after New read them.
	geoWatch *watcher

	// safetyMu serialises the check and the apply of overrides
	// (safety.go).
	safetyMu sync.Mutex

	// The reload path (reload.go).
	reloadMu   sync.Mutex
	pending    pendingReload
	kick       chan struct{}
	seq        atomic.Uint64
	freeing    atomic.Bool // a release of memory to the system is due
	lastResult atomic.Pointer[Result]

	// The signatures of the served snapshot (signing.go): sigs is their
	// state, computed once per snapshot; sigKick tells the renewal timer
	// a new snapshot is served.
	sigs    atomic.Pointer[sigView]
	sigKick chan struct{}
	// keys are the zones' key plans (keyroll.go).
	keys *keyService

	ctx      context.Context // ends at Shutdown: watchers and the reload loop
	cancel   context.CancelFunc
	loops    sync.WaitGroup
	stops    []func(context.Context) // what Start started, in order
	started  bool
	shutOnce sync.Once
}

// New reads the configuration and everything it names and checks it all,
// opening no listener: an API token file that is missing or empty, an
// unset token variable, a query log that cannot be opened or a broken
// configuration fail here, before any part starts. A zone file that
// cannot be loaded does not fail New: that zone serves its last good copy
// or SERVFAIL and the node reports itself degraded.
func New(o Options) (_ *Node, err error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = 5 * time.Second
	}
	n := &Node{opts: o, log: o.Log, source: o.ConfigPath, kick: make(chan struct{}, 1), sigKick: make(chan struct{}, 1)}
	n.copies.log, n.copies.drained = o.Log, n.releaseMemory
	if n.source == "" {
		n.source = "embedded demo"
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	start := time.Now()
	n.log.Info("loading", "config", n.source)
	cfg, err := loadConfig(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	// The state directory is the local file's, in a fleet too (never the
	// pushed bundle's).
	if n.stateDir = cfg.StatePath(); n.stateDir != "" {
		if err := config.MakeStateDir(n.stateDir); err != nil {
			return nil, cfg.StateProblem(err)
		}
		migrateLegacyState(n.log, cfg, n.stateDir)
		n.log.Info("state directory", "dir", n.stateDir)
	} else {
		n.log.Info("no state directory: nothing is kept across restarts", "config", n.source)
	}
	n.keys = newKeyService(n.log, n.stateDir)
	var bundle fleet.Bundle
	if cfg.Fleet != nil {
		n.fl, err = fleetnode.Open(fleetnode.Options{Log: n.log, Local: cfg, Version: o.Version, Reload: n.RequestReload, StateDir: n.stateDir})
		if err != nil {
			return nil, err
		}
		n.keys.shareInFleet(n.fl) // the key plans are the store's (keyroll_fleet.go)
		if cfg, bundle, err = n.fl.Config(nil); err != nil {
			cfg, bundle = n.fleetFallback(bundle, err)
		}
	}
	n.log.Info("configuration read; loading zones and geo databases, compiling policies", "zones", len(cfg.Zones),
		"records", len(cfg.Records), "took", time.Since(start).Round(time.Millisecond))
	n.reg = prometheus.NewRegistry()
	n.met = metrics.New(n.reg)
	n.tr = traffic.New()
	var agreement xfr.Agreement
	if n.fl != nil {
		// In a fleet each new export's serial is agreed through the
		// store, so that every node exports one content under one serial.
		agreement = n.fl.AgreeSerials(func() { n.xfr.HealthChanged() })
	}
	n.xfr = newXfr(n.log, n.reg, n.stateDir, agreement, n.servedSnapshot, func(why string) { n.request(kindZones, why) })
	defer func() {
		if err != nil {
			n.xfr.Close()
		}
	}()
	// In a fleet, a bundle that fails here (its keys, its build) gives
	// way to the bundle last applied, then to the local file alone.
	var snap *snapshot.Snapshot
	for {
		keys, kerrs := snapshot.LoadKeys(cfg)
		err = kerrs.Err()
		if err == nil {
			n.xfr.configure(cfg, keys)
			var warns diag.Problems
			snap, warns, err = n.build(cfg, nil, false, nil)
			logWarnings(n.log, warns)
		}
		if err == nil || n.fl == nil || bundle.Rev == 0 {
			break
		}
		cfg, bundle = n.fleetFallback(bundle, err)
	}
	if err != nil {
		return nil, err
	}
	if n.fl != nil && bundle.Rev != 0 {
		n.fl.Applied(bundle, nil)
	}
	n.log.Info("loaded", "data", snap.Summary(), "took", time.Since(start).Round(time.Millisecond))
	n.setServer(dnsserver.New(snap, n.log))
	current := n.srv.Handler().Snapshot
	n.geoWatch = newWatcher(func() []string { return current().GeoFiles })
	n.srv.Handler().SetMetrics(n.met)
	n.reg.MustRegister(dnsserver.NewTCPCollector(n.srv.TCPStats), snapshot.NewPoolCollector(n.srv.Handler().Snapshot),
		geo.NewCollector(func() *geo.Set { return n.srv.Handler().Snapshot().Geo }))
	n.reg.MustRegister(dnssec.NewCollector(n.dnssecSource))
	n.srv.Handler().SetTransfers(n.xfr)
	n.ql = newQueryLog(n.log, n.srv.Handler(), n.reg)
	n.grd = newGuard(n.log, n.srv, n.reg)
	n.hc = newHealth(n.log, current, n.met, n.reg)
	hc := n.xfr.HealthChanged
	n.hc.afterRefresh.Store(&hc)
	if o.HealthDial != nil {
		n.hc.manager.SetDialer(o.HealthDial)
	}
	n.lat = newLatency(n.log, func() *policy.Live { return current().Live })
	if n.lat.met, err = latency.NewMetrics(n.reg); err != nil {
		return nil, err
	}
	rumMet, err := rum.NewMetrics(n.reg)
	if err != nil {
		return nil, err
	}
	n.rum = newRUM(n.log, rumMet, n.lat)
	n.lat.rum = n.rum
	if n.load, err = newLoad(n.log, func() *policy.Live { return current().Live }, n.reg); err != nil {
		return nil, err
	}
	n.api = &apiWiring{log: n.log, newHandler: func() *api.Handler {
		return api.NewHandler(&backend{n: n}, api.Options{Log: n.log, Metrics: n.met.Handler()})
	}}
	n.feed = health.NewFeed(n.log, n.hc.manager, func() health.Served {
		snap := current()
		return health.Served{Targets: servedTargets(snap), Pool: func(r, p string) (string, error) { return findPool(snap, r, p) }}
	})
	// The API is bound by Start; everything else is prepared here.
	if n.first, err = prepare(cfg, snap, parts{ql: n.ql, grd: n.grd, lat: n.lat}); err != nil {
		return nil, err
	}
	n.first.commit(n)
	return n, nil
}

// fleetFallback is what a fleet node starts from when bundle failed with
// err: the bundle it last applied (kept on disk), when that is another
// one and its configuration reads; else the local file alone. The
// failure is reported (Applied) only for the newest bundle, so fleet
// status says which bundle is served and why the newest is not.
func (n *Node) fleetFallback(bundle fleet.Bundle, err error) (*config.Config, fleet.Bundle) {
	if !n.fellBack {
		n.fl.Applied(bundle, err)
		n.fellBack = true
		if cfg, kept, ok, kerr := n.fl.Kept(nil); ok {
			if kerr == nil {
				n.log.Error("fleet: the newest bundle cannot be served; serving the bundle last applied", "err", err,
					"serial", kept.Meta.Serial, "revision", kept.Rev)
				return cfg, kept
			}
			err = fmt.Errorf("%w; and the bundle last applied: %v", err, kerr)
		}
	} else {
		err = fmt.Errorf("the bundle last applied (serial %d): %w", bundle.Meta.Serial, err)
	}
	n.log.Error("fleet: the published configuration cannot be served; serving the local file alone", "err", err)
	return n.fl.Local(), fleet.Bundle{}
}

// applyFeed points the health feed at cfg's feed file and says what
// changed.
func applyFeed(f *health.Feed, cfg *config.Config) []string {
	p := ""
	if cfg.Health.FeedFile != "" {
		p = cfg.LocalPath(cfg.Health.FeedFile)
	}
	switch old := f.SetPath(p); {
	case old == p:
		return nil
	case old == "":
		return []string{"health.feed_file " + p}
	case p == "":
		p = "(none)"
		fallthrough
	default:
		return []string{fmt.Sprintf("health.feed_file %s -> %s", old, p)}
	}
}

// loadConfig reads path, or the embedded demo when path is empty.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.LoadDemo()
	}
	return config.Load(path)
}

// reloadConfigFile reads the configuration again, keeping prev's parse
// when the file has the same bytes.
func reloadConfigFile(path string, prev *config.Config) (*config.Config, bool, error) {
	if path == "" {
		return config.LoadAgain(config.DemoFS(), config.DemoPath, prev)
	}
	return config.LoadAgain(nil, path, prev)
}

// build compiles cfg into a snapshot. Zones that fail alone are served
// from prev's copy, or the copy kept in the state directory, or SERVFAIL.
// keepServed takes the zones prev serves from their files as they are
// (snapshot.Options.KeepServed), but for those in reread.
func (n *Node) build(cfg *config.Config, prev *snapshot.Snapshot, keepServed bool, reread map[string]bool) (*snapshot.Snapshot, diag.Problems, error) {
	start := time.Now()
	opts := snapshot.Options{Previous: prev, CacheDir: n.statePath(config.StateZones), KeepServed: keepServed, Reread: reread, DeferCopies: true}
	if n.met != nil {
		met, tr := n.met, n.tr
		opts.Hooks = policy.Hooks{Answered: func(record int, d policy.Decision, ecs int) {
			met.Answered(record, d.Pools, d.Rule, d.AllDown)
			tr.Answered(record, &d, ecs)
		}}
	}
	if n.xfr != nil {
		opts.Secondary = n.xfr.copyOf
		opts.Serials = n.xfr.Serials()
	}
	if n.keys != nil {
		opts.ZoneKeys = n.keys.zoneKeys
	}
	snap, warns, err := snapshot.BuildWith(cfg, opts)
	if n.keys != nil && prev != nil {
		// A rebuild's time is what a key event waits for (a start
		// compiles everything, which a key event never does).
		n.keys.built(time.Since(start))
	}
	if err != nil {
		return nil, warns, err
	}
	if len(n.opts.Listen) > 0 {
		snap.Listen = append([]string(nil), n.opts.Listen...)
	}
	n.log.Debug("reload step", "step", "build snapshot", "data", snap.Summary(), "took", time.Since(start).Round(time.Microsecond))
	return snap, warns, nil
}

// statePath is name in the state directory; "" when nothing is kept.
func (n *Node) statePath(name string) string {
	if n.stateDir == "" {
		return ""
	}
	return filepath.Join(n.stateDir, name)
}

// healthStateFile is where the health manager keeps its state for cfg:
// health.state_file (deprecated) when a local file sets it, else
// health.json in the state directory.
func (n *Node) healthStateFile(cfg *config.Config) string {
	if cfg.Health.StateFile != "" && cfg.FS == nil {
		return cfg.HealthStateFile()
	}
	return n.statePath(config.StateHealth)
}

// Start restores operator state, opens the listeners and starts every
// part; when one fails, those already started are stopped and the error
// returned. ctx bounds the start itself.
func (n *Node) Start(ctx context.Context) (err error) {
	if n.started {
		return errors.New("node: already started")
	}
	n.started = true
	defer func() {
		if err != nil {
			n.unwind(context.Background())
		}
	}()
	p := n.first
	n.first = nil // served from here on; a reload must be able to free it
	snap, cfg := p.snap, p.cfg
	// The query log is closed last, after the listeners: queries in flight
	// may still write to it.
	n.onStop(func(context.Context) { n.ql.close() })
	t := time.Now()
	n.hc.setStateFile(n.healthStateFile(cfg))
	n.onStop(func(context.Context) { n.hc.close() })
	n.onStop(func(context.Context) { n.lat.stop() })
	n.onStop(func(context.Context) { n.load.stop() })
	if err := ctx.Err(); err != nil {
		return err
	}
	n.onStop(n.copies.wait) // the last good copies are written before the node stops
	err = n.swap(nil, snap, true)
	if err == nil {
		err = n.srv.Start()
	}
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	n.onStop(func(ctx context.Context) {
		if err := n.srv.Shutdown(ctx); err != nil {
			n.log.Warn("DNS shutdown did not finish in time", "err", err)
		}
	})
	n.logDegraded(snap)
	n.log.Debug("start step", "step", "health, latency and listeners", "took", time.Since(t).Round(time.Microsecond))
	n.onStop(func(context.Context) { n.xfr.Close() })
	n.xfr.refresh() // publishes the exports and notifies the secondaries
	if p.api, err = n.api.prepare(cfg); err != nil {
		return err
	}
	p.api.commit(cfg.API.Token.Value())
	n.onStop(n.api.stop)
	if err := n.rum.start(); err != nil {
		return err
	}
	n.onStop(n.rum.stop)
	if n.ac, err = startAnycast(n.log, snap, n.srv, n.hc.manager, n.met, n.reg); err != nil {
		return fmt.Errorf("anycast: %w", err)
	}
	n.onStop(func(context.Context) { n.ac.stop() })
	// Watchers and the reload loop run until Shutdown; each watcher takes
	// its baseline before its file is read, so no change slips between.
	applyFeed(n.feed, cfg)
	n.loops.Add(6)
	go func() {
		defer n.loops.Done()
		n.tr.Run(n.ctx)
	}()
	go n.reloadLoop()
	go n.watchGeo(n.geoWatch)
	go n.watchInputs()
	go n.renewLoop()
	go n.keyLoop()
	if n.fl != nil {
		interval := func(check string) time.Duration {
			if c, ok := n.srv.Handler().Snapshot().HealthChecks[check]; ok {
				return c.WithDefaults().Interval
			}
			return health.DefaultInterval
		}
		if err := n.fl.ShareHealth(fleetnode.Health{Manager: n.hc.manager, Interval: interval, Reapply: n.hc.reapply}); err != nil {
			return err
		}
		observed, probes := n.fl.Observed, n.fl.Probes
		n.hc.onCheck.Store(&observed)
		n.hc.filter.Store(&probes)
		if err := n.fl.RegisterMetrics(n.reg); err != nil {
			return err
		}
		if err := n.fl.Claim(ctx); err != nil {
			n.fl.Close()
			return err
		}
		n.fl.ShareTraffic(n.tr)
		n.fl.Start(n.ctx)
		n.fl.FollowLoads(n.ctx, n.load.fromFleet)
		n.load.setPublish(func(loads []fleetnode.Load) error { return n.fl.PutLoads(loads, n.load.staleAfter()) })
		n.onStop(func(context.Context) { n.fl.Close() })
	}
	n.log.Info("serving", "config", n.source, "version", n.opts.Version, "data", snap.Summary(),
		"listen", strings.Join(addrStrings(n.srv.Addrs()), " "))
	return nil
}

// Traffic is the node's traffic recorder: answers per pool and rule and
// the ECS scopes returned, over the last 5 minutes and hour (summed over
// the fleet in one).
func (n *Node) Traffic() *traffic.Recorder { return n.tr }

func (n *Node) onStop(f func(context.Context)) { n.stops = append(n.stops, f) }

// unwind stops what Start started, last first.
func (n *Node) unwind(ctx context.Context) {
	n.cancel()
	n.loops.Wait()
	for i := len(n.stops) - 1; i >= 0; i-- {
		n.stops[i](ctx)
	}
	n.stops = nil
}

// Shutdown withdraws the anycast prefixes first (DNS keeps answering for
// the drain period), then stops the watchers and reloads, the DNS
// listeners, the API, the health checks (saving their state) and the
// query log. It may be called once; later calls return at once.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutOnce.Do(func() {
		n.ac.drain()
		n.unwind(ctx)
		n.log.Info("stopped")
	})
	return nil
}

// Addrs returns the DNS listeners' bound addresses.
func (n *Node) Addrs() []netip.AddrPort { return n.srv.Addrs() }

// APIAddr returns the admin API's bound address ("" without one).
func (n *Node) APIAddr() string { return n.api.addr() }

// RUMAddr is the bound address of the beacon listener ("" when off).
func (n *Node) RUMAddr() string { return n.rum.addr() }

// ReopenLogs reopens the query log (logrotate's SIGUSR1).
func (n *Node) ReopenLogs() {
	if err := n.ql.reopen(); err != nil {
		n.log.Error("query log not reopened", "err", err)
	}
}

func addrStrings(as []netip.AddrPort) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func logWarnings(log *slog.Logger, warns diag.Problems) {
	for _, w := range warns {
		log.Warn(w.String())
	}
}

// problemLines lists err's problems, one file:line: message each.
func problemLines(err error) []string {
	var ps diag.Problems
	if errors.As(err, &ps) {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return out
	}
	return strings.Split(strings.TrimSpace(err.Error()), "\n")
}

// degraded lists what the snapshot serves not as configured.
func degraded(snap *snapshot.Snapshot) []string {
	var out []string
	for _, d := range snap.Degraded {
		out = append(out, fmt.Sprintf("zone %s: %s; serving %s", d.Origin, d.Problem, d.Serving))
	}
	return out
}

func (n *Node) logDegraded(snap *snapshot.Snapshot) {
	for _, d := range snap.Degraded {
		n.log.Error("zone failed to load", "zone", d.Origin, "file", d.File, "problem", d.Problem, "serving", d.Serving)
	}
	n.met.SetZonesDegraded(len(snap.Degraded))
}

// ExplainOffline explains req against the configuration at path alone
// (the embedded demo when empty): every pool as its checks have not yet
// said, no operator overrides, the latency files as a node would start
// with them. steer explain --offline uses it; a running node's
// /v1/explain tells the live answer.
func ExplainOffline(path string, req explain.Request, log *slog.Logger) (*explain.Report, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	newLatency(log, nil).prepare(snap)
	h := dnsserver.NewHandler(snap)
	// The guard as the configuration sets it, with empty buckets: explain
	// says how the answer is keyed and whether rate limiting applies.
	g, err := (&guardWiring{random: cookie.Random()}).prepare(cfg)
	if err != nil {
		return nil, err
	}
	h.SetGuard(g.guard)
	return explain.Run(h, req)
}
