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
type quorumHealth struct {
	m        *Member
	manager  *health.Manager
	interval func(check string) time.Duration
	reapply  func()
	cfg      quorum.Config
	grace    time.Duration
	tracker  *quorum.Tracker

	// decideMu orders decideTargets' updates of the tracker with
	// forgetting the targets a reload removed (configured), so a decision
	// under way cannot bring back a target just forgotten. Taken before mu.
	decideMu sync.Mutex

	mu sync.Mutex
	// targets are the configured targets (the keys mine was last given);
	// nil until then: every target observed is decided.
	targets map[string]bool
	obs     map[string]map[string]quorum.Observation // target → node → observation
	own     map[string]quorum.Verdict
	ownObs  map[string]quorum.Observation // this node's latest, counted before the store has it
	viewAt  time.Time                     // the last complete view of P/obs/
	fresh   bool                          // the view was fresh at the last tick
	members map[string]string             // live nodes (their status keys) → region
	probing string                        // the last choice of keys, for change detection
	pending map[string]observation        // to publish, by target
	kick    chan struct{}
	savedAt time.Time // the view was last written to viewFile
	// newest and longest are the view's clock: the newest CheckedAt and
	// the longest interval of any observation seen (decide).
	newest  time.Time
	longest time.Duration
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
	data, err := json.Marshal(savedView{ViewAt: fh.viewAt, Obs: fh.obs})
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

// loadView starts from the view kept on disk, if any.
func (fh *quorumHealth) loadView() {
	if fh.viewFile() == "" {
		return
	}
	data, err := os.ReadFile(fh.viewFile())
	if err != nil {
		return
	}
	var v savedView
	if json.Unmarshal(data, &v) != nil || v.Obs == nil {
		return
	}
	fh.obs, fh.viewAt = v.Obs, v.ViewAt
	for _, m := range fh.obs {
		for _, o := range m {
			if o.CheckedAt.After(fh.newest) {
				fh.newest = o.CheckedAt
			}
			fh.longest = max(fh.longest, o.Interval)
		}
	}
	fh.fresh = time.Since(v.ViewAt) <= fh.grace
	fh.m.log.Info("fleet: starting from the health view kept on disk", "view_at", v.ViewAt, "targets", len(v.Obs))
}

// observation is what a node publishes for one target.
type observation struct {
	Up        bool          `json:"up"`
	CheckedAt time.Time     `json:"checked_at"`
	Interval  time.Duration `json:"interval"`
	Region    string        `json:"region,omitempty"`
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
		obs: map[string]map[string]quorum.Observation{}, own: map[string]quorum.Verdict{}, ownObs: map[string]quorum.Observation{},
		members: map[string]string{},
		pending: map[string]observation{}, kick: make(chan struct{}, 1)}
	fh.loadView()
	h.Manager.SetVerdict(fh.verdict)
	fh.decide() // verdicts from the kept view before the first query
	return fh, nil
}

// verdict is the status Usable goes by: the fleet's, while the view is
// fresh and the quorum has decided, else the node's own.
func (fh *quorumHealth) verdict(k health.Key, own health.Status) health.Status {
	fh.mu.Lock()
	fresh := time.Since(fh.viewAt) <= fh.grace
	fh.mu.Unlock()
	if !fresh {
		return own
	}
	r, ok := fh.tracker.Result(targetName(k))
	if fh.cfg.Regional {
		// This node answers the clients of its region: the verdict of
		// its region's observers (the fleet's where they are too few).
		r, ok = fh.tracker.Region(targetName(k), fh.m.local.Fleet.Region)
	}
	if !ok {
		return own
	}
	switch r.Verdict {
	case quorum.Up:
		return health.Up
	case quorum.Down:
		return health.Down
	}
	return own
}

// observed takes one of the node's own check results.
func (fh *quorumHealth) observed(k health.Key, to health.Status) {
	interval := fh.interval(k.Check)
	name := targetName(k)
	now := time.Now()
	o := observation{Up: to != health.Down, CheckedAt: now, Interval: interval, Region: fh.m.local.Fleet.Region}
	fh.mu.Lock()
	if fh.targets != nil && !fh.targets[name] {
		// A check that was running when a reload removed its target.
		fh.mu.Unlock()
		return
	}
	v := quorum.Up
	if to == health.Down {
		v = quorum.Down
	}
	fh.own[name] = v
	fh.ownObs[name] = quorum.Observation{Node: fh.m.local.Fleet.Node, Region: o.Region, Up: o.Up, CheckedAt: now, Interval: interval}
	// Published at every check: observers older than three intervals are
	// not counted, and the newest observation is the view's clock (decide).
	fh.pending[name] = o
	fh.mu.Unlock()
	select {
	case fh.kick <- struct{}{}:
	default:
	}
}

// start follows every node's observations, publishes this node's, and
// re-decides the verdicts as time passes (hold-down, staleness).
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
				fh.mu.Lock()
				fh.obs = map[string]map[string]quorum.Observation{}
				fh.newest, fh.longest = time.Time{}, 0
				for _, kv := range kvs {
					fh.putLocked(p, kv)
				}
				fh.viewAt = time.Now()
				fh.mu.Unlock()
				fh.decide()
			},
			Events: func(evs []fleet.Event, rev int64) {
				touched := map[string]bool{}
				fh.mu.Lock()
				for _, e := range evs {
					if target, _, ok := splitObsKey(p, e.KV.Key); ok {
						touched[target] = true
					}
					if e.Kind == fleet.EventDelete {
						fh.deleteLocked(p, e.KV.Key)
					} else {
						fh.putLocked(p, e.KV)
					}
				}
				fh.viewAt = time.Now()
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
				fh.mu.Unlock()
				if flipped {
					if fresh {
						fh.m.log.Info("fleet: the store is back: health by the fleet's quorum again")
					} else {
						fh.m.log.Warn("fleet: no view of the store for view_grace: health by this node's own checks", "view_grace", fh.grace)
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
// node joining or leaving moves about 1/N of the targets; k = 5 by default,
// so that two observers can be lost and min_observers 3 still decide, and
// one of five seeing it up is 20 % > 18 %). Every key while the node has no
// fresh view (its own checks then decide) or knows no other member.
func (fh *quorumHealth) mine(keys []health.Key) []health.Key {
	fh.configured(keys)
	fh.mu.Lock()
	defer fh.mu.Unlock()
	self := fh.m.local.Fleet.Node
	if !fh.fresh || len(fh.members) <= 1 {
		fh.probing = "all"
		return keys
	}
	nodes := []quorum.Node{{Name: self, Region: fh.m.local.Fleet.Region}}
	for name, region := range fh.members {
		if name != self {
			nodes = append(nodes, quorum.Node{Name: name, Region: region})
		}
	}
	k := fh.m.local.Fleet.HealthQuorum.Observers
	if k <= 0 {
		k = quorum.DefaultK(len(nodes), fh.cfg.MinObservers)
	}
	var out []health.Key
	var b strings.Builder
	for _, key := range keys {
		name := targetName(key)
		for _, o := range quorum.Observers(name, nodes, k) {
			if o == self {
				out = append(out, key)
				b.WriteString(name + ";")
				break
			}
		}
	}
	chosen := map[string]bool{}
	for _, key := range out {
		chosen[targetName(key)] = true
	}
	for name := range fh.own {
		if !chosen[name] {
			// No longer probed here: this node's view of it is unknown.
			delete(fh.own, name)
			delete(fh.ownObs, name)
		}
	}
	fh.probing = b.String()
	return out
}

// configured takes the targets the served configuration checks (every
// key, before mine chooses among them) and drops what the node holds of
// any other: a target (or check) a reload removed leaves the quorum
// tracker, with its hold-down and verdict, and this node's own view of it,
// so the state does not grow with every target ever configured and a key
// that returns starts afresh. Observations other nodes still publish for
// it stay in the view (it mirrors the store) but are not decided.
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
			delete(fh.ownObs, name)
		}
	}
	for name := range fh.pending {
		if !targets[name] {
			delete(fh.pending, name)
		}
	}
	fh.mu.Unlock()
	for _, name := range fh.tracker.Keys() {
		if !targets[name] {
			fh.tracker.Forget(name)
		}
	}
}

// followMembers keeps the live members (their status keys) for mine.
func (fh *quorumHealth) followMembers(ctx context.Context) {
	m := fh.m
	p := strings.TrimSuffix(m.prefix, "/") + "/nodes/"
	set := func(kvs map[string][]byte) {
		live := map[string]string{}
		for key, v := range kvs {
			var st fleet.Status
			if json.Unmarshal(v, &st) == nil {
				live[strings.TrimPrefix(key, p)] = st.Region
			}
		}
		fh.mu.Lock()
		changed := len(live) != len(fh.members)
		for n, r := range live {
			if fh.members[n] != r {
				changed = true
			}
		}
		fh.members = live
		fh.mu.Unlock()
		if changed {
			fh.reapply()
		}
	}
	m.followView(ctx, p, set)
}

func splitObsKey(p, key string) (target, node string, ok bool) {
	rest := strings.TrimPrefix(key, p)
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

func (fh *quorumHealth) putLocked(p string, kv fleet.KV) {
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
	m[node] = quorum.Observation{Node: node, Region: o.Region, Up: o.Up, CheckedAt: o.CheckedAt, Interval: o.Interval}
	if o.CheckedAt.After(fh.newest) {
		fh.newest = o.CheckedAt
	}
	fh.longest = max(fh.longest, o.Interval)
}

func (fh *quorumHealth) deleteLocked(p, key string) {
	if target, node, ok := splitObsKey(p, key); ok {
		delete(fh.obs[target], node)
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

// updateTargets is decideTargets' update of the tracker (decideMu held):
// true when a verdict flipped.
func (fh *quorumHealth) updateTargets(only map[string]bool) bool {
	now := time.Now()
	fh.mu.Lock()
	// Cut from the store, the node sees no fresh observation from anyone:
	// its view is frozen at the newest observation it has (observers do
	// not go stale, hold-downs do not run out) until view_grace, when its
	// own checks take over (verdict). Observations are re-published at
	// every check, so while the store answers the newest one is at most an
	// interval old and the view's time is now.
	if !fh.newest.IsZero() && now.After(fh.newest.Add(fh.longest)) {
		now = fh.newest.Add(fh.longest)
	}
	type in struct {
		name string
		obs  []quorum.Observation
		own  quorum.Verdict
	}
	var ins []in
	seen := map[string]bool{}
	self := fh.m.local.Fleet.Node
	for name, m := range fh.obs {
		if (only != nil && !only[name]) || (fh.targets != nil && !fh.targets[name]) {
			continue
		}
		x := in{name: name, own: fh.own[name]}
		for node, o := range m {
			if node != self {
				x.obs = append(x.obs, o)
			}
		}
		if o, ok := fh.ownObs[name]; ok {
			x.obs = append(x.obs, o) // its own, as it is now, not as the store last had it
		}
		ins = append(ins, x)
		seen[name] = true
	}
	for name, v := range fh.own {
		if (only != nil && !only[name]) || (fh.targets != nil && !fh.targets[name]) {
			continue
		}
		if !seen[name] {
			x := in{name: name, own: v}
			if o, ok := fh.ownObs[name]; ok {
				x.obs = append(x.obs, o)
			}
			ins = append(ins, x)
		}
	}
	fh.mu.Unlock()
	changed := false
	region := fh.m.local.Fleet.Region
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

// publish writes pending observations under the node's lease.
func (fh *quorumHealth) publish(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-fh.kick:
		}
		fh.m.mu.Lock()
		l := fh.m.lease
		fh.m.mu.Unlock()
		fh.mu.Lock()
		batch := fh.pending
		fh.pending = map[string]observation{}
		fh.mu.Unlock()
		if l == nil {
			continue // the first lease is not granted yet; the next result publishes
		}
		// One transaction for as many observations as it may hold, all
		// under the node's lease.
		names := make([]string, 0, len(batch))
		for name := range batch {
			names = append(names, name)
		}
		for len(names) > 0 {
			chunk := names[:min(len(names), fleet.MaxTxnOps)]
			names = names[len(chunk):]
			puts := make([]fleet.KV, 0, len(chunk))
			for _, name := range chunk {
				data, _ := json.Marshal(batch[name])
				puts = append(puts, fleet.KV{Key: obsPrefix(fh.m.prefix) + name + "/" + fh.m.local.Fleet.Node, Value: data, Lease: l.ID()})
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, _, err := fh.m.store.Txn(pctx, nil, puts, nil)
			cancel()
			fh.mu.Lock()
			for _, name := range chunk {
				if _, newer := fh.pending[name]; err != nil && !newer {
					fh.pending[name] = batch[name] // try again with the next kick
				}
			}
			fh.mu.Unlock()
		}
	}
}
