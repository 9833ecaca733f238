package policy_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/policy"
)

// latRecord steers by measured latency between three sites.
const latRecord = `
  - name: lat.example.com
    type: A
    ttl: 60
    pools:
      mumbai:    { address: 203.0.113.10,  location: { lat: 19.08, lon: 72.88 } }
      frankfurt: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      virginia:  { address: 192.0.2.30,    location: { lat: 38.95, lon: -77.45 } }
    rules:
      - default: { by: latency, fallback: [virginia, frankfurt, mumbai] }
`

const (
	mumbai    = uint64(1) << 0
	frankfurt = uint64(1) << 1
	virginia  = uint64(1) << 2
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// latEnv is a compiled latency record with its store and anti-flap state.
type latEnv struct {
	t     testing.TB
	table *policy.Table
	live  *policy.Live
	r     *policy.Record
	store *latency.Store
	h     *policy.LatencyMemory
	now   time.Time
}

func newLatEnv(t testing.TB, record string, o latency.Options) *latEnv {
	t.Helper()
	table := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, record))
	// No evaluation yet: the first update sets every network's initial
	// choice, as loading the files does before a server answers.
	return &latEnv{t: t, table: table, live: policy.NewLive(table, policy.LiveOptions{}), r: table.Records[0], store: latency.NewStore(o), h: policy.NewLatencyMemory(o), now: t0}
}

// update applies one update of "key,site,rtt" lines measured at e.now.
func (e *latEnv) update(lines ...string) {
	e.t.Helper()
	var ms []latency.Measurement
	for _, l := range lines {
		f := strings.Split(l, ",")
		var rtt float64
		fmt.Sscan(f[2], &rtt)
		ms = append(ms, latency.Measurement{Key: f[0], Site: f[1], RTTms: rtt, Samples: 1, MeasuredAt: e.now})
	}
	e.store.Update(ms, e.now)
	e.eval()
}

func (e *latEnv) eval() { e.live.SetLatency(e.store.Map(), e.h, e.store.Updates(), e.now) }

// decide answers an A query from client/bits (bits -1: the resolver's own
// address) with the pools in up usable.
func (e *latEnv) decide(client string, bits int, up uint64) policy.Decision {
	q := query(e.r, client, bits, client)
	q.Up = up & e.r.Enabled
	q.Latency = e.live.Latency()
	return e.r.Decide(q)
}

func (e *latEnv) pick(client string, bits int) string {
	return poolNames(e.r, e.decide(client, bits, ^uint64(0)).Pools)
}

// The seed case: a Guwahati user behind a Singapore public
// resolver.
func TestLatencyGuwahatiSeed(t *testing.T) {
	e := newLatEnv(t, latRecord, latency.Options{})
	e.update(
		"192.0.2.32/28,mumbai,40", "192.0.2.32/28,frankfurt,150", "192.0.2.32/28,virginia,230", // Guwahati's subnet
		"192.0.2.144/28,mumbai,60", "192.0.2.144/28,virginia,220", // the Singapore resolver's network
	)
	d := e.decide("192.0.2.32", 28, ^uint64(0))
	if got := poolNames(e.r, d.Pools); got != "mumbai" {
		t.Errorf("Guwahati subnet: %s, want mumbai", got)
	}
	if d.Scope != 28 {
		t.Errorf("Guwahati scope %d, want 28 (the map's and the geo data's granularity)", d.Scope)
	}
	d = e.decide("192.0.2.150", -1, ^uint64(0))
	if got := poolNames(e.r, d.Pools); got != "mumbai" {
		t.Errorf("Singapore resolver without a subnet: %s, want mumbai", got)
	}
	// The measurement decides, not geography: Singapore is nearer Mumbai,
	// but measured Virginia wins once it is faster.
	e.update("192.0.2.144/28,virginia,30")
	if got := e.pick("192.0.2.150", -1); got != "mumbai" {
		t.Errorf("one faster update must not switch (anti-flap): %s", got)
	}
	e.update("192.0.2.144/28,virginia,30")
	e.update("192.0.2.144/28,virginia,30")
	if got := e.pick("192.0.2.150", -1); got != "virginia" {
		t.Errorf("after switch_rounds updates: %s, want virginia", got)
	}
	// Explain names each candidate's RTT and source.
	tr := e.live.ExplainLatency(e.r, 0, addr("192.0.2.150"), lookupInfo(t, "192.0.2.150"), ^uint64(0), "virginia", e.now)
	want := map[string]string{"mumbai": "measured 60 192.0.2.144/28", "virginia": "measured 30 192.0.2.144/28", "frankfurt": "estimated"}
	for _, c := range tr.Candidates {
		got := c.Source
		if c.Key != "" {
			got = fmt.Sprintf("%s %.0f %s", c.Source, c.RTT, c.Key)
		}
		if !strings.HasPrefix(got, want[c.Pool]) {
			t.Errorf("explain %s: %q, want %q", c.Pool, got, want[c.Pool])
		}
	}
	for _, c := range tr.Candidates {
		if c.Pool == "frankfurt" && !strings.HasPrefix(c.Estimate, "2 × 10") {
			t.Errorf("frankfurt's estimate %q does not show Singapore–Frankfurt (about 10,000 km)", c.Estimate)
		}
	}
	if tr.State == nil || tr.State.Current != "virginia" {
		t.Errorf("explain state %+v, want current virginia", tr.State)
	}
}

// lookupInfo is what the test databases say about a.
func lookupInfo(t testing.TB, a string) *geo.Info {
	t.Helper()
	info, _, err := geoSetFor(t, cityDB, asnDB).Lookup(addr(a))
	if err != nil {
		t.Fatal(err)
	}
	return &info
}

// With no measurement at all, the estimate from distance decides.
func TestLatencyEstimateWithoutMeasurements(t *testing.T) {
	e := newLatEnv(t, latRecord, latency.Options{OverheadMs: 5})
	e.eval()
	for _, tc := range []struct{ client, want string }{
		{"192.0.2.32", "mumbai"},     // Guwahati
		{"192.0.2.64", "frankfurt"},  // Frankfurt
		{"192.0.2.128", "virginia"},  // Ashburn
		{"192.0.2.192", "virginia"},  // São Paulo
		{"203.0.113.70", "virginia"}, // continent only, no location: fallback order
	} {
		if got := e.pick(tc.client, 32); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.client, got, tc.want)
		}
	}
}

// Keys of every kind, most specific first.
func TestLatencyKeyPrecedence(t *testing.T) {
	e := newLatEnv(t, latRecord, latency.Options{})
	e.update(
		"continent:AS,frankfurt,10", // all of Asia: Frankfurt
		"IN,virginia,5",             // India: Virginia
		"IN-MH,mumbai,4",            // Maharashtra: Mumbai
		"AS64497,frankfurt,3",       // the Guwahati ASN: Frankfurt
	)
	for _, tc := range []struct{ client, want string }{
		{"192.0.2.144", "frankfurt"}, // Singapore: continent key (others estimated and slower)
		{"198.51.100.10", "virginia"},
		{"192.0.2.16", "mumbai"},
		{"192.0.2.32", "frankfurt"},
	} {
		if got := e.pick(tc.client, 32); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.client, got, tc.want)
		}
	}
}

func TestLatencyAntiFlap(t *testing.T) {
	o := latency.Options{SwitchMargin: 0.2, SwitchRounds: 3}
	t.Run("5% alternating never switches", func(t *testing.T) {
		e := newLatEnv(t, latRecord, o)
		e.update("192.0.2.64/28,frankfurt,100", "192.0.2.64/28,mumbai,105", "192.0.2.64/28,virginia,300")
		first := e.pick("192.0.2.64", 28)
		for i := range 50 {
			e.now = e.now.Add(time.Minute)
			if i%2 == 0 {
				e.update("192.0.2.64/28,frankfurt,105", "192.0.2.64/28,mumbai,100")
			} else {
				e.update("192.0.2.64/28,frankfurt,100", "192.0.2.64/28,mumbai,105")
			}
			if got := e.pick("192.0.2.64", 28); got != first {
				t.Fatalf("round %d: switched from %s to %s", i+1, first, got)
			}
		}
	})
	t.Run("25% sustained switches after exactly switch_rounds", func(t *testing.T) {
		e := newLatEnv(t, latRecord, o)
		e.update("192.0.2.64/28,frankfurt,100", "192.0.2.64/28,mumbai,120", "192.0.2.64/28,virginia,300")
		if got := e.pick("192.0.2.64", 28); got != "frankfurt" {
			t.Fatalf("start: %s", got)
		}
		for round := 1; round <= 3; round++ {
			e.now = e.now.Add(time.Minute)
			e.update("192.0.2.64/28,frankfurt,100", "192.0.2.64/28,mumbai,75")
			// Repeated evaluations within one update count once.
			e.eval()
			got := e.pick("192.0.2.64", 28)
			want := "frankfurt"
			if round == 3 {
				want = "mumbai"
			}
			if got != want {
				t.Fatalf("after %d updates: %s, want %s", round, got, want)
			}
		}
	})
	t.Run("a worse round restarts the count", func(t *testing.T) {
		e := newLatEnv(t, latRecord, o)
		e.update("192.0.2.64/28,frankfurt,100", "192.0.2.64/28,mumbai,120", "192.0.2.64/28,virginia,300")
		for _, m := range []string{"75", "75", "95", "75", "75"} {
			e.update("192.0.2.64/28,mumbai," + m)
		}
		if got := e.pick("192.0.2.64", 28); got != "frankfurt" {
			t.Fatalf("2+2 better rounds around a worse one switched: %s", got)
		}
		e.update("192.0.2.64/28,mumbai,75")
		if got := e.pick("192.0.2.64", 28); got != "mumbai" {
			t.Fatalf("third consecutive: %s", got)
		}
	})
	t.Run("current choice down switches on the next answer", func(t *testing.T) {
		e := newLatEnv(t, latRecord, o)
		e.update("192.0.2.64/28,frankfurt,100", "192.0.2.64/28,mumbai,110", "192.0.2.64/28,virginia,300")
		if got := poolNames(e.r, e.decide("192.0.2.64", 28, ^frankfurt).Pools); got != "mumbai" {
			t.Fatalf("frankfurt down: %s, want mumbai (next lowest RTT), with no update in between", got)
		}
		if got := poolNames(e.r, e.decide("192.0.2.64", 28, virginia).Pools); got != "virginia" {
			t.Fatalf("only virginia up: %s", got)
		}
		if d := e.decide("192.0.2.64", 28, 0); d.Pools != 7 || !d.AllDown {
			t.Fatalf("all down: %s, want every pool (when_all_down answer_all)", poolNames(e.r, d.Pools))
		}
	})
}

func TestLatencyStale(t *testing.T) {
	o := latency.Options{MaxAge: time.Hour, OverheadMs: 5}
	e := newLatEnv(t, latRecord, o)
	// The subnet says Virginia, the country says Frankfurt, geography
	// says Mumbai (about 5 ms: it is in Mumbai).
	e.update("192.0.2.16/28,virginia,3", "IN,frankfurt,4")
	if got := e.pick("192.0.2.16", 28); got != "virginia" {
		t.Fatalf("fresh: %s", got)
	}
	// 70 minutes later only the country key is refreshed: the subnet's
	// value is stale and the country's applies.
	// Virginia's evidence changed (stale: now an estimate), so the
	// network chooses afresh instead of waiting out anti-flap rounds.
	e.now = e.now.Add(70 * time.Minute)
	e.update("IN,frankfurt,4")
	if got := e.pick("192.0.2.16", 28); got != "frankfurt" {
		t.Fatalf("subnet stale: %s, want frankfurt from the country key", got)
	}
	tr := e.live.ExplainLatency(e.r, 0, addr("192.0.2.16"), lookupInfo(t, "192.0.2.16"), ^uint64(0), "frankfurt", e.now)
	for _, c := range tr.Candidates {
		if c.Pool == "virginia" && !strings.HasPrefix(c.Source, "stale") {
			t.Errorf("virginia source %q, want stale", c.Source)
		}
		if c.Pool == "frankfurt" && (c.Source != "measured" || c.Key != "IN") {
			t.Errorf("frankfurt %+v, want measured from IN", c)
		}
	}
	// Everything stale: the estimate.
	// No update arrives; re-evaluating (as the server's stale timer does)
	// moves the network without counting a round.
	e.now = e.now.Add(2 * time.Hour)
	e.eval()
	if got := e.pick("192.0.2.16", 28); got != "mumbai" {
		t.Fatalf("all stale: %s, want mumbai by estimate", got)
	}
	if next := e.store.Map().NextStale(t0); !next.Equal(t0.Add(time.Hour)) {
		t.Errorf("NextStale %v, want %v", next, t0.Add(time.Hour))
	}
}

// Without any candidate RTT the fallback order decides.
func TestLatencyFallbackOrder(t *testing.T) {
	rec := `
  - name: lat.example.com
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
      c: { address: 192.0.2.3, site: shared }
      d: { address: 192.0.2.4, site: shared }
    rules:
      - default: { by: latency, fallback: [b, a, c, d] }
`
	e := newLatEnv(t, rec, latency.Options{})
	if got := poolNames(e.r, e.decide("192.0.2.64", 32, ^uint64(0)).Pools); got != "b" {
		t.Fatalf("no map: %s, want b (first of fallback)", got)
	}
	if got := poolNames(e.r, e.decide("192.0.2.64", 32, 1<<0|1<<2).Pools); got != "a" {
		t.Fatalf("b down: %s, want a", got)
	}
	// A site label shared by pools: both get its measurement.
	e.update("DE,shared,10", "DE,a,50")
	if got := poolNames(e.r, e.decide("192.0.2.64", 32, ^uint64(0)).Pools); got != "c" {
		t.Fatalf("shared site: %s, want c", got)
	}
	if got := poolNames(e.r, e.decide("192.0.2.64", 32, ^uint64(1<<2)).Pools); got != "d" {
		t.Fatalf("shared site, c down: %s, want d", got)
	}
}

// The compiled answer equals a direct evaluation of the map for random
// clients, and the scope claimed holds: every address inside it gets the
// same answer.
func TestLatencyMatchesDirectEvaluation(t *testing.T) {
	rnd := rand.New(rand.NewPCG(6, 7))
	set := geoSetFor(t, cityDB, asnDB)
	sites := []string{"mumbai", "frankfurt", "virginia"}
	// Networks the clients come from: the test database's, and some
	// random space.
	bases := []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "49.36.0.0/14", "91.64.0.0/14", "126.0.0.0/8",
		"2001:db8::/40", "2409:4000::/22", "10.0.0.0/8"}
	randIn := func(p netip.Prefix) netip.Addr {
		b := p.Addr().AsSlice()
		for i := p.Bits(); i < len(b)*8; i++ {
			if rnd.IntN(2) == 1 {
				b[i/8] |= 0x80 >> (i % 8)
			}
		}
		a, _ := netip.AddrFromSlice(b)
		return a
	}
	for round := range 6 {
		e := newLatEnv(t, latRecord, latency.Options{MaxAge: time.Hour, OverheadMs: 5})
		var lines []string
		for range 60 {
			base := netip.MustParsePrefix(bases[rnd.IntN(len(bases))])
			bits := base.Bits() + rnd.IntN(min(16, base.Addr().BitLen()-base.Bits())+1)
			p, _ := randIn(base).Prefix(bits)
			lines = append(lines, fmt.Sprintf("%s,%s,%d", p, sites[rnd.IntN(3)], 1+rnd.IntN(300)))
		}
		for _, k := range []string{"IN", "DE", "US", "AS64496", "AS64498", "IN-AS", "continent:EU", "continent:AS"} {
			if rnd.IntN(2) == 0 {
				lines = append(lines, fmt.Sprintf("%s,%s,%d", k, sites[rnd.IntN(3)], 1+rnd.IntN(300)))
			}
		}
		// Three updates: half the keys, the rest (new prefixes: the cells
		// are rebuilt), then new values for existing keys only (the cells
		// are kept). A fresh anti-flap state before each makes every
		// network take its best, which the direct evaluation computes.
		half := len(lines) / 2
		e.update(lines[:half]...)
		e.h = policy.NewLatencyMemory(latency.Options{})
		e.update(lines[half:]...)
		var again []string
		for _, l := range lines[:half] {
			if rnd.IntN(2) == 0 {
				f := strings.Split(l, ",")
				again = append(again, fmt.Sprintf("%s,%s,%d", f[0], f[1], 1+rnd.IntN(300)))
			}
		}
		e.now = e.now.Add(time.Minute)
		e.h = policy.NewLatencyMemory(latency.Options{})
		e.update(again...)
		m := e.store.Map()
		for i := range 3000 {
			a := randIn(netip.MustParsePrefix(bases[rnd.IntN(len(bases))]))
			up := uint64(rnd.IntN(8))
			if i%2 == 0 {
				up = 7
			}
			d := e.decide(a.String(), a.BitLen(), up)
			// Direct: the lowest RTT among usable candidates (a fresh
			// anti-flap state chooses the best), else the fallback order.
			info, _, err := set.Lookup(a)
			if err != nil {
				t.Fatal(err)
			}
			c := latency.Client{Addr: a, ASN: info.ASN, Subdivision: info.Subdivision, Country: info.Country, Continent: info.Continent,
				Lat: info.Lat, Lon: info.Lon, HasLocation: info.HasLocation}
			var ss []latency.Site
			for _, p := range e.r.Pools {
				ss = append(ss, latency.Site{Name: p.Site, Lat: p.Lat, Lon: p.Lon, HasLocation: p.HasLoc})
			}
			rtts := m.Lookup(nil, &c, ss, e.now)
			want, best := uint64(0), math.Inf(1)
			for j, r := range rtts {
				if r.Source != latency.SourceNone && up&(1<<j) != 0 && r.Ms < best {
					want, best = 1<<j, r.Ms
				}
			}
			if want == 0 {
				for _, p := range []uint64{virginia, frankfurt, mumbai} {
					if up&p != 0 {
						want = p
						break
					}
				}
			}
			if want == 0 {
				want = 7 // all down: fail open
			}
			if d.Pools != want {
				t.Fatalf("round %d, %s (up %03b): compiled %s, direct %s; rtts %+v", round, a, up, poolNames(e.r, d.Pools), poolNames(e.r, want), rtts)
			}
			// Scope: another address inside it decides the same.
			if d.Scope < a.BitLen() {
				p, _ := a.Prefix(d.Scope)
				b := randIn(p)
				if d2 := e.decide(b.String(), b.BitLen(), up); d2.Pools != d.Pools {
					t.Fatalf("round %d: %s scope /%d claims %s, but %s in it gets %s", round, a, d.Scope, poolNames(e.r, d.Pools), b, poolNames(e.r, d2.Pools))
				}
			}
		}
	}
}

// A 100,000-entry update: how long SetLatency takes after the store has
// applied it.
func BenchmarkLatencyUpdate100k(b *testing.B) {
	e := newLatEnv(b, latRecord, latency.Options{HalfLife: 5 * time.Minute})
	ms := bigUpdate(100000, e.now)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.now = e.now.Add(time.Second)
		for j := range ms {
			ms[j].MeasuredAt = e.now
		}
		e.store.Update(ms, e.now)
		st := e.live.SetLatency(e.store.Map(), e.h, e.store.Updates(), e.now)
		b.ReportMetric(float64(st.Networks), "networks")
	}
}

// bigUpdate makes n measurements over n/3 IPv4 /24s and 3 sites.
func bigUpdate(n int, at time.Time) []latency.Measurement {
	sites := []string{"mumbai", "frankfurt", "virginia"}
	ms := make([]latency.Measurement, 0, n)
	for i := 0; len(ms) < n; i++ {
		p := netip.AddrFrom4([4]byte{byte(1 + i>>16), byte(i >> 8), byte(i), 0})
		for j, s := range sites {
			if len(ms) == n {
				break
			}
			ms = append(ms, latency.Measurement{Key: netip.PrefixFrom(p, 24).String(), Site: s, RTTms: float64(10 + (i*7+j*31)%200), Samples: 1, MeasuredAt: at})
		}
	}
	return ms
}

// Queries answered through a latency record.
func BenchmarkDecideLatency(b *testing.B) {
	e := newLatEnv(b, latRecord, latency.Options{})
	e.store.Update(bigUpdate(100000, e.now), e.now)
	e.eval()
	q := query(e.r, "1.2.3.4", 32, "1.2.3.4")
	q.Up = e.r.Enabled
	q.Latency = e.live.Latency()
	q.Qtype = dns.TypeA
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.Client = netip.AddrFrom4([4]byte{byte(1 + i&1), byte(i >> 8), byte(i), 9})
		if d := e.r.Decide(q); d.Pools == 0 {
			b.Fatal("no answer")
		}
	}
}

// BenchmarkQueriesDuringLatencyUpdate measures query latency while a
// 100,000-entry update is applied (store update, evaluation and swap) on
// another goroutine, against the same queries with no update running.
// One iteration is one update.
func BenchmarkQueriesDuringLatencyUpdate(b *testing.B) {
	e := newLatEnv(b, latRecord, latency.Options{HalfLife: 5 * time.Minute})
	ms := bigUpdate(100000, e.now)
	e.store.Update(ms, e.now)
	e.eval()
	q := query(e.r, "1.2.3.4", 32, "1.2.3.4")
	q.Up = e.r.Enabled
	run := func(stop <-chan struct{}, lat []time.Duration) []time.Duration {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return lat
			default:
			}
			q.Latency = e.live.Latency()
			q.Client = netip.AddrFrom4([4]byte{byte(1 + i&1), byte(i >> 8), byte(i), 9})
			start := time.Now()
			e.r.Decide(q)
			lat = append(lat, time.Since(start))
		}
	}
	pct := func(lat []time.Duration, p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		s := append([]time.Duration(nil), lat...)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Nanoseconds())
	}
	var during, idle []time.Duration
	var took time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.now = e.now.Add(time.Second)
		for j := range ms {
			ms[j].MeasuredAt = e.now
		}
		stop := make(chan struct{})
		start := time.Now()
		go func() {
			e.store.Update(ms, e.now)
			e.live.SetLatency(e.store.Map(), e.h, e.store.Updates(), e.now)
			close(stop)
		}()
		during = run(stop, during[:0:0])
		d := time.Since(start)
		took += d
		// The same length of time with no update.
		idleStop := make(chan struct{})
		time.AfterFunc(d, func() { close(idleStop) })
		idle = run(idleStop, idle[:0:0])
	}
	b.StopTimer()
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "update-ms")
	b.ReportMetric(pct(during, 0.5), "p50-ns-during")
	b.ReportMetric(pct(during, 0.99), "p99-ns-during")
	b.ReportMetric(pct(during, 1), "max-ns-during")
	b.ReportMetric(pct(idle, 0.5), "p50-ns-idle")
	b.ReportMetric(pct(idle, 0.99), "p99-ns-idle")
	b.ReportMetric(pct(idle, 1), "max-ns-idle")
}
