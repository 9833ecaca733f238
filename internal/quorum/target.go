package quorum

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Source says what decided a computed verdict.
type Source uint8

// Sources.
const (
	// SourceOwn: fewer than MinObservers live observers; the node's own
	// checker decided.
	SourceOwn Source = iota
	// SourceQuorum: the fraction rule over every live observer.
	SourceQuorum
	// SourceRegion: the fraction rule over the live observers of one region
	// (regional mode, a region with at least MinObservers of them).
	SourceRegion
)

// String returns "own", "quorum" or "region".
func (s Source) String() string {
	switch s {
	case SourceQuorum:
		return "quorum"
	case SourceRegion:
		return "region"
	}
	return "own"
}

// Result is the outcome of one Update for a target, globally or for one
// region. Reason renders it for logs and explain.
type Result struct {
	// Verdict is the published verdict, after hold-down: Up or Down
	// (Unknown only in the zero Result, before the first Update).
	Verdict Verdict
	// Changed is true when Verdict differs from the one published before
	// this Update. The first Update publishes a verdict where there was
	// none, so it reports Changed.
	Changed bool
	// Since is when Verdict was published.
	Since time.Time
	// Computed is what this Update's inputs alone say, before hold-down.
	Computed Verdict
	// Source is what decided Computed. A region result that fell back to
	// the global verdict carries the global source (SourceQuorum or
	// SourceOwn).
	Source Source
	// Region is the region asked for; "" for the global result.
	Region string
	// Live and LiveUp count the live observers the deciding rule looked at,
	// and those seeing the target up: the region's for SourceRegion, the
	// whole fleet's otherwise (also for SourceOwn, where they were too
	// few).
	Live, LiveUp int
	// RegionLive is, for a region result, the region's own live observers
	// (fewer than MinObservers when it fell back to the global verdict).
	RegionLive int
	// Stale counts observations present but not live (too old, or with no
	// interval), fleet-wide. They did not vote.
	Stale int
	// Own is the node's own view given to Update.
	Own Verdict
	// PendingSince is, while Computed differs from Verdict, when Computed
	// started to hold; FlipAt = PendingSince + HoldDown is when Verdict
	// flips if it keeps holding (given an Update then). Both are zero
	// otherwise.
	PendingSince, FlipAt time.Time
	// Next is the earliest time at which an Update with the same
	// observations could give another result: a pending flip, or a live
	// observation going stale. Zero when nothing is due. The caller should
	// call Update by then (a timer) as well as on every change.
	Next time.Time

	healthyAbove float64
	minObservers int
}

// Reason says in one line why Verdict is what it is, e.g.
//
//	quorum: 1 of 5 live observers see it up (20% > healthy_above 18%): up
//	own view: 2 live observers < min_observers 3, own checker says down; 3 stale observations ignored
//	region eu: 1 live observer < min_observers 3, global verdict: quorum: 4 of 6 ...
//	...; computed down since 16:00:05.000, held down until 16:00:15.000
func (r Result) Reason() string {
	var b strings.Builder
	if r.Region != "" && r.Source != SourceRegion {
		fmt.Fprintf(&b, "region %s: %s < min_observers %d, global verdict: ", r.Region, observers(r.RegionLive), r.minObservers)
	}
	switch r.Source {
	case SourceRegion, SourceQuorum:
		if r.Source == SourceRegion {
			fmt.Fprintf(&b, "region %s quorum: ", r.Region)
		} else {
			b.WriteString("quorum: ")
		}
		op := "≤"
		if r.Computed == Up {
			op = ">"
		}
		fmt.Fprintf(&b, "%d of %d live observers see it up (%s%% %s healthy_above %s%%): %s",
			r.LiveUp, r.Live, pct(float64(r.LiveUp)/float64(r.Live)), op, pct(r.healthyAbove), r.Computed)
	default:
		fmt.Fprintf(&b, "own view: %s < min_observers %d, own checker says %s", observers(r.Live), r.minObservers, r.Own)
		if r.Own == Unknown {
			b.WriteString(" (no result yet: counted up)")
		}
	}
	if r.Stale > 0 {
		fmt.Fprintf(&b, "; %d stale observation", r.Stale)
		if r.Stale > 1 {
			b.WriteString("s")
		}
		b.WriteString(" ignored")
	}
	if !r.PendingSince.IsZero() {
		fmt.Fprintf(&b, "; computed %s since %s, held down until %s", r.Computed,
			r.PendingSince.UTC().Format("15:04:05.000"), r.FlipAt.UTC().Format("15:04:05.000"))
	}
	return b.String()
}

// String returns the verdict and its reason.
func (r Result) String() string { return r.Verdict.String() + ": " + r.Reason() }

func observers(n int) string {
	if n == 1 {
		return "1 live observer"
	}
	return strconv.Itoa(n) + " live observers"
}

func pct(f float64) string { return strconv.FormatFloat(f*100, 'g', 3, 64) }

// machine is the hold-down state of one published verdict.
type machine struct {
	started      bool
	pub          Verdict
	since        time.Time
	pending      Verdict // Unknown: none
	pendingSince time.Time
}

// step feeds the computed verdict c at now; it reports whether the
// published verdict changed.
func (m *machine) step(c Verdict, now time.Time, hold time.Duration) bool {
	if !m.started {
		m.started, m.pub, m.since, m.pending = true, c, now, Unknown
		return true
	}
	if c == m.pub {
		m.pending = Unknown
		return false
	}
	if m.pending != c {
		m.pending, m.pendingSince = c, now
	}
	if now.Sub(m.pendingSince) >= hold {
		m.pub, m.since, m.pending = c, now, Unknown
		return true
	}
	return false
}

// fill sets r's published fields from m.
func (m *machine) fill(r *Result, changed bool, hold time.Duration) {
	r.Verdict, r.Since, r.Changed = m.pub, m.since, changed
	r.PendingSince, r.FlipAt = time.Time{}, time.Time{}
	if m.pending != Unknown {
		r.PendingSince, r.FlipAt = m.pendingSince, m.pendingSince.Add(hold)
	}
}

type regionState struct {
	name     string
	m        machine
	live, up int
	last     Result
}

// Target is the quorum state machine of one target: the hold-down state of
// its global verdict and, in regional mode, of each region's. It is not
// safe for concurrent use (Tracker is).
type Target struct {
	cfg     Config
	global  machine
	regions []regionState
	last    Result
}

// maxWindow caps Stale×Refresh so that absurd periods cannot overflow.
const maxWindow = 100 * 365 * 24 * time.Hour

// Update computes the verdict from obs, the observations of this target
// currently in the store (at most one per node; an expired lease is simply
// absent), and own, this node's own checker status (Up, Down, or Unknown
// with no result yet or no checker here), at now. It returns the global
// result; Region gives a region's (regional mode). In steady state (no new
// region) it does not allocate. obs is not retained.
func (t *Target) Update(obs []Observation, own Verdict, now time.Time) Result {
	first := !t.global.started
	for i := range t.regions {
		t.regions[i].live, t.regions[i].up = 0, 0
	}
	nRegions := len(t.regions)
	live, up, stale := 0, 0, 0
	var next time.Time
	for i := range obs {
		o := &obs[i]
		if o.Refresh <= 0 {
			stale++
			continue
		}
		window := maxWindow
		if o.Refresh < maxWindow/time.Duration(t.cfg.Stale) {
			window = time.Duration(t.cfg.Stale) * o.Refresh
		}
		expires := o.HeardAt.Add(window) // live while now ≤ expires
		if expires.Before(now) {
			stale++
			continue
		}
		live++
		if o.Up {
			up++
		}
		if gone := expires.Add(1); next.IsZero() || gone.Before(next) {
			next = gone
		}
		if t.cfg.Regional {
			r := t.region(o.Region)
			r.live++
			if o.Up {
				r.up++
			}
		}
	}

	g := Result{Own: own, Live: live, LiveUp: up, Stale: stale, healthyAbove: t.cfg.HealthyAbove, minObservers: t.cfg.MinObservers}
	if live >= t.cfg.MinObservers {
		g.Source, g.Computed = SourceQuorum, upByFraction(up, live, t.cfg.HealthyAbove)
	} else {
		g.Source, g.Computed = SourceOwn, Up
		if own == Down {
			g.Computed = Down
		}
	}
	changed := t.global.step(g.Computed, now, t.cfg.HoldDown)
	t.global.fill(&g, changed, t.cfg.HoldDown)
	next = earlier(next, g.FlipAt)

	for i := range t.regions {
		rs := &t.regions[i]
		if i >= nRegions && !first {
			// A region first seen now starts from the target's published
			// verdict: appearing must not skip the hold-down.
			rs.m = machine{started: true, pub: g.Verdict, since: now}
		}
		r := g
		r.Region, r.RegionLive = rs.name, rs.live
		if rs.live >= t.cfg.MinObservers {
			r.Source, r.Computed = SourceRegion, upByFraction(rs.up, rs.live, t.cfg.HealthyAbove)
			r.Live, r.LiveUp = rs.live, rs.up
		}
		changed := rs.m.step(r.Computed, now, t.cfg.HoldDown)
		rs.m.fill(&r, changed, t.cfg.HoldDown)
		next = earlier(next, r.FlipAt)
		rs.last = r
	}
	g.Next = next
	for i := range t.regions {
		t.regions[i].last.Next = next
	}
	t.last = g
	return g
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// region returns the state of the named region, adding it (unstarted).
func (t *Target) region(name string) *regionState {
	for i := range t.regions {
		if t.regions[i].name == name {
			return &t.regions[i]
		}
	}
	t.regions = append(t.regions, regionState{name: name})
	return &t.regions[len(t.regions)-1]
}

// Result returns the global result of the last Update (the zero Result
// before the first).
func (t *Target) Result() Result { return t.last }

// Region returns the result of the last Update for the named region: its
// own verdict when it had at least MinObservers live observers, otherwise
// the global verdict (see the package comment), each under its own
// hold-down. A region with no observers ever seen, and every region when
// the Config is not Regional, gets the global result (with Region set and
// RegionLive 0 in regional mode).
func (t *Target) Region(name string) Result {
	if !t.cfg.Regional {
		return t.last
	}
	for i := range t.regions {
		if t.regions[i].name == name {
			return t.regions[i].last
		}
	}
	r := t.last
	r.Region, r.RegionLive = name, 0
	return r
}
