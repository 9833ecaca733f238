package simulate

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/querylog"
)

// genKey is one cache entry of a made-up population: a resolver with k
// independent caches, its users asking at lambda q/s (Poisson, each query
// to a cache at random), from the ECS sources (weights) in a block of
// the given scope (-1: no ECS).
type genKey struct {
	res     string
	sources map[string]float64
	scope   int
	lambda  float64
	k       int
}

// genLog simulates the keys' caches over [t0, t0+span) with TTL ttl and
// writes the misses, as steer's query log writes them (querylog.Log), to
// a file; it returns the file's bytes. Each cache starts empty 20 TTLs
// before t0 so the window sees the stationary process. The log's first
// and last lines are another name, at t0 and t0+span, so its span is
// exactly span.
func genLog(t testing.TB, seed uint64, keys []genKey, t0 time.Time, span, ttl time.Duration) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var entries []querylog.Entry
	other := func(at time.Time) querylog.Entry {
		return querylog.Entry{Time: at, Client: netip.MustParseAddr("192.0.2.200"), Scope: -1, Name: "www.example.com.", Type: dns.TypeA, Transport: "udp"}
	}
	entries = append(entries, other(t0))
	T := ttl.Seconds()
	for _, k := range keys {
		res := netip.MustParseAddr(k.res)
		var srcs []netip.Prefix
		var cum []float64
		tot := 0.0
		for s, w := range k.sources {
			srcs = append(srcs, netip.MustParsePrefix(s))
			tot += w
			cum = append(cum, tot)
		}
		// Map iteration order is random: sort for a reproducible log.
		idx := make([]int, len(srcs))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return srcs[idx[a]].String() < srcs[idx[b]].String() })
		ps, cs := make([]netip.Prefix, len(srcs)), make([]float64, len(srcs))
		acc := 0.0
		for i, j := range idx {
			ps[i] = srcs[j]
			acc += k.sources[srcs[j].String()]
			cs[i] = acc
		}
		for c := 0; c < k.k; c++ {
			free := -20 * T // the cache is empty from here on
			for {
				miss := free + rng.ExpFloat64()/(k.lambda/float64(k.k))
				if miss >= span.Seconds() {
					break
				}
				free = miss + T
				if miss < 0 {
					continue
				}
				e := querylog.Entry{
					Time:      t0.Add(time.Duration(miss * float64(time.Second))),
					Client:    res,
					Scope:     -1,
					Name:      "shop.example.com.",
					Type:      dns.TypeA,
					Rule:      1,
					Pool:      "us-east",
					Answers:   []netip.Addr{netip.MustParseAddr("192.0.2.30")},
					Duration:  20 * time.Microsecond,
					Transport: "udp",
				}
				if len(ps) > 0 {
					u := rng.Float64() * acc
					i := sort.SearchFloat64s(cs, u)
					e.ECS = ps[min(i, len(ps)-1)]
					e.Scope = k.scope
				}
				entries = append(entries, e)
			}
		}
	}
	entries = append(entries, other(t0.Add(span)))
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Time.Before(entries[j].Time) })
	path := filepath.Join(t.TempDir(), "query.log")
	ql, err := querylog.Open(querylog.Options{Path: path, Sample: 1, Buffer: len(entries) + 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		ql.Write(&entries[i])
	}
	if err := ql.Close(); err != nil {
		t.Fatal(err)
	}
	if d := ql.Dropped(); d != 0 {
		t.Fatalf("the query log dropped %d entries", d)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var logT0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func findKey(t *testing.T, rep *LogReport, res, block string) LogKey {
	t.Helper()
	for _, k := range rep.Keys {
		b := ""
		if k.Block.IsValid() {
			b = k.Block.String()
		}
		if k.Resolver.String() == res && b == block {
			return k
		}
	}
	t.Fatalf("no key %s %q in the report:\n%s", res, block, rep.Text())
	return LogKey{}
}

// checkScenario checks what ParseScenario's validation asks of a
// population: names unique, every group served by sites whose shares sum
// to 1, rates and prefixes sound, duration a whole number of bins.
func checkScenario(t *testing.T, sc *Scenario) {
	t.Helper()
	if sc.Record == "" || sc.Duration <= 0 || sc.Bin <= 0 || sc.Duration%sc.Bin != 0 {
		t.Errorf("record %q, duration %v, bin %v", sc.Record, time.Duration(sc.Duration), time.Duration(sc.Bin))
	}
	if len(sc.Events) != 0 {
		t.Errorf("events %v", sc.Events)
	}
	groups := map[string]float64{}
	for _, g := range sc.Clients {
		if _, dup := groups[g.Name]; dup || g.Name == "" {
			t.Errorf("client group name %q empty or repeated", g.Name)
		}
		groups[g.Name] = 0
		if !(g.Rate > 0) || math.IsInf(g.Rate, 0) {
			t.Errorf("group %s: rate %v", g.Name, g.Rate)
		}
		if len(g.Prefixes) == 0 {
			t.Errorf("group %s: no prefixes", g.Name)
		}
		for _, p := range g.Prefixes {
			if pp, err := netip.ParsePrefix(p); err != nil || pp != pp.Masked() {
				t.Errorf("group %s: prefix %q: %v", g.Name, p, err)
			}
		}
	}
	sites := map[string]bool{}
	for _, s := range sc.Resolvers {
		if sites[s.Name] || s.Name == "" {
			t.Errorf("site name %q empty or repeated", s.Name)
		}
		sites[s.Name] = true
		if s.Share == nil || len(s.Groups) == 0 {
			t.Errorf("site %s: share %v groups %v", s.Name, s.Share, s.Groups)
			continue
		}
		for _, g := range s.Groups {
			if _, ok := groups[g]; !ok {
				t.Errorf("site %s serves unknown group %q", s.Name, g)
			}
			groups[g] += *s.Share
		}
		if s.Address != "" {
			_, e1 := netip.ParseAddr(s.Address)
			_, e2 := netip.ParsePrefix(s.Address)
			if e1 != nil && e2 != nil {
				t.Errorf("site %s: address %q", s.Name, s.Address)
			}
		}
	}
	for g, sum := range groups {
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("group %s: shares sum to %v", g, sum)
		}
	}
}

// TestFromLogInfersRates: a log made by simulating known caches gives
// back the users' rates within ±10 % (unsaturated keys), flags the
// saturated key, finds 3 caches behind the resolver that has 3, counts
// the bad lines, and yields a scenario that validates.
func TestFromLogInfersRates(t *testing.T) {
	const ttl = 30 * time.Second
	span := 48 * time.Hour
	keys := []genKey{
		// λT = 0.3: m = λ/1.3; the block is a /20 holding three /24 sources.
		{res: "192.0.2.1", sources: map[string]float64{"198.51.100.0/24": 0.5, "198.51.101.0/24": 0.3, "198.51.102.0/24": 0.2}, scope: 20, lambda: 0.01, k: 1},
		// λT = 1.5.
		{res: "192.0.2.1", sources: map[string]float64{"203.0.113.0/24": 1}, scope: 24, lambda: 0.05, k: 1},
		// λT = 30: mT = 0.97, saturated.
		{res: "198.18.0.1", sources: map[string]float64{"100.64.0.0/24": 1}, scope: 24, lambda: 1, k: 1},
		// Three caches, λT/k = 1: mT = 1.5 (impossible for one cache).
		{res: "198.18.5.9", sources: map[string]float64{"100.64.8.0/24": 1}, scope: 24, lambda: 0.1, k: 3},
	}
	data := genLog(t, 7, keys, logT0, span, ttl)
	// Three bad lines among the good ones: not JSON, a bad time, a bad
	// client; and a blank line, which is not bad.
	lines := bytes.SplitAfter(data, []byte("\n"))
	var buf bytes.Buffer
	for i, l := range lines {
		buf.Write(l)
		switch i {
		case 2:
			buf.WriteString("this is not json\n")
		case 10:
			buf.WriteString(`{"time":"yesterday","client":"192.0.2.1","name":"shop.example.com.","type":"A","pool":"us-east"}` + "\n")
		case 11:
			buf.WriteString("\n")
		case 20:
			buf.WriteString(`{"time":"2026-03-02T01:00:00Z","client":"resolver","name":"shop.example.com.","type":"A","pool":"us-east"}` + "\n")
		}
	}
	start := time.Now()
	sc, rep, err := FromLog(&buf, FromLogOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FromLog took %v\n%s", time.Since(start), rep.Text())

	if rep.Record != "shop.example.com." || rep.Type != "A" || rep.Span != span {
		t.Errorf("record %q %q span %v", rep.Record, rep.Type, rep.Span)
	}
	if rep.Bad != 3 || len(rep.BadLines) != 3 || rep.BadLines[0].Line != 4 || rep.BadLines[1].Line != 13 || rep.BadLines[2].Line != 25 {
		t.Errorf("bad lines %d %+v, want 3 at lines 4, 13, 25 (a blank line counts as a line)", rep.Bad, rep.BadLines)
	}
	text := rep.Text()
	for _, want := range []string{"3 unparseable (line 4: not a JSON object", `line 13: time "yesterday" is not RFC 3339`, `line 25: client "resolver" is not an address`} {
		if !strings.Contains(text, want) {
			t.Errorf("the report does not say %q", want)
		}
	}
	if len(rep.Keys) != 4 {
		t.Fatalf("%d keys, want 4", len(rep.Keys))
	}
	within := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.10*want {
			t.Errorf("%s: λ̂ %.5f, want %.5f ± 10 %%", name, got, want)
		} else {
			t.Logf("%s: λ̂ %.5f, true %.5f (%+.1f %%)", name, got, want, 100*(got/want-1))
		}
	}
	k1 := findKey(t, rep, "192.0.2.1", "198.51.96.0/20")
	within("λT=0.3", k1.Rate, 0.01)
	if k1.Sources != 3 || k1.Saturated || k1.Caches != 1 || k1.Site != "res-192.0.2.0-24" {
		t.Errorf("key 1: %+v", k1)
	}
	k2 := findKey(t, rep, "192.0.2.1", "203.0.113.0/24")
	within("λT=1.5", k2.Rate, 0.05)
	if k2.Saturated || k2.Caches != 1 {
		t.Errorf("key 2: %+v", k2)
	}
	k3 := findKey(t, rep, "198.18.0.1", "100.64.0.0/24")
	if !k3.Saturated || k3.Caches != 1 || math.Abs(k3.Rate-9/ttl.Seconds()) > 1e-9 || k3.Rate > 1 {
		t.Errorf("key 3 (λT = 30): %+v, want saturated with the lower bound 9/T = 0.3", k3)
	}
	k4 := findKey(t, rep, "198.18.5.9", "100.64.8.0/24")
	if k4.Caches != 3 {
		t.Errorf("key 4: %d caches, want 3 (%+v)", k4.Caches, rep.Resolvers)
	}
	within("3 caches", k4.Rate, 0.1)
	if k4.Saturated {
		t.Errorf("key 4 saturated: %+v", k4)
	}
	if rep.Saturated != 1 || !strings.Contains(text, "1 resolver saturated") || !strings.Contains(text, "their rates are lower bounds") {
		t.Errorf("saturated %d; report:\n%s", rep.Saturated, text)
	}
	if strings.Contains(text, "no ECS fields") {
		t.Errorf("a log with ECS says it has none:\n%s", text)
	}

	// The scenario.
	checkScenario(t, sc)
	if sc.Record != "shop.example.com" || sc.Type != "A" || time.Duration(sc.Duration) != span || time.Duration(sc.Bin) != time.Minute {
		t.Errorf("scenario %q %q %v %v", sc.Record, sc.Type, time.Duration(sc.Duration), time.Duration(sc.Bin))
	}
	site := func(name string) ResolverSite {
		for _, s := range sc.Resolvers {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no site %s in %+v", name, sc.Resolvers)
		return ResolverSite{}
	}
	s1 := site("res-192.0.2.0-24")
	if s1.Address != "192.0.2.1" || s1.Count > 1 || s1.Caches > 1 || s1.ECS == nil || !s1.ECS.Enabled || s1.ECS.V4 != 24 {
		t.Errorf("site 1: %+v", s1)
	}
	if s := site("res-198.18.5.0-24"); s.Caches != 3 {
		t.Errorf("the 3-cache site: %+v", s)
	}
	// The users of the /20 block: three /24s with 0.5, 0.3, 0.2 of 0.01.
	rate := map[string]float64{}
	for _, g := range sc.Clients {
		for _, p := range g.Prefixes {
			rate[p] += g.Rate / float64(len(g.Prefixes))
		}
	}
	total := 0.0
	for _, r := range rate {
		total += r
	}
	if math.Abs(total-rep.UserRate) > 1e-5*total { // the file has 6 digits
		t.Errorf("the groups' rates sum to %v, the keys' to %v", total, rep.UserRate)
	}
	if r := rate["198.51.100.0/24"]; r < 0.004 || r > 0.006 {
		t.Errorf("198.51.100.0/24: %v q/s, want about 0.005 (%v)", r, rate)
	}
	if r := rate["198.51.100.0/24"] + rate["198.51.101.0/24"] + rate["198.51.102.0/24"]; math.Abs(r-k1.Rate) > 0.3*k1.Rate {
		t.Errorf("the /20's subnets: %v q/s, its key %v", r, k1.Rate)
	}
	y := FromLogYAML(sc, rep)
	t.Logf("scenario:\n%s", y)
	for _, want := range []string{"duration: 48h\n", "bin: 1m\n", `record: "shop.example.com"`, `"198.51.100.0/24"`, "caches: 3\n", "ecs: {v4: 24, v6: 56, honors_scope: true}"} {
		if !bytes.Contains(y, []byte(want)) {
			t.Errorf("the scenario file has no %q", want)
		}
	}
	m := mustCompile(t, sc, larkbook(t))
	if len(m.Resolvers) != 3 || len(m.Subnets) != 6 {
		t.Errorf("compiled: %d resolvers, %d subnets, want 3 and 6", len(m.Resolvers), len(m.Subnets))
	}
	for _, r := range m.Resolvers {
		if want := map[string]int{"198.18.5.9": 3}[r.Addr.String()]; r.Caches != max(want, 1) {
			t.Errorf("resolver %s: %d caches", r.Addr, r.Caches)
		}
	}
	if sc.File != FromLogFile || sc.Line == 0 || sc.Resolvers[0].Line == 0 {
		t.Errorf("the scenario was not read back from its file: %q line %d", sc.File, sc.Line)
	}
}

// TestFromLogWithoutECS: a log without ECS models each resolver's users
// as its /24, groups the resolvers of one /24 into one site, and says
// what it could not see.
func TestFromLogWithoutECS(t *testing.T) {
	const ttl = 60 * time.Second
	keys := []genKey{
		{res: "10.1.0.1", lambda: 0.02, k: 1, scope: -1},
		{res: "10.1.0.2", lambda: 0.01, k: 1, scope: -1},
		{res: "10.2.0.1", lambda: 0.005, k: 1, scope: -1},
		{res: "2001:db8:5::53", lambda: 0.01, k: 1, scope: -1},
	}
	data := genLog(t, 3, keys, logT0, 24*time.Hour, ttl)
	sc, rep, err := FromLog(bytes.NewReader(data), FromLogOptions{TTL: ttl, Record: "SHOP.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	text := rep.Text()
	t.Logf("\n%s\n%s", text, FromLogYAML(sc, rep))
	if !strings.Contains(text, "no ECS fields in the log: every resolver's users are modelled as one subnet at the resolver's address") || !strings.Contains(text, "the split between clients behind one resolver is unknown") {
		t.Errorf("no 'no ECS' note:\n%s", text)
	}
	if !regexp.MustCompile(`\nres-10\.1\.0\.0-24 +2 +2 +1 +no `).MatchString(text) {
		t.Errorf("the sites table does not show res-10.1.0.0-24 with 2 resolvers, 2 keys, 1 cache, no ECS:\n%s", text)
	}
	if !strings.Contains(text, "the sample rate is not in the log") {
		t.Errorf("no note on the sample rate:\n%s", text)
	}
	checkScenario(t, sc)
	if len(sc.Resolvers) != 3 {
		t.Fatalf("%d sites, want 3 (10.1.0.0/24 with 2 resolvers, 10.2.0.0/24, 2001:db8:5::/48)", len(sc.Resolvers))
	}
	byName := map[string]ResolverSite{}
	for _, s := range sc.Resolvers {
		byName[s.Name] = s
		if s.ECS != nil {
			t.Errorf("site %s sends ECS: %+v", s.Name, s.ECS)
		}
	}
	// The two resolvers of 10.1.0.0/24: one site, a group each (Compile
	// deals a site's subnets to its resolvers in turn).
	if s := byName["res-10.1.0.0-24"]; s.Count != 2 || s.Address != "10.1.0.1" || strings.Join(s.Groups, " ") != "users-10.1.0.1 users-10.1.0.2" {
		t.Errorf("res-10.1.0.0-24: %+v", s)
	}
	if s := byName["res-2001:db8:5::-48"]; s.Address != "2001:db8:5::53" {
		t.Errorf("the v6 site: %+v (sites %v)", s, byName)
	}
	groups := map[string]ClientGroup{}
	for _, g := range sc.Clients {
		groups[g.Name] = g
	}
	for name, rate := range map[string]float64{"users-10.1.0.1": 0.02, "users-10.1.0.2": 0.01, "users-res-10.2.0.0-24": 0.005} {
		g := groups[name]
		if len(g.Prefixes) != 1 || !strings.HasPrefix(g.Prefixes[0], "10.") || !strings.HasSuffix(g.Prefixes[0], ".0/24") || math.Abs(g.Rate-rate) > 0.2*rate {
			t.Errorf("%s: %+v, want one /24 at about %g q/s", name, g, rate)
		}
	}
	// Compiled against the demo configuration: each resolver serves its
	// own users, at its address.
	m := mustCompile(t, sc, larkbook(t))
	if len(m.Resolvers) != 4 {
		t.Fatalf("%d resolvers compiled, want 4: %+v", len(m.Resolvers), m.Resolvers)
	}
	for _, r := range m.Resolvers {
		if len(r.Subnets) != 1 || r.Share[0] != 1 {
			t.Errorf("resolver %s serves %v (shares %v), want one subnet", r.Addr, r.Subnets, r.Share)
			continue
		}
		g := m.Groups[m.Subnets[r.Subnets[0]].Group]
		if want := "users-" + r.Addr.String(); strings.HasPrefix(r.Addr.String(), "10.1.") && g.Name != want {
			t.Errorf("resolver %s serves %s, want %s", r.Addr, g.Name, want)
		}
		if !m.Subnets[r.Subnets[0]].Prefix.Contains(r.Addr) {
			t.Errorf("resolver %s serves %s, not its own /24 (/56)", r.Addr, m.Subnets[r.Subnets[0]].Prefix)
		}
	}
	if g := groups["users-res-2001:db8:5::-48"]; len(g.Prefixes) != 1 || g.Prefixes[0] != "2001:db8:5::/56" {
		t.Errorf("users of the v6 resolver: %+v", g)
	}
}

// TestFromLogErrors: what FromLog refuses, and how it says so.
func TestFromLogErrors(t *testing.T) {
	data := genLog(t, 1, []genKey{{res: "10.1.0.1", lambda: 0.02, k: 1, scope: -1}}, logT0, time.Hour, time.Minute)
	cases := []struct {
		name string
		log  string
		o    FromLogOptions
		want []string
	}{
		{"no TTL", string(data), FromLogOptions{}, []string{"the TTL of shop.example.com. is not in the log: give --ttl"}},
		{"no such record", string(data), FromLogOptions{TTL: time.Minute, Record: "api.example.com"}, []string{"no entry for api.example.com. in the log; names seen: shop.example.com. (", "steered), www.example.com. (2)"}},
		{"nothing steered", `{"time":"2026-03-02T00:00:00Z","client":"10.0.0.1","name":"www.example.com.","type":"A","rcode":"NOERROR"}` + "\n", FromLogOptions{TTL: time.Minute}, []string{"no steered name in the log", "give --record", "www.example.com. (1)"}},
		{"one instant", `{"time":"2026-03-02T00:00:00Z","client":"10.0.0.1","name":"shop.example.com.","type":"A","pool":"x"}` + "\n", FromLogOptions{TTL: time.Minute}, []string{"the log spans no time"}},
		{"empty", "", FromLogOptions{TTL: time.Minute}, []string{"the log is empty"}},
		{"no address query", `{"time":"2026-03-02T00:00:00Z","client":"10.0.0.1","name":"shop.example.com.","type":"HTTPS","pool":"x"}` + "\n" +
			`{"time":"2026-03-02T00:01:00Z","client":"10.0.0.1","name":"shop.example.com.","type":"HTTPS","pool":"x"}` + "\n", FromLogOptions{TTL: time.Minute}, []string{"no A or AAAA query for shop.example.com. in the log (HTTPS (2))"}},
		{"all bad", "x\ny\n", FromLogOptions{TTL: time.Minute}, []string{"no parseable entry in 2 lines", "line 1: not a JSON object", "line 2:"}},
		{"bad sample", string(data), FromLogOptions{TTL: time.Minute, Sample: 2}, []string{"sample 2 out of range"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := FromLog(strings.NewReader(c.log), c.o)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestFromLogSampled: a log that keeps half the queries, read with
// Sample 0.5, gives the same rates.
func TestFromLogSampled(t *testing.T) {
	const ttl = 30 * time.Second
	data := genLog(t, 11, []genKey{{res: "192.0.2.1", sources: map[string]float64{"203.0.113.0/24": 1}, scope: 24, lambda: 0.02, k: 1}}, logT0, 96*time.Hour, ttl)
	rng := rand.New(rand.NewPCG(5, 5))
	var kept bytes.Buffer
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		if i == 0 || i >= len(lines)-2 || rng.Float64() < 0.5 { // keep the span's ends
			kept.Write(l)
		}
	}
	kept.WriteString(`{"time":"2026-03-02T01:00:00Z","client":"192.0.2.1","name":"shop.example.com.","type":"AAAA","pool":"us-east"}` + "\n")
	_, rep, err := FromLog(&kept, FromLogOptions{TTL: ttl, Sample: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	k := findKey(t, rep, "192.0.2.1", "203.0.113.0/24")
	if math.Abs(k.Rate-0.02) > 0.1*0.02 || k.Caches != 1 {
		t.Errorf("sampled: %+v, want λ̂ 0.02 ± 10 %% and one cache", k)
	}
	if !strings.Contains(rep.Text(), "only A queries are modelled; the log also has AAAA (1) for shop.example.com.") {
		t.Errorf("no note on the AAAA query:\n%s", rep.Text())
	}
	if strings.Contains(rep.Text(), "the sample rate is not in the log") {
		t.Errorf("the note on the sample rate with a sample given")
	}
}

// TestFromLogGap: six silent hours in a day's log (a node down, a
// rotated file missing) are reported; an ordinary log has none.
func TestFromLogGap(t *testing.T) {
	const ttl = 30 * time.Second
	data := genLog(t, 4, []genKey{{res: "10.1.0.1", lambda: 0.05, k: 1, scope: -1}}, logT0, 24*time.Hour, ttl)
	var kept bytes.Buffer
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		var e struct{ Time time.Time }
		if json.Unmarshal(l, &e) == nil && !e.Time.Before(logT0.Add(6*time.Hour)) && e.Time.Before(logT0.Add(12*time.Hour)) {
			continue
		}
		kept.Write(l)
	}
	_, rep, err := FromLog(&kept, FromLogOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if text := rep.Text(); !strings.Contains(text, "the log is silent for 6h0m") || !strings.Contains(text, "(25 % of its span)") {
		t.Errorf("no note on the silence (gap %v from %v):\n%s", rep.Gap, rep.GapStart, text)
	}
	_, rep, err = FromLog(bytes.NewReader(data), FromLogOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rep.Text(), "silent") {
		t.Errorf("a log without a gap has one (%v):\n%s", rep.Gap, rep.Text())
	}
}
