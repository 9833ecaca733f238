package rum

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func fixedNow(t time.Time) func() time.Time { return func() time.Time { return t } }

// A log-normal RTT distribution has known quantiles: exp(mu + sigma*z_q).
// The estimate must be within a few per cent (buckets are 9 % wide).
func TestStoreQuantilesOfKnownDistribution(t *testing.T) {
	s := NewStore(Options{Now: fixedNow(t0)})
	r := rand.New(rand.NewPCG(1, 2))
	mu, sigma := math.Log(80), 0.5
	c := netip.MustParsePrefix("198.51.100.7/32")
	for range 20000 {
		ms := math.Exp(mu + sigma*r.NormFloat64())
		if err := s.Add(Beacon{Client: c, Site: "fra", RTTms: ms, Time: t0}); err != nil {
			t.Fatal(err)
		}
	}
	a := s.Snapshot()
	if len(a) != 1 {
		t.Fatalf("%d cells, want 1", len(a))
	}
	want50, want75 := math.Exp(mu), math.Exp(mu+sigma*0.6744897502)
	if d := math.Abs(a[0].P50/want50 - 1); d > 0.02 {
		t.Errorf("p50 %.2f, want %.2f (off %.1f%%)", a[0].P50, want50, 100*d)
	}
	if d := math.Abs(a[0].P75/want75 - 1); d > 0.02 {
		t.Errorf("p75 %.2f, want %.2f (off %.1f%%)", a[0].P75, want75, 100*d)
	}
	if a[0].Total != 20000 || math.Abs(a[0].Count-20000) > 1 {
		t.Errorf("total %d count %.1f, want 20000", a[0].Total, a[0].Count)
	}
}

// Old beacons lose weight by the half-life: after a shift in the RTT
// the quantile follows the new values, and the count decays.
func TestStoreDecay(t *testing.T) {
	now := t0
	s := NewStore(Options{HalfLife: time.Minute, Now: func() time.Time { return now }})
	c := netip.MustParsePrefix("2001:db8:1:2:3::1/128")
	for i := range 100 {
		_ = s.Add(Beacon{Client: c, Site: "a", RTTms: 200, Time: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	// 40 half-lives later (past the rescale point) 100 beacons at 20 ms.
	later := t0.Add(40 * time.Minute)
	for range 100 {
		_ = s.Add(Beacon{Client: c, Site: "a", RTTms: 20, Time: later})
	}
	now = later.Add(time.Minute)
	a := s.Snapshot()[0]
	if a.P75 > 25 || a.P50 > 25 {
		t.Errorf("quantiles %v: old beacons still weigh", a)
	}
	if math.Abs(a.Count-50) > 0.5 {
		t.Errorf("count %.2f one half-life after 100 beacons, want 50", a.Count)
	}
	if a.Block != netip.MustParsePrefix("2001:db8:1::/56") {
		t.Errorf("block %v, want the /56", a.Block)
	}
}

// The budget holds: the least recently seen block goes, and is counted.
func TestStoreEvictsLeastRecentlySeen(t *testing.T) {
	s := NewStore(Options{MaxBlocks: 3, Now: fixedNow(t0)})
	add := func(a string) {
		t.Helper()
		if err := s.Add(Beacon{Client: netip.MustParsePrefix(a), Site: "x", RTTms: 10, Time: t0}); err != nil {
			t.Fatal(err)
		}
	}
	add("10.0.1.1/32")
	add("10.0.2.1/32")
	add("10.0.3.1/32")
	add("10.0.1.2/32") // 10.0.1.0/24 seen again: 10.0.2.0/24 is now the oldest
	add("10.0.4.1/32")
	var got []string
	for _, a := range s.Snapshot() {
		got = append(got, a.Block.String())
	}
	if want := []string{"10.0.1.0/24", "10.0.3.0/24", "10.0.4.0/24"}; !slices.Equal(got, want) {
		t.Errorf("blocks %v, want %v", got, want)
	}
	if st := s.Stats(); st.Evictions != 1 || st.Blocks != 3 || st.Cells != 3 {
		t.Errorf("stats %+v, want 1 eviction, 3 blocks, 3 cells", st)
	}
	if ev := s.TakeEvicted(); len(ev) != 1 || ev[0].String() != "10.0.2.0/24" {
		t.Errorf("evicted %v, want 10.0.2.0/24", ev)
	}
	// The evicted block's pending change is not reported.
	for _, a := range s.TakeChanged() {
		if a.Block.String() == "10.0.2.0/24" {
			t.Errorf("evicted block reported changed: %v", a)
		}
	}
	if ch := s.TakeChanged(); len(ch) != 0 {
		t.Errorf("changed again without a beacon: %v", ch)
	}
}

func TestTruncate(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.77/32":           "192.0.2.0/24",
		"192.0.0.0/16":            "192.0.0.0/16",
		"::ffff:192.0.2.77/128":   "192.0.2.0/24",
		"2001:db8:aa:bbcc::1/128": "2001:db8:aa:bb00::/56",
		"2001:db8::/32":           "2001:db8::/32",
	} {
		if got := Truncate(netip.MustParsePrefix(in)); got.String() != want {
			t.Errorf("Truncate(%s) = %s, want %s", in, got, want)
		}
	}
}
