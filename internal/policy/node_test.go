package policy_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/policy"
)

// nodeRecords steer by the answering node's identity, and by distance
// and continent for clients steering cannot place.
const nodeRecords = `
  - name: by-node.example.com
    pools:
      fra: { address: 198.51.100.20 }
      bom: { address: 203.0.113.10 }
      syd: { address: 192.0.2.40 }
    rules:
      - match: { node: [fra-1, ams-1] }
        pool: fra
      - match: { node_region: ap }
        pool: bom
      - default: { pool: syd }
  - name: near.example.com
    pools:
      fra: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      bom: { address: 203.0.113.10, location: { lat: 19.08, lon: 72.88 } }
      syd: { address: 192.0.2.40, location: { lat: -33.87, lon: 151.21 } }
    rules:
      - default: { by: geoproximity }
  - name: continent.example.com
    pools:
      fra: { address: 198.51.100.20 }
      bom: { address: 203.0.113.10 }
      syd: { address: 192.0.2.40 }
      internal: { address: 192.0.2.99 }
    rules:
      - match: { cidr: 10.0.0.0/8, continent: EU }
        pool: internal
      - match: { continent: EU }
        pool: fra
      - match: { continent: AS }
        pool: bom
      - default: { pool: syd }
`

// nodeSection is a node section and an ecs section steering unknown
// clients by the node.
func nodeSection(name, region, where string, mode string) string {
	return fmt.Sprintf("node: { name: %s, region: %s, %s }\necs: { unknown_client: %s%s }\n", name, region, where, mode,
		map[bool]string{true: ", anycast_resolvers: [1.1.1.0/24, 2606:4700:4700::/48]", false: ""}[mode == "node"])
}

const (
	atFrankfurt = "location: { lat: 50.11, lon: 8.68 }, country: DE"
	atMumbai    = "location: { lat: 19.08, lon: 72.88 }, country: IN"
)

func nodeTable(t *testing.T, section string) *policy.Table {
	t.Helper()
	return mustBuild(t, section+configYAML(t, []string{cityDB, asnDB}, nodeRecords))
}

// noECS is a query from resolver with no usable ECS.
func noECS(r *policy.Record, resolver string) *policy.Query {
	q := query(r, "", -1, resolver)
	q.NoECS = true
	return q
}

func TestNodeMatches(t *testing.T) {
	for _, c := range []struct {
		name, region, want string
	}{
		{"fra-1", "eu", "fra"},
		{"ams-1", "eu", "fra"},
		{"bom-1", "ap", "bom"},
		{"iad-1", "us", "syd"},
	} {
		tb := nodeTable(t, nodeSection(c.name, c.region, atFrankfurt, "resolver"))
		r := tb.Get("by-node.example.com.")
		for _, q := range []*policy.Query{query(r, "49.36.0.0", 24, "8.8.8.8"), query(r, "", -1, "1.1.1.1"), noECS(r, "10.0.0.1")} {
			d := r.Decide(q)
			if got := poolNames(r, d.Pools); got != c.want {
				t.Errorf("node %s (%s), client %s: %s, want %s", c.name, c.region, q.Client, got, c.want)
			}
			// A constant of the process: nothing about the client
			// takes part.
			if d.Scope != 0 {
				t.Errorf("node %s: scope %d, want 0", c.name, d.Scope)
			}
		}
		// The rules for other nodes are never in a mask: one leaf.
		if r.Stats.Outcomes != 1 {
			t.Errorf("node %s: %d outcomes, want 1", c.name, r.Stats.Outcomes)
		}
	}
}

func TestNodeMatchWithoutNodeSection(t *testing.T) {
	tb, warns, err := build(t, configYAML(t, []string{cityDB}, nodeRecords))
	if err != nil {
		t.Fatal(err)
	}
	r := tb.Get("by-node.example.com.")
	if d := r.Decide(query(r, "49.36.0.0", 24, "8.8.8.8")); poolNames(r, d.Pools) != "syd" {
		t.Errorf("no node section: %s, want syd (node rules never match)", poolNames(r, d.Pools))
	}
	if !containsMsg(warns, "has no node (or fleet) section") {
		t.Errorf("no warning about the missing node section in:\n%v", warns)
	}
}

func TestUnknownClientNode(t *testing.T) {
	for _, c := range []struct {
		node              string
		near, continent   string
		resolverNear      string // unknown_client: resolver
		resolverContinent string
	}{
		{atFrankfurt, "fra", "fra", "syd", "syd"},
		{atMumbai, "bom", "bom", "syd", "syd"},
		// A country alone gives the continent and the country's centroid.
		{"country: IN", "bom", "bom", "syd", "syd"},
		{"country: DE", "fra", "fra", "syd", "syd"},
	} {
		tb := nodeTable(t, nodeSection("n-1", "x", c.node, "node"))
		res := nodeTable(t, nodeSection("n-1", "x", c.node, "resolver"))
		for _, rec := range []struct{ name, want, resolverWant string }{
			{"near.example.com.", c.near, c.resolverNear},
			{"continent.example.com.", c.continent, c.resolverContinent},
		} {
			r := tb.Get(rec.name)
			// 1.1.1.1 is placed in Sydney, but it is an anycast resolver.
			for _, resolver := range []string{"1.1.1.1", "2606:4700:4700::1111"} {
				d := r.Decide(noECS(r, resolver))
				if got := poolNames(r, d.Pools); got != rec.want || d.Scope != 0 || d.Input != policy.InputNodeAnycast {
					t.Errorf("node %q, %s from %s: %s scope %d input %d, want %s scope 0 input anycast", c.node, rec.name, resolver, got, d.Scope, d.Input, rec.want)
				}
			}
			// The same query with unknown_client: resolver: Sydney's.
			rr := res.Get(rec.name)
			if d := rr.Decide(noECS(rr, "1.1.1.1")); poolNames(rr, d.Pools) != rec.resolverWant || d.Input != policy.InputClient {
				t.Errorf("unknown_client resolver, node %q, %s: %s, want %s", c.node, rec.name, poolNames(rr, d.Pools), rec.resolverWant)
			}
			// A query that did not say NoECS (an ECS /32 of the same
			// address) steers by its subnet.
			if d := r.Decide(query(r, "", -1, "1.1.1.1")); poolNames(r, d.Pools) != "syd" || d.Input != policy.InputClient {
				t.Errorf("node %q, %s, ECS 1.1.1.1/32: %s, want syd by the subnet", c.node, rec.name, poolNames(r, d.Pools))
			}
		}
	}
}

func TestUnknownClientECSSteersBySubnet(t *testing.T) {
	for _, node := range []string{atFrankfurt, atMumbai} {
		tb := nodeTable(t, nodeSection("n-1", "x", node, "node"))
		for _, c := range []struct {
			rec, client string
			bits        int
			want        string
		}{
			{"near.example.com.", "49.36.0.0", 24, "bom"},         // Mumbai
			{"near.example.com.", "91.64.0.0", 24, "fra"},         // Berlin
			{"near.example.com.", "192.0.2.208", 28, "syd"},       // Sydney
			{"continent.example.com.", "49.36.0.0", 24, "bom"},    // AS
			{"continent.example.com.", "80.128.0.0", 24, "fra"},   // EU
			{"continent.example.com.", "192.0.2.128", 28, "syd"},  // NA: default
			{"near.example.com.", "2409:4000::", 48, "bom"},       // Mumbai
			{"continent.example.com.", "2001:db8:4::", 48, "fra"}, // Berlin
			{"continent.example.com.", "2001:db8:e::", 48, "syd"}, // Sydney: default
			{"near.example.com.", "2001:db8:e::", 48, "syd"},      // Sydney
			{"near.example.com.", "2001:db8:1aa::", 48, "bom"},    // Mumbai
			{"continent.example.com.", "126.0.0.0", 24, "bom"},    // Tokyo: AS
			{"near.example.com.", "126.0.0.0", 24, "bom"},         // Tokyo is nearer Mumbai than Sydney
			{"continent.example.com.", "200.147.0.0", 24, "syd"},  // SA: default
			{"continent.example.com.", "196.25.0.0", 24, "syd"},   // AF: default
			{"near.example.com.", "196.25.0.0", 24, "bom"},        // Johannesburg: nearer Mumbai
			{"continent.example.com.", "117.192.0.0", 24, "bom"},  // IN, no location
			{"near.example.com.", "2001:4860::", 48, "fra"},       // US, country centroid: nearest Frankfurt
			{"continent.example.com.", "2001:4860::", 48, "syd"},  // NA
			{"continent.example.com.", "192.0.2.48", 28, "fra"},   // Berlin
			{"continent.example.com.", "3fff:0:5::", 48, "fra"},   // Frankfurt
			{"continent.example.com.", "8.8.8.0", 24, "syd"},      // NA
		} {
			r := tb.Get(c.rec)
			// From an anycast resolver, with the subnet: the subnet decides.
			d := r.Decide(query(r, c.client, c.bits, "1.1.1.1"))
			if got := poolNames(r, d.Pools); got != c.want || d.Input != policy.InputClient || d.Scope == 0 {
				t.Errorf("node %q, %s ECS %s/%d: %s scope %d input %d, want %s by the subnet with a scope", node, c.rec, c.client, c.bits, got, d.Scope, d.Input, c.want)
			}
		}
	}
}

func TestUnknownClientUnplacedResolver(t *testing.T) {
	for _, c := range []struct {
		node, want, internal string
	}{
		{atFrankfurt, "fra", "internal"},
		{atMumbai, "bom", "bom"},
	} {
		tb := nodeTable(t, nodeSection("n-1", "x", c.node, "node"))
		r := tb.Get("near.example.com.")
		// 10.0.0.0/8 and 172.16.0.0/12 are in no database; 203.0.113.64/26
		// has a continent but neither country nor location.
		for _, resolver := range []string{"10.1.2.3", "172.16.0.1", "203.0.113.70", "fd00::1"} {
			d := r.Decide(noECS(r, resolver))
			if got := poolNames(r, d.Pools); got != c.want || d.Input != policy.InputNodeUnplaced || d.Scope != 0 {
				t.Errorf("node %q, unplaced resolver %s: %s input %d scope %d, want %s by the node, scope 0", c.node, resolver, got, d.Input, d.Scope, c.want)
			}
		}
		// A placed resolver that is no anycast resolver: its own address.
		if d := r.Decide(noECS(r, "49.36.1.1")); poolNames(r, d.Pools) != "bom" || d.Input != policy.InputClient {
			t.Errorf("node %q, resolver in Mumbai: %s input %d, want bom by its address", c.node, poolNames(r, d.Pools), d.Input)
		}
		if d := r.Decide(noECS(r, "91.64.1.1")); poolNames(r, d.Pools) != "fra" || d.Input != policy.InputClient {
			t.Errorf("node %q, resolver in Berlin: %s input %d, want fra by its address", c.node, poolNames(r, d.Pools), d.Input)
		}
		// CIDR matches still see the real address: the node's
		// continent with the resolver's network.
		rc := tb.Get("continent.example.com.")
		if d := rc.Decide(noECS(rc, "10.1.2.3")); poolNames(rc, d.Pools) != c.internal {
			t.Errorf("node %q, resolver 10.1.2.3: %s, want %s", c.node, poolNames(rc, d.Pools), c.internal)
		}
		if d := rc.Decide(noECS(rc, "172.16.0.1")); poolNames(rc, d.Pools) != c.want {
			t.Errorf("node %q, resolver 172.16.0.1: %s, want %s", c.node, poolNames(rc, d.Pools), c.want)
		}
	}
	// With unknown_client: resolver an unplaced resolver takes the
	// fallback order, as before.
	tb := nodeTable(t, nodeSection("n-1", "x", atMumbai, "resolver"))
	r := tb.Get("near.example.com.")
	if d := r.Decide(noECS(r, "10.1.2.3")); poolNames(r, d.Pools) != "fra" || d.Input != policy.InputClient {
		t.Errorf("unknown_client resolver, 10.1.2.3: %s input %d, want fra (first pool) by the resolver", poolNames(r, d.Pools), d.Input)
	}
}

func TestUnknownClientNoLocationWarns(t *testing.T) {
	yaml := "node: { name: n-1 }\necs: { unknown_client: node }\n" + configYAML(t, []string{cityDB}, nodeRecords)
	tb, warns, err := build(t, yaml)
	if err != nil {
		t.Fatal(err)
	}
	if !containsMsg(warns, "the node has no location or country") {
		t.Errorf("no warning in:\n%v", warns)
	}
	r := tb.Get("near.example.com.")
	if d := r.Decide(noECS(r, "10.1.2.3")); d.Input != policy.InputClient {
		t.Errorf("a node with no location steered: input %d", d.Input)
	}
}

// A reload that changes the node rebuilds what depends on it and keeps
// the rest.
func TestNodeChangeOnReload(t *testing.T) {
	set := geoSetFor(t, cityDB, asnDB)
	cfgFor := func(section string) *config.Config {
		return parseConfig(t, section+configYAML(t, []string{cityDB, asnDB}, nodeRecords+`
  - name: plain.example.com
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
    rules:
      - match: { cidr: 10.0.0.0/8 }
        pool: a
      - default: { pool: b }
`))
	}
	t1, _, err := policy.BuildWith(cfgFor(nodeSection("fra-1", "eu", atFrankfurt, "node")), set, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := func(tb *policy.Table, rec, pool string) {
		t.Helper()
		r := tb.Get(rec)
		if d := r.Decide(noECS(r, "1.1.1.1")); poolNames(r, d.Pools) != pool {
			t.Errorf("%s: %s, want %s", rec, poolNames(r, d.Pools), pool)
		}
	}
	want(t1, "by-node.example.com.", "fra")
	want(t1, "near.example.com.", "fra")
	// The same node: everything is taken from the previous table.
	t2, _, err := policy.BuildWith(cfgFor(nodeSection("fra-1", "eu", atFrankfurt, "node")), set, t1)
	if err != nil {
		t.Fatal(err)
	}
	if t2.RecordsReused != 4 {
		t.Errorf("same node: %d records reused, want 4", t2.RecordsReused)
	}
	// Another node: only the record that depends on nothing of it is kept.
	t3, _, err := policy.BuildWith(cfgFor(nodeSection("bom-1", "ap", atMumbai, "node")), set, t2)
	if err != nil {
		t.Fatal(err)
	}
	if t3.RecordsReused != 1 || t3.RecordsBuilt != 3 {
		t.Errorf("node changed: %d reused and %d built, want 1 and 3", t3.RecordsReused, t3.RecordsBuilt)
	}
	want(t3, "by-node.example.com.", "bom")
	want(t3, "near.example.com.", "bom")
	want(t3, "continent.example.com.", "bom")
	// The node back, and unknown_client: resolver: Sydney's answer for
	// 1.1.1.1, by-node.example.com's partition shared with the first table's.
	t4, _, err := policy.BuildWith(cfgFor(nodeSection("fra-1", "eu", atFrankfurt, "resolver")), set, t3)
	if err != nil {
		t.Fatal(err)
	}
	want(t4, "by-node.example.com.", "fra")
	want(t4, "near.example.com.", "syd")
	// Only anycast_resolvers changed: records are reused and see the new list.
	c5 := cfgFor(nodeSection("fra-1", "eu", atFrankfurt, "node"))
	t5, _, err := policy.BuildWith(c5, set, t1)
	if err != nil {
		t.Fatal(err)
	}
	c6 := cfgFor("node: { name: fra-1, region: eu, " + atFrankfurt + " }\necs: { unknown_client: node, anycast_resolvers: [8.8.8.0/24] }\n")
	t6, _, err := policy.BuildWith(c6, set, t5)
	if err != nil {
		t.Fatal(err)
	}
	if t6.RecordsReused != 4 {
		t.Errorf("anycast_resolvers changed: %d reused, want 4", t6.RecordsReused)
	}
	want(t6, "near.example.com.", "syd") // 1.1.1.1 is no longer listed
	r := t6.Get("near.example.com.")
	if d := r.Decide(noECS(r, "8.8.8.8")); poolNames(r, d.Pools) != "fra" || d.Input != policy.InputNodeAnycast {
		t.Errorf("8.8.8.8 after the change: %s input %d, want fra by the node", poolNames(r, d.Pools), d.Input)
	}
}

func TestAnycastResolverSet(t *testing.T) {
	yaml := "node: { name: n-1, country: DE }\necs:\n  unknown_client: node\n  anycast_resolvers: [1.1.1.0/24, 9.9.9.9, 8.8.0.0/16, 8.8.8.0/24, 2606:4700:4700::/48, 2001:4860:4860::8888/128, 2c0f::/16]\n" +
		configYAML(t, []string{cityDB}, nodeRecords)
	tb := mustBuild(t, yaml)
	for a, want := range map[string]bool{
		"1.1.1.0": true, "1.1.1.255": true, "1.1.2.0": false, "1.1.0.255": false,
		"9.9.9.9": true, "9.9.9.8": false, "9.9.9.10": false,
		"8.8.8.8": true, "8.8.255.255": true, "8.9.0.0": false, "8.7.255.255": false,
		"0.0.0.0": false, "255.255.255.255": false,
		"::ffff:1.1.1.1":       true,
		"2606:4700:4700::1111": true, "2606:4700:4700:ffff:ffff:ffff:ffff:ffff": true, "2606:4700:4701::": false,
		"2001:4860:4860::8888": true, "2001:4860:4860::8889": false,
		"2c0f:ffff::1": true, "2c10::": false, "2c0e:ffff::": false, "::": false,
	} {
		if got := tb.IsAnycastResolver(netip.MustParseAddr(a)); got != want {
			t.Errorf("IsAnycastResolver(%s) = %t, want %t", a, got, want)
		}
	}
}

func TestUnknownClientDecideDoesNotAllocate(t *testing.T) {
	tb := nodeTable(t, nodeSection("fra-1", "eu", atFrankfurt, "node"))
	r := tb.Get("near.example.com.")
	qs := []*policy.Query{noECS(r, "1.1.1.1"), noECS(r, "10.1.2.3"), noECS(r, "2606:4700:4700::1111"), query(r, "49.36.0.0", 24, "1.1.1.1")}
	if n := testing.AllocsPerRun(200, func() {
		for _, q := range qs {
			r.Decide(q)
		}
	}); n != 0 {
		t.Errorf("Decide allocates %v times", n)
	}
}

func containsMsg(ps diag.Problems, phrase string) bool {
	for _, p := range ps {
		if strings.Contains(p.Msg, phrase) {
			return true
		}
	}
	return false
}

// by: latency steers an unknown client by the node's latency class: the
// distance estimate from the node, and measurements keyed on its country
// or continent.
func TestUnknownClientLatency(t *testing.T) {
	for _, c := range []struct {
		node, want string
	}{
		{atFrankfurt, "frankfurt"},
		{atMumbai, "mumbai"},
	} {
		o := latency.Options{}.WithDefaults()
		table := mustBuild(t, nodeSection("n-1", "x", c.node, "node")+configYAML(t, []string{cityDB, asnDB}, latRecord))
		r := table.Records[0]
		live := policy.NewLive(table, policy.LiveOptions{})
		store, h := latency.NewStore(o), policy.NewLatencyMemory(o)
		// Estimates only, from the pools' locations.
		live.SetLatency(store.Map(), h, store.Updates(), t0)
		for _, resolver := range []string{"1.1.1.1", "10.9.9.9"} {
			q := noECS(r, resolver)
			q.Latency = live.Latency()
			d := r.Decide(q)
			if got := poolNames(r, d.Pools); got != c.want || d.Scope != 0 || d.Input == policy.InputClient {
				t.Errorf("node %q, resolver %s: %s scope %d input %d, want %s by the node, scope 0", c.node, resolver, got, d.Scope, d.Input, c.want)
			}
		}
		// A measurement for the node's country wins over the estimate
		// (a fresh anti-flap state: the first evaluation sets the choice).
		store, h = latency.NewStore(o), policy.NewLatencyMemory(o)
		store.Update([]latency.Measurement{
			{Key: "DE", Site: "virginia", RTTms: 1, Samples: 1, MeasuredAt: t0},
			{Key: "DE", Site: "frankfurt", RTTms: 500, Samples: 1, MeasuredAt: t0},
			{Key: "IN", Site: "virginia", RTTms: 1, Samples: 1, MeasuredAt: t0},
			{Key: "IN", Site: "mumbai", RTTms: 500, Samples: 1, MeasuredAt: t0},
		}, t0)
		live.SetLatency(store.Map(), h, store.Updates(), t0)
		q := noECS(r, "1.1.1.1")
		q.Latency = live.Latency()
		if d := r.Decide(q); poolNames(r, d.Pools) != "virginia" {
			t.Errorf("node %q with a country measurement: %s, want virginia", c.node, poolNames(r, d.Pools))
		}
	}
}

func TestNodeMatchProblems(t *testing.T) {
	yaml := "node: { name: fra-1 }\n" + configYAML(t, []string{cityDB}, `
  - name: www.example.com
    pools:
      a: { address: 192.0.2.1 }
    rules:
      - match: { node: ["fra 1", ok-1] } # bad name
        pool: a
      - match: { node_region: ["eu/west"] } # bad region
        pool: a
      - match: { not: { node: [ams-1] } } # fine
        pool: a
      - default: { pool: a }
`)
	_, _, err := build(t, yaml)
	ps := problems(t, err)
	for _, w := range []struct {
		marker, phrase string
	}{
		{"# bad name", `"fra 1" is not a node name`},
		{"# bad region", `"eu/west" is not a region name`},
	} {
		line := lineOf(t, yaml, w.marker)
		found := false
		for _, p := range ps {
			if p.Line == line && strings.Contains(p.Msg, w.phrase) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing steer.yaml:%d %q in:\n%v", line, w.phrase, ps)
		}
	}
	if len(ps) != 2 {
		t.Errorf("%d problems, want 2:\n%v", len(ps), ps)
	}
}

// A nested geoproximity decision (a group ranked by its location) takes
// the node's location as a top-level one does.
func TestUnknownClientNested(t *testing.T) {
	const rec = `
  - name: tree.example.com
    pools:
      bom-1: { address: 203.0.113.10 }
      bom-2: { address: 203.0.113.11 }
      fra:   { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      iad:   { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 } }
    groups:
      mumbai: { failover: [bom-1, bom-2], location: { lat: 19.08, lon: 72.88 } }
      near:   { by: geoproximity, fallback: [mumbai, fra, iad] }
    rules:
      - match: { continent: NA }
        pool: iad
      - default: { failover: [near, iad] }
`
	for _, c := range []struct{ node, want string }{{atFrankfurt, "fra"}, {atMumbai, "bom-1"}} {
		tb := mustBuild(t, nodeSection("n-1", "x", c.node, "node")+configYAML(t, []string{cityDB, asnDB}, rec))
		r := tb.Get("tree.example.com.")
		for _, resolver := range []string{"1.1.1.1", "10.1.1.1"} {
			d := r.Decide(noECS(r, resolver))
			if got := poolNames(r, d.Pools); got != c.want || d.Scope != 0 || d.Input == policy.InputClient {
				t.Errorf("node %q, resolver %s: %s scope %d input %d, want %s by the node", c.node, resolver, got, d.Scope, d.Input, c.want)
			}
		}
		// Mumbai's first pool down: the group fails over inside.
		q := noECS(r, "1.1.1.1")
		q.Up &^= 1 // bom-1
		if d := r.Decide(q); c.want == "bom-1" && poolNames(r, d.Pools) != "bom-2" {
			t.Errorf("node %q, bom-1 down: %s, want bom-2", c.node, poolNames(r, d.Pools))
		}
		// A subnet in Ashburn (NA): rule 1, by the subnet.
		if d := r.Decide(query(r, "192.0.2.128", 28, "1.1.1.1")); poolNames(r, d.Pools) != "iad" || d.Input != policy.InputClient {
			t.Errorf("node %q, ECS Ashburn: %s, want iad", c.node, poolNames(r, d.Pools))
		}
	}
}

// BenchmarkDecideUnknownClient decides queries without ECS from random
// resolver addresses (the Larkbook record on the embedded database), with
// ecs.unknown_client: resolver (the default) and node with a list of
// public resolvers' prefixes, of which ~1 in 64 query addresses is in.
func BenchmarkDecideUnknownClient(b *testing.B) {
	r0, _, addrs := embedded(b)
	list := "[1.1.1.0/24, 1.0.0.0/24, 8.8.8.0/24, 8.8.4.0/24, 9.9.9.0/24, 149.112.112.0/24, 208.67.222.0/24, 208.67.220.0/24, 64.0.0.0/8, " +
		"2606:4700:4700::/48, 2001:4860:4860::/48, 2620:fe::/48, 2620:119:35::/48, 2400::/8]"
	yaml := "node: { name: fra-1, location: { lat: 50.11, lon: 8.68 }, country: DE }\necs: { unknown_client: node, anycast_resolvers: " + list + " }\n" +
		configYAML(b, []string{embedDB}, larkbookRecord)
	rn := mustBuild(b, yaml).Get("shop.example.com.")
	for _, c := range []struct {
		name string
		r    *policy.Record
	}{{"resolver", r0}, {"node", rn}} {
		b.Run(c.name, func(b *testing.B) {
			for _, v6 := range []bool{false, true} {
				as := addrs[v6]
				b.Run(map[bool]string{false: "v4", true: "v6"}[v6], func(b *testing.B) {
					q := policy.Query{Qtype: dns.TypeA, Up: c.r.Enabled, NoECS: true}
					var sink int
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						q.Client = as[i&(len(as)-1)]
						q.ClientBits, q.Resolver = q.Client.BitLen(), q.Client
						d := c.r.Decide(&q)
						sink += d.Scope + int(d.Input)
					}
					_ = sink
				})
			}
		})
	}
}

func TestAnycastResolversWithoutNodeWarns(t *testing.T) {
	yaml := "node: { name: n-1, country: DE }\necs: { anycast_resolvers: [1.1.1.0/24] }\n" + configYAML(t, []string{cityDB}, nodeRecords)
	_, warns, err := build(t, yaml)
	if err != nil {
		t.Fatal(err)
	}
	if !containsMsg(warns, "ecs.anycast_resolvers is only used with ecs.unknown_client: node (it is resolver)") {
		t.Errorf("no warning in:\n%v", warns)
	}
	for _, w := range warns {
		if strings.Contains(w.Msg, "anycast_resolvers") && w.Line != 2 {
			t.Errorf("warning at line %d, want 2: %v", w.Line, w)
		}
	}
}

// TestUnknownClientKeepsSubnetScopes: steering unknown clients by the
// node changes nothing for a query with a subnet, whether its pools or
// its scope, and nothing for a resolver that is placed and not listed:
// the unknown-client data lives apart from the client partition.
func TestUnknownClientKeepsSubnetScopes(t *testing.T) {
	recs := nodeRecords + larkbookRecord
	res := mustBuild(t, nodeSection("n-1", "x", atMumbai, "resolver")+configYAML(t, []string{cityDB, asnDB}, recs))
	node := mustBuild(t, nodeSection("n-1", "x", atMumbai, "node")+configYAML(t, []string{cityDB, asnDB}, recs))
	rnd := rand.New(rand.NewPCG(7, 7))
	var subnets []netip.Prefix
	for _, n := range testNetworks() {
		subnets = append(subnets, n)
		for range 20 {
			a := randomWithin(rnd, n)
			for _, bits := range []int{n.Bits(), min(n.Bits()+4, a.BitLen()), a.BitLen()} {
				subnets = append(subnets, netip.PrefixFrom(a, bits).Masked())
			}
		}
	}
	for range 2000 {
		subnets = append(subnets, netip.PrefixFrom(randomWithin(rnd, netip.MustParsePrefix("0.0.0.0/0")), 24).Masked(),
			netip.PrefixFrom(randomWithin(rnd, netip.MustParsePrefix("2000::/3")), 48).Masked())
	}
	for _, rr := range res.Records {
		rn := node.Get(rr.Name)
		if rr.Stats.Leaves4 != rn.Stats.Leaves4 || rr.Stats.Leaves6 != rn.Stats.Leaves6 {
			t.Errorf("%s: %d+%d leaves by the resolver, %d+%d by the node: the client partition changed", rr.Name,
				rr.Stats.Leaves4, rr.Stats.Leaves6, rn.Stats.Leaves4, rn.Stats.Leaves6)
		}
		for _, p := range subnets {
			q := &policy.Query{Qtype: dns.TypeA, Up: rr.Enabled, Client: p.Addr(), ClientBits: p.Bits(), Resolver: addr("1.1.1.1")}
			a, b := rr.Decide(q), rn.Decide(q)
			if a.Scope != b.Scope || a.Rule != b.Rule || (a.Pools != b.Pools && rr.Name != "shop.example.com.") {
				t.Fatalf("%s, ECS %s: %+v by the resolver, %+v by the node", rr.Name, p, a, b)
			}
		}
	}
}
