package policy_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// capacityRecord sends 10.0.0.0/11 to a, falling over to b, in 32 /16
// networks (two rules alternate so that the partition keeps them apart);
// the rest of the space goes to c.
func capacityRecord(capacity string) string {
	var even, odd []string
	for i := range 32 {
		n := fmt.Sprintf("10.%d.0.0/16", i)
		if i%2 == 0 {
			even = append(even, n)
		} else {
			odd = append(odd, n)
		}
	}
	return `
  - name: c.example.com
    pools:
      a: { address: 192.0.2.1, capacity: ` + capacity + ` }
      b: { address: 192.0.2.2 }
      c: { address: 192.0.2.3 }
    rules:
      - match: { cidr: [` + strings.Join(even, ", ") + `] }
        failover: [a, b]
      - match: { cidr: [` + strings.Join(odd, ", ") + `] }
        failover: [a, b]
      - default: { pool: c }
`
}

// offer asks n queries from random /24s of 10.0.0.0/11 (and as many from
// elsewhere), and returns the share of the 10/11 ones a answered.
func offer(l *policy.Live, r *policy.Record, rnd *rand.Rand, n int) float64 {
	a := 0
	for range n {
		ip := netip.AddrFrom4([4]byte{10, byte(rnd.IntN(32)), byte(rnd.IntN(256)), 0})
		q := policy.Query{Qtype: dns.TypeA, Client: ip, ClientBits: 24}
		if l.Decide(r, &q, 0).Pools == 1 {
			a++
		}
		o := netip.AddrFrom4([4]byte{byte(20 + rnd.IntN(100)), byte(rnd.IntN(256)), byte(rnd.IntN(256)), 0})
		q = policy.Query{Qtype: dns.TypeA, Client: o, ClientBits: 24}
		l.Decide(r, &q, 0)
	}
	return float64(a) / float64(n)
}

// checkScopes decides sample clients and checks that every address of
// each answer's scope prefix gets the same pools (the scope is exact).
func checkScopes(t *testing.T, l *policy.Live, r *policy.Record, rnd *rand.Rand) {
	t.Helper()
	for range 300 {
		ip := netip.AddrFrom4([4]byte{byte(rnd.IntN(2) * 10), byte(rnd.IntN(64)), byte(rnd.IntN(256)), byte(rnd.IntN(256))})
		q := policy.Query{Qtype: dns.TypeA, Client: ip, ClientBits: 32}
		d := r.Decide(&q)
		q = policy.Query{Qtype: dns.TypeA, Client: ip, ClientBits: 32}
		d = l.Decide(r, &q, 0).Decision
		pfx := netip.PrefixFrom(ip, d.Scope).Masked()
		for range 20 {
			b := pfx.Addr().As4()
			x := rnd.Uint32() >> d.Scope
			if d.Scope == 0 {
				x = rnd.Uint32()
			}
			v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | x
			o := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
			q2 := policy.Query{Qtype: dns.TypeA, Client: o, ClientBits: 32}
			if d2 := l.Decide(r, &q2, 0).Decision; d2.Pools != d.Pools {
				t.Fatalf("%s answered %s with scope /%d, but %s inside it gets %s", ip, poolNames(r, d.Pools), d.Scope, o, poolNames(r, d2.Pools))
			}
		}
	}
}

func TestCapacitySheds(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, capacityRecord("{ target: 100, max: 200 }")))
	r := table.Get("c.example.com.")
	l := policy.NewLive(table, policy.LiveOptions{})
	l.SetHealth(allUsable, nil)
	rnd := rand.New(rand.NewPCG(1, 2))
	o := policy.ShedOptions{MaxShift: 0.5, LowWater: 0.85, StaleAfter: time.Second}
	now := time.Unix(1_700_000_000, 0)
	at := func(v float64) func(string, string) (policy.Load, bool) {
		now = now.Add(100 * time.Millisecond) // each report newer than the last
		return func(_, pool string) (policy.Load, bool) { return policy.Load{Value: v, At: now}, pool == "a" }
	}
	if got := offer(l, r, rnd, 4000); got != 1 {
		t.Fatalf("before any load, a answers %.2f of 10/11, want all", got)
	}
	st := l.SetLoad(at(150), now.Add(100*time.Millisecond), o)
	if len(st) != 1 || st[0].State != "shed" || st[0].Networks != 32 {
		t.Fatalf("states %+v", st)
	}
	// 150 % of target: a third of its answers move (about 11 of 32 networks).
	share := offer(l, r, rnd, 4000)
	if share < 0.6 || share > 0.72 {
		t.Errorf("after one step at 150 %%, a answers %.2f, want about 0.67 (%+v)", share, st[0])
	}
	if reason := l.Loads()[0].Reason(); !strings.HasPrefix(reason, "shed: load 150 % of target") {
		t.Errorf("reason %q", reason)
	}
	checkScopes(t, l, r, rnd)
	// The same report again (a reload's step): nothing more moves.
	if again := l.SetLoad(func(_, pool string) (policy.Load, bool) { return policy.Load{Value: 150, At: now}, pool == "a" }, now, o); again[0].Moved != 0 {
		t.Errorf("a step without a newer load moved %d networks", again[0].Moved)
	}
	// Inside the band (90 %): nothing moves.
	st = l.SetLoad(at(90), now.Add(100*time.Millisecond), o)
	if st[0].Moved != 0 || st[0].Shed == 0 {
		t.Errorf("at 90 %% of target: moved %d, shed %d; want a hold", st[0].Moved, st[0].Shed)
	}
	offer(l, r, rnd, 4000)
	// Below the low-water mark: some come back, not past the band's middle.
	st = l.SetLoad(at(60), now.Add(100*time.Millisecond), o)
	if st[0].Moved >= 0 {
		t.Errorf("at 60 %% of target: moved %d, want some back", st[0].Moved)
	}
	offer(l, r, rnd, 4000)
	// Stale: everything back.
	st = l.SetLoad(func(_, pool string) (policy.Load, bool) {
		return policy.Load{Value: 150, At: now.Add(-2 * time.Second)}, pool == "a"
	}, now, o)
	if st[0].State != "stale" || st[0].Shed != 0 {
		t.Errorf("stale load: %+v", st[0])
	}
	if got := offer(l, r, rnd, 2000); got != 1 {
		t.Errorf("stale load: a answers %.2f, want all", got)
	}
	checkScopes(t, l, r, rnd)
}

// TestCapacityScopesWithHealth: a shed network next to networks whose
// scope health widened keeps every scope exact.
func TestCapacityScopesWithHealth(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, capacityRecord("{ target: 10 }")))
	r := table.Get("c.example.com.")
	l := policy.NewLive(table, policy.LiveOptions{})
	l.SetHealth(allUsable, nil)
	rnd := rand.New(rand.NewPCG(5, 6))
	now := time.Now()
	offer(l, r, rnd, 2000)
	l.SetLoad(func(_, pool string) (policy.Load, bool) { return policy.Load{Value: 13, At: now}, true }, now, policy.ShedOptions{})
	checkScopes(t, l, r, rnd)
	// b down: the shed networks go on to the next rule (c), and health
	// widens the scopes of the rest.
	l.SetHealth(allUsable, down("b"))
	checkScopes(t, l, r, rnd)
	l.SetHealth(allUsable, down("c"))
	checkScopes(t, l, r, rnd)
}

func TestCapacityConfigErrors(t *testing.T) {
	for _, c := range []struct{ capacity, want string }{
		{"{ target: 0 }", "capacity target 0 must be a positive number"},
		{"{ target: 10, max: 5 }", "capacity max 5 is below its target 10"},
	} {
		yaml := configYAML(t, []string{cityDB}, capacityRecord(c.capacity))
		_, probs, err := build(t, yaml)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.capacity, err, c.want)
			continue
		}
		if line := lineOf(t, yaml, "capacity: "+c.capacity); !strings.Contains(err.Error(), fmt.Sprintf("steer.yaml:%d:", line)) {
			t.Errorf("%s: %v does not name steer.yaml:%d (%v)", c.capacity, err, line, probs)
		}
	}
}

// TestCapacityMaxTakesNoNewNetworks: networks b sheds skip a, which is
// above its max, and go on to the next candidate.
func TestCapacityMaxTakesNoNewNetworks(t *testing.T) {
	rec := `
  - name: m.example.com
    pools:
      a: { address: 192.0.2.1, capacity: { target: 10, max: 12 } }
      b: { address: 192.0.2.2, capacity: { target: 10 } }
      c: { address: 192.0.2.3 }
    rules:
      - match: { cidr: [10.0.0.0/16, 10.2.0.0/16] }
        failover: [b, a, c]
      - match: { cidr: [10.1.0.0/16, 10.3.0.0/16] }
        failover: [b, a, c]
      - default: { pool: c }
`
	table := mustBuild(t, configYAML(t, []string{cityDB}, rec))
	r := table.Get("m.example.com.")
	l := policy.NewLive(table, policy.LiveOptions{})
	ask := func(k int) string {
		q := policy.Query{Qtype: dns.TypeA, Client: netip.AddrFrom4([4]byte{10, byte(k), 1, 0}), ClientBits: 24}
		return poolNames(r, l.Decide(r, &q, 0).Decision.Pools)
	}
	for range 10 {
		for k := range 4 {
			ask(k)
		}
	}
	now := time.Now()
	loads := map[string]float64{"a": 13, "b": 20}
	l.SetLoad(func(_, pool string) (policy.Load, bool) {
		v, ok := loads[pool]
		return policy.Load{Value: v, At: now}, ok
	}, now, policy.ShedOptions{MaxShift: 1})
	got := map[string]int{}
	for k := range 4 {
		got[ask(k)]++
	}
	if got["a"] != 0 || got["c"] == 0 || got["b"] == 0 {
		t.Errorf("b at 200 %% sheds half its networks past a (above max) to c: answers %v", got)
	}
}

// BenchmarkCapacityDecide is the query path of a record with a capacity
// pool and networks shed, beside BenchmarkCapacityDecidePlain, the same
// record without capacity.
func BenchmarkCapacityDecide(b *testing.B)      { benchCapacity(b, "{ target: 100 }", 150) }
func BenchmarkCapacityDecidePlain(b *testing.B) { benchCapacity(b, "", 0) }

func benchCapacity(b *testing.B, capacity string, load float64) {
	rec := capacityRecord(capacity)
	if capacity == "" {
		rec = strings.Replace(rec, ", capacity: ", "", 1)
	}
	table := mustBuild(b, configYAML(b, []string{cityDB}, rec))
	r := table.Get("c.example.com.")
	l := policy.NewLive(table, policy.LiveOptions{})
	l.SetHealth(allUsable, nil)
	rnd := rand.New(rand.NewPCG(1, 2))
	offer(l, r, rnd, 4000)
	now := time.Now()
	l.SetLoad(func(_, _ string) (policy.Load, bool) { return policy.Load{Value: load, At: now}, load > 0 }, now, policy.ShedOptions{MaxShift: 1})
	clients := make([]netip.Addr, 1024)
	for i := range clients {
		clients[i] = netip.AddrFrom4([4]byte{10, byte(rnd.IntN(32)), byte(rnd.IntN(256)), 0})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		q := policy.Query{Qtype: dns.TypeA, Client: clients[i&1023], ClientBits: 24}
		l.Decide(r, &q, 0)
	}
}
