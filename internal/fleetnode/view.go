package fleetnode

import (
	"fmt"
	"sort"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/quorum"
)

// View is the fleet as this node sees it now (the dashboard's fleet page,
// GET /v1/fleet): every live node's status as last heard through the
// node's watch, every health target with each observer's latest
// observation and the fleet's verdict, and how this node decides health.
// It is built from copies of what the member already keeps in memory,
// under its locks held briefly: no read of the store.
type View struct {
	// Node and Region are this node's; Prefix is the fleet's key prefix.
	Node, Region, Prefix string
	// Nodes are the live nodes, by name; this node's entry is its status
	// as it would write it now (also when the store does not hold it).
	Nodes []NodeView
	// Targets are the health targets this node knows an observation or a
	// result of, by name (ADDR/CHECK).
	Targets []TargetView
	// HealthMode is this node's: "quorum", "frozen since T", "local
	// since T" or "local" (HealthMode); ModeSince is T.
	HealthMode string
	ModeSince  time.Time
	// Errors are this node's problems with the store, and with what it
	// serves (a bundle it could not apply); Warnings what it finds wrong
	// with the store itself or the fleet (a database past half its quota,
	// regions short of observers).
	Errors, Warnings []string
}

// NodeView is one node's status.
type NodeView struct {
	fleet.Status
	// HeardAt is when its status last arrived here (this node's clock;
	// zero for this node itself).
	HeardAt time.Time
	// Self marks this node.
	Self bool
}

// TargetView is one health target: each observer's latest observation
// and the verdict the fleet's quorum reached (this node's region's in
// regional mode).
type TargetView struct {
	Target string // ADDR/CHECK, as the store names it
	// Verdict is "up", "down" or "unknown" (no verdict yet); Reason says
	// how it was reached, Since when it last changed.
	Verdict string
	Reason  string
	Since   time.Time
	// Observers are the nodes observing it, by name.
	Observers []ObserverView
}

// ObserverView is one node's latest observation of a target.
type ObserverView struct {
	Node, Region string
	Up           bool
	// HeardAt is when it, or its observer's refresh, last arrived here
	// (this node's clock; for this node's own, when its check reported).
	HeardAt time.Time
	// Stale is set when the quorum no longer counts it: not heard within
	// Stale × its observer's refresh.
	Stale bool
	// Own marks this node's own check result.
	Own bool
}

// The health modes (HealthMode).
const (
	ModeQuorum = "quorum"
	ModeFrozen = "frozen"
	ModeLocal  = "local"
)

// HealthMode says how this node decides health at now: ModeQuorum while
// its view of the store is current (the fleet's quorum decides), "frozen
// since T" when it has had no view for two refresh periods (the quorum's
// clock stopped at T: no observer goes stale, no hold-down runs out),
// "local since T" past view_grace (its own checks decide, each target
// starting as the fleet last saw it), and ModeLocal when health is not
// shared at all. since is T (zero for the other two).
func (m *Member) HealthMode(now time.Time) (mode string, since time.Time) {
	fh := m.shared.Load()
	if fh == nil {
		return ModeLocal, time.Time{}
	}
	fh.mu.Lock()
	viewAt := fh.viewAt
	fh.mu.Unlock()
	if viewAt.IsZero() {
		return ModeQuorum, time.Time{}
	}
	if t := viewAt.Add(fh.grace); now.After(t) {
		return ModeLocal + " since " + t.UTC().Format(time.RFC3339), t
	}
	if t := viewAt.Add(fh.freezeAfter()); now.After(t) {
		return ModeFrozen + " since " + t.UTC().Format(time.RFC3339), t
	}
	return ModeQuorum, time.Time{}
}

// identity is the node's identity from its own file's node section, as
// its status publishes it.
func (m *Member) identity() fleet.Status {
	var st fleet.Status
	nd := m.Local().Node
	if nd == nil {
		return st
	}
	st.Country = nd.Country
	if nd.Name != "" && nd.Name != m.local.Fleet.Node {
		st.NodeName = nd.Name
	}
	if l := nd.Location; l != nil {
		lat, lon := l.Lat, l.Lon
		st.Lat, st.Lon = &lat, &lon
	}
	return st
}

// Statuses are every live node's status as last heard (this node's as it
// would write it now), by name.
func (m *Member) Statuses() []NodeView {
	self := m.status()
	out := []NodeView{{Status: self, Self: true}}
	if fh := m.shared.Load(); fh != nil {
		fh.mu.Lock()
		for name, st := range fh.statuses {
			if name != self.Node {
				out = append(out, NodeView{Status: st, HeardAt: fh.heard[name]})
			}
		}
		fh.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Status is the live node name's status as last heard (this node's as it
// would write it now), and whether it is live.
func (m *Member) Status(name string) (fleet.Status, bool) {
	if name == m.local.Fleet.Node {
		return m.status(), true
	}
	if fh := m.shared.Load(); fh != nil {
		fh.mu.Lock()
		defer fh.mu.Unlock()
		st, ok := fh.statuses[name]
		return st, ok
	}
	return fleet.Status{}, false
}

// Name is this node's name in the fleet (fleet.node).
func (m *Member) Name() string { return m.local.Fleet.Node }

// View describes the fleet as this node sees it at now.
func (m *Member) View(now time.Time) View {
	f := m.local.Fleet
	v := View{Node: f.Node, Region: f.Region, Prefix: m.prefix, Nodes: m.Statuses()}
	v.HealthMode, v.ModeSince = m.HealthMode(now)
	m.mu.Lock()
	if m.applyErr != "" {
		v.Errors = append(v.Errors, fmt.Sprintf("newest bundle (serial %d, %s) not served: %s", m.errOf.Meta.Serial, fleet.ShortDigest(m.errOf.Meta.Digest), m.applyErr))
	}
	if m.lease == nil {
		v.Errors = append(v.Errors, "no lease: the node's status is not in the store")
	}
	if m.failing {
		v.Errors = append(v.Errors, "the store does not take the node's writes")
	}
	if n := m.waiting(); n > 0 {
		v.Errors = append(v.Errors, fmt.Sprintf("pending: fleet (%d overrides set while the store was unreachable)", n))
	}
	if m.storeWarning != "" {
		v.Warnings = append(v.Warnings, m.storeWarning)
	}
	m.mu.Unlock()
	if fh := m.shared.Load(); fh != nil {
		if v.HealthMode != ModeQuorum {
			v.Errors = append(v.Errors, "health: "+v.HealthMode+": no current view of the store")
		}
		v.Targets = fh.targetViews(now)
		fh.mu.Lock()
		if fh.short != "" {
			v.Warnings = append(v.Warnings, "health_quorum.regional: regions short of observers (their verdicts are the whole fleet's): "+fh.short)
		}
		fh.mu.Unlock()
	}
	return v
}

// targetViews are the targets' observations and verdicts at now: one
// copy of the observations under mu, then the tracker's results.
func (fh *quorumHealth) targetViews(now time.Time) []TargetView {
	self, region := fh.m.local.Fleet.Node, fh.m.local.Fleet.Region
	fh.mu.Lock()
	clock := fh.frozen(now) // the quorum's clock: stopped while the view is frozen
	stale := func(o quorum.Observation) bool {
		return o.Refresh <= 0 || clock.After(o.HeardAt.Add(time.Duration(fh.cfg.Stale)*o.Refresh))
	}
	byName := map[string]*TargetView{}
	target := func(name string) *TargetView {
		t := byName[name]
		if t == nil {
			t = &TargetView{Target: name}
			byName[name] = t
		}
		return t
	}
	wanted := func(name string) bool { return fh.targets == nil || fh.targets[name] }
	for name, m := range fh.obs {
		if !wanted(name) {
			continue
		}
		t := target(name)
		for node, o := range m {
			if node == self {
				continue // its own, as it is now, below
			}
			if h := fh.heard[node]; h.After(o.HeardAt) {
				o.HeardAt = h
			}
			t.Observers = append(t.Observers, ObserverView{Node: node, Region: o.Region, Up: o.Up, HeardAt: o.HeardAt, Stale: stale(o)})
		}
	}
	for name, r := range fh.own {
		if !wanted(name) {
			continue
		}
		o := r.observation(self, region, fh.refresh)
		target(name).Observers = append(target(name).Observers, ObserverView{Node: self, Region: region, Up: o.Up, HeardAt: o.HeardAt, Stale: stale(o), Own: true})
	}
	fh.mu.Unlock()
	out := make([]TargetView, 0, len(byName))
	for name, t := range byName {
		r, ok := fh.tracker.Result(name)
		if fh.cfg.Regional {
			r, ok = fh.tracker.Region(name, region)
		}
		t.Verdict = "unknown"
		if ok {
			t.Verdict, t.Reason, t.Since = r.Verdict.String(), r.Reason(), r.Since
		}
		sort.Slice(t.Observers, func(i, j int) bool { return t.Observers[i].Node < t.Observers[j].Node })
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}
