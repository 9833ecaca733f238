package node

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/snapshot"
)

// The one reload path. SIGHUP, POST /v1/reload and every file watcher ask
// through request; one goroutine (reloadLoop) runs the reloads one at a
// time. Requests that arrive while a reload runs are merged into exactly
// one more reload after it, which reads the files anew: none is lost, none
// overlaps another, and the last files written are the ones served.
//
// What each trigger reloads is its own input only:
//   - kindConfig (SIGHUP, the API): the configuration, zones and
//     everything they name, and the query log reopened;
//   - kindGeo (a geo database file changed): the geo databases and the
//     policies compiled against them, with the served config and zones;
//   - kindInputs (the poll of the latency and health feed files): those
//     files only;
//   - kindZones (a secondary zone transferred or expired, a zone given a
//     new serial to export, a reload of named zones: POST
//     /v1/reload?zone=): the served configuration built again, which
//     keeps every zone and policy that did not change, the named zones'
//     files looked at again (pendingReload.reread);
//   - kindResign (the renewal timer, signing.go): the served snapshot
//     with the signatures due made anew, reading no file; it
//     runs after a reload of another kind, whatever that one's outcome,
//     and is not the "last reload" status reports.

type reloadKind uint8

const (
	kindConfig reloadKind = 1 << iota
	kindGeo
	kindInputs
	// kindZones: the served configuration again, for a secondary zone's
	// new copy or a zone's new exported serial (xfr.go).
	kindZones
	// kindResign: the served configuration again with the DNSSEC
	// signatures due made anew (signing.go).
	kindResign
)

// pendingReload is what waits for the next run.
type pendingReload struct {
	kinds    reloadKind
	triggers []string
	waiters  []chan Result
	// forcedBy, when set, is the caller of a forced reload: a safety
	// rule does not refuse it (checkReloadSafety).
	forcedBy string
	// reread are the zones (canonical origins) whose files a kindZones
	// reload reads again when they changed (ReloadZones).
	reread map[string]bool
}

// request queues a reload of kind and returns a channel that receives its
// result (buffered: a caller that does not wait loses nothing).
func (n *Node) request(kind reloadKind, trigger string) <-chan Result {
	return n.requestBy(kind, trigger, "")
}

// requestBy is request; a forcedBy caller forces the reload past the
// safety rules (and every request merged with it).
func (n *Node) requestBy(kind reloadKind, trigger, forcedBy string) <-chan Result {
	return n.requestZones(kind, trigger, forcedBy, nil)
}

// requestZones is requestBy with zones whose files are read again.
func (n *Node) requestZones(kind reloadKind, trigger, forcedBy string, zones []string) <-chan Result {
	ch := make(chan Result, 1)
	n.reloadMu.Lock()
	if forcedBy != "" {
		n.pending.forcedBy = forcedBy
	}
	for _, o := range zones {
		if n.pending.reread == nil {
			n.pending.reread = map[string]bool{}
		}
		n.pending.reread[o] = true
	}
	n.pending.kinds |= kind
	if !containsString(n.pending.triggers, trigger) {
		n.pending.triggers = append(n.pending.triggers, trigger)
	}
	n.pending.waiters = append(n.pending.waiters, ch)
	n.reloadMu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default: // a kick is already pending; it will see this request
	}
	return ch
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Reload re-reads the configuration, zones and everything they name, as
// SIGHUP does, and waits for the result (or ctx). The error is non-nil
// when the configuration was rejected and the old one keeps serving.
func (n *Node) Reload(ctx context.Context) (Result, error) {
	return n.wait(ctx, n.request(kindConfig, "api"))
}

// ReloadZones reads the files of the named zones again, as Knot's
// zone-reload does, and serves those that changed with everything else
// as it is served (the configuration is not read): its cost is the
// zones named, not every zone's stat. A zone the served configuration
// does not have is api.ErrNotFound, a secondary zone (its copy comes
// from its primaries) api.ErrBadInput; then nothing is reloaded.
func (n *Node) ReloadZones(ctx context.Context, zones []string) (Result, error) {
	snap := n.srv.Handler().Snapshot()
	origins := make([]string, 0, len(zones))
	for _, z := range zones {
		o := dns.CanonicalName(strings.TrimSpace(z))
		switch {
		case snap.Zones.Zone(o) == nil:
			return Result{}, fmt.Errorf("%w: zone %q is not served", api.ErrNotFound, z)
		case snap.Secondaries[o]:
			return Result{}, fmt.Errorf("%w: zone %s is a secondary: its copy comes from its primaries (POST /v1/zones/%s/refresh)", api.ErrBadInput, o, strings.TrimSuffix(o, "."))
		}
		origins = append(origins, o)
	}
	if len(origins) == 0 {
		return Result{}, fmt.Errorf("%w: no zone named", api.ErrBadInput)
	}
	return n.wait(ctx, n.requestZones(kindZones, "api (zones "+strings.Join(origins, " ")+")", "", origins))
}

// ReloadForced is Reload past the safety rules: a configuration that
// disables or weights out a pool a rule needs is applied anyway, and
// logged with caller.
func (n *Node) ReloadForced(ctx context.Context, caller string) (Result, error) {
	return n.wait(ctx, n.requestBy(kindConfig, "api (forced)", caller))
}

// RequestReload asks for a reload without waiting (SIGHUP); its result
// is logged.
func (n *Node) RequestReload(trigger string) { n.request(kindConfig, trigger) }

func (n *Node) wait(ctx context.Context, ch <-chan Result) (Result, error) {
	select {
	case r := <-ch:
		if !r.Applied {
			return r, errors.New(strings.Join(r.Problems, "\n"))
		}
		return r, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-n.ctx.Done():
		return Result{}, errors.New("node: shutting down")
	}
}

// reloadLoop runs the queued reloads one at a time until Shutdown.
func (n *Node) reloadLoop() {
	defer n.loops.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.kick:
		}
		n.reloadMu.Lock()
		p := n.pending
		n.pending = pendingReload{}
		n.reloadMu.Unlock()
		if p.kinds == 0 {
			continue
		}
		res := n.runReload(p)
		if n.opts.AfterReload != nil {
			n.opts.AfterReload(res)
		}
		for _, w := range p.waiters {
			w <- res
		}
	}
}

// runReload does one reload of the kinds in p.
func (n *Node) runReload(p pendingReload) Result {
	start := time.Now()
	res := Result{Seq: n.seq.Add(1), Trigger: strings.Join(p.triggers, ", "), Applied: true}
	if p.kinds&(kindConfig|kindGeo|kindZones|kindResign) != 0 {
		defer boundReloadMemory()()
	}
	switch {
	case p.kinds&kindConfig != 0:
		n.reloadConfig(&res, p.forcedBy)
	case p.kinds&kindGeo != 0:
		n.reloadGeo(&res)
		if p.kinds&kindZones != 0 && res.Applied {
			n.rebuildZones(&res, p.reread)
		}
	case p.kinds&kindZones != 0:
		n.rebuildZones(&res, p.reread)
	}
	if p.kinds&kindResign != 0 {
		// Signatures are renewed whether or not a reload queued with
		// the renewal was applied: a rejected configuration must not
		// let the served one's signatures expire.
		rr := Result{Applied: true}
		n.renew(&rr)
		if !rr.Applied {
			res.Applied = false
			res.Problems = append(res.Problems, rr.Problems...)
		}
		res.Changed = append(res.Changed, rr.Changed...)
	}
	if p.kinds&(kindConfig|kindGeo|kindZones|kindResign) != 0 && n.xfr != nil {
		// A renewal changes a signed zone's export (its signatures):
		// it is exported under the next serial.
		n.xfr.refresh()
	}
	if p.kinds&kindInputs != 0 && p.kinds&kindConfig == 0 {
		n.lat.poll()
		n.feed.Poll()
		n.load.poll()
	}
	res.Took = time.Since(start).Round(time.Microsecond).String()
	if p.kinds&(kindConfig|kindGeo|kindZones) != 0 {
		n.met.Reload(res.Applied)
		n.lastResult.Store(&res)
		n.logResult(&res)
	}
	return res
}

func (n *Node) logResult(res *Result) {
	if !res.Applied {
		for _, p := range res.Problems {
			n.log.Error("reload rejected; still serving the previous configuration", "trigger", res.Trigger, "problem", p)
		}
		return
	}
	for _, w := range res.RestartNeeded {
		n.log.Warn("reload: a changed setting takes effect at the next restart", "setting", w)
	}
	snap := n.srv.Handler().Snapshot()
	n.log.Info("reloaded", "trigger", res.Trigger, "seq", res.Seq, "config", n.source, "data", snap.Summary(),
		"changed", strings.Join(res.Changed, "; "), "took", res.Took)
}

func (n *Node) reject(res *Result, err error) {
	res.Applied = false
	res.Problems = problemLines(err)
}

// reloadConfig re-reads everything and applies it all, or nothing when
// the configuration is invalid. Settings that cannot change while
// running are named in res.RestartNeeded.
func (n *Node) reloadConfig(res *Result, forcedBy string) {
	step := func(name string, t time.Time) {
		n.log.Debug("reload step", "step", name, "took", time.Since(t).Round(time.Microsecond))
	}
	t := time.Now()
	old := n.srv.Handler().Snapshot()
	var cfg *config.Config
	var same bool
	var err error
	var bundle fleet.Bundle
	if n.fl != nil {
		// The node's own file too, unless the reload is a push's.
		if res.Trigger != "fleet" {
			restart, err := n.fl.ReloadLocal(n.opts.ConfigPath)
			if err != nil {
				n.reject(res, err)
				return
			}
			res.RestartNeeded = append(res.RestartNeeded, restart...)
		}
		cfg, bundle, err = n.fl.Config(old.Config)
		same = cfg == old.Config
		defer func() {
			if bundle.Rev != 0 {
				var e error
				if !res.Applied {
					e = errors.New(strings.Join(res.Problems, "; "))
				}
				n.fl.Applied(bundle, e)
			}
		}()
	} else {
		cfg, same, err = reloadConfigFile(n.opts.ConfigPath, old.Config)
	}
	if err != nil {
		n.reject(res, err)
		return
	}
	step("read config", t)
	if same {
		n.log.Debug("reload: the configuration file is unchanged; its parse is kept")
	}
	snap, warns, err := n.build(cfg, old, false, nil)
	logWarnings(n.log, warns)
	for _, w := range warns {
		res.Warnings = append(res.Warnings, w.String())
	}
	if err != nil {
		n.reject(res, err)
		return
	}
	if res.Trigger != "fleet" {
		// A push is applied by every node alike; refusing it on some
		// nodes and not others would split the fleet, so it is not
		// checked here.
		if err := n.checkReloadSafety(old, snap, forcedBy != "", forcedBy); err != nil {
			n.reject(res, err)
			return
		}
	}
	// Prepare every part before anything changes.
	p, err := prepare(cfg, snap, parts{ql: n.ql, api: n.api, grd: n.grd, lat: n.lat})
	if err != nil {
		n.reject(res, err)
		return
	}
	t = time.Now()
	n.hc.setStateFile(n.healthStateFile(cfg))
	if err := n.swap(old, snap, true); err != nil {
		p.abort()
		n.reject(res, err)
		return
	}
	step("health, latency and swap", t)
	n.xfr.configure(cfg, snap.TSIG)
	res.Changed = append(res.Changed, describeChanges(old, snap)...)
	res.Changed = append(res.Changed, p.commit(n)...)
	res.Changed = append(res.Changed, applyFeed(n.feed, cfg)...)
	n.swapped(res, old, snap)
}

// swapped reports what a reload that swapped snap in for old changed.
func (n *Node) swapped(res *Result, old, snap *snapshot.Snapshot) {
	res.RestartNeeded = append(res.RestartNeeded, restartNeeded(old, snap)...)
	res.Warnings = append(res.Warnings, degraded(snap)...)
	n.logDegraded(snap)
}

// rebuildZones builds the served configuration again with the secondary
// zones' copies and the exported serials of now, and swaps it in. Every
// zone and policy that did not change is kept as it is, but for the
// zones in reread, whose files are looked at again.
func (n *Node) rebuildZones(res *Result, reread map[string]bool) {
	old := n.srv.Handler().Snapshot()
	snap, warns, err := n.build(old.Config, old, true, reread) // the served zones as they are: their files are read at a reload
	// The configuration's own warnings were given when it was loaded;
	// those of a zone's data (a transferred copy) are new.
	var fresh diag.Problems
	for _, w := range warns {
		if w.File != old.Config.File {
			fresh = append(fresh, w)
		}
	}
	logWarnings(n.log, fresh)
	for _, w := range fresh {
		res.Warnings = append(res.Warnings, w.String())
	}
	if err == nil {
		err = n.swap(old, snap, false)
	}
	if err != nil {
		n.reject(res, err)
		return
	}
	res.Changed = append(res.Changed, describeChanges(old, snap)...)
	n.swapped(res, old, snap)
}

// reloadGeo re-opens the geo databases and recompiles the policies with
// the configuration and zones being served: a pending edit of the config
// or a zone stays unserved until an explicit reload.
func (n *Node) reloadGeo(res *Result) {
	old := n.srv.Handler().Snapshot()
	snap, warns, err := old.WithGeo()
	logWarnings(n.log, warns)
	if err == nil {
		err = n.swap(old, snap, false)
	}
	if err != nil {
		n.reject(res, err)
		return
	}
	if snap.Geo == nil {
		return
	}
	for _, d := range snap.Geo.DBs {
		res.Changed = append(res.Changed, fmt.Sprintf("geo database %s built %s", d.Name, d.Built.Format(time.RFC3339)))
	}
}

// describeChanges lists zone serials and record counts that changed.
func describeChanges(old, cur *snapshot.Snapshot) []string {
	var out []string
	// The zones are in configuration order, which a reload mostly
	// keeps: those in the same place are compared in place (a zone
	// kept is the same object, compared with no look-up), and only
	// the rest go through a map, so that a reload of 100,000 zones
	// with one changed does not index 100,000 serials.
	oz, cz := old.Zones.Zones(), cur.Zones.Zones()
	i := 0
	for ; i < len(oz) && i < len(cz) && oz[i].Origin == cz[i].Origin; i++ {
		if oz[i] == cz[i] {
			continue
		}
		if s, c := oz[i].Serial(), cz[i].Serial(); s != c {
			out = append(out, fmt.Sprintf("zone %s serial %d -> %d", cz[i].Origin, s, c))
		}
	}
	was := make(map[string]uint32, len(oz)-i)
	for _, z := range oz[i:] {
		was[z.Origin] = z.Serial()
	}
	for _, z := range cz[i:] {
		s, ok := was[z.Origin]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("zone %s added (serial %d)", z.Origin, z.Serial()))
		case s != z.Serial():
			out = append(out, fmt.Sprintf("zone %s serial %d -> %d", z.Origin, s, z.Serial()))
		}
		delete(was, z.Origin)
	}
	var gone []string
	for o := range was {
		gone = append(gone, o)
	}
	slices.Sort(gone)
	for _, o := range gone {
		out = append(out, "zone "+o+" removed")
	}
	nr := func(s *snapshot.Snapshot) int {
		if s.Policies == nil {
			return 0
		}
		return len(s.Policies.Records)
	}
	if a, b := nr(old), nr(cur); a != b {
		out = append(out, fmt.Sprintf("steered records %d -> %d", a, b))
	}
	if !reflect.DeepEqual(old.Listen, cur.Listen) {
		out = append(out, fmt.Sprintf("listen %v -> %v", old.Listen, cur.Listen))
	}
	return out
}

// restartNeeded names the settings a reload changed but cannot apply.
func restartNeeded(old, cur *snapshot.Snapshot) []string {
	var out []string
	if !reflect.DeepEqual(old.Config.Anycast, cur.Config.Anycast) {
		out = append(out, "anycast (the BGP speaker keeps its settings until the next restart)")
	}
	if o, c := old.Config.StatePath(), cur.Config.StatePath(); o != c {
		out = append(out, fmt.Sprintf("state_dir %s -> %s (the node keeps its state in %s until the next restart)", o, c, o))
	}
	return out
}

// watchGeo polls the geo database files and queues a geo reload when one
// changes.
func (n *Node) watchGeo(w *watcher) {
	defer n.loops.Done()
	n.every(func() {
		if w.poll() {
			n.log.Info("a geo database file changed; recompiling what depends on it")
			n.request(kindGeo, "geo database file changed")
		}
	})
}

// watchInputs polls the latency and health feed files through the reload
// path, so they never apply in the middle of a reload.
func (n *Node) watchInputs() {
	defer n.loops.Done()
	n.every(func() {
		if n.lat.changed() || n.feed.Changed() || n.load.changed() {
			n.request(kindInputs, "input file changed")
		}
	})
}

// every calls f each WatchInterval until Shutdown.
func (n *Node) every(f func()) {
	t := time.NewTicker(n.opts.WatchInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
