package fleetnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/quorum"
)

// quorumHealth shares health across the fleet: the node publishes each of
// its checkers' observations under its lease (P/obs/ADDR/CHECK/NODE), follows
// every node's, and lets the quorum of live observers decide each target's
// status (see internal/quorum: up while more than healthy_above of them
// see it up; absent observers never vote). When the node has had no view
// of the store for view_grace, its own checks decide again.
//
// What is written: an observation when its status changes (and when the
// node's lease was replaced, or it starts or stops observing the target),
// never a result that changes nothing, so a fleet with stable health adds
// no revision to etcd for its observations. What keeps them live is the
// node's refresh: its status key, re-written under the same lease every
// lease_ttl/3 (keepStatus). A node deciding counts an observation while it
// is in the store (the observer's lease holds it) and it, or its
// observer's refresh, arrived through this node's watch within
// Stale × refresh on this node's own clock (quorum.Observation.HeardAt):
// no time another node read from its clock is ever compared with this
// one's. An observer whose checker stopped reporting withdraws its
// observation itself (its own clock, Stale × the check's interval).
type quorumHealth struct {
	m        *Member
	manager  *health.Manager
	interval func(check string) time.Duration
	reapply  func()
	cfg      quorum.Config
	grace    time.Duration
	tracker  *quorum.Tracker
	// refresh is this node's refresh period, lease_ttl/3: how often its
	// status is re-written, and what an observation that does not say
	// its observer's is judged by.
	refresh time.Duration

	// decideMu orders decideTargets' updates of the tracker with
	// forgetting the targets a reload removed (configured), so a decision
	// under way cannot bring back a target just forgotten. Taken before mu.
	decideMu sync.Mutex

	mu sync.Mutex
	// targets are the configured targets (the keys mine was last given);
	// nil until then: every target observed is decided.
	targets map[string]bool
	// obs mirrors P/obs/: target → node → observation, HeardAt when its
	// put arrived here.
	obs map[string]map[string]quorum.Observation
	// heard is when each live node's refresh (a write of its status key)
	// last arrived here.
	heard map[string]time.Time
	own   map[string]ownResult // this node's latest check result, by target
	// chosen are the targets this node observes for the fleet (mine);
	// nil until mine chose with a fresh view: nothing is published then.
	chosen map[string]bool
	// published is what the store holds of this node's observations,
	// under the lease pubLease.
	published map[string]observation
	pubLease  int64
	viewAt    time.Time         // the last complete view of P/obs/
	fresh     bool              // the view was fresh at the last tick
	members   map[string]string // live nodes (their status keys) → region
	// statuses are the live nodes' statuses as last heard (view.go).
	statuses map[string]fleet.Status
	probing  string // the last choice of keys, for change detection
	short    string // regions last warned short of observers
	kick     chan struct{}
	savedAt  time.Time // the view was last written to viewFile
}

// ownResult is this node's latest check result of one target.
type ownResult struct {
	verdict  quorum.Verdict
	at       time.Time     // when it came (this node's clock)
	interval time.Duration // the check's interval
}

// observation counts in this node's own quorum, live while its checker
// keeps reporting.
func (r ownResult) observation(node, region string, refresh time.Duration) quorum.Observation {
	return quorum.Observation{Node: node, Region: region, Up: r.verdict != quorum.Down, HeardAt: r.at, Refresh: max(r.interval, refresh)}
}

// savedView is the fleet's health view as kept on disk, so a node
// restarted while the store is unreachable decides as it did, until
// view_grace after the view was current.
type savedView struct {
	ViewAt time.Time                                `json:"view_at"`
	Obs    map[string]map[string]quorum.Observation `json:"observations"`
}

func (fh *quorumHealth) viewFile() string { return stateFile(fh.m.stateDir, HealthView) }

// saveView writes the view at most every two seconds.
func (fh *quorumHealth) saveView(now time.Time) {
	fh.mu.Lock()
	if now.Sub(fh.savedAt) < 2*time.Second || fh.viewAt.IsZero() || fh.viewFile() == "" {
		fh.mu.Unlock()
		return
	}
	fh.savedAt = now
	data, err := json.Marshal(savedView{ViewAt: fh.viewAt, Obs: fh.heardObs()})
	fh.mu.Unlock()
	if err == nil {
		tmp := fh.viewFile() + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, fh.viewFile())
		}
	}
	if err != nil {
		fh.m.log.Warn("fleet: the health view could not be kept on disk", "err", err)
	}
}

// heardObs is the view with each observation's HeardAt moved up to its
// observer's last refresh (an observation is written only when it
// changes: the refreshes are what keep it live). Called with mu held.
func (fh *quorumHealth) heardObs() map[string]map[string]quorum.Observation {
	out := make(map[string]map[string]quorum.Observation, len(fh.obs))
	for target, m := range fh.obs {
		c := make(map[string]quorum.Observation, len(m))
		for node, o := range m {
			if h := fh.heard[node]; h.After(o.HeardAt) {
				o.HeardAt = h
			}
			c[node] = o
		}
		out[target] = c
	}
	return out
}

// loadView starts from the view kept on disk, if any. Its HeardAt times
// are this node's own, from before the restart.
func (fh *quorumHealth) loadView() {
	if fh.viewFile() == "" {
		return
	}
	data, err := os.ReadFile(fh.viewFile())
	if err != nil {
		return
	}
	// A view kept by an earlier version has CheckedAt and Interval where
	// this one keeps HeardAt and Refresh: taken for them.
	type kept struct {
		quorum.Observation
		CheckedAt time.Time
		Interval  time.Duration
	}
	var v struct {
		ViewAt time.Time                  `json:"view_at"`
		Obs    map[string]map[string]kept `json:"observations"`
	}
	if json.Unmarshal(data, &v) != nil || v.Obs == nil {
		return
	}
	fh.obs = make(map[string]map[string]quorum.Observation, len(v.Obs))
	for target, m := range v.Obs {
		c := make(map[string]quorum.Observation, len(m))
		for node, k := range m {
			o := k.Observation
			if o.HeardAt.IsZero() {
				o.HeardAt = k.CheckedAt
			}
			if o.Refresh <= 0 {
				o.Refresh = k.Interval
			}
			c[node] = o
		}
		fh.obs[target] = c
	}
	fh.viewAt = v.ViewAt
	fh.fresh = time.Since(v.ViewAt) <= fh.grace
	fh.m.log.Info("fleet: starting from the health view kept on disk", "view_at", v.ViewAt, "targets", len(v.Obs))
}

// observation is what a node publishes for one target. Only Up (and its
// region) is news; CheckedAt, read from the observer's clock, is shown but
// never compared with another node's clock.
type observation struct {
	Up        bool          `json:"up"`
	CheckedAt time.Time     `json:"checked_at"`
	Interval  time.Duration `json:"interval"`
	// Refresh is how often the observer refreshes (lease_ttl/3).
	Refresh time.Duration `json:"refresh,omitempty"`
	Region  string        `json:"region,omitempty"`
}

// same reports whether o and p say the same (so p need not be written).
func (o observation) same(p observation) bool {
	return o.Up == p.Up && o.Interval == p.Interval && o.Refresh == p.Refresh && o.Region == p.Region
}

func obsPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/obs/" }

// targetName is a health key as the store names it: ADDR/CHECK.
func targetName(k health.Key) string { return k.Addr.String() + "/" + url.PathEscape(k.Check) }

// Health is what sharing health needs from the node.
type Health struct {
	// Manager runs the node's checks; the fleet's verdicts and overrides
	// go into it.
	Manager *health.Manager
	// Interval is the interval of the served snapshot's check of that
	// name (health.DefaultInterval for one it does not know).
	Interval func(check string) time.Duration
	// Reapply runs the checks Probes chooses now, on the last snapshot.
	Reapply func()
}

// ShareHealth makes the fleet's quorum decide the health manager's
// verdicts (call it before Start). The node then hands every check result
// to Observed and checks only the keys Probes chooses.
func (m *Member) ShareHealth(h Health) error {
	fh, err := newQuorumHealth(m, h)
	if err != nil {
		return fmt.Errorf("fleet.health_quorum: %w", err)
	}
	m.health, m.manager = fh, h.Manager
	m.shared.Store(fh)
	return nil
}

// Observed takes one of the node's own check results (after ShareHealth).
func (m *Member) Observed(k health.Key, to health.Status) { m.health.observed(k, to) }

// Probes chooses, of keys, those this node checks itself (after ShareHealth).
func (m *Member) Probes(keys []health.Key) []health.Key { return m.health.mine(keys) }

func newQuorumHealth(m *Member, h Health) (*quorumHealth, error) {
	f := m.local.Fleet
	q := f.HealthQuorum.Config // decoded, defaulted and checked with the configuration
	tr, err := quorum.NewTracker(q)
	if err != nil {
		return nil, err
	}
	fh := &quorumHealth{m: m, manager: h.Manager, interval: h.Interval, reapply: h.Reapply, cfg: q, grace: time.Duration(f.ViewGrace), tracker: tr,
		refresh: refreshPeriod(m.local),
		obs:     map[string]map[string]quorum.Observation{}, heard: map[string]time.Time{}, own: map[string]ownResult{},
		members: map[string]string{}, published: map[string]observation{}, kick: make(chan struct{}, 1)}
	fh.loadView()
	h.Manager.SetVerdict(fh.verdict)
	h.Manager.SetSeed(fh.seed)
	fh.decide() // verdicts from the kept view before the first query
	return fh, nil
}

// fleetVerdict is the fleet's published verdict of k (its region's in
// regional mode), and whether the tracker has one.
func (fh *quorumHealth) fleetVerdict(k health.Key) (health.Status, bool) {
	r, ok := fh.tracker.Result(targetName(k))
	if fh.cfg.Regional {
		// This node answers the clients of its region: the verdict of
		// its region's observers (the fleet's where they are too few).
		r, ok = fh.tracker.Region(targetName(k), fh.m.local.Fleet.Region)
	}
	if !ok {
		return health.Unknown, false
	}
	switch r.Verdict {
	case quorum.Up:
		return health.Up, true
	case quorum.Down:
		return health.Down, true
	}
	return health.Unknown, false
}

// verdict is the status Usable goes by: the fleet's, while the view is
// fresh and the quorum has decided, else the node's own. Back on its own
// checks (past view_grace), a target this node has no result of yet is
// as the fleet last saw it, never up by default; one whose checker
// started then started from that verdict too (seed), and leaves it only
// after rise passes or fall failures.
func (fh *quorumHealth) verdict(k health.Key, own health.Status) health.Status {
	fh.mu.Lock()
	fresh := time.Since(fh.viewAt) <= fh.grace
	fh.mu.Unlock()
	v, ok := fh.fleetVerdict(k)
	if !fresh {
		if own == health.Unknown && ok {
			return v
		}
		return own
	}
	if !ok {
		return own
	}
	return v
}

// seed is the status a checker started now starts from: the fleet's last
// verdict while the node decides by its own checks (Unknown otherwise).
func (fh *quorumHealth) seed(k health.Key) health.Status {
	fh.mu.Lock()
	fresh := fh.fresh
	fh.mu.Unlock()
	if fresh {
		return health.Unknown
	}
	v, _ := fh.fleetVerdict(k)
	return v
}

// observed takes one of the node's own check results. It is published
// only when it says something new (publish).
func (fh *quorumHealth) observed(k health.Key, to health.Status) {
	name := targetName(k)
	r := ownResult{verdict: quorum.Up, at: time.Now(), interval: fh.interval(k.Check)}
	if to == health.Down {
		r.verdict = quorum.Down
	}
	fh.mu.Lock()
	if fh.targets != nil && !fh.targets[name] {
		// A check that was running when a reload removed its target.
		fh.mu.Unlock()
		return
	}
	fh.own[name] = r
	news := false
	if fh.chosen[name] {
		p, ok := fh.published[name]
		news = !ok || p.Up != (r.verdict != quorum.Down) || p.Interval != r.interval
	}
	fh.mu.Unlock()
	if news {
		fh.poke()
	}
}

// poke has the publisher compare what the store holds with what it should.
func (fh *quorumHealth) poke() {
	select {
	case fh.kick <- struct{}{}:
	default:
	}
}

// start follows every node's observations and refreshes, publishes this
// node's, and re-decides the verdicts as time passes (hold-down,
// staleness).
func (fh *quorumHealth) start(ctx context.Context) {
	m := fh.m
	m.wg.Add(4)
	go func() {
		defer m.wg.Done()
		fh.followMembers(ctx)
	}()
	go func() {
		defer m.wg.Done()
		p := obsPrefix(m.prefix)
		m.follow(ctx, p, fleet.Handler{
			Snapshot: func(kvs []fleet.KV, rev int64) {
				now := time.Now()
				fh.mu.Lock()
				fh.obs = map[string]map[string]quorum.Observation{}
				for _, kv := range kvs {
					fh.putLocked(p, kv, now)
				}
				fh.viewAt = now
				fh.mu.Unlock()
				fh.decide()
			},
			Events: func(evs []fleet.Event, rev int64) {
				now := time.Now()
				touched := map[string]bool{}
				fh.mu.Lock()
				for _, e := range evs {
					if target, _, ok := splitObsKey(p, e.KV.Key); ok {
						touched[target] = true
					}
					if e.Kind == fleet.EventDelete {
						fh.deleteLocked(p, e.KV.Key)
					} else {
						fh.putLocked(p, e.KV, now)
					}
				}
				fh.viewAt = now
				fh.mu.Unlock()
				fh.decideTargets(touched)
			},
			Progress: func(int64) {
				fh.mu.Lock()
				fh.viewAt = time.Now()
				fh.mu.Unlock()
			},
		})
	}()
	go func() {
		defer m.wg.Done()
		fh.publish(ctx)
	}()
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// A store that answers keeps the view fresh even when no
				// observation changes (the status writes prove it).
				m.mu.Lock()
				statusAt := m.viewAt
				m.mu.Unlock()
				fh.mu.Lock()
				if statusAt.After(fh.viewAt) && !fh.viewAt.IsZero() {
					fh.viewAt = statusAt
				}
				fresh := time.Since(fh.viewAt) <= fh.grace
				flipped := fresh != fh.fresh
				fh.fresh = fresh
				// Fresh, but nothing chosen yet (the view was fresh from
				// the kept one, or no reapply reached mine since): choose
				// now, so that this node's observations get published.
				unchosen := fresh && fh.chosen == nil
				fh.mu.Unlock()
				if unchosen && !flipped {
					fh.reapply()
				}
				if flipped {
					if fresh {
						fh.m.log.Info("fleet: the store is back: health by the fleet's quorum again")
					} else {
						fh.m.log.Warn("fleet: no view of the store for view_grace: health by this node's own checks, "+
							"each target as the fleet last saw it until they confirm or refute it", "view_grace", fh.grace)
					}
					fh.manager.Changed()
					fh.reapply() // probe every target while deciding alone
				}
				fh.decide()
			}
		}
	}()
}

// mine chooses the keys this node probes: for each target, the k nodes
// quorum.Observers picks among the live members (rendezvous hashing, so a
// node joining or leaving moves about 1/N of the targets). k is
// quorum.PickK's: health_quorum.observers when set; in regional mode
// enough for min_observers in every region (with one spare); else 5, so
// that two observers can be lost and min_observers 3 still decide, and one
// of five seeing it up is 20 % > 18 %. Every key while the node has no
// fresh view (its own checks then decide) or knows no other member.
func (fh *quorumHealth) mine(keys []health.Key) []health.Key {
	fh.configured(keys)
	fh.mu.Lock()
	self := fh.m.local.Fleet.Node
	if !fh.fresh {
		// Deciding alone: probe everything, publish what was chosen last.
		fh.probing = "all"
		fh.mu.Unlock()
		return keys
	}
	if len(fh.members) <= 1 {
		fh.probing = "all"
		fh.chosen = make(map[string]bool, len(keys))
		for _, k := range keys {
			fh.chosen[targetName(k)] = true
		}
		fh.mu.Unlock()
		fh.poke()
		return keys
	}
	nodes := []quorum.Node{{Name: self, Region: fh.m.local.Fleet.Region}}
	for name, region := range fh.members {
		if name != self {
			nodes = append(nodes, quorum.Node{Name: name, Region: region})
		}
	}
	k := quorum.PickK(nodes, fh.m.local.Fleet.HealthQuorum.Observers, fh.cfg.MinObservers, fh.cfg.Regional)
	var warn []string
	if fh.cfg.Regional {
		short := quorum.ShortRegions(nodes, k, fh.cfg.MinObservers)
		if s := strings.Join(short, ","); s != fh.short {
			fh.short, warn = s, short
			if len(short) == 0 {
				warn = []string{}
			}
		}
	}
	var out []health.Key
	var b strings.Builder
	chosen := map[string]bool{}
	for _, key := range keys {
		name := targetName(key)
		for _, o := range quorum.Observers(name, nodes, k) {
			if o == self {
				out = append(out, key)
				chosen[name] = true
				b.WriteString(name + ";")
				break
			}
		}
	}
	for name := range fh.own {
		if !chosen[name] {
			// No longer probed here: this node's view of it is unknown
			// (and its observation leaves the store: publish).
			delete(fh.own, name)
		}
	}
	fh.chosen = chosen
	fh.probing = b.String()
	fh.mu.Unlock()
	fh.poke()
	if warn != nil {
		fh.warnShort(warn, nodes, k)
	}
	return out
}

// warnShort says which regions cannot get min_observers observers of
// every target (their verdicts then fall back to the fleet's), or that
// none is short any more.
func (fh *quorumHealth) warnShort(short []string, nodes []quorum.Node, k int) {
	if len(short) == 0 {
		fh.m.log.Info("fleet: every region has min_observers observers of every target", "observers", k, "nodes", len(nodes))
		return
	}
	sizes := map[string]int{}
	for _, n := range nodes {
		sizes[n.Region]++
	}
	var parts []string
	for _, r := range short {
		name := r
		if name == "" {
			name = `"" (no region)`
		}
		parts = append(parts, fmt.Sprintf("%s (%d nodes)", name, sizes[r]))
	}
	fh.m.log.Warn("fleet: health_quorum.regional: these regions cannot have min_observers observers of every target, "+
		"so their verdicts fall back to the whole fleet's: add nodes there, or raise health_quorum.observers",
		"regions", strings.Join(parts, ", "), "min_observers", fh.cfg.MinObservers, "observers", k, "nodes", len(nodes))
}

// configured takes the targets the served configuration checks (every
// key, before mine chooses among them) and drops what the node holds of
// any other: a target (or check) a reload removed leaves the quorum
// tracker, with its hold-down and verdict, and this node's own view of it
// (and its observation leaves the store), so the state does not grow with
// every target ever configured and a key that returns starts afresh.
// Observations other nodes still publish for it stay in the view (it
// mirrors the store) but are not decided.
func (fh *quorumHealth) configured(keys []health.Key) {
	targets := make(map[string]bool, len(keys))
	for _, k := range keys {
		targets[targetName(k)] = true
	}
	fh.decideMu.Lock()
	defer fh.decideMu.Unlock()
	fh.mu.Lock()
	fh.targets = targets
	for name := range fh.own {
		if !targets[name] {
			delete(fh.own, name)
		}
	}
	for name := range fh.chosen {
		if !targets[name] {
			delete(fh.chosen, name)
		}
	}
	fh.mu.Unlock()
	for _, name := range fh.tracker.Keys() {
		if !targets[name] {
			fh.tracker.Forget(name)
		}
	}
}

// followMembers keeps the live members (their status keys) for mine, and
// when each one's refresh last arrived (every write of its status).
func (fh *quorumHealth) followMembers(ctx context.Context) {
	m := fh.m
	p := strings.TrimSuffix(m.prefix, "/") + "/nodes/"
	view := map[string]fleet.Status{} // node → its status
	region := func(v []byte) fleet.Status {
		var st fleet.Status
		json.Unmarshal(v, &st)
		return st
	}
	set := func(now time.Time, heard []string, gone []string) {
		live := make(map[string]string, len(view))
		statuses := make(map[string]fleet.Status, len(view))
		for n, st := range view {
			live[n] = st.Region
			statuses[n] = st
		}
		fh.mu.Lock()
		fh.statuses = statuses
		changed := len(live) != len(fh.members)
		for n, r := range live {
			if old, ok := fh.members[n]; !ok || old != r {
				changed = true
			}
		}
		fh.members = live
		for _, n := range heard {
			fh.heard[n] = now
		}
		for _, n := range gone {
			delete(fh.heard, n)
		}
		fh.viewAt = now
		fh.mu.Unlock()
		if changed {
			fh.reapply()
		}
	}
	m.follow(ctx, p, fleet.Handler{
		Snapshot: func(kvs []fleet.KV, rev int64) {
			clear(view)
			var heard []string
			for _, kv := range kvs {
				n := strings.TrimPrefix(kv.Key, p)
				view[n] = region(kv.Value)
				heard = append(heard, n)
			}
			fh.mu.Lock()
			var gone []string
			for n := range fh.heard {
				if _, ok := view[n]; !ok {
					gone = append(gone, n)
				}
			}
			fh.mu.Unlock()
			set(time.Now(), heard, gone)
		},
		Events: func(evs []fleet.Event, rev int64) {
			var heard, gone []string
			for _, e := range evs {
				n := strings.TrimPrefix(e.KV.Key, p)
				if e.Kind == fleet.EventDelete {
					delete(view, n)
					gone = append(gone, n)
				} else {
					view[n] = region(e.KV.Value)
					heard = append(heard, n)
				}
			}
			// A refresh only keeps observations live: the ticker's
			// decide counts it, no pass over every target per refresh.
			set(time.Now(), heard, gone)
		},
		Progress: func(int64) {
			fh.mu.Lock()
			fh.viewAt = time.Now()
			fh.mu.Unlock()
		},
	})
}

func splitObsKey(p, key string) (target, node string, ok bool) {
	rest := strings.TrimPrefix(key, p)
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// putLocked takes an observation that arrived at now.
func (fh *quorumHealth) putLocked(p string, kv fleet.KV, now time.Time) {
	target, node, ok := splitObsKey(p, kv.Key)
	if !ok {
		return
	}
	var o observation
	if json.Unmarshal(kv.Value, &o) != nil {
		return
	}
	m := fh.obs[target]
	if m == nil {
		m = map[string]quorum.Observation{}
		fh.obs[target] = m
	}
	refresh := o.Refresh
	if refresh <= 0 {
		refresh = fh.refresh // an observer that does not say: this node's own
	}
	m[node] = quorum.Observation{Node: node, Region: o.Region, Up: o.Up, HeardAt: now, Refresh: refresh}
}

func (fh *quorumHealth) deleteLocked(p, key string) {
	if target, node, ok := splitObsKey(p, key); ok {
		delete(fh.obs[target], node)
		if len(fh.obs[target]) == 0 {
			delete(fh.obs, target)
		}
	}
}

// decide updates every target's verdict and, when one flipped, has the
// answers recomputed.
func (fh *quorumHealth) decide() { fh.decideTargets(nil) }

// decideTargets updates the verdicts of the named targets (nil: every
// target: the ticker's pass, for hold-downs and staleness) and, when one
// flipped, has the answers recomputed. A watch event re-decides only the
// targets it touched, so its cost grows with the change, not the fleet.
func (fh *quorumHealth) decideTargets(only map[string]bool) {
	fh.decideMu.Lock()
	changed := fh.updateTargets(only)
	fh.decideMu.Unlock()
	if changed {
		fh.manager.Changed()
	}
	fh.saveView(time.Now())
}

// frozen is the quorum's clock: now, or, when the view has not been
// current for longer than two refresh periods (the node is cut from the
// store and hears no refresh from anyone), the time the view was last
// current plus that: the view is frozen there (observers do not go stale,
// hold-downs do not run out) until view_grace, when the node's own checks
// take over (verdict). Both are this node's own clock: no observer's
// clock can move it. Called with mu held.
func (fh *quorumHealth) frozen(now time.Time) time.Time {
	if fh.viewAt.IsZero() {
		return now
	}
	if lim := fh.viewAt.Add(fh.freezeAfter()); now.After(lim) {
		return lim
	}
	return now
}

// freezeAfter is how long after the view was last current the quorum's
// clock stops: two refresh periods, longer than the node's own refresh
// (its status write, which keeps the view current while the store
// answers, as every other node's refresh arriving does) and shorter than
// an observation's life (Stale = 3 refreshes), so a cut-off node freezes
// before any observation it heard goes stale.
func (fh *quorumHealth) freezeAfter() time.Duration { return 2 * fh.refresh }

// updateTargets is decideTargets' update of the tracker (decideMu held):
// true when a verdict flipped.
func (fh *quorumHealth) updateTargets(only map[string]bool) bool {
	fh.mu.Lock()
	now := fh.frozen(time.Now())
	type in struct {
		name string
		obs  []quorum.Observation
		own  quorum.Verdict
	}
	var ins []in
	seen := map[string]bool{}
	self := fh.m.local.Fleet.Node
	region := fh.m.local.Fleet.Region
	for name, m := range fh.obs {
		if (only != nil && !only[name]) || (fh.targets != nil && !fh.targets[name]) {
			continue
		}
		r, mine := fh.own[name]
		x := in{name: name, own: r.verdict}
		for node, o := range m {
			if node == self {
				continue
			}
			if h := fh.heard[node]; h.After(o.HeardAt) {
				o.HeardAt = h // its observer refreshed since
			}
			x.obs = append(x.obs, o)
		}
		if mine {
			// Its own, as it is now, not as the store last had it.
			x.obs = append(x.obs, r.observation(self, region, fh.refresh))
		}
		ins = append(ins, x)
		seen[name] = true
	}
	for name, r := range fh.own {
		if (only != nil && !only[name]) || (fh.targets != nil && !fh.targets[name]) || seen[name] {
			continue
		}
		ins = append(ins, in{name: name, own: r.verdict, obs: []quorum.Observation{r.observation(self, region, fh.refresh)}})
	}
	fh.mu.Unlock()
	changed := false
	for _, x := range ins {
		var before quorum.Result
		var had bool
		if fh.cfg.Regional {
			before, had = fh.tracker.Region(x.name, region)
		}
		r := fh.tracker.Update(x.name, x.obs, x.own, now)
		if r.Changed {
			changed = true
			fh.m.log.Info("fleet health verdict", "target", x.name, "verdict", r.Verdict.String(), "reason", r.Reason())
		}
		if fh.cfg.Regional {
			if after, ok := fh.tracker.Region(x.name, region); ok && (!had || after.Verdict != before.Verdict) {
				changed = true
				fh.m.log.Info("fleet health verdict for the region", "target", x.name, "region", region, "verdict", after.Verdict.String(), "reason", after.Reason())
			}
		}
	}
	return changed
}

// publish keeps the store's copy of this node's observations equal to
// what it should be, under the node's current lease: on every poke (a
// result that changed, a new choice of targets, a new lease) and on a
// ticker (a checker that stopped reporting withdraws its observation; a
// failed write is tried again).
func (fh *quorumHealth) publish(ctx context.Context) {
	t := time.NewTicker(min(fh.refresh, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-fh.kick:
		case <-t.C:
		}
		fh.reconcile(ctx)
	}
}

// reconcile writes the observations that changed and deletes those this
// node no longer makes, in as few transactions as the limits allow (one,
// usually: one revision).
func (fh *quorumHealth) reconcile(ctx context.Context) {
	fh.m.mu.Lock()
	l := fh.m.lease
	fh.m.mu.Unlock()
	if l == nil {
		return // the first lease is not granted yet; keepStatus pokes when it is
	}
	now := time.Now()
	self, region := fh.m.local.Fleet.Node, fh.m.local.Fleet.Region
	key := func(name string) string { return obsPrefix(fh.m.prefix) + name + "/" + self }
	fh.mu.Lock()
	if fh.pubLease != l.ID() {
		// A new lease: what the old one held is gone (or goes with it).
		fh.published, fh.pubLease = map[string]observation{}, l.ID()
	}
	want := map[string]observation{}
	for name, r := range fh.own {
		if !fh.chosen[name] {
			continue
		}
		if now.Sub(r.at) > time.Duration(fh.cfg.Stale)*r.interval+fh.refresh {
			continue // its checker stopped reporting: withdrawn
		}
		want[name] = observation{Up: r.verdict != quorum.Down, Interval: r.interval, Refresh: fh.refresh, Region: region}
	}
	type op struct {
		name string
		o    observation
		del  bool
	}
	var ops []op
	for name, o := range want {
		if p, ok := fh.published[name]; !ok || !p.same(o) {
			ops = append(ops, op{name: name, o: o})
		}
	}
	for name := range fh.published {
		if _, ok := want[name]; !ok {
			ops = append(ops, op{name: name, del: true})
		}
	}
	fh.mu.Unlock()
	checkedAt := fh.m.now()
	for len(ops) > 0 {
		chunk := ops[:min(len(ops), fleet.MaxTxnOps)]
		ops = ops[len(chunk):]
		var puts []fleet.KV
		var dels []string
		for _, x := range chunk {
			if x.del {
				dels = append(dels, key(x.name))
				continue
			}
			o := x.o
			o.CheckedAt = checkedAt
			data, _ := json.Marshal(o)
			puts = append(puts, fleet.KV{Key: key(x.name), Value: data, Lease: l.ID()})
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _, err := fh.m.store.Txn(pctx, nil, puts, dels)
		cancel()
		if err != nil {
			return // the next tick or poke tries again
		}
		fh.mu.Lock()
		if fh.pubLease == l.ID() {
			for _, x := range chunk {
				if x.del {
					delete(fh.published, x.name)
				} else {
					fh.published[x.name] = x.o
				}
			}
		}
		fh.mu.Unlock()
	}
}
