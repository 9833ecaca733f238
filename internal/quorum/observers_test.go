package quorum

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func nodes(n int, regions ...string) []Node {
	ns := make([]Node, n)
	for i := range ns {
		ns[i] = Node{Name: fmt.Sprintf("pop-%02d", i), Region: regions[i%len(regions)]}
	}
	return ns
}

func targets(n int) []string {
	ts := make([]string, n)
	for i := range ts {
		ts[i] = fmt.Sprintf("192.0.2.%d/https-healthz#%d", i%250, i)
	}
	return ts
}

func TestDefaultK(t *testing.T) {
	for _, c := range []struct{ n, min, want int }{
		{40, 3, 5}, {24, 3, 5}, {3, 3, 3}, {1, 3, 1}, {40, 5, 7}, {40, 1, 5},
	} {
		if got := DefaultK(c.n, c.min); got != c.want {
			t.Errorf("DefaultK(%d, %d) = %d, want %d", c.n, c.min, got, c.want)
		}
	}
	if got := DefaultRegionalK(40, 6, 3); got != 24 {
		t.Errorf("DefaultRegionalK(40, 6, 3) = %d", got)
	}
	if got := DefaultRegionalK(10, 6, 3); got != 10 {
		t.Errorf("DefaultRegionalK(10, 6, 3) = %d", got)
	}
	// The arithmetic DefaultK rests on: with 5 observers (or 3 or 4 left),
	// one up keeps the target up; with 6, one up does not.
	for _, live := range []int{3, 4, 5} {
		if upByFraction(1, live, DefaultHealthyAbove) != Up {
			t.Errorf("1 of %d up is not up", live)
		}
	}
	if upByFraction(1, 6, DefaultHealthyAbove) != Down {
		t.Error("1 of 6 up is up")
	}
}

func TestObserversBasics(t *testing.T) {
	ns := nodes(10, "eu")
	got := Observers("t", ns, 3)
	if len(got) != 3 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 3 {
		t.Fatalf("k=3: %v", got)
	}
	// The same whatever the order of the member list.
	shuffled := slices.Clone(ns)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if again := Observers("t", shuffled, 3); !slices.Equal(got, again) {
		t.Errorf("order-dependent: %v vs %v", got, again)
	}
	// k ≤ 0: the default; k ≥ N: everyone; no nodes: none.
	if d := Observers("t", ns, 0); len(d) != 5 || !slices.Equal(d[:3], got) {
		t.Errorf("k=0: %v (k=3 gave %v)", d, got)
	}
	if all := Observers("t", ns, 99); len(all) != 10 {
		t.Errorf("k=99: %v", all)
	}
	if none := Observers("t", nil, 5); len(none) != 0 {
		t.Errorf("no nodes: %v", none)
	}
	// Different targets, different observers.
	if other := Observers("u", ns, 3); slices.Equal(other, got) && slices.Equal(Observers("v", ns, 3), got) {
		t.Errorf("t, u and v all get %v", got)
	}
}

// Each node probes about k·T/N of 1,000 targets, within ±25 %.
func TestObserversBalance(t *testing.T) {
	for _, c := range []struct {
		n       int
		regions []string
		k       int
	}{
		{40, []string{"eu"}, 5},
		{24, []string{"eu", "us", "ap", "sa"}, 5},
		{40, []string{"eu", "us", "ap", "sa", "af"}, 5},
		{30, []string{"eu", "us", "ap"}, 12},
	} {
		ns := nodes(c.n, c.regions...)
		load := map[string]int{}
		ts := targets(1000)
		for _, tg := range ts {
			for _, o := range Observers(tg, ns, c.k) {
				load[o]++
			}
		}
		want := float64(c.k*len(ts)) / float64(c.n)
		lo, hi := 0.75*want, 1.25*want
		mn, mx := len(ts), 0
		for _, n := range ns {
			l := load[n.Name]
			mn, mx = min(mn, l), max(mx, l)
			if float64(l) < lo || float64(l) > hi {
				t.Errorf("N=%d regions=%d k=%d: %s probes %d targets, want %.0f ± 25 %%", c.n, len(c.regions), c.k, n.Name, l, want)
			}
		}
		t.Logf("N=%d regions=%d k=%d: per node %d..%d, ideal %.1f", c.n, len(c.regions), c.k, mn, mx, want)
	}
}

// moved returns, over ts, how many assignments are in after but not in
// before, and the most any single target gained.
func moved(ts []string, before, after []Node, k int) (total, worst int) {
	for _, tg := range ts {
		b := Observers(tg, before, k)
		n := 0
		for _, o := range Observers(tg, after, k) {
			if !slices.Contains(b, o) {
				n++
			}
		}
		total += n
		worst = max(worst, n)
	}
	return total, worst
}

// Adding or removing one node moves about 1/N of the k·T assignments.
func TestObserversStability(t *testing.T) {
	ts := targets(1000)
	for _, regions := range [][]string{{"eu"}, {"eu", "us", "ap", "sa"}} {
		const n, k = 24, 5
		ns := nodes(n, regions...)
		added := append(slices.Clone(ns), Node{Name: "pop-new", Region: regions[0]})
		removed := slices.Delete(slices.Clone(ns), 7, 8)
		total := k * len(ts)
		for _, c := range []struct {
			name          string
			before, after []Node
			members       int
		}{
			{"add", ns, added, n + 1},
			{"remove", ns, removed, n},
		} {
			m, worst := moved(ts, c.before, c.after, k)
			ideal := float64(total) / float64(c.members)
			t.Logf("regions=%d %s one node: %d of %d assignments moved (%.1f %%; 1/N = %.1f %%), at most %d per target",
				len(regions), c.name, m, total, 100*float64(m)/float64(total), 100/float64(c.members), worst)
			if float64(m) > 1.5*ideal || m == 0 {
				t.Errorf("regions=%d %s one node: %d assignments moved, want about %.0f", len(regions), c.name, m, ideal)
			}
			if worst > 2 {
				t.Errorf("regions=%d %s one node: a target changed %d observers", len(regions), c.name, worst)
			}
		}
		// Everything that moved on adding went to the new node, in one region.
		if len(regions) == 1 {
			for _, tg := range ts {
				b := Observers(tg, ns, k)
				for _, o := range Observers(tg, added, k) {
					if !slices.Contains(b, o) && o != "pop-new" {
						t.Fatalf("%s: %s gained %s", tg, "adding pop-new", o)
					}
				}
			}
		}
	}
}

func TestObserversRegionSpread(t *testing.T) {
	regions := []string{"eu", "us", "ap", "sa"}
	ns := nodes(23, regions...) // uneven: eu and us and ap 6, sa 5
	regionOf := map[string]string{}
	for _, n := range ns {
		regionOf[n.Name] = n.Region
	}
	count := func(obs []string) map[string]int {
		c := map[string]int{}
		for _, o := range obs {
			c[regionOf[o]]++
		}
		return c
	}
	for _, tg := range targets(300) {
		// k ≥ regions: every region has one, none has two before all have one.
		c := count(Observers(tg, ns, 5))
		for _, r := range regions {
			if c[r] < 1 || c[r] > 2 {
				t.Fatalf("%s k=5: %v", tg, c)
			}
		}
		// k < regions: k distinct regions.
		if c := count(Observers(tg, ns, 3)); len(c) != 3 {
			t.Fatalf("%s k=3: %v", tg, c)
		}
		// Regional mode's k: min_observers+1 per region.
		if c := count(Observers(tg, ns, DefaultRegionalK(len(ns), len(regions), 3))); len(c) != 4 || c["eu"] != 4 || c["sa"] != 4 {
			t.Fatalf("%s regional k: %v", tg, c)
		}
	}
	// A region with fewer nodes than its share: the rest go elsewhere.
	small := append(nodes(12, "eu", "us"), Node{Name: "lone", Region: "sa"})
	obs := Observers("t", small, 9)
	c := map[string]int{}
	for _, o := range obs {
		for _, n := range small {
			if n.Name == o {
				c[n.Region]++
			}
		}
	}
	if c["sa"] != 1 || c["eu"]+c["us"] != 8 || c["eu"] < 4 || c["us"] < 4 {
		t.Errorf("small region: %v", c)
	}
}

func BenchmarkObservers40(b *testing.B) {
	ns := nodes(40, "eu", "us", "ap", "sa", "af")
	b.ReportAllocs()
	for b.Loop() {
		Observers("192.0.2.10/https-healthz", ns, 5)
	}
}

// TestPickKRegional: in regional mode PickK gives every region with at
// least min_observers nodes that many observers of every target (10 nodes
// in 3 regions), where DefaultK gave a region at most 2; ShortRegions
// names a region with too few nodes, and every region when an explicit k
// is too small.
func TestPickKRegional(t *testing.T) {
	var nodes []Node
	for i, r := range []string{"eu", "eu", "eu", "eu", "us", "us", "us", "ap", "ap", "ap"} {
		nodes = append(nodes, Node{Name: fmt.Sprintf("n%d", i), Region: r})
	}
	region := map[string]string{}
	for _, n := range nodes {
		region[n.Name] = n.Region
	}
	k := PickK(nodes, 0, DefaultMinObservers, true)
	fewest := map[string]int{"eu": 99, "us": 99, "ap": 99}
	for i := range 500 {
		per := map[string]int{}
		for _, o := range Observers(fmt.Sprintf("192.0.2.%d/h", i), nodes, k) {
			per[region[o]]++
		}
		for r := range fewest {
			fewest[r] = min(fewest[r], per[r])
		}
	}
	for r, n := range fewest {
		if n < DefaultMinObservers {
			t.Errorf("k %d: region %s has as few as %d observers of a target, want %d", k, r, n, DefaultMinObservers)
		}
	}
	if s := ShortRegions(nodes, k, DefaultMinObservers); len(s) != 0 {
		t.Errorf("short regions %v with k %d", s, k)
	}
	if k := PickK(nodes, 0, DefaultMinObservers, false); k != 5 {
		t.Errorf("not regional: k %d, want 5", k)
	}
	if k := PickK(nodes, 7, DefaultMinObservers, true); k != 7 {
		t.Errorf("configured 7: k %d", k)
	}
	if s := ShortRegions(nodes, 8, DefaultMinObservers); !slices.Equal(s, []string{"ap", "eu", "us"}) {
		t.Errorf("k 8 < 9: short regions %v, want all three", s)
	}
	if s := ShortRegions(nodes[:9], 9, DefaultMinObservers); !slices.Equal(s, []string{"ap"}) {
		t.Errorf("2 nodes in ap: short regions %v, want [ap]", s)
	}
}
