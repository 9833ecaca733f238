package policy_test

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/policy"
)

// issueTree is issue 17's example: Mumbai a failover pair, Virginia a
// sticky canary split, Europe by rule, everyone else by geoproximity
// over the three regions.
const issueTree = `
  - name: tree.example.com
    pools:
      bom-1:      { address: 203.0.113.10 }
      bom-2:      { address: 203.0.113.11 }
      fra:        { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      iad:        { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 } }
      iad-canary: { address: 192.0.2.31 }
    groups:
      mumbai:   { failover: [bom-1, bom-2], location: { lat: 19.08, lon: 72.88 } }
      virginia: { split: [{ pool: iad, weight: 95 }, { pool: iad-canary, weight: 5 }], sticky: client_subnet, site: iad }
    rules:
      - match: { continent: EU }
        pool: fra
      - default: { by: geoproximity, fallback: [mumbai, fra, virginia] }
`

const (
	bom1 = uint64(1) << iota
	bom2
	fra
	iad
	iadCanary
)

func decideUp(r *policy.Record, client string, up uint64) policy.Decision {
	q := query(r, client, 28, "")
	q.Up = up
	return r.Decide(q)
}

func TestGroupTree(t *testing.T) {
	r := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, issueTree)).Get("tree.example.com.")
	if len(r.Groups) != 2 || r.Groups[0].Name != "mumbai" || r.Groups[1].Depth != 1 {
		t.Fatalf("groups %+v", r.Groups)
	}
	const all = bom1 | bom2 | fra | iad | iadCanary
	for _, tt := range []struct {
		what, client string
		up, want     uint64
	}{
		{"Pune: the Mumbai group, its primary", "192.0.2.0", all, bom1},
		{"Pune, bom-1 down: the group's secondary", "192.0.2.0", all &^ bom1, bom2},
		{"Pune, Mumbai down: the next region by distance", "192.0.2.0", all &^ (bom1 | bom2), fra},
		{"Berlin: the EU rule", "192.0.2.48", all, fra},
		{"Berlin, fra down: next rule, the nearest usable region", "192.0.2.48", all &^ fra, bom1},
		{"Ashburn, iad down: the canary takes every subnet", "192.0.2.128", all &^ iad, iadCanary},
		{"Ashburn, Virginia down: Frankfurt", "192.0.2.128", all &^ (iad | iadCanary), fra},
		{"Sydney, nothing but the canary", "192.0.2.208", iadCanary, iadCanary},
	} {
		if d := decideUp(r, tt.client, tt.up); d.Pools != tt.want || d.AllDown {
			t.Errorf("%s: %s (%+v), want %s", tt.what, poolNames(r, d.Pools), d, poolNames(r, tt.want))
		}
	}
	// Mountain View is nearest Virginia: the sticky split inside it
	// decides, by the client's subnet (its source prefix, here a /32),
	// and about 5 % of the subnets get the canary.
	canary := 0
	for i := range 256 {
		a := netip.AddrFrom4([4]byte{8, 8, 8, byte(i)})
		q := query(r, a.String(), 32, "")
		q.Up = all
		d := r.Decide(q)
		if d.Pools != iad && d.Pools != iadCanary {
			t.Fatalf("Mountain View %s: %s", a, poolNames(r, d.Pools))
		}
		if d.Pools == iadCanary {
			canary++
		}
		if d2 := r.Decide(q); d2.Pools != d.Pools {
			t.Fatalf("sticky split not sticky for %s", a)
		}
		if d.Scope != 32 {
			t.Errorf("Mountain View %s: scope %d; the sticky split hashed the whole /32", a, d.Scope)
		}
	}
	if canary == 0 || canary > 40 {
		t.Errorf("canary took %d of 256 /32s, want about 5 %%", canary)
	}
}

// Route 53's examples: geolocation → failover (primary/secondary) →
// weighted, and latency → weighted → endpoints.
func TestRoute53Trees(t *testing.T) {
	r := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: r53.example.com
    pools:
      eu-a:  { address: 198.51.100.1 }
      eu-b:  { address: 198.51.100.2 }
      eu-dr: { address: 198.51.100.3 }
      us-1:  { address: 192.0.2.1 }
      us-2:  { address: 192.0.2.2 }
    groups:
      eu-primary:   { split: [{ pool: eu-a, weight: 70 }, { pool: eu-b, weight: 30 }] }
      eu-secondary: { pool: eu-dr }
      europe:       { failover: [eu-primary, eu-secondary] }
      us:           { split: [{ pool: us-1, weight: 1 }, { pool: us-2, weight: 1 }], location: { lat: 38.95, lon: -77.45 } }
      eu-latency:   { failover: [europe], location: { lat: 50.11, lon: 8.68 } }
    rules:
      - match: { continent: EU }
        pool: europe
      - default: { by: latency, fallback: [us, eu-latency] }
`)).Get("r53.example.com.")
	const (
		euA = uint64(1) << iota
		euB
		euDR
		us1
		us2
		all = euA | euB | euDR | us1 | us2
	)
	seen := map[uint64]int{}
	for range 400 {
		seen[decideUp(r, "192.0.2.48", all).Pools]++
	}
	if seen[euA] == 0 || seen[euB] == 0 || seen[euA]+seen[euB] != 400 || seen[euA] < seen[euB] {
		t.Errorf("Berlin: the primary's 70/30 split gave %v", seen)
	}
	for _, tt := range []struct {
		what, client string
		up, want     uint64
	}{
		{"Berlin, eu-a down: the split's other pool", "192.0.2.48", all &^ euA, euB},
		{"Berlin, the primary down: the secondary", "192.0.2.48", all &^ (euA | euB), euDR},
		{"Berlin, Europe down: next rule, latency's fallback order", "192.0.2.48", us2, us2},
		{"Ashburn, no latency map: fallback order, us first", "192.0.2.128", us1, us1},
		{"Ashburn, us down: the Europe tree by latency's fallback", "192.0.2.128", euDR | euB, euB},
	} {
		if d := decideUp(r, tt.client, tt.up); d.Pools != tt.want {
			t.Errorf("%s: %s (%+v), want %s", tt.what, poolNames(r, d.Pools), d, poolNames(r, tt.want))
		}
	}
	if !r.HasLatency() {
		t.Error("a by: latency rule over groups is a latency record")
	}
}

// A tree that says the same as a flat rule decides the same, with the
// same ECS scope, for every client: nesting costs no scope.
func TestNestedScopeIsExact(t *testing.T) {
	flat := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: flat.example.com
    pools:
      ap: { address: 203.0.113.10, location: { lat: 19.08, lon: 72.88 } }
      eu: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      us: { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: DE }
        pool: eu
      - default: { by: geoproximity, fallback: [ap, eu, us] }
`)).Get("flat.example.com.")
	nested := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: nested.example.com
    pools:
      ap: { address: 203.0.113.10, location: { lat: 19.08, lon: 72.88 } }
      eu: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      us: { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 } }
    groups:
      g-ap: { failover: [ap] }
      g-eu: { failover: [eu] }
      g-us: { pool: us }
      top:  { by: geoproximity, fallback: [g-ap, g-eu, g-us] }
    rules:
      - match: { country: DE }
        pool: g-eu
      - default: { by: first, fallback: [top] }
`)).Get("nested.example.com.")
	rnd := rand.New(rand.NewPCG(7, 7))
	points := []string{"192.0.2.0", "192.0.2.48", "192.0.2.128", "192.0.2.208", "203.0.113.64", "49.36.1.1", "8.8.8.8", "1.1.1.1", "2001:db8:4::1", "2409:4000::1"}
	for range 3000 {
		var a netip.Addr
		if rnd.IntN(3) == 0 {
			a = netip.MustParseAddr(points[rnd.IntN(len(points))])
		} else {
			a = netip.AddrFrom4([4]byte{byte(rnd.IntN(256)), byte(rnd.IntN(256)), byte(rnd.IntN(256)), byte(rnd.IntN(256))})
		}
		for _, up := range []uint64{0b111, 0b110, 0b101, 0b011, 0b100} {
			bits := 24
			if a.Is6() {
				bits = 48
			}
			qf := query(flat, a.String(), bits, "")
			qf.Up = up
			qn := query(nested, a.String(), bits, "")
			qn.Up = up
			df, dn := flat.Decide(qf), nested.Decide(qn)
			if df.Pools != dn.Pools || df.Scope != dn.Scope || df.AllDown != dn.AllDown {
				t.Fatalf("%s up %03b: flat %s scope %d, nested %s scope %d", a, up, poolNames(flat, df.Pools), df.Scope, poolNames(nested, dn.Pools), dn.Scope)
			}
		}
	}
}

func TestGroupErrors(t *testing.T) {
	for _, tt := range []struct {
		what, yaml, marker, want string
	}{
		{"cycle", `
      a: { failover: [b, x] }   # MARK
      b: { failover: [c] }
      c: { failover: [a] }
    rules:
      - default: { pool: a }`, "MARK", "group a refers to itself: a → b → c → a"},
		{"unknown member", `
      a: { failover: [x, nope] }   # MARK
    rules:
      - default: { pool: a }`, "MARK", `unknown pool or group "nope" (pools: x, y; groups: a)`},
		{"unused", `
      a: { failover: [x] }
      b: { failover: [y] }   # MARK
    rules:
      - default: { pool: a }`, "MARK", "group b is used by no rule or group"},
		{"name of a pool", `
      x: { failover: [y] }   # MARK
    rules:
      - default: { pool: x }`, "MARK", "group x has the name of a pool"},
		{"too deep", `
      g1: { pool: g2 }
      g2: { pool: g3 }
      g3: { pool: g4 }
      g4: { pool: g5 }
      g5: { pool: g6 }
      g6: { pool: g7 }
      g7: { pool: g8 }
      g8: { pool: x }
    rules:
      - default: { pool: g1 }   # MARK`, "MARK", "rule 1's tree is 9 levels deep; at most 8"},
		{"bad location", `
      a: { failover: [x], location: { lat: 91, lon: 0 } }   # MARK
    rules:
      - default: { pool: a }`, "MARK", "group a: location 91,0 is not a latitude and longitude"},
	} {
		t.Run(tt.what, func(t *testing.T) {
			yaml := configYAML(t, []string{cityDB}, `
  - name: g.example.com
    pools:
      x: { address: 192.0.2.1 }
      y: { address: 192.0.2.2 }
    groups:`+tt.yaml+"\n")
			_, _, err := build(t, yaml)
			line := lineOf(t, yaml, tt.marker)
			found := false
			for _, p := range problems(t, err) {
				if p.Line == line && strings.Contains(p.Msg, tt.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("no error at line %d containing %q; got:\n%v", line, tt.want, err)
			}
		})
	}
}

func TestGroupNeverChosenWarning(t *testing.T) {
	yaml := configYAML(t, []string{cityDB}, `
  - name: w.example.com
    pools:
      x: { address: 192.0.2.1 }
      y: { address: 192.0.2.2 }
    groups:
      both: { failover: [x, y] }
      pair: { failover: [both, y] }   # MARK
    rules:
      - default: { pool: pair }
`)
	_, warns, err := build(t, yaml)
	if err != nil {
		t.Fatal(err)
	}
	line := lineOf(t, yaml, "MARK")
	for _, w := range warns {
		if w.Line == line && strings.Contains(w.Msg, "group pair: y can never be chosen") {
			return
		}
	}
	t.Errorf("no warning at line %d; got %v", line, warns)
}

// A named policy may define groups over the pool names its records give;
// each record binds them to its own pools.
func TestPolicyGroups(t *testing.T) {
	yaml := configYAML(t, []string{cityDB}, `
  - name: a.example.com
    policy: regional
    pools:
      p1: { address: 192.0.2.1 }
      p2: { address: 192.0.2.2 }
  - name: b.example.com
    policy: regional
    pools:
      p1: { address: 198.51.100.1 }
      p2: { address: 198.51.100.2 }
policies:
  regional:
    groups:
      pair: { failover: [p1, p2] }
    rules:
      - default: { pool: pair }
`)
	table := mustBuild(t, yaml)
	for _, name := range []string{"a.example.com.", "b.example.com."} {
		r := table.Get(name)
		if d := decideUp(r, "192.0.2.48", 0b10); d.Pools != 0b10 {
			t.Errorf("%s: %s", name, poolNames(r, d.Pools))
		}
	}
	if table.Shared != 1 {
		t.Errorf("records sharing the policy compiled %d partitions (shared %d)", table.Compiled, table.Shared)
	}
}

func TestExplainTree(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, issueTree))
	r := table.Get("tree.example.com.")
	const all = bom1 | bom2 | fra | iad | iadCanary
	q := query(r, "192.0.2.0", 28, "") // Pune
	q.Up = all &^ bom1
	d := r.Decide(q)
	info := geo.Info{Country: "IN", Continent: "AS", Lat: 18.52, Lon: 73.86, HasLocation: true}
	live := policy.NewLive(table, policy.LiveOptions{})
	steps := live.ExplainTree(r, q, &d, &info, time.Now())
	if len(steps) != 2 {
		t.Fatalf("%d steps: %+v", len(steps), steps)
	}
	if s := steps[0]; s.Node != "rule 2" || s.Chosen != "mumbai" || !strings.Contains(s.Candidates[0].State, "km") {
		t.Errorf("level 1: %+v", s)
	}
	if s := steps[1]; s.Node != "group mumbai" || s.Chosen != "bom-2" || s.Candidates[0].Usable || !strings.Contains(s.Why, "first usable") {
		t.Errorf("level 2: %+v", s)
	}
	q.Up = all &^ (bom1 | bom2)
	d = r.Decide(q)
	steps = live.ExplainTree(r, q, &d, &info, time.Now())
	if len(steps) != 1 || steps[0].Chosen != "fra" || !strings.HasPrefix(steps[0].Candidates[0].State, "unusable: no usable pool under it") {
		t.Errorf("Mumbai down: %+v", steps)
	}
}

// Route 53's "latency → weighted → endpoints": the latency map picks a
// region (a group, measured under its site), the region's weighted split
// picks the endpoint; a region whose endpoints are all down is skipped
// for the next one by RTT.
func TestLatencyOverGroups(t *testing.T) {
	e := newLatEnv(t, `
  - name: latg.example.com
    pools:
      bom-1: { address: 203.0.113.10 }
      bom-2: { address: 203.0.113.11 }
      fra-1: { address: 198.51.100.20 }
      fra-2: { address: 198.51.100.21 }
      iad-1: { address: 192.0.2.30 }
    groups:
      mumbai:    { split: [{ pool: bom-1, weight: 1 }, { pool: bom-2, weight: 1 }], site: bom }
      frankfurt: { split: [{ pool: fra-1, weight: 1 }, { pool: fra-2, weight: 1 }], site: fra }
      virginia:  { pool: iad-1, site: iad }
    rules:
      - default: { by: latency, fallback: [virginia, frankfurt, mumbai] }
`, latency.Options{})
	const (
		b1 = uint64(1) << iota
		b2
		f1
		f2
		i1
	)
	if sites := e.table.LatencySites(); !sites["bom"] || !sites["fra"] || !sites["iad"] || len(sites) != 3 {
		t.Fatalf("latency sites %v: the groups' sites", sites)
	}
	e.update("192.0.2.32/28,bom,40", "192.0.2.32/28,fra,150", "192.0.2.32/28,iad,230")
	seen := map[uint64]int{}
	for range 200 {
		d := e.decide("192.0.2.32", 28, ^uint64(0))
		seen[d.Pools]++
		if d.Scope != 28 {
			t.Fatalf("scope %d", d.Scope)
		}
	}
	if seen[b1] == 0 || seen[b2] == 0 || seen[b1]+seen[b2] != 200 {
		t.Errorf("Guwahati by latency: %v, want the Mumbai split", seen)
	}
	if d := e.decide("192.0.2.32", 28, ^(b1 | b2)); d.Pools != f1 && d.Pools != f2 {
		t.Errorf("Mumbai down: %s, want the Frankfurt split (next by RTT)", poolNames(e.r, d.Pools))
	}
	if d := e.decide("192.0.2.32", 28, i1); d.Pools != i1 {
		t.Errorf("only Virginia: %s", poolNames(e.r, d.Pools))
	}
	if d := e.decide("192.0.2.208", 28, ^uint64(0)); d.Pools != i1 {
		t.Errorf("Sydney, not measured and no location: %s, want the fallback order's first (virginia)", poolNames(e.r, d.Pools))
	}
}

// TestStableDecision: a stable decision (Query.Stable, as a transfer's
// exported fallback is decided) takes a split's heaviest usable member,
// ties by name, at the top level and inside a group, instead of
// drawing; AppendStable gives the first addresses in the record's
// order under a multivalue limit.
func TestStableDecision(t *testing.T) {
	tbl := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: split.example.com
    pools:
      b: { address: 192.0.2.2 }
      a: { address: 192.0.2.1 }
      c: { address: 192.0.2.3 }
    rules:
      - default: { split: [{ pool: b, weight: 40 }, { pool: a, weight: 40 }, { pool: c, weight: 20 }] }
  - name: nested.example.com
    pools:
      x: { address: 198.51.100.1 }
      y: { address: 198.51.100.2 }
      z: { address: 198.51.100.3 }
    groups:
      g: { split: [{ pool: x, weight: 10 }, { pool: y, weight: 90 }] }
    rules:
      - default: { split: [{ pool: g, weight: 70 }, { pool: z, weight: 30 }] }
  - name: multi.example.com
    pools:
      p: { addresses: [203.0.113.1, 203.0.113.2] }
      q: { addresses: [203.0.113.3, 203.0.113.4] }
    rules:
      - default: { multivalue: 3 }
`))
	stable := func(name string, up uint64) (policy.Decision, *policy.Record) {
		r := tbl.Get(name)
		q := query(r, "0.0.0.0", 32, "")
		q.Up, q.Stable = up, true
		return r.Decide(q), r
	}
	for i := range 50 {
		if d, r := stable("split.example.com.", ^uint64(0)); poolNames(r, d.Pools) != "a" {
			t.Fatalf("try %d: split exported %s, want a (a and b tie at 40: a by name)", i, poolNames(r, d.Pools))
		}
		if d, r := stable("split.example.com.", ^uint64(0)&^(1<<1)); poolNames(r, d.Pools) != "b" {
			t.Fatalf("try %d, a down: %s, want b", i, poolNames(r, d.Pools))
		}
		if d, r := stable("nested.example.com.", ^uint64(0)); poolNames(r, d.Pools) != "y" {
			t.Fatalf("try %d: nested split exported %s, want y (group g, then its heaviest)", i, poolNames(r, d.Pools))
		}
		if d, r := stable("nested.example.com.", 1<<2); poolNames(r, d.Pools) != "z" {
			t.Fatalf("try %d, only z up: %s", i, poolNames(r, d.Pools))
		}
		d, r := stable("multi.example.com.", ^uint64(0))
		var got []string
		for _, rr := range r.AppendStable(nil, &d, 1, nil) {
			got = append(got, strings.Fields(rr.String())[4])
		}
		if strings.Join(got, " ") != "203.0.113.1 203.0.113.2 203.0.113.3" {
			t.Fatalf("try %d: multivalue exported %v, want the first three in order", i, got)
		}
	}
}

// TestPoolIndexIsPosition: a record's pool i has Index i, and groups
// number after the pools (a reuse, reuse.go, replaces pools in place).
// AppendWire reads the pools a decision chose by their bits' positions.
func TestPoolIndexIsPosition(t *testing.T) {
	yaml := configYAML(t, []string{cityDB, asnDB}, issueTree+larkbookRecord)
	check := func(table *policy.Table) {
		t.Helper()
		for _, r := range table.Records {
			for i, p := range r.Pools {
				if p.Index != i {
					t.Errorf("%s: pool %s at %d has Index %d", r.Name, p.Name, i, p.Index)
				}
			}
			for _, g := range r.Groups {
				if g.Index < len(r.Pools) {
					t.Errorf("%s: group %s has Index %d, among the pools'", r.Name, g.Name, g.Index)
				}
			}
		}
	}
	table := mustBuild(t, yaml)
	check(table)
	if len(table.Records) < 2 || len(table.Get("tree.example.com.").Groups) == 0 {
		t.Fatal("the test's records did not build")
	}
}
