package policy_test

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
)

// larkbookRecord is the steered record of the demo configuration.
var larkbookRecord = "\n" + dnstest.LarkbookRecord()

// Pool bits of the Larkbook record, in configuration order.
const (
	apSouth   = uint64(1) << 0
	euCentral = uint64(1) << 1
	usEast    = uint64(1) << 2
	usCanary  = uint64(1) << 3
)

// testdataGeo returns the absolute path of a file in the repository's
// testdata/geo (see its README for the networks it holds).
func testdataGeo(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	dbOnce  sync.Map // path -> *dbEntry
	cityDB  = "larkbook-city.mmdb"
	asnDB   = "larkbook-asn.mmdb"
	flatDB  = "larkbook-country-flat.mmdb"
	embedDB = geo.EmbeddedName
)

type dbEntry struct {
	once sync.Once
	db   *geo.Database
	err  error
}

// openDB opens a database once per test binary (they are read-only).
func openDB(t testing.TB, path string) *geo.Database {
	t.Helper()
	e, _ := dbOnce.LoadOrStore(path, &dbEntry{})
	ent := e.(*dbEntry)
	ent.once.Do(func() { ent.db, ent.err = geo.Open(path) })
	if ent.err != nil {
		t.Fatalf("geo.Open(%s): %v", path, ent.err)
	}
	return ent.db
}

// configYAML returns a configuration with geo.databases set to the named
// testdata files (or embedded) and records.
func configYAML(t testing.TB, dbs []string, records string) string {
	t.Helper()
	var names []string
	for _, d := range dbs {
		if d == embedDB {
			names = append(names, d)
		} else {
			names = append(names, testdataGeo(t, d))
		}
	}
	return "geo:\n  databases: [" + strings.Join(names, ", ") + "]\nrecords:" + records
}

// build parses yaml as steer.yaml, opens its databases and compiles it.
func build(t testing.TB, yaml string) (*policy.Table, diag.Problems, error) {
	t.Helper()
	cfg, err := config.Parse(nil, "steer.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, numbered(yaml))
	}
	set := &geo.Set{}
	for _, name := range cfg.Geo.Databases {
		path := name
		if name != geo.EmbeddedName {
			path = cfg.Resolve(name)
		}
		set.DBs = append(set.DBs, openDB(t, path))
	}
	return policy.Build(cfg, set)
}

// mustBuild compiles yaml and fails on any error.
func mustBuild(t testing.TB, yaml string) *policy.Table {
	t.Helper()
	table, _, err := build(t, yaml)
	if err != nil {
		t.Fatalf("policy.Build: %v\n%s", err, numbered(yaml))
	}
	return table
}

// geoSetFor returns the set a configuration loads.
func geoSetFor(t testing.TB, dbs ...string) *geo.Set {
	set := &geo.Set{}
	for _, d := range dbs {
		if d == embedDB {
			set.DBs = append(set.DBs, openDB(t, d))
		} else {
			set.DBs = append(set.DBs, openDB(t, testdataGeo(t, d)))
		}
	}
	return set
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}

// lineOf returns the 1-based line of yaml holding marker.
func lineOf(t testing.TB, yaml, marker string) int {
	t.Helper()
	n := 0
	line := 0
	for i, l := range strings.Split(yaml, "\n") {
		if strings.Contains(l, marker) {
			n++
			line = i + 1
		}
	}
	if n != 1 {
		t.Fatalf("marker %q occurs %d times", marker, n)
	}
	return line
}

var (
	larkOnce  sync.Once
	larkTable *policy.Table
	larkErr   error
)

// larkbook returns the Larkbook record compiled against the testdata city
// and ASN databases (once per test binary).
func larkbook(t testing.TB) *policy.Record {
	t.Helper()
	larkOnce.Do(func() {
		cfg, err := config.Parse(nil, "steer.yaml", []byte(configYAML(t, []string{cityDB, asnDB}, larkbookRecord)))
		if err != nil {
			larkErr = err
			return
		}
		larkTable, _, larkErr = policy.Build(cfg, geoSetFor(t, cityDB, asnDB))
	})
	if larkErr != nil {
		t.Fatal(larkErr)
	}
	r := larkTable.Get("shop.example.com.")
	if r == nil {
		t.Fatal("no record shop.example.com.")
	}
	return r
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// query builds a query for an A record from a client subnet (or, with
// bits -1, the resolver's own address) with every enabled pool up.
func query(r *policy.Record, client string, bits int, resolver string) *policy.Query {
	q := &policy.Query{Qtype: dns.TypeA, Up: r.Enabled}
	if resolver != "" {
		q.Resolver = addr(resolver)
	}
	if bits < 0 {
		q.Client = q.Resolver
		q.ClientBits = q.Resolver.BitLen()
	} else {
		p := netip.PrefixFrom(addr(client), bits).Masked()
		q.Client, q.ClientBits = p.Addr(), bits
	}
	return q
}

func poolNames(r *policy.Record, mask uint64) string {
	return strings.Join(r.PoolNames(mask), ",")
}

func problems(t testing.TB, err error) diag.Problems {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps diag.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v is %T, not diag.Problems", err, err)
	}
	return ps
}

func parseConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(nil, "steer.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	return cfg
}
