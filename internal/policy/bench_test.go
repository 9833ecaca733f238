package policy_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/oschwald/maxminddb-golang/v2"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
)

var (
	embOnce  sync.Once
	embTable *policy.Table
	embSet   *geo.Set
	embTime  time.Duration
	embErr   error
	embAddrs map[bool][]netip.Addr // by IPv6
)

// embedded returns the Larkbook record compiled against the embedded
// database (once per test binary: it takes about a second) and 64k random
// client addresses of each family.
func embedded(tb testing.TB) (*policy.Record, *geo.Set, map[bool][]netip.Addr) {
	tb.Helper()
	embOnce.Do(func() {
		d, err := geo.OpenEmbedded()
		if err != nil {
			embErr = err
			return
		}
		embSet = &geo.Set{DBs: []*geo.Database{d}}
		yaml := configYAML(tb, []string{embedDB}, larkbookRecord)
		start := time.Now()
		var table *policy.Table
		table, _, embErr = build(tb, yaml)
		embTime = time.Since(start)
		embTable = table
		rnd := rand.New(rand.NewPCG(1, 1))
		embAddrs = map[bool][]netip.Addr{}
		for range 1 << 16 {
			embAddrs[false] = append(embAddrs[false], randomWithin(rnd, netip.MustParsePrefix("0.0.0.0/0")))
			// Routed IPv6 space, where the database has data.
			embAddrs[true] = append(embAddrs[true], randomWithin(rnd, netip.MustParsePrefix("2000::/4")))
		}
	})
	if embErr != nil {
		tb.Fatal(embErr)
	}
	return embTable.Get("shop.example.com."), embSet, embAddrs
}

func benchFamilies(b *testing.B, f func(b *testing.B, addrs []netip.Addr)) {
	_, _, addrs := embedded(b)
	b.Run("v4", func(b *testing.B) { f(b, addrs[false]) })
	b.Run("v6", func(b *testing.B) { f(b, addrs[true]) })
}

func BenchmarkDecide(b *testing.B) {
	r, _, _ := embedded(b)
	benchFamilies(b, func(b *testing.B, addrs []netip.Addr) {
		q := policy.Query{Qtype: dns.TypeA, Up: r.Enabled}
		var sink int
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			q.Client = addrs[i&(len(addrs)-1)]
			q.ClientBits = q.Client.BitLen()
			d := r.Decide(&q)
			sink += d.Scope
		}
		_ = sink
	})
}

// BenchmarkLiveDecide is BenchmarkDecide through the step the server
// takes (Live.Decide: the health read, the decision, the answered mark
// and its hooks), with every pool healthy.
func BenchmarkLiveDecide(b *testing.B) {
	r, _, _ := embedded(b)
	live := policy.NewLive(embTable, policy.LiveOptions{})
	live.SetHealth(func(netip.Addr, string) bool { return true }, nil)
	now := time.Now().Unix()
	benchFamilies(b, func(b *testing.B, addrs []netip.Addr) {
		q := policy.Query{Qtype: dns.TypeA}
		var sink int
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			q.Client = addrs[i&(len(addrs)-1)]
			q.ClientBits = q.Client.BitLen()
			d := live.Decide(r, &q, now)
			sink += d.Scope
		}
		_ = sink
	})
}

// BenchmarkRawMaxMindLookup is one plain maxminddb lookup in the embedded
// database, opened here without geo, to compare BenchmarkDecide with.
func BenchmarkRawMaxMindLookup(b *testing.B) {
	gz, err := os.ReadFile(filepath.Join("..", "geo", "embedded", "iptoasn-country.mmdb.gz"))
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	db, err := maxminddb.OpenBytes(raw)
	if err != nil {
		b.Fatal(err)
	}
	benchFamilies(b, func(b *testing.B, addrs []netip.Addr) {
		found := 0
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if db.Lookup(addrs[i&(len(addrs)-1)]).Found() {
				found++
			}
		}
		_ = found
	})
}

// TestDecideDoesNotAllocate: the query path allocates nothing, for every
// kind of action.
func TestDecideDoesNotAllocate(t *testing.T) {
	r, _, addrs := embedded(t)
	sticky := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, stickyRecord)).Get("sticky.example.com.")
	sink := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, sinkRecord)).Get("sink.example.com.")
	for _, tc := range []struct {
		name  string
		r     *policy.Record
		addrs []netip.Addr
	}{
		{"embedded v4", r, addrs[false][:4096]},
		{"embedded v6", r, addrs[true][:4096]},
		{"sticky", sticky, sampleClients(4096)},
		{"sink", sink, sampleClients(4096)},
	} {
		i := 0
		q := policy.Query{Qtype: dns.TypeA, Resolver: addr("192.0.2.150")}
		allocs := testing.AllocsPerRun(4096, func() {
			q.Client = tc.addrs[i%len(tc.addrs)]
			q.ClientBits = q.Client.BitLen()
			q.Up = tc.r.Enabled
			if i%3 == 0 {
				q.Up &^= uint64(i)
			}
			if i%5 == 0 {
				q.Qtype = dns.TypeAAAA
			} else {
				q.Qtype = dns.TypeA
			}
			i++
			_ = tc.r.Decide(&q)
		})
		if allocs != 0 {
			t.Errorf("%s: Decide allocates %v times per call", tc.name, allocs)
		}
	}
}

func sampleClients(n int) []netip.Addr {
	rnd := rand.New(rand.NewPCG(21, 22))
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = randomClient(rnd)
	}
	return out
}

// TestCompileStats reports what compiling the demo record against the
// embedded database costs.
func TestCompileStats(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles against the embedded database")
	}
	r, set, _ := embedded(t)
	s := r.Stats
	t.Logf("compile time %v (table %v); %s", embTime, embTable.CompileTime, set.Summary())
	t.Logf("stats: leaves4 %d nodes4 %d leaves6 %d nodes6 %d outcomes %d bytes %d",
		s.Leaves4, s.Nodes4, s.Leaves6, s.Nodes6, s.Outcomes, s.Bytes)
	if s.Nodes4 == 0 || s.Nodes6 == 0 || s.Outcomes < 4 || s.Bytes < 4*2*(s.Nodes4+s.Nodes6) {
		t.Errorf("implausible stats %+v", s)
	}
	// The embedded database is country-level: India is ap-south, Germany
	// is EU, the US splits.
	for _, tt := range []struct {
		client string
		rule   int
	}{
		{"49.36.0.1", 0},
		{"91.64.0.1", 1},
		{"8.8.8.8", 2},
		{"2001:4860:4860::8888", 2},
		{"192.0.2.1", 3}, // documentation space: no country
	} {
		d := r.Decide(&policy.Query{Client: addr(tt.client), ClientBits: addr(tt.client).BitLen(), Qtype: dns.TypeA, Up: r.Enabled})
		if d.Rule != tt.rule {
			t.Errorf("embedded, %s: rule %d, want %d", tt.client, d.Rule, tt.rule)
		}
	}
}

// TestEmbeddedMatchesReference: the partition compiled from the embedded
// database (large enough for the trie's first-level table) decides what
// the reference evaluator decides, and its scopes do not overlap.
func TestEmbeddedMatchesReference(t *testing.T) {
	r, set, addrs := embedded(t)
	cfg := parseConfig(t, configYAML(t, []string{embedDB}, larkbookRecord))
	rf := newRef(t, cfg, 0, set)
	rnd := rand.New(rand.NewPCG(31, 32))
	for i := range 3000 {
		a := addrs[i%2 == 1][rnd.IntN(len(addrs[false]))]
		if i%7 == 0 {
			a = randomClient(rnd)
		}
		q := &policy.Query{Client: a, ClientBits: a.BitLen(), Qtype: dns.TypeA, Up: r.Enabled}
		d := r.Decide(q)
		if msg := rf.check(d, rf.decide(t, a, netip.Addr{}, dns.TypeA, r.Enabled)); msg != "" {
			t.Fatalf("%s: %s (%+v)", a, msg, d)
		}
		pfx, _ := a.Prefix(d.Scope)
		for range 3 {
			b := randomWithin(rnd, pfx)
			db := r.Decide(&policy.Query{Client: b, ClientBits: b.BitLen(), Qtype: dns.TypeA, Up: r.Enabled})
			if db.Rule != d.Rule || db.Scope != d.Scope || d.Rule != 2 && db.Pools != d.Pools {
				t.Fatalf("%s is inside %s (scope of %s: %+v) but gets %+v", b, pfx, a, d, db)
			}
		}
		// One bit wider, the outcome is not the same everywhere: either
		// the reference disagrees somewhere in the sibling half, or the
		// sibling's leaf is narrower (it is split further).
		if d.Scope > 0 && i%10 == 0 {
			wider, _ := a.Prefix(d.Scope - 1)
			sib := randomWithin(rnd, wider)
			for pfx.Contains(sib) {
				sib = randomWithin(rnd, wider)
			}
			ds := r.Decide(&policy.Query{Client: sib, ClientBits: sib.BitLen(), Qtype: dns.TypeA, Up: r.Enabled})
			if ds.Scope == d.Scope && ds.Rule == d.Rule && rf.outcomeKey(t, sib) == rf.outcomeKey(t, a) {
				t.Fatalf("%s/%d and its sibling (%s/%d) have the same outcome: the leaf is not merged", a, d.Scope, sib, ds.Scope)
			}
		}
	}
}

// TestTableInnerDepth: in the embedded database's large partition, a
// first-level table entry that leads to an inner node is 16 bits deep,
// which trie.lookup assumes instead of reading the depth array.
func TestTableInnerDepth(t *testing.T) {
	r, _, _ := embedded(t)
	ok, tables := policy.TableDepthsOK(r)
	if tables == 0 {
		t.Fatal("no first-level table in the embedded partition")
	}
	if !ok {
		t.Error("a table entry leads to an inner node at another depth")
	}
}
