package simulate

import (
	"math/rand/v2"
	"net/netip"
	"os"
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

const larkbookConfig = "../../examples/larkbook/steer.yaml"

var (
	geoOnce sync.Map // database name -> *geoEntry
)

type geoEntry struct {
	once sync.Once
	db   *geo.Database
	err  error
}

// openGeo opens cfg's geo databases, each once per test binary.
func openGeo(t testing.TB, cfg *config.Config) *geo.Set {
	t.Helper()
	set := &geo.Set{}
	for _, name := range cfg.Geo.Databases {
		path := name
		if name != geo.EmbeddedName {
			path = cfg.LocalPath(name)
		}
		e, _ := geoOnce.LoadOrStore(path, &geoEntry{})
		ent := e.(*geoEntry)
		ent.once.Do(func() { ent.db, ent.err = geo.Open(path) })
		if ent.err != nil {
			t.Fatalf("geo.Open(%s): %v", path, ent.err)
		}
		set.DBs = append(set.DBs, ent.db)
	}
	return set
}

var (
	larkOnce  sync.Once
	larkBase  Base
	larkError error
)

// larkbook returns the Larkbook demo configuration, its geo set and
// compiled table (built once; tests copy the Base).
func larkbook(t testing.TB) Base {
	t.Helper()
	larkOnce.Do(func() {
		cfg, err := config.Load(larkbookConfig)
		if err != nil {
			larkError = err
			return
		}
		set := openGeo(t, cfg)
		table, _, err := policy.Build(cfg, set)
		if err != nil {
			larkError = err
			return
		}
		larkBase = Base{Config: cfg, Geo: set, Table: table, LoadConfig: config.Load}
	})
	if larkError != nil {
		t.Fatal(larkError)
	}
	return larkBase
}

// cityBase is a configuration on the Larkbook test City database with
// the demo's record.
func cityBase(t testing.TB) Base {
	t.Helper()
	db, err := filepath.Abs("../../testdata/geo/larkbook-city.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, t.TempDir(), "steer.yaml", "geo:\n  databases: ["+db+"]\n", "95", "5")
	return Base{Config: cfg, Geo: openGeo(t, cfg), LoadConfig: config.Load}
}

// writeConfig writes a configuration with the demo's record (split
// weights us-east and canary) into dir and loads it.
func writeConfig(t testing.TB, dir, name, head, stable, canary string) *config.Config {
	t.Helper()
	data, err := os.ReadFile(larkbookConfig)
	if err != nil {
		t.Fatal(err)
	}
	_, rec, ok := strings.Cut(string(data), "records:\n")
	if !ok {
		t.Fatal("no records in the demo configuration")
	}
	rec = strings.Replace(rec, "weight: 95", "weight: "+stable, 1)
	rec = strings.Replace(rec, "weight: 5 ", "weight: "+canary+" ", 1)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(head+"records:\n"+rec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustParse(t testing.TB, file, text string) *Scenario {
	t.Helper()
	sc, err := ParseScenario(file, []byte(text))
	if err != nil {
		t.Fatalf("ParseScenario:\n%v", err)
	}
	return sc
}

func mustCompile(t testing.TB, sc *Scenario, b Base) *Model {
	t.Helper()
	m, err := Compile(sc, b)
	if err != nil {
		t.Fatalf("Compile:\n%v", err)
	}
	return m
}

// share decides n queries of a client in phase ph with a seeded source
// and returns the share answered with pool.
func share(t testing.TB, ph Phase, client string, pool string, n int) float64 {
	t.Helper()
	var bit uint64
	for _, p := range ph.Record.Pools {
		if p.Name == pool {
			bit = 1 << p.Index
		}
	}
	if bit == 0 {
		t.Fatalf("no pool %s in %s", pool, ph.Record.Name)
	}
	a := netip.MustParseAddr(client)
	src := rand.New(rand.NewPCG(11, 12))
	hits := 0
	for range n {
		q := policy.Query{Qtype: dns.TypeA, Client: a, ClientBits: 24, Resolver: a, Rand: src}
		if s := ph.Live.Decide(ph.Record, &q, 0); s.Pools&bit != 0 {
			hits++
		}
	}
	return float64(hits) / float64(n)
}

// A scenario with 2 sites and prefixes, against the Larkbook demo.
const usScenario = `
duration: 2h
record: shop.example.com
clients:
  - name: us
    prefixes: [8.8.0.0/22, 8.34.208.0/23]
    rate: 100
resolvers:
  - name: big
    share: 0.25
    address: 8.8.8.8
  - name: isps
    share: 0.75
    count: 2
    caches: 3
`

func TestCompilePrefixes(t *testing.T) {
	m := mustCompile(t, mustParse(t, "us.yaml", usScenario), larkbook(t))
	if m.Record != "shop.example.com." || m.Qtype != dns.TypeA || m.Runs != 20 || m.Seed != 1 || m.Bin != time.Minute ||
		!m.Start.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("model %s qtype %d runs %d seed %d bin %s start %s", m.Record, m.Qtype, m.Runs, m.Seed, m.Bin, m.Start)
	}
	var got []string
	sum := 0.0
	for _, s := range m.Subnets {
		got = append(got, s.Prefix.String()+" "+s.Country)
		sum += s.Weight
	}
	want := "8.8.0.0/24 US,8.8.1.0/24 US,8.8.2.0/24 US,8.8.3.0/24 US,8.34.208.0/24 US,8.34.209.0/24 US"
	if strings.Join(got, ",") != want || sum < 0.999999 || sum > 1.000001 || m.Subnets[0].Weight != 1.0/6 {
		t.Errorf("subnets %s (weights sum %g, first %g), want %s equally weighted", strings.Join(got, ","), sum, m.Subnets[0].Weight, want)
	}
	if len(m.Resolvers) != 3 {
		t.Fatalf("%d resolvers, want 1 + 2", len(m.Resolvers))
	}
	big, isp0, isp1 := m.Resolvers[0], m.Resolvers[1], m.Resolvers[2]
	if big.Addr != netip.MustParseAddr("8.8.8.8") || len(big.Subnets) != 6 || big.Share[0] != 0.25 || big.Caches != 1 || big.Site != 0 {
		t.Errorf("big resolver %+v", big)
	}
	// Round robin: subnets 0, 2, 4 and 1, 3, 5; each at the first host
	// of its first subnet.
	if isp0.Addr != netip.MustParseAddr("8.8.0.1") || isp1.Addr != netip.MustParseAddr("8.8.1.1") ||
		len(isp0.Subnets) != 3 || isp0.Subnets[1] != 2 || isp1.Subnets[2] != 5 || isp1.Share[0] != 0.75 || isp1.Caches != 3 || isp1.Site != 1 {
		t.Errorf("isp resolvers %+v %+v", isp0, isp1)
	}
	if len(m.Sites) != 2 || m.Sites[0].ECS || !m.Sites[0].HonorsScope || m.Sites[1].Name != "isps" {
		t.Errorf("sites %+v", m.Sites)
	}
	if len(m.Phases) != 1 || m.Phases[0].Label != "start" || m.Phases[0].Record.Name != "shop.example.com." || m.Phases[0].Table != larkbook(t).Table {
		t.Errorf("phases %+v", m.Phases)
	}
	if s := share(t, m.Phases[0], "8.8.0.1", "us-east-canary", 10000); s < 0.04 || s > 0.06 {
		t.Errorf("the canary answers %.3f of a US client's queries, want 0.05", s)
	}
}

// subnets: N spreads N subnets evenly over the prefixes; zipf weights
// them by rank.
func TestCompileSubnetsSpreadAndZipf(t *testing.T) {
	sc := mustParse(t, "s.yaml", strings.Replace(usScenario, "rate: 100", "rate: 100\n    subnets: 3\n    zipf: 1", 1))
	m := mustCompile(t, sc, larkbook(t))
	var got []string
	weights := map[float64]bool{}
	for _, s := range m.Subnets {
		got = append(got, s.Prefix.String())
		weights[s.Weight] = true
	}
	if strings.Join(got, " ") != "8.8.0.0/24 8.8.2.0/24 8.34.208.0/24" {
		t.Errorf("subnets %v, want every second of the 6", got)
	}
	h := 1 + 1.0/2 + 1.0/3
	for _, w := range []float64{1 / h, 0.5 / h, 1 / 3.0 / h} {
		found := false
		for x := range weights {
			if x > w-1e-12 && x < w+1e-12 {
				found = true
			}
		}
		if !found {
			t.Errorf("weights %v: no %g (rank^-1 of 3 ranks)", weights, w)
		}
	}
}

func TestCompileIPv6AndSiteAddresses(t *testing.T) {
	sc := mustParse(t, "v6.yaml", `
duration: 1h
record: shop.example.com
type: AAAA
clients:
  - name: v6
    prefixes: [2001:db8::/54]
    rate: 10
resolvers:
  - name: isps
    count: 3
    address: 192.0.2.0/29
    ecs: { v4: 32, v6: 64, honors_scope: false }
`)
	m := mustCompile(t, sc, larkbook(t))
	if m.Qtype != dns.TypeAAAA || len(m.Subnets) != 4 || m.Subnets[3].Prefix.String() != "2001:db8:0:300::/56" {
		t.Errorf("qtype %d subnets %v", m.Qtype, m.Subnets)
	}
	if len(m.Resolvers) != 3 || m.Resolvers[0].Addr.String() != "192.0.2.1" || m.Resolvers[2].Addr.String() != "192.0.2.3" || m.Resolvers[0].Share[0] != 1 {
		t.Errorf("resolvers %+v", m.Resolvers)
	}
	// The configuration's ecs.max_source_v4/v6 (24, 56) cap the site's.
	if s := m.Sites[0]; !s.ECS || s.SourceV4 != 24 || s.SourceV6 != 56 || s.HonorsScope {
		t.Errorf("site %+v, want ECS /24 /56 not honouring the scope", s)
	}
}

// The canary example against the Larkbook demo: 5,000 /24s of the
// Americas, one big resolver and 400 small ones, a drain at 12 h.
func TestCompileCanaryExample(t *testing.T) {
	sc, err := LoadScenario("../../examples/simulate/canary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := larkbook(t)
	m := mustCompile(t, sc, b)
	countries := map[string]int{}
	for _, s := range m.Subnets {
		countries[s.Country]++
		if info, _, err := b.Geo.LookupInfo(s.Prefix.Addr()); err != nil || info.Country != s.Country {
			t.Fatalf("subnet %s says %s, the database %s", s.Prefix, s.Country, info.Country)
		}
	}
	if len(m.Subnets) != 5000 || countries["US"] == 0 || countries["CA"] == 0 || countries["BR"] == 0 || len(countries) != 3 {
		t.Errorf("%d subnets by country %v, want 5,000 of US, CA and BR", len(m.Subnets), countries)
	}
	if len(m.Resolvers) != 401 || len(m.Resolvers[0].Subnets) != 5000 || m.Resolvers[0].Addr.String() != "8.8.8.8" ||
		len(m.Resolvers[1].Subnets) != 13 || len(m.Resolvers[400].Subnets) != 12 || m.Resolvers[400].Share[0] != 0.8 {
		t.Errorf("%d resolvers; big serves %d at %s; isp 1 %d, isp 400 %d", len(m.Resolvers), len(m.Resolvers[0].Subnets), m.Resolvers[0].Addr, len(m.Resolvers[1].Subnets), len(m.Resolvers[400].Subnets))
	}
	if len(m.Phases) != 2 || m.Phases[1].At != 12*time.Hour || m.Phases[1].Label != "drain us-east-canary" || m.Phases[1].Line == 0 {
		t.Fatalf("phases %+v", m.Phases)
	}
	if len(m.Drains) != 1 || m.Drains[0] != (Drain{Pool: "us-east-canary", At: 12 * time.Hour, Label: "drain us-east-canary"}) {
		t.Errorf("drains %+v", m.Drains)
	}
	if s := share(t, m.Phases[0], "8.8.8.8", "us-east-canary", 10000); s < 0.04 || s > 0.06 {
		t.Errorf("before the drain the canary answers %.3f, want 0.05", s)
	}
	if s := share(t, m.Phases[1], "8.8.8.8", "us-east-canary", 2000); s != 0 {
		t.Errorf("after the drain the canary answers %.3f, want 0", s)
	}
	if s := share(t, m.Phases[1], "8.8.8.8", "us-east", 2000); s != 1 {
		t.Errorf("after the drain us-east answers %.3f, want all", s)
	}
}

// set_weights really changes what steer decides in the new phase; undrain
// and recover undo a drain and a failure.
func TestCompileSetWeightsAndHealth(t *testing.T) {
	sc := mustParse(t, "w.yaml", usScenario+`
events:
  - { at: 30m, fail: us-east }
  - { at: 1h, set_weights: { us-east: 50, us-east-canary: 50 } }
  - { at: 1h, recover: us-east }
  - { at: 90m, drain: shop.example.com/us-east }
`)
	b := larkbook(t)
	m := mustCompile(t, sc, b)
	var labels []string
	for _, p := range m.Phases {
		labels = append(labels, fmtDuration(p.At)+" "+p.Label)
	}
	if got := strings.Join(labels, " | "); got != "0s start | 30m fail us-east | 1h weights us-east=50 us-east-canary=50; recover us-east | 1h30m drain shop.example.com/us-east" {
		t.Errorf("phases %s", got)
	}
	if s := share(t, m.Phases[1], "8.8.0.1", "us-east-canary", 1000); s != 1 {
		t.Errorf("us-east failed: the canary answers %.3f, want all", s)
	}
	if s := share(t, m.Phases[2], "8.8.0.1", "us-east-canary", 10000); s < 0.47 || s > 0.53 {
		t.Errorf("weights 50/50: the canary answers %.3f, want 0.5", s)
	}
	if m.Phases[2].Table == m.Phases[1].Table || m.Phases[1].Table != b.Table {
		t.Errorf("set_weights did not compile a new table, or fail did")
	}
	if s := share(t, m.Phases[3], "8.8.0.1", "us-east-canary", 1000); s != 1 {
		t.Errorf("us-east drained: the canary answers %.3f, want all", s)
	}
	if len(m.Drains) != 2 || m.Drains[0].Pool != "us-east" || m.Drains[0].At != 30*time.Minute || m.Drains[1].Label != "drain shop.example.com/us-east" {
		t.Errorf("drains %+v", m.Drains)
	}
	// The base configuration is untouched.
	if w := b.Config.Records[0].Rules[2].Split[0].Weight; w != 95 {
		t.Errorf("the base configuration's weight is now %d", w)
	}
}
