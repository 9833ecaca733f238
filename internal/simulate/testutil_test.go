package simulate

// Shared test helpers: build a Model by hand from a configuration string
// and a hand-made population, with steer's real compiled policy.

import (
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
)

// testStart is the simulated clock's origin in tests.
var testStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testGeoPath returns the absolute path of a file in the repository's
// testdata/geo ("embedded" stays as it is).
func testGeoPath(t testing.TB, name string) string {
	t.Helper()
	if name == geo.EmbeddedName {
		return name
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var testDBs sync.Map // path → *testDB

type testDB struct {
	once sync.Once
	db   *geo.Database
	err  error
}

// testConfigYAML returns a configuration whose geo.databases are the
// named testdata files (or embedded) and whose records are records (a
// YAML list, indented by two spaces).
func testConfigYAML(t testing.TB, records string, dbs ...string) string {
	t.Helper()
	if len(dbs) == 0 {
		dbs = []string{"larkbook-city.mmdb"}
	}
	var paths []string
	for _, d := range dbs {
		paths = append(paths, testGeoPath(t, d))
	}
	return "geo:\n  databases: [" + strings.Join(paths, ", ") + "]\nrecords:\n" + records
}

// testTable parses yaml as steer.yaml, opens its databases (once per
// test binary) and compiles it.
func testTable(t testing.TB, yaml string) *policy.Table {
	t.Helper()
	cfg, err := config.Parse(nil, "steer.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	set := &geo.Set{}
	for _, name := range cfg.Geo.Databases {
		path := name
		if name != geo.EmbeddedName {
			path = cfg.Resolve(name)
		}
		e, _ := testDBs.LoadOrStore(path, &testDB{})
		ent := e.(*testDB)
		ent.once.Do(func() { ent.db, ent.err = geo.Open(path) })
		if ent.err != nil {
			t.Fatalf("geo.Open(%s): %v", path, ent.err)
		}
		set.DBs = append(set.DBs, ent.db)
	}
	table, _, err := policy.Build(cfg, set)
	if err != nil {
		t.Fatalf("policy.Build: %v", err)
	}
	return table
}

// testPhase returns a phase of table from at, with the named pools'
// overrides (policy.PoolDrain, PoolDown) and every address healthy.
func testPhase(t testing.TB, table *policy.Table, record string, at time.Duration, label string, overrides map[string]policy.PoolOverride) Phase {
	t.Helper()
	rec := table.Get(dns.Fqdn(record))
	if rec == nil {
		t.Fatalf("no record %s in the table", record)
	}
	live := policy.NewLive(table, policy.LiveOptions{Start: testStart})
	if len(overrides) > 0 {
		live.SetHealth(func(netip.Addr, string) bool { return true }, func(_, pool string) policy.PoolOverride {
			if o, ok := overrides[pool]; ok {
				return o
			}
			return policy.PoolAuto
		})
	}
	return Phase{At: at, Label: label, Table: table, Live: live, Record: rec}
}

// testModel returns a model of record with its first phase from table
// and no population yet.
func testModel(t testing.TB, table *policy.Table, record string, duration, bin time.Duration, runs int) *Model {
	t.Helper()
	m := &Model{
		Start: testStart, Duration: duration, Bin: bin, Runs: runs, Seed: 1,
		Qtype: dns.TypeA, Record: dns.Fqdn(record),
	}
	m.Phases = []Phase{testPhase(t, table, record, 0, "start", nil)}
	return m
}

// testSubnets returns n consecutive subnets of length bits from first.
func testSubnets(first string, bits, n int) []netip.Prefix {
	p := netip.MustParsePrefix(first).Masked()
	out := make([]netip.Prefix, 0, n)
	a := p.Addr()
	for range n {
		out = append(out, netip.PrefixFrom(a, bits))
		b := a.As16()
		// add 1 << (128-bits) (or 32-bits for IPv4) to the address
		bitLen := a.BitLen()
		pos := bitLen - bits // bit position from the right to increment
		if a.Is4() {
			b4 := a.As4()
			v := uint32(b4[0])<<24 | uint32(b4[1])<<16 | uint32(b4[2])<<8 | uint32(b4[3])
			v += 1 << pos
			a = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
			continue
		}
		byteIdx := 15 - pos/8
		carry := uint16(1) << (pos % 8)
		for i := byteIdx; i >= 0 && carry != 0; i-- {
			s := uint16(b[i]) + carry
			b[i] = byte(s)
			carry = s >> 8
		}
		a = netip.AddrFrom16(b)
	}
	return out
}

// addGroup adds a client group of rate q/s over the subnets, weighted
// equally, and returns the subnets' indices.
func addGroup(m *Model, name string, rate float64, subnets []netip.Prefix) []int32 {
	g := len(m.Groups)
	m.Groups = append(m.Groups, Group{Name: name, Rate: rate})
	idx := make([]int32, len(subnets))
	for i, p := range subnets {
		idx[i] = int32(len(m.Subnets))
		m.Subnets = append(m.Subnets, Subnet{Group: g, Prefix: p, Weight: 1 / float64(len(subnets))})
	}
	return idx
}

// addSite adds a resolver site of count resolvers with caches cache
// instances each, carrying share of every one of subnets (dealt to the
// resolvers in contiguous runs), and returns the site's index. A
// resolver's address is in the first subnet it serves (an ISP's resolver
// near its users); without subnets it is taken from 100.64.0.0/10.
func addSite(m *Model, s Site, count, caches int, share float64, subnets []int32) int {
	si := len(m.Sites)
	m.Sites = append(m.Sites, s)
	for i := range count {
		n := uint32(len(m.Resolvers) + 1)
		r := Resolver{Site: si, Caches: caches,
			Addr: netip.AddrFrom4([4]byte{100, 64 | byte(n>>16&0x3f), byte(n >> 8), byte(n)})}
		lo, hi := i*len(subnets)/count, (i+1)*len(subnets)/count
		for _, sn := range subnets[lo:hi] {
			r.Subnets = append(r.Subnets, sn)
			r.Share = append(r.Share, share)
		}
		if hi > lo {
			r.Addr = m.Subnets[subnets[lo]].Prefix.Addr().Next()
		}
		m.Resolvers = append(m.Resolvers, r)
	}
	return si
}

// poolIndex returns pool's index in r.Pools.
func poolIndex(t testing.TB, r *Result, pool string) int {
	t.Helper()
	for i, p := range r.Pools {
		if p == pool {
			return i
		}
	}
	t.Fatalf("no pool %s in %v", pool, r.Pools)
	return -1
}
