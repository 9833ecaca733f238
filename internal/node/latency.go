package node

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
)

// latencyWiring feeds the latency map from its files and from pushes, and
// re-evaluates the live table's by: latency choices after each update
// (each applied file version or push is one update, as anti-flap counts
// them) and when a value turns stale.
type latencyWiring struct {
	log     *slog.Logger
	met     *latency.Metrics
	current func() *policy.Live // the live state of the table being served (nil: none)

	mu    sync.Mutex // serialises updates and evaluations
	opts  latency.Options
	store *latency.Store
	hyst  *policy.LatencyMemory // anti-flap state, shared by records that evaluate alike
	// fsys says where each file is read from: an absolute path is on the
	// node's disk (also in a fleet, whose configuration comes from a
	// bundle) and is watched; a relative one of a configuration read from
	// an FS (the embedded demo) is read once, from there.
	fsys    *config.Config
	files   []string
	stamps  map[string]fileStamp
	last    time.Time
	lastSrc string
	stats   policy.LatencyStats
	timer   *time.Timer
	pending map[string]bool // during prepare: the sites of the snapshot being prepared
	// onFresh returns (l.mu held) every RUM value for cfg when a fresh
	// map starts: they land in it with the files, before the first
	// evaluation. rum reports RUM's part of status.
	onFresh func(cfg *config.RUM) []latency.Measurement
	rum     *rumWiring
}

func newLatency(log *slog.Logger, current func() *policy.Live) *latencyWiring {
	return &latencyWiring{log: log, current: current, stamps: map[string]fileStamp{}}
}

// prepare takes snap's latency settings, reads the latency files that are
// new or changed, and evaluates snap's table, before snap goes live. New
// smoothing or anti-flap settings start a fresh map (every file read
// again); otherwise the map and each network's state carry over. It
// returns the files rejected (errs) and those not readable (warns): a
// node serves without them, steer check reports them.
func (l *latencyWiring) prepare(snap *snapshot.Snapshot) (errs, warns []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := snap.Config
	o := cfg.Latency.LatencyOptions()
	if cfg.RUM != nil {
		o.RUMWeight = cfg.RUM.WeightOr()
	}
	fresh := l.store == nil || o != l.opts
	if fresh {
		if l.store != nil {
			l.log.Info("latency settings changed: starting a fresh latency map")
		}
		l.opts, l.store, l.hyst = o, latency.NewStore(o), policy.NewLatencyMemory(o)
		clear(l.stamps)
	}
	l.fsys = cfg
	// Files read before the swap are checked against the new records.
	l.pending = snap.Policies.LatencySites()
	defer func() { l.pending = nil }()
	l.files = l.files[:0]
	for _, f := range cfg.Latency.Files {
		l.files = append(l.files, cfg.LocalPath(f))
	}
	for p := range l.stamps {
		if !slices.Contains(l.files, p) {
			delete(l.stamps, p)
		}
	}
	applied, errs, warns := l.readChanged()
	if fresh && cfg.RUM != nil && l.onFresh != nil {
		if ms := l.onFresh(cfg.RUM); len(ms) > 0 {
			l.store.Update(ms, time.Now())
			l.log.Info("real-user values applied to the fresh latency map", "values", len(ms), "update", l.store.Updates())
		}
	}
	if snap.Live != nil {
		l.evaluate(snap.Live, "load")
	}
	l.logApplied(applied)
	return errs, warns
}

// readChanged applies every file whose stamp differs from the one last
// read, one update per file; the caller holds l.mu. A file that does not
// parse is rejected whole (the error names file:line) and the map keeps
// what it had. It reports the updates applied (for logApplied, once the
// answers follow them), the files rejected and those not read.
func (l *latencyWiring) readChanged() (applied []fileApplied, errs, warns []string) {
	notRead := func(p string, err error) {
		l.log.Error("latency file not read", "file", p, "err", err)
		warns = append(warns, fmt.Sprintf("%s: warning: latency file not readable (serve starts without it): %v", l.fsys.File, err))
	}
	for _, p := range l.files {
		var st fileStamp
		if l.fsys.LocalFS(p) == nil {
			var err error
			if st, err = stampOf(p); err != nil {
				if _, seen := l.stamps[p]; !seen {
					notRead(p, err)
				}
				l.stamps[p] = st
				continue
			}
		}
		if old, ok := l.stamps[p]; ok && old == st {
			continue
		}
		// The stamp is taken before the read: a change racing the read is
		// seen again at the next poll.
		l.stamps[p] = st
		data, err := config.ReadFile(l.fsys.LocalFS(p), p)
		if err != nil {
			notRead(p, err)
			l.count("file", false)
			continue
		}
		ms, err := parseLatency(p, data)
		if err == nil {
			err = latency.Check(ms, l.sites(), time.Now())
		}
		if err != nil {
			l.log.Error("latency file rejected; the map keeps its previous values", "err", err)
			errs = append(errs, err.Error())
			l.count("file", false)
			continue
		}
		now := time.Now()
		l.store.Update(ms, now)
		l.last, l.lastSrc = now, "file "+p
		l.publish()
		l.count("file", true)
		applied = append(applied, fileApplied{p, len(ms), l.store.Updates()})
	}
	return applied, errs, warns
}

// fileApplied is a latency file version readChanged applied.
type fileApplied struct {
	file         string
	measurements int
	update       uint64
}

// logApplied logs the file versions applied, after the caller evaluated
// the answers' latency choices with them: an operator (or a test) who
// reads "applied" finds the answers already following it.
func (l *latencyWiring) logApplied(applied []fileApplied) {
	for _, a := range applied {
		l.log.Info("latency file applied", "file", a.file, "measurements", a.measurements, "update", a.update)
	}
}

// sites are the site names the served records' latency rules measure.
func (l *latencyWiring) sites() map[string]bool {
	if l.pending != nil || l.current == nil {
		return l.pending
	}
	if t := l.current(); t != nil {
		return t.Table().LatencySites()
	}
	return nil
}

// parseLatency reads a latency file: JSON when its name ends in .json,
// CSV otherwise.
func parseLatency(name string, data []byte) ([]latency.Measurement, error) {
	if strings.HasSuffix(strings.ToLower(name), ".json") {
		return latency.ParseJSON(name, bytes.NewReader(data))
	}
	return latency.ParseCSV(name, bytes.NewReader(data))
}

func (l *latencyWiring) count(source string, ok bool) { l.met.Update(source, ok) }

// publish sets the latency gauges from the map; the caller holds l.mu.
func (l *latencyWiring) publish() {
	if l.store != nil {
		l.met.Set(l.store.Map().Len(), l.stats.Networks, l.last, l.stats.Took)
	}
}

// evaluate recomputes t's latency choices from the current map; the
// caller holds l.mu. It also arms the timer for the next value to turn
// stale, which re-evaluates without counting as an update.
func (l *latencyWiring) evaluate(t *policy.Live, why string) {
	now := time.Now()
	m := l.store.Map()
	l.stats = t.SetLatency(m, l.hyst, l.store.Updates(), now)
	l.publish()
	if l.stats.Networks > 0 {
		l.log.Debug("latency choices evaluated", "why", why, "update", l.stats.Update, "networks", l.stats.Networks, "evaluated", l.stats.Evaluated,
			"groups", l.stats.Groups, "reused", l.stats.Reused, "records", l.stats.Records, "cells", l.stats.Cells, "rankings", l.stats.Rankings,
			"took", l.stats.Took.Round(time.Microsecond))
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if next := m.NextStale(now); !next.IsZero() && l.current != nil {
		l.timer = time.AfterFunc(time.Until(next)+10*time.Millisecond, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if t := l.current(); t != nil {
				l.count("stale", true)
				l.evaluate(t, "a measurement turned stale")
			}
		})
	}
}

// hold evaluates t's latency choices with the health t goes live with
// (swap sets it first) and at the latest update (one can land between
// prepare and the swap), and keeps every update waiting until release is
// called: the swap serving t runs between. The groups whose inputs are
// those prepare evaluated with (every pool up, the same update) keep
// that evaluation; the others are evaluated again, so anti-flap never
// counts a round for a pool that is down.
func (l *latencyWiring) hold(t *policy.Live) (release func()) {
	l.mu.Lock()
	if t != nil && l.store != nil {
		l.evaluate(t, "before a swap")
	}
	return l.mu.Unlock
}

// poll applies changed files to the live table.
func (l *latencyWiring) poll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if applied, _, _ := l.readChanged(); len(applied) > 0 {
		if t := l.current(); t != nil {
			l.evaluate(t, "latency file changed")
		}
		l.logApplied(applied)
	}
}

// changed reports whether a latency file differs from the one last read.
func (l *latencyWiring) changed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fsys == nil {
		return false
	}
	for _, p := range l.files {
		if l.fsys.LocalFS(p) != nil {
			continue // read once from the configuration's FS
		}
		st, _ := stampOf(p)
		if old, ok := l.stamps[p]; !ok || old != st {
			return true
		}
	}
	return false
}

// stop ends the stale timer.
func (l *latencyWiring) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// push applies one batch from the admin API as one update.
func (l *latencyWiring) push(format string, body io.Reader) (api.LatencyResult, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return api.LatencyResult{}, err
	}
	start := time.Now()
	var ms []latency.Measurement
	if format == api.LatencyCSV {
		ms, err = latency.ParseCSV("body", bytes.NewReader(data))
	} else {
		ms, err = latency.ParseJSON("body", bytes.NewReader(data))
	}
	if err != nil {
		l.count("push", false)
		return api.LatencyResult{}, fmt.Errorf("%w: %v (nothing applied)", api.ErrBadInput, err)
	}
	if len(ms) == 0 {
		l.count("push", false)
		return api.LatencyResult{}, fmt.Errorf("%w: the batch holds no measurements", api.ErrBadInput)
	}
	if err := latency.Check(ms, l.sites(), time.Now()); err != nil {
		l.count("push", false)
		return api.LatencyResult{}, fmt.Errorf("%w: %v (nothing applied)", api.ErrBadInput, err)
	}
	parsed := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.store.Update(ms, parsed)
	stored := time.Now()
	l.last, l.lastSrc = parsed, "push"
	l.publish()
	l.count("push", true)
	if t := l.current(); t != nil {
		l.evaluate(t, "latency push")
	}
	res := api.LatencyResult{Applied: len(ms), Update: l.store.Updates(), Networks: l.stats.Networks,
		Parse: parsed.Sub(start).Round(time.Microsecond).String(), Store: stored.Sub(parsed).Round(time.Microsecond).String(),
		Evaluate: l.stats.Took.Round(time.Microsecond).String(), Took: time.Since(start).Round(time.Microsecond).String()}
	l.log.Info("latency push applied", "measurements", len(ms), "update", res.Update, "networks", res.Networks,
		"parse", res.Parse, "store", res.Store, "evaluate", res.Evaluate, "took", res.Took)
	return res, nil
}

// pushRUM applies one round of real-user values (already checked by the
// intake) as one update.
func (l *latencyWiring) pushRUM(ms []latency.Measurement) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		return
	}
	now := time.Now()
	l.store.Update(ms, now)
	l.last, l.lastSrc = now, "rum"
	l.publish()
	l.count("rum", true)
	if t := l.current(); t != nil {
		l.evaluate(t, "rum round")
	}
	l.log.Debug("rum round applied", "values", len(ms), "update", l.store.Updates(), "networks", l.stats.Networks)
}

// status describes the map for the admin API.
func (l *latencyWiring) status() api.LatencyStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.store.Map()
	return api.LatencyStatus{Update: l.store.Updates(), Values: m.Len(), Prefixes: m.NumPrefixes(), Networks: l.stats.Networks,
		LastUpdate: l.last, LastSource: l.lastSrc, Files: append([]string(nil), l.files...),
		HalfLife: l.opts.HalfLife.String(), MaxAge: l.opts.MaxAge.String(), SwitchRounds: l.opts.SwitchRounds, Margin: l.opts.SwitchMargin,
		RUM: l.rum.status(m.Len(), m.RUMValues())}
}
