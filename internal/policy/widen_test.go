package policy_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// mumbaiRecord sends parts of 10.16.0.0/12 to bom and the rest of it to
// fra (the default); its neighbours 10.0.0.0/12 and 10.32.0.0/11 go to
// iad. With bom down, the whole /12 is fra and nothing wider is.
const mumbaiRecord = `
  - name: m.example.com
    pools:
      bom: { address: 203.0.113.10 }
      fra: { address: 198.51.100.20 }
      iad: { address: 192.0.2.30 }
    rules:
      - match: { cidr: [10.16.0.0/14, 10.22.0.0/15, 10.28.0.0/16] }
        pool: bom
      - match: { cidr: [10.0.0.0/12, 10.32.0.0/11] }
        pool: iad
      - default: { pool: fra }
    on_unhealthy: next_rule
`

func allUsable(netip.Addr, string) bool { return true }

// down returns a pool override that takes the named pools down.
func down(pools ...string) func(record, pool string) policy.PoolOverride {
	return func(_, pool string) policy.PoolOverride {
		for _, p := range pools {
			if p == pool {
				return policy.PoolDown
			}
		}
		return policy.PoolAuto
	}
}

// decideNow decides for client as the server does, with the table's
// current pool state and widened scopes.
func decideNow(l *policy.Live, r *policy.Record, qtype uint16, client netip.Addr) policy.Decision {
	return decideAt(l, r, qtype, client, time.Now().Unix())
}

// decideAt is decideNow at now (Unix seconds): a sweep of 65,536
// decisions reads the clock once, not per decision (a fifth of
// TestScopeWidenProperty's CPU was time.Now).
func decideAt(l *policy.Live, r *policy.Record, qtype uint16, client netip.Addr, now int64) policy.Decision {
	q := policy.Query{Qtype: qtype, Client: client, ClientBits: client.BitLen()}
	return l.Decide(r, &q, now).Decision
}

type answer struct {
	pools                     uint64
	limit                     int
	allDown, noData, servFail bool
}

func answerOf(d policy.Decision) answer {
	return answer{d.Pools, d.Limit, d.AllDown, d.NoData, d.ServFail}
}

// sixteens returns the first address of every IPv4 /16, built once and
// shared: callers only read it.
var sixteens = sync.OnceValue(func() []netip.Addr {
	out := make([]netip.Addr, 0, 1<<16)
	for i := range 1 << 16 {
		out = append(out, netip.AddrFrom4([4]byte{byte(i >> 8), byte(i), 0, 0}))
	}
	return out
})

// checkPartition checks, for a record whose partition (and every rule's
// CIDR) is made of IPv4 /16s or wider, over every /16: every address in a
// decision's scope prefix gets the same answer and the same scope (so the
// prefixes partition the space: they never overlap). With maximal set,
// also that a widened prefix cannot be wider: the other half of its
// parent holds a different answer.
func checkPartition(t *testing.T, live *policy.Live, r *policy.Record, maximal bool) (widened int) {
	t.Helper()
	all := sixteens()
	ds := make([]policy.Decision, len(all))
	now := time.Now().Unix()
	for i, a := range all {
		ds[i] = decideAt(live, r, dns.TypeA, a, now)
	}
	at := func(a netip.Addr) int { b := a.As4(); return int(b[0])<<8 | int(b[1]) }
	for i, a := range all {
		d := ds[i]
		if d.WidenedFrom != 0 {
			widened++
			if d.WidenedFrom <= d.Scope {
				t.Fatalf("%s: widened from /%d to /%d", a, d.WidenedFrom, d.Scope)
			}
		}
		p, _ := a.Prefix(min(d.Scope, 16))
		if d.Scope > 16 {
			continue
		}
		// Every /16 of p: one answer, one scope (checked from p's first).
		first := at(p.Addr())
		if first != i {
			continue
		}
		n := 1 << (16 - p.Bits())
		for j := first; j < first+n; j++ {
			if answerOf(ds[j]) != answerOf(d) || ds[j].Scope != d.Scope {
				t.Fatalf("%s gets %s scope /%d, but %s inside %s gets %s scope /%d",
					a, poolNames(r, d.Pools), d.Scope, all[j], p, poolNames(r, ds[j].Pools), ds[j].Scope)
			}
		}
		if maximal && d.Scope > 0 && d.WidenedFrom != 0 {
			parent, _ := a.Prefix(d.Scope - 1)
			pf := at(parent.Addr())
			same := true
			for j := pf; j < pf+2*n; j++ {
				if answerOf(ds[j]) != answerOf(d) {
					same = false
					break
				}
			}
			if same {
				t.Fatalf("%s: scope /%d, but all of %s gets the same answer", a, d.Scope, parent)
			}
		}
	}
	return widened
}

func scopesOf(live *policy.Live, r *policy.Record) []int {
	all := sixteens()
	out := make([]int, 0, len(all))
	now := time.Now().Unix()
	for _, a := range all {
		out = append(out, decideAt(live, r, dns.TypeA, a, now).Scope)
	}
	return out
}

// TestScopeWidensWhilePoolDown: with bom down, a /24 inside 10.16.0.0/12
// gets scope /12 (the region that falls entirely to fra), never wider;
// scopes partition the space; with bom back they are the partition's again.
func TestScopeWidensWhilePoolDown(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, mumbaiRecord))
	live := policy.NewLive(table, policy.LiveOptions{})
	r := table.Get("m.example.com.")
	client := addr("10.17.3.0")
	live.SetHealth(allUsable, nil)
	before := decideNow(live, r, dns.TypeA, client)
	if poolNames(r, before.Pools) != "bom" || before.Scope != 14 || before.WidenedFrom != 0 {
		t.Fatalf("all up: %s scope /%d widened from %d, want bom /14 not widened", poolNames(r, before.Pools), before.Scope, before.WidenedFrom)
	}
	orig := scopesOf(live, r)
	if ws := live.WidenStats(); ws.Records != 0 || ws.Bytes != 0 {
		t.Fatalf("all up: widening %+v, want none", ws)
	}
	checkPartition(t, live, r, false)

	live.SetHealth(allUsable, down("bom"))
	for _, c := range []string{"10.17.3.0", "10.22.200.0", "10.28.0.0", "10.20.1.0", "10.31.255.0"} {
		d := decideNow(live, r, dns.TypeA, addr(c))
		if poolNames(r, d.Pools) != "fra" || d.Scope != 12 {
			t.Errorf("bom down: %s gets %s scope /%d, want fra /12", c, poolNames(r, d.Pools), d.Scope)
		}
	}
	d := decideNow(live, r, dns.TypeA, client)
	if d.WidenedFrom != 14 {
		t.Errorf("bom down: %s widened from /%d, want /14", client, d.WidenedFrom)
	}
	// Neighbours with another answer keep theirs.
	if d := decideNow(live, r, dns.TypeA, addr("10.1.0.0")); poolNames(r, d.Pools) != "iad" || d.Scope != 12 {
		t.Errorf("bom down: 10.1.0.0 gets %s /%d, want iad /12", poolNames(r, d.Pools), d.Scope)
	}
	if n := checkPartition(t, live, r, true); n == 0 {
		t.Fatal("bom down: no scope widened")
	}
	if ws := live.WidenStats(); ws.Records != 1 || ws.Computed != 1 || ws.Bytes == 0 {
		t.Errorf("bom down: widening %+v, want one record, one computation", ws)
	}
	// A change elsewhere keeps the computed widening.
	live.SetHealth(allUsable, down("bom"))
	if ws := live.WidenStats(); ws.Computed != 0 || ws.Reused != 1 {
		t.Errorf("same state again: widening %+v, want it reused", ws)
	}

	live.SetHealth(allUsable, nil)
	after := scopesOf(live, r)
	for i := range orig {
		if orig[i] != after[i] {
			t.Fatalf("bom back: %d.%d.0.0 scope /%d, was /%d", i>>8, i&0xff, after[i], orig[i])
		}
	}
	if ws := live.WidenStats(); ws.Records != 0 || ws.Bytes != 0 {
		t.Fatalf("bom back: widening %+v, want none", ws)
	}
}

// TestScopeWidenKeepsClientDependentLeaves: leaves decided by a sticky or
// random split, by latency or after a resolver rule keep their own depth
// even when a neighbour's answer is the same.
func TestScopeWidenKeepsClientDependentLeaves(t *testing.T) {
	for _, tc := range []struct{ name, rule string }{
		{"sticky split", `split: [{ pool: fra, weight: 1 }, { pool: iad, weight: 1 }]
        sticky: client_subnet`},
		{"random split", `split: [{ pool: fra, weight: 1 }, { pool: iad, weight: 0 }]`},
		{"latency", `by: latency
        fallback: [fra, iad]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := strings.Replace(mumbaiRecord, "pool: iad\n", tc.rule+"\n", 1)
			table := mustBuild(t, configYAML(t, []string{cityDB}, rec))
			live := policy.NewLive(table, policy.LiveOptions{})
			r := table.Get("m.example.com.")
			live.SetHealth(allUsable, down("bom"))
			d := decideNow(live, r, dns.TypeA, addr("10.1.0.0"))
			if d.WidenedFrom != 0 || d.Scope < 12 {
				t.Errorf("%s leaf: scope /%d widened from %d, want its own", tc.name, d.Scope, d.WidenedFrom)
			}
			// The fra region next to it still widens to /12.
			if d := decideNow(live, r, dns.TypeA, addr("10.17.0.0")); d.Scope != 12 {
				t.Errorf("10.17.0.0: scope /%d, want /12", d.Scope)
			}
		})
	}
	t.Run("resolver rule first", func(t *testing.T) {
		rec := strings.Replace(mumbaiRecord, "    rules:\n", "    rules:\n      - match: { source: resolver, cidr: [192.0.2.0/24] }\n        pool: iad\n", 1)
		table := mustBuild(t, configYAML(t, []string{cityDB}, rec))
		live := policy.NewLive(table, policy.LiveOptions{})
		r := table.Get("m.example.com.")
		live.SetHealth(allUsable, down("bom"))
		if d := decideNow(live, r, dns.TypeA, addr("10.17.0.0")); d.WidenedFrom != 0 || d.Scope != 14 {
			t.Errorf("10.17.0.0: scope /%d widened from %d, want its own /14", d.Scope, d.WidenedFrom)
		}
	})
}

// TestScopeWidenProperty: over random records (CIDR rules of /8 to /16
// inside 10.0.0.0/8 with every kind of action) and random pool states,
// every widened scope holds one answer, scopes never overlap, a widened
// scope is as wide as its answer allows when every action is leaf-only,
// and with every pool back the scopes are the partition's.
func TestScopeWidenProperty(t *testing.T) {
	rnd := rand.New(rand.NewPCG(17, 17))
	pools := []string{"p0", "p1", "p2", "p3"}
	actions := []string{
		"pool: %s",
		"failover: [%s, %s]",
		"by: first\n        fallback: [%s, %s, %s]",
		"multivalue: 2\n        pools: [%s, %s, %s]",
		"split: [{ pool: %s, weight: 1 }, { pool: %s, weight: 2 }]\n        sticky: client_subnet",
	}
	n := 40
	if testing.Short() {
		n = 8
	}
	withGroups := 0
	defer func() {
		if withGroups == 0 {
			t.Error("no random record used a group")
		}
		t.Logf("%d of %d random records used groups", withGroups, n)
	}()
	for c := range n {
		var b strings.Builder
		b.WriteString("\n  - name: p.example.com\n    pools:\n")
		for i, p := range pools {
			fmt.Fprintf(&b, "      %s: { address: 192.0.2.%d }\n", p, i+1)
		}
		// Groups, written when a rule uses them: g2 splits (never
		// merges), the others are leaf-only.
		groups := map[string]string{
			"g0": "failover: [p0, p1]",
			"g1": "multivalue: 2, pools: [p1, p2, p3]",
			"g2": "split: [{ pool: p2, weight: 1 }, { pool: p3, weight: 1 }], sticky: client_subnet",
			"g3": "failover: [g0, p3]",
		}
		members := append(slices.Clone(pools), "g0", "g1", "g2", "g3")
		used := map[string]bool{}
		var rules strings.Builder
		leafOnly := true
		action := func() string {
			k := rnd.IntN(len(actions))
			if k == 4 {
				leafOnly = false
			}
			args := []any{}
			for _, i := range rnd.Perm(len(members))[:3] {
				args = append(args, members[i])
			}
			args = args[:strings.Count(actions[k], "%s")]
			for _, a := range args {
				used[a.(string)] = true
			}
			return fmt.Sprintf(actions[k], args...)
		}
		for range 2 + rnd.IntN(5) {
			var cidrs []string
			for range 1 + rnd.IntN(3) {
				bits := 8 + rnd.IntN(9)
				p, _ := netip.AddrFrom4([4]byte{10, byte(rnd.IntN(256)), 0, 0}).Prefix(bits)
				cidrs = append(cidrs, p.String())
			}
			fmt.Fprintf(&rules, "      - match: { cidr: [%s] }\n        %s\n", strings.Join(cidrs, ", "), action())
		}
		if used["g3"] {
			used["g0"] = true
		}
		if used["g2"] {
			leafOnly = false
		}
		if len(used) > 0 {
			var gs []string
			for _, g := range []string{"g0", "g1", "g2", "g3"} {
				if used[g] {
					gs = append(gs, fmt.Sprintf("      %s: { %s }\n", g, groups[g]))
				}
			}
			if len(gs) > 0 {
				b.WriteString("    groups:\n" + strings.Join(gs, ""))
				withGroups++
			}
		}
		b.WriteString("    rules:\n")
		b.WriteString(rules.String())
		fmt.Fprintf(&b, "      - default: { pool: %s }\n", pools[rnd.IntN(len(pools))])
		if rnd.IntN(2) == 0 {
			b.WriteString("    on_unhealthy: next_rule\n")
		}
		if rnd.IntN(3) == 0 {
			b.WriteString("    when_all_down: nodata\n")
		}
		table := mustBuild(t, configYAML(t, []string{cityDB}, b.String()))
		live := policy.NewLive(table, policy.LiveOptions{})
		r := table.Records[0]
		live.SetHealth(allUsable, nil)
		orig := scopesOf(live, r)
		for s := range 3 {
			var downs []string
			for _, p := range pools {
				if rnd.IntN(3) == 0 {
					downs = append(downs, p)
				}
			}
			live.SetHealth(allUsable, down(downs...))
			t.Run(fmt.Sprintf("config %d state %d", c, s), func(t *testing.T) {
				defer func() {
					if t.Failed() {
						t.Logf("down: %v\n%s", downs, b.String())
					}
				}()
				checkPartition(t, live, r, leafOnly)
			})
		}
		live.SetHealth(allUsable, nil)
		if got := scopesOf(live, r); !slices.Equal(got, orig) {
			t.Fatalf("config %d: with every pool back the scopes differ from the partition's\n%s", c, b.String())
		}
	}
}

// widenTable builds n records sharing one named policy over the embedded
// country database.
func widenTable(tb testing.TB, n int) *policy.Table {
	tb.Helper()
	var b strings.Builder
	b.WriteString("geo:\n  databases: [" + embedDB + "]\n")
	b.WriteString(`policies:
  shop:
    rules:
      - match: { country: [IN, LK, BD, NP] }
        pool: bom
      - match: { continent: EU }
        pool: fra
      - default:
          by: geoproximity
          fallback: [bom, fra, iad]
    on_unhealthy: next_rule
records:
`)
	for i := range n {
		fmt.Fprintf(&b, `  - name: r%d.example.com
    policy: shop
    pools:
      bom: { address: 203.0.%d.10, location: { lat: 19.08, lon: 72.88 } }
      fra: { address: 198.51.%d.20, location: { lat: 50.11, lon: 8.68 } }
      iad: { address: 192.0.%d.30, location: { lat: 38.95, lon: -77.45 } }
`, i, i%256, i%256, i%256)
	}
	return mustBuild(tb, b.String())
}

// BenchmarkWiden measures what SetHealth pays to widen scopes when one
// pool of the embedded database's record goes down: one record, and
// 10,000 records sharing a named policy (one computation).
func BenchmarkWiden(b *testing.B) {
	for _, n := range []int{1, 10000} {
		table := widenTable(b, n)
		live := policy.NewLive(table, policy.LiveOptions{})
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var st policy.WidenStats
			for b.Loop() {
				// A different state each time, so nothing is reused.
				live.SetHealth(allUsable, nil)
				live.SetHealth(allUsable, down("bom"))
				st = live.WidenStats()
			}
			b.ReportMetric(float64(st.Bytes), "widened-bytes")
			b.ReportMetric(float64(st.Took)/float64(time.Microsecond), "widen-µs")
			if st.Computed != 1 || st.Records != n {
				b.Fatalf("widening %+v, want one computation for %d records", st, n)
			}
		})
	}
}

// TestWidenEmbedded: over the embedded country database with bom down,
// sampled clients' scopes hold one answer and one scope (no overlap),
// Indian clients get scopes no narrower than before and some wider, and
// deciding with widened scopes allocates nothing.
func TestWidenEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles against the embedded database")
	}
	table := widenTable(t, 1)
	live := policy.NewLive(table, policy.LiveOptions{})
	r := table.Records[0]
	_, _, addrs := embedded(t)
	live.SetHealth(allUsable, nil)
	india := addr("49.36.0.1")
	before := decideNow(live, r, dns.TypeA, india)
	live.SetHealth(allUsable, down("bom"))
	ws := live.WidenStats()
	t.Logf("bom down: %+v; record stats %+v", ws, r.Stats)
	after := decideNow(live, r, dns.TypeA, india)
	if after.Scope > before.Scope || poolNames(r, after.Pools) == "bom" {
		t.Fatalf("India with bom down: %s /%d, before /%d", poolNames(r, after.Pools), after.Scope, before.Scope)
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	widened := 0
	for i := range 4000 {
		a := addrs[i%2 == 1][rnd.IntN(len(addrs[false]))]
		d := decideNow(live, r, dns.TypeA, a)
		if d.WidenedFrom != 0 {
			widened++
		}
		pfx, _ := a.Prefix(d.Scope)
		for range 4 {
			b := randomWithin(rnd, pfx)
			db := decideNow(live, r, dns.TypeA, b)
			if answerOf(db) != answerOf(d) || db.Scope != d.Scope {
				t.Fatalf("%s is inside %s (scope of %s: %s) but gets %s /%d", b, pfx, a, poolNames(r, d.Pools), poolNames(r, db.Pools), db.Scope)
			}
		}
	}
	if widened == 0 {
		t.Fatal("no sampled scope widened")
	}
	i := 0
	allocs := testing.AllocsPerRun(4096, func() {
		a := addrs[i%2 == 1][i&4095]
		i++
		q := policy.Query{Qtype: dns.TypeA, Client: a, ClientBits: a.BitLen()}
		q.Up, q.Scopes = live.Usable(r, dns.TypeA)
		_ = r.Decide(&q)
	})
	if allocs != 0 {
		t.Errorf("Decide with widened scopes allocates %v times per call", allocs)
	}
}

// BenchmarkDecideWidened: a steered decision over the embedded database
// with bom down, without the widened scopes (the partition's) and with
// them: the query path's cost of widening.
func BenchmarkDecideWidened(b *testing.B) {
	table := widenTable(b, 1)
	live := policy.NewLive(table, policy.LiveOptions{})
	r := table.Records[0]
	_, _, addrs := embedded(b)
	live.SetHealth(allUsable, down("bom"))
	up, sc := live.Usable(r, dns.TypeA)
	if sc == nil {
		b.Fatal("no widened scopes")
	}
	for _, tc := range []struct {
		name string
		sc   *policy.Scopes
	}{{"partition", nil}, {"widened", sc}} {
		for _, v6 := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/v6=%t", tc.name, v6), func(b *testing.B) {
				as := addrs[v6]
				q := policy.Query{Qtype: dns.TypeA, Up: up, Scopes: tc.sc}
				sink := 0
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					q.Client = as[i&(len(as)-1)]
					q.ClientBits = q.Client.BitLen()
					sink += r.Decide(&q).Scope
					i++
				}
				_ = sink
			})
		}
	}
}

// mumbaiGroupRecord is mumbaiRecord with Mumbai a failover pair and the
// neighbours a group: the widening descends the tree as the query does.
const mumbaiGroupRecord = `
  - name: g.example.com
    pools:
      bom-1: { address: 203.0.113.10 }
      bom-2: { address: 203.0.113.11 }
      fra:   { address: 198.51.100.20 }
      iad-1: { address: 192.0.2.30 }
      iad-2: { address: 192.0.2.31 }
    groups:
      mumbai:   { failover: [bom-1, bom-2] }
      virginia: { NEIGHBOURS }
    rules:
      - match: { cidr: [10.16.0.0/14, 10.22.0.0/15, 10.28.0.0/16] }
        pool: mumbai
      - match: { cidr: [10.0.0.0/12, 10.32.0.0/11] }
        failover: [virginia, fra]
      - default: { pool: fra }
    on_unhealthy: next_rule
`

// TestScopeWidensThroughGroups: a branch of the tree going down widens
// like a pool; a group that splits keeps its leaves' own depth.
func TestScopeWidensThroughGroups(t *testing.T) {
	for _, tc := range []struct {
		name, neighbours string
		fixed            bool
	}{
		{"failover group", "failover: [iad-1, iad-2]", true},
		{"multivalue group", "multivalue: 2, pools: [iad-1, iad-2]", true},
		{"sticky split group", "split: [{ pool: iad-1, weight: 1 }, { pool: iad-2, weight: 1 }], sticky: client_subnet", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := strings.Replace(mumbaiGroupRecord, "NEIGHBOURS", tc.neighbours, 1)
			table := mustBuild(t, configYAML(t, []string{cityDB}, rec))
			live := policy.NewLive(table, policy.LiveOptions{})
			r := table.Get("g.example.com.")
			live.SetHealth(allUsable, nil)
			orig := scopesOf(live, r)
			// One of the pair down: Mumbai still answers, nothing widens
			// for it (bom-2 now), and the scopes stay.
			live.SetHealth(allUsable, down("bom-1"))
			if d := decideNow(live, r, dns.TypeA, addr("10.17.0.0")); poolNames(r, d.Pools) != "bom-2" || d.Scope != 14 {
				t.Errorf("bom-1 down: 10.17.0.0 gets %s /%d, want bom-2 /14", poolNames(r, d.Pools), d.Scope)
			}
			checkPartition(t, live, r, tc.fixed)
			// The whole branch down: the /12 is fra.
			live.SetHealth(allUsable, down("bom-1", "bom-2"))
			if d := decideNow(live, r, dns.TypeA, addr("10.17.0.0")); poolNames(r, d.Pools) != "fra" || d.Scope != 12 || d.WidenedFrom != 14 {
				t.Errorf("mumbai down: 10.17.0.0 gets %s /%d (from %d), want fra /12 from /14", poolNames(r, d.Pools), d.Scope, d.WidenedFrom)
			}
			checkPartition(t, live, r, tc.fixed)
			// Virginia down too: every client gets fra, and when the
			// neighbours' tree is leaf-only the whole space widens to /0
			// (a tree with a split keeps its leaves' /12).
			live.SetHealth(allUsable, down("bom-1", "bom-2", "iad-1", "iad-2"))
			d := decideNow(live, r, dns.TypeA, addr("10.1.0.0"))
			if want := map[bool]int{true: 0, false: 12}[tc.fixed]; poolNames(r, d.Pools) != "fra" || d.Scope != want {
				t.Errorf("mumbai and virginia down: 10.1.0.0 gets %s /%d, want fra /%d", poolNames(r, d.Pools), d.Scope, want)
			}
			checkPartition(t, live, r, tc.fixed)
			live.SetHealth(allUsable, nil)
			if got := scopesOf(live, r); !slices.Equal(got, orig) {
				t.Error("every pool back: scopes differ from the partition's")
			}
		})
	}
}

// TestWidenKeptAcrossReload: a reload that keeps the partition keeps its
// widening (the new table's first state takes the previous table's), and
// one that changes the rules computes afresh.
func TestWidenKeptAcrossReload(t *testing.T) {
	set := geoSetFor(t, cityDB)
	yaml := configYAML(t, []string{cityDB}, mumbaiRecord)
	prev, _, err := policy.BuildWith(parseConfig(t, yaml), set, nil)
	if err != nil {
		t.Fatal(err)
	}
	prevLive := policy.NewLive(prev, policy.LiveOptions{})
	prevLive.SetHealth(allUsable, down("bom"))
	if ws := prevLive.WidenStats(); ws.Computed != 1 {
		t.Fatalf("first table: %+v, want one computation", ws)
	}
	next, _, err := policy.BuildWith(parseConfig(t, yaml+"  - name: other.example.com\n    pools: { x: { address: 192.0.2.9 } }\n    rules: [{ default: { pool: x } }]\n"), set, prev)
	if err != nil {
		t.Fatal(err)
	}
	nextLive := policy.NewLive(next, policy.LiveOptions{Previous: prevLive})
	nextLive.SetHealth(allUsable, down("bom"))
	if ws := nextLive.WidenStats(); ws.Computed != 0 || ws.Reused != 1 {
		t.Errorf("reloaded table, same partition: %+v, want the widening reused", ws)
	}
	r := next.Get("m.example.com.")
	if d := decideNow(nextLive, r, dns.TypeA, addr("10.17.3.0")); d.Scope != 12 {
		t.Errorf("reloaded table: scope /%d, want /12", d.Scope)
	}
	edited := strings.Replace(yaml, "10.28.0.0/16", "10.28.0.0/15", 1)
	third, _, err := policy.BuildWith(parseConfig(t, edited), set, next)
	if err != nil {
		t.Fatal(err)
	}
	thirdLive := policy.NewLive(third, policy.LiveOptions{Previous: nextLive})
	thirdLive.SetHealth(allUsable, down("bom"))
	if ws := thirdLive.WidenStats(); ws.Computed != 1 {
		t.Errorf("reloaded table, new rules: %+v, want a new computation", ws)
	}
	checkPartition(t, thirdLive, third.Get("m.example.com."), true)
}
