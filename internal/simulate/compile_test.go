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
  - { at: 1h, set_weights: { us-east: 50, shop.example.com/us-east-canary: 50 } }
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

// compileErr compiles text (the scenario file file) against b and returns
// the error, which must say each of want.
func compileErr(t *testing.T, file, text string, b Base, want ...string) {
	t.Helper()
	sc := mustParse(t, file, text)
	_, err := Compile(sc, b)
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error:\n%v\nwant %q", err, w)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	b := larkbook(t)
	ev := func(events string) string { return usScenario + "events:\n" + events }
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"unknown record", strings.Replace(usScenario, "record: shop.example.com", "record: www.example.com", 1),
			[]string{"s.yaml:3: record www.example.com is not a steered record of ../../examples/larkbook/steer.yaml (steered: shop.example.com)"}},
		{"unknown drain pool", ev("  - at: 1h\n    drain: frankfurt\n"),
			[]string{"s.yaml:17: pool frankfurt is not a pool of shop.example.com (pools: ap-south, eu-central, us-east, us-east-canary)"}},
		{"unknown undrain pool", ev("  - { at: 1h, undrain: x }\n"), []string{"s.yaml:17: pool x is not a pool of shop.example.com"}},
		{"unknown fail pool", ev("  - { at: 1h, fail: x }\n"), []string{"s.yaml:17: pool x is not a pool of shop.example.com"}},
		{"unknown recover pool", ev("  - { at: 1h, recover: x }\n"), []string{"s.yaml:17: pool x is not a pool of shop.example.com"}},
		{"unknown record of a pool", ev("  - { at: 1h, drain: www.example.com/us-east }\n"),
			[]string{"s.yaml:17: www.example.com/us-east: record www.example.com is not a steered record"}},
		{"unknown set_weights pool", ev("  - { at: 1h, set_weights: { us-east: 50, frankfurt: 50 } }\n"),
			[]string{"s.yaml:17: pool frankfurt is not a pool of shop.example.com (pools: ap-south, eu-central, us-east, us-east-canary)"}},
		{"set_weights pool in no split", ev("  - { at: 1h, set_weights: { ap-south: 50 } }\n"),
			[]string{"s.yaml:17: set_weights: pool ap-south is in no split of shop.example.com"}},
		{"set_weights all zero", ev("  - { at: 1h, set_weights: { us-east: 0, us-east-canary: 0 } }\n"),
			[]string{"s.yaml:17: weights us-east=0 us-east-canary=0: compiling the policies: "}},
		{"set_weights of another record", ev("  - { at: 1h, set_weights: { www.example.com/us-east: 50 } }\n"),
			[]string{"s.yaml:17: set_weights: www.example.com/us-east: only the pools of shop.example.com, the record asked, can be reweighed"}},
		{"several", ev("  - { at: 1h, drain: x }\n  - { at: 90m, fail: y }\n") + "", []string{"s.yaml:17: pool x", "s.yaml:18: pool y"}},
	} {
		t.Run(c.name, func(t *testing.T) { compileErr(t, "s.yaml", c.text, b, c.want...) })
	}
}

func TestCompileLimits(t *testing.T) {
	b := larkbook(t)
	b.Limits = Limits{MaxSubnets: 5, MaxRuns: 10, MaxBins: 100, MaxResolvers: 2, MaxDuration: time.Hour}
	compileErr(t, "l.yaml", "runs: 20\n"+usScenario, b,
		"l.yaml:1: runs 20 is more than the limit of 10",
		"l.yaml:3: duration 2h in bins of 1m is 120 bins, more than the limit of 100",
		"l.yaml:3: duration 2h is longer than the limit of 1h",
		"l.yaml:6: client group us has 6 subnets, more than the limit of 5")
	b.Limits.MaxSubnets = 7
	compileErr(t, "l.yaml", usScenario, b, "l.yaml:8: the resolver sites have 3 resolvers, more than the limit of 2")
	compileErr(t, "l.yaml", strings.Replace(usScenario, "resolvers:", "  - name: more\n    prefixes: [192.0.2.0/23]\n    rate: 1\nresolvers:", 1), b,
		"l.yaml:4: the client groups have 8 subnets, more than the limit of 7")
	// The default: 100,000 subnets.
	big := strings.Replace(usScenario, "8.34.208.0/23", "10.0.0.0/7", 1)
	compileErr(t, "l.yaml", big, larkbook(t), "l.yaml:5: client group us has 131076 subnets, more than the limit of 100000 (set subnets: to take fewer")
	// subnets: caps them.
	m := mustCompile(t, mustParse(t, "l.yaml", strings.Replace(big, "rate: 100", "rate: 100\n    subnets: 1000", 1)), larkbook(t))
	if len(m.Subnets) != 1000 {
		t.Errorf("%d subnets, want 1,000", len(m.Subnets))
	}
}

// A config event switches to another file's policies; the scenario's
// ttl_override applies to every phase.
func TestCompileConfigEvent(t *testing.T) {
	dir := t.TempDir()
	b := cityBase(t)
	writeConfig(t, dir, "half.yaml", "geo:\n  databases: ["+b.Config.Geo.Databases[0]+"]\n", "50", "50")
	writeConfig(t, dir, "embedded.yaml", "geo:\n  databases: [embedded]\n", "50", "50")
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("records:\n  - name: shop.example.com\n    tll: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scen := filepath.Join(dir, "s.yaml")
	text := strings.Replace(usScenario, "8.8.0.0/22, 8.34.208.0/23", "8.8.8.0/24", 1) + "ttl_override: 20s\nevents:\n  - { at: 1h, config: half.yaml }\n"
	m := mustCompile(t, mustParse(t, scen, text), b)
	if len(m.Phases) != 2 || m.Phases[1].Label != "config half.yaml" || m.Phases[1].Table == m.Phases[0].Table {
		t.Fatalf("phases %+v", m.Phases)
	}
	for i, ph := range m.Phases {
		if ph.Record.TTL != 20 {
			t.Errorf("phase %d: TTL %d, want the override's 20", i, ph.Record.TTL)
		}
	}
	if s := share(t, m.Phases[0], "8.8.8.1", "us-east-canary", 10000); s < 0.04 || s > 0.06 {
		t.Errorf("before: canary %.3f, want 0.05", s)
	}
	if s := share(t, m.Phases[1], "8.8.8.1", "us-east-canary", 10000); s < 0.47 || s > 0.53 {
		t.Errorf("after the config event: canary %.3f, want 0.5", s)
	}

	// Events after a config event at the same time name the new file's pools.
	half, err := os.ReadFile(filepath.Join(dir, "half.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "renamed.yaml"), []byte(strings.ReplaceAll(string(half), "us-east-canary", "canary2")), 0o644); err != nil {
		t.Fatal(err)
	}
	m = mustCompile(t, mustParse(t, scen, usScenario+"events:\n  - { at: 1h, config: renamed.yaml }\n  - { at: 1h, drain: canary2 }\n"), b)
	if len(m.Phases) != 2 || m.Phases[1].Label != "config renamed.yaml; drain canary2" || len(m.Drains) != 1 || m.Drains[0].Pool != "canary2" {
		t.Errorf("phases %+v drains %+v", m.Phases, m.Drains)
	}
	if s := share(t, m.Phases[1], "8.8.8.1", "us-east", 1000); s != 1 {
		t.Errorf("canary2 drained: us-east answers %.3f, want all", s)
	}

	for _, c := range []struct {
		event string
		b     func(Base) Base
		want  []string
	}{
		{"config: missing.yaml", nil, []string{"s.yaml:17: config missing.yaml: " + filepath.Join(dir, "missing.yaml") + ": open"}},
		{"config: broken.yaml", nil, []string{"s.yaml:17: config broken.yaml: " + filepath.Join(dir, "broken.yaml") + `:3: unknown key "tll"`}},
		{"config: embedded.yaml", nil, []string{"s.yaml:17: config embedded.yaml: its geo databases (embedded) are not those of"}},
		{"config: half.yaml", func(b Base) Base { b.LoadConfig = nil; return b },
			[]string{"s.yaml:17: config half.yaml: config events need files: not available through the API"}},
	} {
		t.Run(c.event, func(t *testing.T) {
			bb := b
			if c.b != nil {
				bb = c.b(b)
			}
			compileErr(t, scen, usScenario+"events:\n  - { at: 1h, "+c.event+" }\n", bb, c.want...)
		})
	}
}

// set_weights on a record using a shared policy changes the policy, and
// the label says so.
func TestCompileSetWeightsSharedPolicy(t *testing.T) {
	db, _ := filepath.Abs("../../testdata/geo/larkbook-city.mmdb")
	p := filepath.Join(t.TempDir(), "steer.yaml")
	pools := "\n    pools:\n      stable: { address: 192.0.2.30 }\n      canary: { address: 192.0.2.31 }\n    policy: canary\n"
	text := "geo:\n  databases: [" + db + "]\nrecords:\n  - name: a.example.com" + pools + "  - name: b.example.com" + pools +
		"policies:\n  canary:\n    rules:\n      - default:\n          split: [{ pool: stable, weight: 95 }, { pool: canary, weight: 5 }]\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	b := Base{Config: cfg, Geo: openGeo(t, cfg)}
	sc := mustParse(t, "p.yaml", strings.Replace(usScenario, "shop.example.com", "a.example.com", 1)+"events:\n  - { at: 1h, set_weights: { canary: 50 } }\n")
	m := mustCompile(t, sc, b)
	if got := m.Phases[1].Label; got != "weights canary=50 (in policy canary: every record using it)" {
		t.Errorf("label %q", got)
	}
	if s := share(t, m.Phases[1], "8.8.8.1", "canary", 10000); s < 0.31 || s > 0.36 { // 50/145
		t.Errorf("canary %.3f after weights 95/50, want 0.345", s)
	}
	if w := cfg.Policies["canary"].Rules[0].Default.Split[1].Weight; w != 5 {
		t.Errorf("the base policy's weight is now %d", w)
	}
}

// ECS off in the configuration: no site sends it.
func TestCompileConfigWithoutECS(t *testing.T) {
	b := cityBase(t)
	cfg := *b.Config
	off := false
	cfg.ECS.Enabled = &off
	b.Config = &cfg
	m := mustCompile(t, mustParse(t, "e.yaml", strings.Replace(usScenario, "caches: 3", "caches: 3\n    ecs: true", 1)), b)
	if m.Sites[1].ECS {
		t.Errorf("site sends ECS though the configuration ignores it: %+v", m.Sites[1])
	}
}

// from_geodb draws N /24s of the countries asked, the same for a seed.
func TestCompileFromGeoDB(t *testing.T) {
	b := cityBase(t)
	text := `
duration: 1h
record: shop.example.com
seed: 7
clients:
  - name: g
    from_geodb: { countries: [IN, DE], subnets: 300, zipf: 1.2 }
    rate: 50
resolvers:
  - name: r
    count: 7
`
	draw := func(text string) ([]string, map[string]int) {
		m := mustCompile(t, mustParse(t, "g.yaml", text), b)
		var out []string
		countries := map[string]int{}
		for _, s := range m.Subnets {
			info, _, err := b.Geo.LookupInfo(s.Prefix.Addr())
			if err != nil || info.Country != s.Country || s.Prefix.Bits() != 24 || !s.Prefix.Addr().Is4() {
				t.Fatalf("subnet %s country %s, the database says %s", s.Prefix, s.Country, info.Country)
			}
			if last := s.Prefix.Addr().As4(); true {
				last[3] = 255
				if i2, _, _ := b.Geo.LookupInfo(netip.AddrFrom4(last)); i2.Country != s.Country {
					t.Fatalf("subnet %s is not all %s", s.Prefix, s.Country)
				}
			}
			countries[s.Country]++
			out = append(out, s.Prefix.String())
		}
		if len(m.Resolvers) != 7 {
			t.Errorf("%d resolvers", len(m.Resolvers))
		}
		return out, countries
	}
	a, countries := draw(text)
	if len(a) != 300 || countries["IN"] == 0 || countries["DE"] == 0 || len(countries) != 2 {
		t.Errorf("%d subnets by country %v, want 300 of IN and DE", len(a), countries)
	}
	if again, _ := draw(text); strings.Join(again, " ") != strings.Join(a, " ") {
		t.Errorf("the same seed drew different subnets")
	}
	if other, _ := draw(strings.Replace(text, "seed: 7", "seed: 8", 1)); strings.Join(other, " ") == strings.Join(a, " ") {
		t.Errorf("two seeds drew the same subnets")
	}
	// More than the databases have: all of them; a country they lack: an error.
	all, _ := draw(strings.Replace(text, "subnets: 300", "subnets: 99999", 1))
	if len(all) != 1024+16384+1024+8192 { // IN 49.36/14, 117.192/10; DE 91.64/14, 80.128/11
		t.Errorf("all /24s of IN and DE: %d", len(all))
	}
	compileErr(t, "g.yaml", strings.Replace(text, "[IN, DE]", "[IN, FR, CA]", 1), b,
		"g.yaml:7: client group g: the geo databases (larkbook-city.mmdb) have no IPv4 /24 of FR, CA")
}

// A scenario built in code (not parsed) gets the defaults and the checks.
func TestCompileUnparsedScenario(t *testing.T) {
	half := 0.5
	sc := &Scenario{File: "code", Duration: Duration(time.Hour), Record: "shop.example.com",
		Clients:   []ClientGroup{{Name: "g", Prefixes: []string{"8.8.8.0/24"}, Rate: 10}},
		Resolvers: []ResolverSite{{Name: "a", Share: &half}, {Name: "b", Share: &half, ECS: &ECSSpec{Enabled: true}}}}
	m := mustCompile(t, sc, larkbook(t))
	if m.Runs != 20 || m.Seed != 1 || m.Bin != time.Minute || !m.Sites[1].ECS || m.Sites[1].SourceV4 != 24 || len(m.Resolvers) != 2 {
		t.Errorf("model runs %d seed %d bin %s sites %+v", m.Runs, m.Seed, m.Bin, m.Sites)
	}
	third := 0.3
	sc.Resolvers[1].Share = &third
	if _, err := Compile(sc, larkbook(t)); err == nil || err.Error() != "code: client group g: the shares of the sites serving it sum to 0.8, not 1 (a 0.5, b 0.3)" {
		t.Errorf("error %v", err)
	}
}

// Sites take their TTL clamps and violators (their own or the
// scenario's); groups their diurnal profile; shares per group.
func TestCompileSitesAndGroups(t *testing.T) {
	sc := mustParse(t, "s.yaml", `
duration: 1d
bin: 10m
seed: 3
runs: 5
start: 2026-06-01T12:00:00Z
record: shop.example.com
ttl_violators: { fraction: 0.0874, extend_to: 1h }
clients:
  - name: a
    prefixes: [8.8.8.0/24]
    rate: 10
    diurnal: { trough: 0.3, peak: "18:30" }
  - name: b
    prefixes: [8.8.4.0/24, 8.8.5.0/24]
    rate: 20
resolvers:
  - name: one
    shares: { a: 0.4, b: 1 }
    ttl: { min: 30s, max: 5m }
  - name: two
    groups: [a]
    ttl_violators: { fraction: 1, extend_to: 2h }
`)
	m := mustCompile(t, sc, larkbook(t))
	if m.Runs != 5 || m.Seed != 3 || m.Bin != 10*time.Minute || m.Duration != 24*time.Hour || !m.Start.Equal(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("model runs %d seed %d bin %s duration %s start %s", m.Runs, m.Seed, m.Bin, m.Duration, m.Start)
	}
	if len(m.Groups) != 2 || m.Groups[0].Diurnal == nil || *m.Groups[0].Diurnal != (Diurnal{Trough: 0.3, Peak: 18*time.Hour + 30*time.Minute}) ||
		m.Groups[1].Diurnal != nil || m.Groups[1].Rate != 20 {
		t.Errorf("groups %+v", m.Groups)
	}
	one, two := m.Sites[0], m.Sites[1]
	if one.MinTTL != 30*time.Second || one.MaxTTL != 5*time.Minute || one.Violators != 0.0874 || one.ExtendTo != time.Hour {
		t.Errorf("site one %+v", one)
	}
	if two.MinTTL != 0 || two.Violators != 1 || two.ExtendTo != 2*time.Hour {
		t.Errorf("site two %+v", two)
	}
	// one: a's subnet at 0.4, b's two at 1; two: a's subnet at the 0.6 left.
	r0, r1 := m.Resolvers[0], m.Resolvers[1]
	if len(r0.Subnets) != 3 || r0.Share[0] != 0.4 || r0.Share[1] != 1 || r0.Share[2] != 1 || len(r1.Subnets) != 1 || r1.Share[0] < 0.6-1e-9 || r1.Share[0] > 0.6+1e-9 {
		t.Errorf("resolvers %+v", m.Resolvers)
	}
	for i, s := range m.Subnets {
		if want := []int{0, 1, 1}[i]; s.Group != want {
			t.Errorf("subnet %d in group %d, want %d", i, s.Group, want)
		}
	}
}
