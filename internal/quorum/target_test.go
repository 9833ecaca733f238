package quorum

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)

const iv = 5 * time.Second

func newTarget(t testing.TB, cfg Config) *Target {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &Target{cfg: cfg} // as Tracker.Update adds one
}

// fleet is a set of observers' latest observations of one target, as the
// store would hold them.
type fleet []Observation

func newFleet(n int, region func(i int) string, at time.Time) fleet {
	f := make(fleet, n)
	for i := range f {
		r := "eu"
		if region != nil {
			r = region(i)
		}
		f[i] = Observation{Node: fmt.Sprintf("n%d", i), Region: r, Up: true, HeardAt: at, Refresh: iv}
	}
	return f
}

func (f fleet) set(i int, up bool, at time.Time) {
	f[i].Up, f[i].HeardAt = up, at
}

func (f fleet) without(names ...string) fleet {
	return slices.DeleteFunc(slices.Clone(f), func(o Observation) bool { return slices.Contains(names, o.Node) })
}

func TestConfigValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	d := Defaults()
	if d.HealthyAbove != 0.18 || d.MinObservers != 3 || d.HoldDown != 10*time.Second || d.Stale != 3 || d.Regional {
		t.Fatalf("defaults %+v", d)
	}
	err := Config{}.Validate()
	if err == nil {
		t.Fatal("zero Config valid")
	}
	for _, want := range []string{"min_observers 0: must be from 1 to 1000", "stale 0: must be from 1 to 100"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("zero Config: %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "healthy_above") || strings.Contains(err.Error(), "hold_down") {
		t.Errorf("zero Config: %q: 0 is a valid healthy_above and hold_down", err)
	}
	bad := Config{HealthyAbove: 1, MinObservers: 1001, HoldDown: -time.Second, Stale: 101}
	err = bad.Validate()
	for _, want := range []string{"healthy_above 1: must be at least 0 and below 1", "min_observers 1001", "hold_down -1s: must be from 0s to 1h0m0s", "stale 101"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v lacks %q", bad, err, want)
		}
	}
	if _, err := NewTracker(Config{}); err == nil {
		t.Error("NewTracker(Config{}) accepted")
	}
	if _, err := NewTracker(bad); err == nil {
		t.Error("NewTracker(bad) accepted")
	}
}

func TestFractionRule(t *testing.T) {
	cfg := Defaults()
	cfg.HoldDown = 0
	for _, c := range []struct {
		live, up int
		want     Verdict
	}{
		{5, 0, Down}, {5, 1, Up}, {5, 5, Up}, {6, 1, Down}, {6, 2, Up}, {3, 1, Up}, {4, 1, Up},
		{40, 7, Down}, {40, 8, Up}, // 7/40 = 17.5 %, 8/40 = 20 %
		{50, 9, Down}, {50, 10, Up}, // 9/50 = 18 % is not above 18 %
	} {
		f := newFleet(c.live, nil, t0)
		for i := c.up; i < c.live; i++ {
			f.set(i, false, t0)
		}
		r := newTarget(t, cfg).Update(f, Unknown, t0)
		if r.Verdict != c.want || r.Source != SourceQuorum || r.Live != c.live || r.LiveUp != c.up {
			t.Errorf("%d of %d up: %v (%s), want %v from the quorum", c.up, c.live, r.Verdict, r.Reason(), c.want)
		}
	}
}

// A target really down: the five observers' checkers turn down one after
// another; the fleet verdict is Down exactly HoldDown after the fifth
// report, not a nanosecond before.
func TestReallyDownFlipsAfterHoldDown(t *testing.T) {
	cfg := Defaults()
	tg := newTarget(t, cfg)
	f := newFleet(5, nil, t0)
	r := tg.Update(f, Up, t0)
	if r.Verdict != Up || !r.Changed || r.Since != t0 {
		t.Fatalf("first: %v changed=%v since=%v", r.Verdict, r.Changed, r.Since)
	}
	now := t0
	for i := range 5 {
		now = now.Add(700 * time.Millisecond)
		f.set(i, false, now)
		r = tg.Update(f, Down, now)
		if i < 4 && (r.Computed != Up || r.Verdict != Up || r.Changed) {
			t.Fatalf("after %d down reports: %s", i+1, r)
		}
	}
	fifth := now
	if r.Computed != Down || r.Verdict != Up || r.PendingSince != fifth || r.FlipAt != fifth.Add(cfg.HoldDown) || r.Next != r.FlipAt {
		t.Fatalf("after the fifth: %s (pending %v flip %v next %v)", r, r.PendingSince, r.FlipAt, r.Next)
	}
	if !strings.Contains(r.Reason(), "held down until 16:00:13.500") {
		t.Errorf("reason %q", r.Reason())
	}
	// Observers keep reporting down at their interval; just before the
	// hold-down ends, still up.
	for now = fifth.Add(time.Second); now.Before(fifth.Add(cfg.HoldDown)); now = now.Add(time.Second) {
		for i := range f {
			f.set(i, false, now)
		}
		if r = tg.Update(f, Down, now); r.Verdict != Up || r.Changed {
			t.Fatalf("at +%v after the fifth: %s", now.Sub(fifth), r)
		}
	}
	if r = tg.Update(f, Down, fifth.Add(cfg.HoldDown-1)); r.Verdict != Up {
		t.Fatalf("1ns before: %s", r)
	}
	r = tg.Update(f, Down, fifth.Add(cfg.HoldDown))
	if r.Verdict != Down || !r.Changed || r.Since != fifth.Add(cfg.HoldDown) || !r.PendingSince.IsZero() {
		t.Fatalf("at hold-down: %s", r)
	}
	if got := r.Reason(); got != "quorum: 0 of 5 live observers see it up (0% ≤ healthy_above 18%): down" {
		t.Errorf("reason %q", got)
	}
	// Recovery is held down the same way.
	up := fifth.Add(30 * time.Second)
	for i := range f {
		f.set(i, i == 2, up)
	}
	if r = tg.Update(f, Down, up); r.Computed != Up || r.Verdict != Down {
		t.Fatalf("one observer back: %s", r)
	}
	if r = tg.Update(f, Down, up.Add(cfg.HoldDown)); r.Verdict != Up || !r.Changed {
		t.Fatalf("recovered: %s", r)
	}
}

// The partition cases: the target is unreachable from m of the 5
// observers (their checkers turn down at random times, their reports
// jittered), reachable from the rest. For m = 1, 2, 4 the fleet verdict
// never flips in 100 trials; for m = 5 it flips once, to down.
func TestPartitionsDoNotFlip(t *testing.T) {
	for _, m := range []int{1, 2, 4, 5} {
		flips, downs := 0, 0
		for trial := range 100 {
			rng := rand.New(rand.NewPCG(uint64(m), uint64(trial)))
			f, changes := partitionTrial(t, rng, m)
			flips += changes
			if f == Down {
				downs++
			}
		}
		switch {
		case m < 5 && (flips != 0 || downs != 0):
			t.Errorf("unreachable from %d of 5: %d flips, %d trials ending down; want 0", m, flips, downs)
		case m == 5 && (flips != 100 || downs != 100):
			t.Errorf("unreachable from 5 of 5: %d flips, %d trials ending down; want 100 each", flips, downs)
		}
	}
}

// partitionTrial simulates 2 minutes of reports from 5 observers, m of
// which lose the target 10–20 s in (each at its own moment, after fall = 3
// failed checks). Every report is an Update, with this node's own view
// random (it may be one of the cut-off ones). It returns the final verdict
// and the number of published changes after the first.
func partitionTrial(t *testing.T, rng *rand.Rand, m int) (Verdict, int) {
	tg := newTarget(t, Defaults())
	const fall = 3
	type ev struct {
		at   time.Time
		node int
	}
	f := newFleet(5, nil, t0)
	cut := rng.Perm(5)[:m]
	downAt := make([]time.Time, 5)
	for _, i := range cut {
		downAt[i] = t0.Add(10*time.Second + time.Duration(rng.Int64N(int64(10*time.Second)))).Add(fall * iv)
	}
	var evs []ev
	for i := range 5 {
		phase := time.Duration(rng.Int64N(int64(iv)))
		for at := t0.Add(phase); at.Before(t0.Add(2 * time.Minute)); at = at.Add(iv + time.Duration(rng.Int64N(int64(300*time.Millisecond))) - 150*time.Millisecond) {
			evs = append(evs, ev{at, i})
		}
	}
	slices.SortFunc(evs, func(a, b ev) int { return a.at.Compare(b.at) })
	tg.Update(f, Unknown, t0)
	changes := 0
	var last Result
	for _, e := range evs {
		up := downAt[e.node].IsZero() || e.at.Before(downAt[e.node])
		f.set(e.node, up, e.at)
		own := Up
		if rng.IntN(2) == 0 {
			own = Down
		}
		last = tg.Update(f, own, e.at)
		if last.Changed {
			changes++
		}
		if last.Source != SourceQuorum {
			t.Fatalf("m=%d: source %v at %v: %s", m, last.Source, e.at, last.Reason())
		}
	}
	return last.Verdict, changes
}

// Observers whose leases expired are absent: they leave the denominator
// and never vote down; below min_observers the node's own view decides and
// Reason says so.
func TestVanishedObserversLeaveDenominator(t *testing.T) {
	cfg := Defaults()
	cfg.HoldDown = 0
	tg := newTarget(t, cfg)
	f := newFleet(5, nil, t0)
	for i := 1; i < 5; i++ {
		f.set(i, false, t0) // 1 of 5 up: 20 %
	}
	if r := tg.Update(f, Down, t0); r.Verdict != Up || r.Source != SourceQuorum {
		t.Fatalf("1 of 5 up: %s", r)
	}
	// Two down observers vanish: 1 of 3 live, still the quorum's, still up.
	r := tg.Update(f.without("n3", "n4"), Down, t0.Add(time.Second))
	if r.Verdict != Up || r.Source != SourceQuorum || r.Live != 3 || r.LiveUp != 1 {
		t.Fatalf("3 live: %s", r)
	}
	// Three vanish: 2 live < 3, the node's own view decides.
	r = tg.Update(f.without("n2", "n3", "n4"), Down, t0.Add(2*time.Second))
	if r.Source != SourceOwn || r.Live != 2 || r.Verdict != Down || !r.Changed {
		t.Fatalf("2 live, own down: %s", r)
	}
	if got, want := r.Reason(), "own view: 2 live observers < min_observers 3, own checker says down"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	r = tg.Update(f.without("n2", "n3", "n4"), Unknown, t0.Add(3*time.Second))
	if r.Verdict != Up || r.Source != SourceOwn || !strings.Contains(r.Reason(), "own checker says unknown (no result yet: counted up)") {
		t.Fatalf("2 live, own unknown: %s", r)
	}
	// Everyone vanishes: absence never votes down.
	r = tg.Update(nil, Up, t0.Add(4*time.Second))
	if r.Verdict != Up || r.Source != SourceOwn || r.Live != 0 {
		t.Fatalf("none live: %s", r)
	}
}

func TestStaleObservationsAreNotLive(t *testing.T) {
	cfg := Defaults()
	cfg.HoldDown = 0
	tg := newTarget(t, cfg)
	now := t0.Add(time.Minute)
	window := time.Duration(cfg.Stale) * iv // 15 s
	f := newFleet(5, nil, now)
	// Two up observers whose checkers stopped reporting: one exactly at the
	// edge (still live), one a nanosecond past it.
	f.set(0, true, now.Add(-window))
	f.set(1, true, now.Add(-window-1))
	for i := 2; i < 5; i++ {
		f.set(i, false, now)
	}
	r := tg.Update(f, Unknown, now)
	if r.Live != 4 || r.LiveUp != 1 || r.Stale != 1 || r.Verdict != Up {
		t.Fatalf("edge: %s (live %d up %d stale %d)", r, r.Live, r.LiveUp, r.Stale)
	}
	if r.Next != now.Add(1) {
		t.Errorf("next %v, want when n0 goes stale, %v", r.Next, now.Add(1))
	}
	if !strings.HasSuffix(r.Reason(), "; 1 stale observation ignored") {
		t.Errorf("reason %q", r.Reason())
	}
	// A nanosecond later n0 is stale too: 0 of 3 live up.
	r = tg.Update(f, Unknown, now.Add(1))
	if r.Live != 3 || r.LiveUp != 0 || r.Stale != 2 || r.Verdict != Down {
		t.Fatalf("past the edge: %s", r)
	}
	// An observation with no interval is never live; one from the future
	// (clock skew) is.
	f.set(0, true, now.Add(time.Hour))
	f[1].Refresh = 0
	r = tg.Update(f, Unknown, now.Add(2))
	if r.Live != 4 || r.LiveUp != 1 || r.Stale != 1 || r.Verdict != Up {
		t.Fatalf("future and zero interval: %s", r)
	}
	// Stale observers below min_observers: own view.
	for i := 2; i < 5; i++ {
		f.set(i, false, now.Add(-time.Hour))
	}
	if r = tg.Update(f, Down, now.Add(3)); r.Source != SourceOwn || r.Stale != 4 || !strings.Contains(r.Reason(), "1 live observer < min_observers 3") {
		t.Fatalf("mostly stale: %s", r)
	}
}

// Input that flaps faster than the hold-down never moves the output, from
// the quorum or from the own view.
func TestFlappingShorterThanHoldDownNeverFlips(t *testing.T) {
	cfg := Defaults()
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		tg := newTarget(t, cfg)
		f := newFleet(5, nil, t0)
		tg.Update(f, Up, t0)
		now := t0
		down := false
		for range 200 {
			// Each phase lasts less than HoldDown; several Updates in it.
			phase := time.Duration(rng.Int64N(int64(cfg.HoldDown)))
			down = !down
			end := now.Add(phase)
			for now.Before(end) {
				own := Up
				if down {
					own = Down
				}
				obs := f
				if trial%2 == 1 {
					obs = f[:2] // below min_observers: the own view flaps
				}
				for i := range f {
					f.set(i, !down, now)
				}
				if r := tg.Update(obs, own, now); r.Changed || r.Verdict != Up {
					t.Fatalf("trial %d: flipped at %v: %s", trial, now.Sub(t0), r)
				}
				now = now.Add(time.Duration(1 + rng.Int64N(int64(2*time.Second))))
			}
			now = end
		}
	}
}

func TestHoldDownRestartsWhenInterrupted(t *testing.T) {
	cfg := Defaults()
	tg := newTarget(t, cfg)
	f := newFleet(5, nil, t0)
	tg.Update(f, Up, t0)
	all := func(up bool, at time.Time) {
		for i := range f {
			f.set(i, up, at)
		}
	}
	all(false, t0.Add(time.Second))
	tg.Update(f, Up, t0.Add(time.Second))
	all(true, t0.Add(9*time.Second)) // back before the hold-down ends
	if r := tg.Update(f, Up, t0.Add(9*time.Second)); !r.PendingSince.IsZero() || !r.Next.Equal(t0.Add(9*time.Second+3*iv+1)) {
		t.Fatalf("interrupted: %s next %v", r, r.Next)
	}
	all(false, t0.Add(10*time.Second))
	tg.Update(f, Up, t0.Add(10*time.Second))
	if r := tg.Update(f, Up, t0.Add(19*time.Second)); r.Verdict != Up {
		t.Fatalf("the hold-down counts from the second fall: %s", r)
	}
	if r := tg.Update(f, Up, t0.Add(20*time.Second)); r.Verdict != Down {
		t.Fatalf("after it: %s", r)
	}
}

func TestZeroHoldDownAndFirstVerdict(t *testing.T) {
	cfg := Defaults()
	f := newFleet(5, nil, t0)
	for i := range f {
		f.set(i, false, t0)
	}
	// No history: the first verdict is adopted at once, even down.
	r := newTarget(t, cfg).Update(f, Up, t0)
	if r.Verdict != Down || !r.Changed || !r.PendingSince.IsZero() {
		t.Fatalf("first: %s", r)
	}
	var zero Target
	if zero.Result().Verdict != Unknown {
		t.Fatal("zero Result not Unknown")
	}
	cfg.HoldDown = 0
	tg := newTarget(t, cfg)
	tg.Update(newFleet(5, nil, t0), Up, t0)
	if r := tg.Update(f, Up, t0.Add(1)); r.Verdict != Down || !r.Changed {
		t.Fatalf("hold_down 0: %s", r)
	}
}

func regionOf(regions ...string) func(int) string {
	return func(i int) string { return regions[i%len(regions)] }
}

func TestRegional(t *testing.T) {
	cfg := Defaults()
	cfg.Regional = true
	tg := newTarget(t, cfg)
	// 9 observers: eu n0 n3 n6, us n1 n4 n7, ap n2 n5 n8.
	f := newFleet(9, regionOf("eu", "us", "ap"), t0)
	f = append(f, Observation{Node: "lone", Region: "sa", Up: true, HeardAt: t0, Refresh: iv})
	tg.Update(f, Up, t0)
	// eu loses the site: its three observers see it down; the rest see it up.
	now := t0.Add(time.Second)
	for _, i := range []int{0, 3, 6} {
		f.set(i, false, now)
	}
	g := tg.Update(f, Up, now)
	if g.Verdict != Up || g.Computed != Up || g.Live != 10 || g.LiveUp != 7 {
		t.Fatalf("global: %s", g)
	}
	eu := tg.Region("eu")
	if eu.Computed != Down || eu.Verdict != Up || eu.Source != SourceRegion || eu.FlipAt != now.Add(cfg.HoldDown) {
		t.Fatalf("eu: %s", eu)
	}
	if g.Next != eu.FlipAt || eu.Next != eu.FlipAt {
		t.Errorf("next: global %v eu %v, want eu's flip %v", g.Next, eu.Next, eu.FlipAt)
	}
	now = now.Add(cfg.HoldDown)
	for _, i := range []int{0, 3, 6} {
		f.set(i, false, now)
	}
	g = tg.Update(f, Up, now)
	eu = tg.Region("eu")
	if eu.Verdict != Down || !eu.Changed || g.Verdict != Up || g.Changed {
		t.Fatalf("eu down, global up: eu %s; global %s", eu, g)
	}
	if got, want := eu.Reason(), "region eu quorum: 0 of 3 live observers see it up (0% ≤ healthy_above 18%): down"; got != want {
		t.Errorf("eu reason %q, want %q", got, want)
	}
	for _, name := range []string{"us", "ap"} {
		if r := tg.Region(name); r.Verdict != Up || r.Source != SourceRegion || r.Live != 3 || r.LiveUp != 3 {
			t.Errorf("%s: %s", name, r)
		}
	}
	// sa has one observer: it falls back to the global verdict.
	sa := tg.Region("sa")
	if sa.Verdict != Up || sa.Source != SourceQuorum || sa.RegionLive != 1 || sa.Live != 10 {
		t.Errorf("sa: %s", sa)
	}
	if got := sa.Reason(); !strings.HasPrefix(got, "region sa: 1 live observer < min_observers 3, global verdict: quorum: 7 of 10") {
		t.Errorf("sa reason %q", got)
	}
	// A region with no observer gets the global result.
	if r := tg.Region("af"); r.Verdict != Up || r.Region != "af" || r.RegionLive != 0 || !strings.HasPrefix(r.Reason(), "region af: 0 live observers") {
		t.Errorf("af: %s", r)
	}
	// Two eu observers die: eu falls back to the global verdict (up), under
	// its own hold-down.
	now = now.Add(time.Second)
	f2 := f.without("n3", "n6")
	tg.Update(f2, Up, now)
	if eu = tg.Region("eu"); eu.Verdict != Down || eu.Computed != Up || eu.Source != SourceQuorum || eu.RegionLive != 1 {
		t.Fatalf("eu thinned: %s", eu)
	}
	tg.Update(f2, Up, now.Add(cfg.HoldDown))
	if eu = tg.Region("eu"); eu.Verdict != Up || !eu.Changed {
		t.Fatalf("eu thinned, after hold-down: %s", eu)
	}
	// Without Regional, Region is the global result.
	plain := newTarget(t, Defaults())
	plain.Update(f, Up, t0)
	if r := plain.Region("eu"); r.Region != "" || r.Source != SourceQuorum || r.Live != 10 {
		t.Errorf("not regional: %s", r)
	}
}

// A region first seen after the target's first Update starts from the
// published verdict: appearing with all its observers down does not skip
// the hold-down.
func TestRegionAppearingLaterIsHeldDown(t *testing.T) {
	cfg := Defaults()
	cfg.Regional = true
	tg := newTarget(t, cfg)
	f := newFleet(3, regionOf("eu"), t0)
	tg.Update(f, Up, t0)
	now := t0.Add(time.Second)
	for i := range 3 {
		f = append(f, Observation{Node: fmt.Sprintf("us%d", i), Region: "us", Up: false, HeardAt: now, Refresh: iv})
	}
	tg.Update(f, Up, now)
	us := tg.Region("us")
	if us.Verdict != Up || us.Changed || us.Computed != Down || us.FlipAt != now.Add(cfg.HoldDown) {
		t.Fatalf("us appearing down: %s", us)
	}
	// In the very first Update every region is adopted at once.
	tg = newTarget(t, cfg)
	tg.Update(f, Up, now)
	if us = tg.Region("us"); us.Verdict != Down || !us.Changed {
		t.Fatalf("us in the first Update: %s", us)
	}
	if eu := tg.Region("eu"); eu.Verdict != Up {
		t.Fatalf("eu in the first Update: %s", eu)
	}
}

func TestTracker(t *testing.T) {
	cfg := Defaults()
	cfg.Regional = true
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Config() != cfg {
		t.Error("Config")
	}
	if _, ok := tr.Result("a"); ok {
		t.Error("Result of an unknown key")
	}
	up := newFleet(5, nil, t0)
	down := newFleet(5, nil, t0)
	for i := range down {
		down.set(i, false, t0)
	}
	tr.Update("b", up, Unknown, t0)
	tr.Update("a", down, Unknown, t0)
	if r, ok := tr.Result("a"); !ok || r.Verdict != Down {
		t.Errorf("a: %s", r)
	}
	if r, ok := tr.Region("b", "eu"); !ok || r.Verdict != Up || r.Source != SourceRegion {
		t.Errorf("b eu: %s", r)
	}
	if _, ok := tr.Region("c", "eu"); ok {
		t.Error("Region of an unknown key")
	}
	if got := tr.Keys(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("keys %v", got)
	}
	// Forgotten, a target starts afresh: its first verdict is adopted at once.
	tr.Forget("a")
	if r := tr.Update("a", up, Unknown, t0.Add(time.Second)); r.Verdict != Up || !r.Changed {
		t.Errorf("a again: %s", r)
	}
}

func TestTrackerConcurrent(t *testing.T) {
	tr, _ := NewTracker(Defaults())
	done := make(chan bool)
	for g := range 4 {
		go func() {
			f := newFleet(5, nil, t0)
			for i := range 200 {
				key := fmt.Sprintf("t%d", (g+i)%7)
				tr.Update(key, f, Up, t0.Add(time.Duration(i)*time.Millisecond))
				tr.Result(key)
				tr.Region(key, "eu")
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
	if n := len(tr.Keys()); n != 7 {
		t.Errorf("%d keys", n)
	}
}

func TestUpdateAllocations(t *testing.T) {
	for _, regional := range []bool{false, true} {
		for _, n := range []int{5, 40} {
			cfg := Defaults()
			cfg.Regional = regional
			tg := newTarget(t, cfg)
			f := newFleet(n, regionOf("eu", "us", "ap", "sa"), t0)
			tg.Update(f, Up, t0)
			now := t0
			allocs := testing.AllocsPerRun(1000, func() {
				now = now.Add(time.Millisecond)
				f.set(int(now.UnixMilli())%n, now.UnixMilli()%3 != 0, now)
				tg.Update(f, Up, now)
			})
			if allocs != 0 {
				t.Errorf("regional=%v, %d observers: %v allocations per Update", regional, n, allocs)
			}
		}
	}
}

func benchmarkUpdate(b *testing.B, n int, regional bool) {
	cfg := Defaults()
	cfg.Regional = regional
	tg := newTarget(b, cfg)
	f := newFleet(n, regionOf("eu", "us", "ap", "sa"), t0)
	tg.Update(f, Up, t0)
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		f.set(i%n, i%3 != 0, now)
		tg.Update(f, Up, now)
	}
}

func BenchmarkUpdate5(b *testing.B)          { benchmarkUpdate(b, 5, false) }
func BenchmarkUpdate40(b *testing.B)         { benchmarkUpdate(b, 40, false) }
func BenchmarkUpdate5Regional(b *testing.B)  { benchmarkUpdate(b, 5, true) }
func BenchmarkUpdate40Regional(b *testing.B) { benchmarkUpdate(b, 40, true) }
