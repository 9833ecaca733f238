package policy_test

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/policy"
)

// TestLarkbookSeedTable walks the scenario's users through the demo
// record against the testdata databases.
func TestLarkbookSeedTable(t *testing.T) {
	r := larkbook(t)
	if r.Name != "shop.example.com." || r.Type != dns.TypeA || r.TTL != 60 || len(r.Pools) != 4 || len(r.Rules) != 4 {
		t.Fatalf("record %v", r)
	}
	tests := []struct {
		name     string
		client   string
		bits     int // -1: no client subnet, the resolver's address is used
		resolver string
		rule     int
		pools    []uint64 // one of these
	}{
		{"Pune user via a Mumbai ISP resolver", "192.0.2.0", 28, "192.0.2.20", 0, []uint64{apSouth}},
		{"Pune user, ECS /24", "192.0.2.9", 24, "192.0.2.20", 0, []uint64{apSouth}},
		{"Mumbai resolver without ECS", "", -1, "192.0.2.20", 0, []uint64{apSouth}},
		{"Berlin", "192.0.2.48", 28, "192.0.2.50", 1, []uint64{euCentral}},
		{"Columbus via a Chicago resolver", "192.0.2.96", 28, "192.0.2.115", 2, []uint64{usEast, usCanary}},
		{"Guwahati via a Singapore public resolver, no subnet", "", -1, "192.0.2.150", 3, []uint64{apSouth}},
		{"Guwahati via a Singapore public resolver with her subnet", "192.0.2.32", 28, "192.0.2.150", 0, []uint64{apSouth}},
		{"Lisbon via an Ashburn resolver, no subnet", "", -1, "192.0.2.130", 2, []uint64{usEast, usCanary}},
		{"Lisbon with her subnet", "192.0.2.80", 28, "192.0.2.130", 1, []uint64{euCentral}},
		{"São Paulo", "192.0.2.192", 28, "", 2, []uint64{usEast, usCanary}},
		{"Cape Town: nearest is Mumbai", "192.0.2.160", 28, "", 3, []uint64{apSouth}},
		{"Berlin's AS via the country-only DE network", "203.0.113.0", 26, "", 1, []uint64{euCentral}},
		{"Sydney: nearest is Mumbai", "192.0.2.208", 28, "", 3, []uint64{apSouth}},
		{"Tokyo: nearest is Mumbai", "2001:db8:f::", 48, "", 3, []uint64{apSouth}},
		{"Mountain View", "8.8.8.0", 24, "", 2, []uint64{usEast, usCanary}},
		{"continent EU only", "203.0.113.64", 26, "", 1, []uint64{euCentral}},
		{"not found: the fallback list", "192.0.2.240", 28, "", 3, []uint64{apSouth}},
		{"10/8: the fallback list", "10.1.2.0", 24, "", 3, []uint64{apSouth}},
		{"IPv6 Mumbai", "2001:db8:2::", 56, "2001:db8:2::53", 0, []uint64{apSouth}},
		{"IPv6 Columbus", "2001:db8:7::", 56, "", 2, []uint64{usEast, usCanary}},
		{"IPv4-mapped Berlin", "::ffff:192.0.2.48", 124, "", 1, []uint64{euCentral}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := query(r, tt.client, tt.bits, tt.resolver)
			d := r.Decide(q)
			if d.Rule != tt.rule {
				t.Errorf("rule %d, want %d (%+v)", d.Rule, tt.rule, d)
			}
			ok := false
			for _, p := range tt.pools {
				ok = ok || d.Pools == p
			}
			if !ok {
				t.Errorf("pools %s, want one of %v", poolNames(r, d.Pools), tt.pools)
			}
			if d.AllDown || d.NoData || d.ServFail || d.Limit != 0 {
				t.Errorf("decision %+v", d)
			}
			if d.Scope < 0 || d.Scope > q.Client.BitLen() {
				t.Errorf("scope %d", d.Scope)
			}
			if q.Client.Is4In6() {
				// The scope is in the client's family: the mapped
				// prefix, 96 bits longer than the IPv4 one.
				q4 := *q
				q4.Client, q4.ClientBits = q.Client.Unmap(), q.ClientBits-96
				if d4 := r.Decide(&q4); d.Scope != d4.Scope+96 || d4.Rule != d.Rule {
					t.Errorf("mapped scope %d, IPv4 scope %d", d.Scope, d4.Scope)
				}
			}
		})
	}
}

// TestLarkbookAnswers checks the records a decision answers with.
func TestLarkbookAnswers(t *testing.T) {
	r := larkbook(t)
	d := r.Decide(query(r, "192.0.2.0", 28, ""))
	rrs := r.AppendAnswer(nil, &d, dns.TypeA, nil)
	if len(rrs) != 1 {
		t.Fatalf("answer %v", rrs)
	}
	a, ok := rrs[0].(*dns.A)
	if !ok || a.A.String() != "203.0.113.10" || a.Hdr.Name != "shop.example.com." || a.Hdr.Ttl != 60 {
		t.Errorf("answer %v", rrs[0])
	}
	if got := r.AppendAnswer(nil, &d, dns.TypeAAAA, nil); len(got) != 0 {
		t.Errorf("AAAA answer %v", got)
	}
}

// TestScopeIsPartitionLeaf: a whole /16 that one cidr rule maps gives
// every client inside scope 16.
func TestScopeIsPartitionLeaf(t *testing.T) {
	yaml := configYAML(t, []string{cityDB, asnDB}, `
  - name: cidr.example.com
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
    rules:
      - match: { cidr: [10.20.0.0/16, "2001:db8:ffff:1::/64"] }
        pool: a
      - default: { pool: b }
  - name: flat.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default: { pool: x }
`)
	table := mustBuild(t, yaml)
	r := table.Get("cidr.example.com.")
	for _, c := range []string{"10.20.0.0", "10.20.7.0", "10.20.255.0"} {
		d := r.Decide(query(r, c, 24, ""))
		if d.Rule != 0 || d.Pools != 1 || d.Scope != 16 {
			t.Errorf("%s/24: %+v, want rule 0 pool a scope 16", c, d)
		}
	}
	// Around it: 10.0.0.0/8 is empty in the database, so the scope is the
	// widest prefix that does not reach into 10.20/16.
	for _, tt := range []struct {
		client string
		scope  int
	}{
		{"10.21.0.0", 16}, // 10.21/16 is the sibling of 10.20/16
		{"10.22.0.0", 15},
		{"10.16.0.0", 14},
		{"10.0.0.0", 12},
		{"10.128.0.0", 9},
		{"11.0.0.0", 8}, // the database's 10.0.0.0/7 is empty, but 10/8 is split
	} {
		d := r.Decide(query(r, tt.client, 24, ""))
		if d.Rule != 1 || d.Pools != 2 || d.Scope != tt.scope {
			t.Errorf("%s/24: %+v, want rule 1 pool b scope %d", tt.client, d, tt.scope)
		}
	}
	d := r.Decide(query(r, "2001:db8:ffff:1::", 64, ""))
	if d.Rule != 0 || d.Scope != 64 {
		t.Errorf("2001:db8:ffff:1::/64: %+v, want rule 0 scope 64", d)
	}
	d = r.Decide(query(r, "2001:db8:ffff:0::", 64, ""))
	if d.Rule != 1 || d.Scope != 64 {
		t.Errorf("2001:db8:ffff::/64: %+v, want rule 1 scope 64", d)
	}
	flat := table.Get("flat.example.com.")
	for _, c := range []string{"192.0.2.5", "10.0.0.1", "8.8.8.8", "2001:db8:2::1"} {
		q := query(flat, c, addr(c).BitLen(), "")
		if d := flat.Decide(q); d.Scope != 0 || d.Rule != 0 || d.Pools != 1 {
			t.Errorf("default-only record, %s: %+v, want scope 0", c, d)
		}
	}
	// An IPv4-mapped client: all of ::ffff:0:0/96 (IPv4) gets the answer.
	if d := flat.Decide(query(flat, "::ffff:1.2.3.4", 128, "")); d.Scope != 96 || d.Rule != 0 {
		t.Errorf("default-only record, IPv4-mapped client: %+v, want scope 96", d)
	}
	if flat.Stats.Outcomes != 1 || flat.Stats.Nodes4 != 0 || flat.Stats.Nodes6 != 0 {
		t.Errorf("default-only record stats %+v", flat.Stats)
	}
}

// TestScopeBruteForce compares Decide's scope with the widest prefix over
// which the reference's outcome is the same, found by checking every
// network boundary of the databases.
func TestScopeBruteForce(t *testing.T) {
	yaml := configYAML(t, []string{cityDB, asnDB}, larkbookRecord)
	cfg, err := config.Parse(nil, "steer.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	r := larkbook(t)
	rf := newRef(t, cfg, 0, geoSetFor(t, cityDB, asnDB))
	points := boundaries(t, []string{testdataGeo(t, cityDB), testdataGeo(t, asnDB)}, unroutedV6)
	keys := map[netip.Addr]string{}

	// The IPv6 Mumbai /48 merges with the Guwahati /48 next to it (same
	// rules, same nearest-pool ranking), not with Pune's (2001:db8:1::/48
	// is on the other side of a /47 boundary).
	d := r.Decide(query(r, "2001:db8:2::", 56, ""))
	if want := bruteScope(t, rf, points, keys, addr("2001:db8:2::")); d.Scope != want {
		t.Errorf("2001:db8:2::/56 scope %d, brute force %d", d.Scope, want)
	}
	if d.Scope != 47 {
		t.Errorf("2001:db8:2::/56 scope %d, want 47 (2001:db8:2::/47 is Mumbai and Guwahati)", d.Scope)
	}

	rnd := rand.New(rand.NewPCG(3, 4))
	var samples []netip.Addr
	for _, s := range []string{"192.0.2.5", "192.0.2.40", "192.0.2.100", "192.0.2.150", "192.0.2.241",
		"198.51.100.5", "198.51.100.70", "203.0.113.70", "203.0.113.200", "8.8.8.8", "1.1.1.1", "10.9.9.9",
		"49.36.1.1", "126.1.2.3", "2001:db8:1aa::1", "2001:db8:150::1", "3fff:0:5::1", "2409:4000::1", "2003::1",
		"2001:4860::1", "2001:db8:ffff::1", "2002:c000:201::1", "::1", "fe80::1"} {
		samples = append(samples, addr(s))
	}
	for range 150 {
		samples = append(samples, randomClient(rnd))
	}
	for _, a := range samples {
		q := &policy.Query{Client: a, ClientBits: a.BitLen(), Qtype: dns.TypeA, Up: r.Enabled}
		d := r.Decide(q)
		if want := bruteScope(t, rf, points, keys, a); d.Scope != want {
			t.Errorf("%s: scope %d, brute force %d", a, d.Scope, want)
		}
	}
}

// TestScopesDoNotOverlap: any address inside a decision's scope prefix
// gets the same rule, pools and scope.
func TestScopesDoNotOverlap(t *testing.T) {
	r := larkbook(t)
	sticky := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, stickyRecord)).Get("sticky.example.com.")
	rnd := rand.New(rand.NewPCG(5, 6))
	for i := range 4000 {
		a := randomClient(rnd)
		rec := r
		bits := a.BitLen()
		if i%2 == 1 {
			rec = sticky
			bits = 24
			if a.Is6() {
				bits = 56
			}
			p, _ := a.Prefix(bits)
			a = p.Addr()
		}
		d := rec.Decide(&policy.Query{Client: a, ClientBits: bits, Qtype: dns.TypeA, Up: rec.Enabled})
		pfx, _ := a.Prefix(d.Scope)
		for range 4 {
			// Steering sees the client's subnet (the sticky record's
			// clients send one).
			b, _ := randomWithin(rnd, pfx).Prefix(bits)
			db := rec.Decide(&policy.Query{Client: b.Addr(), ClientBits: bits, Qtype: dns.TypeA, Up: rec.Enabled})
			samePools := db.Pools == d.Pools || d.Rule == 2 && rec == r // a weighted split answers at random
			if db.Rule != d.Rule || !samePools || db.Scope != d.Scope {
				t.Fatalf("%s is inside %s (scope of %s: %+v) but gets %+v", b, pfx, a, d, db)
			}
		}
	}
}

// randomClient returns an address mostly inside the testdata networks.
func randomClient(rnd *rand.Rand) netip.Addr {
	switch n := rnd.IntN(10); {
	case n < 7:
		nets := testNetworks()
		return randomWithin(rnd, nets[rnd.IntN(len(nets))])
	case n < 8:
		return randomWithin(rnd, netip.MustParsePrefix("0.0.0.0/0"))
	case n < 9:
		return randomWithin(rnd, netip.MustParsePrefix("2000::/3"))
	default:
		// Next to a network's edges.
		nets := testNetworks()
		p := nets[rnd.IntN(len(nets))]
		a := p.Addr()
		if rnd.IntN(2) == 0 {
			a = lastAddr(p)
		}
		for range rnd.IntN(3) {
			if rnd.IntN(2) == 0 && a.Prev().IsValid() {
				a = a.Prev()
			} else if a.Next().IsValid() {
				a = a.Next()
			}
		}
		return a
	}
}

// randomWithin returns a random address inside p.
func randomWithin(rnd *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		if rnd.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

var testNets []netip.Prefix

// testNetworks returns the networks of testdata/geo/larkbook-networks.csv
// and a few empty neighbours.
func testNetworks() []netip.Prefix {
	if testNets == nil {
		for _, s := range strings.Fields(`192.0.2.0/24 192.0.2.0/28 192.0.2.16/28 192.0.2.32/28 192.0.2.48/28
			192.0.2.64/28 192.0.2.80/28 192.0.2.96/28 192.0.2.112/28 192.0.2.128/28 192.0.2.144/28
			192.0.2.160/28 192.0.2.176/28 192.0.2.192/28 192.0.2.208/28 192.0.2.224/28 192.0.2.240/28
			198.51.100.0/24 198.51.100.64/26 203.0.113.0/24 203.0.113.0/26 203.0.113.64/26 203.0.113.128/26
			2001:db8::/40 2001:db8:1::/48 2001:db8:2::/48 2001:db8:3::/48 2001:db8:4::/48 2001:db8:5::/48
			2001:db8:6::/48 2001:db8:7::/48 2001:db8:8::/48 2001:db8:9::/48 2001:db8:a::/48 2001:db8:b::/48
			2001:db8:c::/48 2001:db8:d::/48 2001:db8:e::/48 2001:db8:f::/48 2001:db8:100::/40
			2001:db8:1aa::/48 3fff:0:5::/48 3fff::/20 49.36.0.0/14 117.192.0.0/10 91.64.0.0/14
			80.128.0.0/11 8.8.8.0/24 1.1.1.0/24 196.25.0.0/16 200.147.0.0/16 126.0.0.0/8
			2001:4860::/32 2003::/19 2409:4000::/22 10.0.0.0/8 10.20.0.0/16 2001:db8:ffff::/48`) {
			testNets = append(testNets, netip.MustParsePrefix(s))
		}
	}
	return testNets
}

// stickyRecord is Larkbook with a sticky canary split, also for 10.0.0.0/8.
const stickyRecord = `
  - name: sticky.example.com
    pools:
      ap-south:       { address: 203.0.113.10,  location: { lat: 19.08, lon: 72.88 } }
      eu-central:     { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      us-east:        { address: 192.0.2.30,    location: { lat: 38.95, lon: -77.45 } }
      us-east-canary: { address: 192.0.2.31,    location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: [IN, LK, BD, NP] }
        pool: ap-south
      - match: { continent: EU }
        pool: eu-central
      - match: { continent: [NA, SA] }
        split:
          - { pool: us-east,        weight: 95 }
          - { pool: us-east-canary, weight: 5 }
        sticky: client_subnet
      - match: { cidr: 10.0.0.0/8 }
        split:
          - { pool: us-east,        weight: 95 }
          - { pool: us-east-canary, weight: 5 }
        sticky: client_subnet
      - default:
          by: geoproximity
          fallback: [ap-south, eu-central, us-east]
`

// TestSplit: a weighted split lands 95/5 for a North American client.
func TestSplit(t *testing.T) {
	r := larkbook(t)
	q := query(r, "192.0.2.96", 28, "192.0.2.115")
	const n = 100000
	var east, canary int
	for range n {
		d := r.Decide(q)
		switch d.Pools {
		case usEast:
			east++
		case usCanary:
			canary++
		default:
			t.Fatalf("split answered %s", poolNames(r, d.Pools))
		}
	}
	if pct := 100 * float64(canary) / n; pct < 4.5 || pct > 5.5 {
		t.Errorf("canary got %.2f%% of %d decisions, want 5 ± 0.5", pct, n)
	}
	if pct := 100 * float64(east) / n; pct < 94.5 || pct > 95.5 {
		t.Errorf("us-east got %.2f%%, want 95 ± 0.5", pct)
	}
	// With the canary down, everything goes to us-east, and the other way round.
	q.Up = r.Enabled &^ usCanary
	for range 1000 {
		if d := r.Decide(q); d.Pools != usEast || d.Rule != 2 {
			t.Fatalf("canary down: %+v", d)
		}
	}
	q.Up = r.Enabled &^ usEast
	for range 1000 {
		if d := r.Decide(q); d.Pools != usCanary || d.Rule != 2 {
			t.Fatalf("us-east down: %+v", d)
		}
	}
}

// TestStickySplit: the same subnet always gets the same pool, subnets
// spread 95/5, and with a pool disabled every subnet gets the other.
func TestStickySplit(t *testing.T) {
	yaml := configYAML(t, []string{cityDB, asnDB}, stickyRecord)
	r := mustBuild(t, yaml).Get("sticky.example.com.")
	// Disabled canary: the same record with enabled: false.
	noCanary := mustBuild(t, configYAML(t, []string{cityDB, asnDB},
		strings.Replace(stickyRecord, "address: 192.0.2.31, ", "address: 192.0.2.31, enabled: false, ", 1))).Get("sticky.example.com.")
	if noCanary.Enabled != apSouth|euCentral|usEast {
		t.Fatalf("enabled %b", noCanary.Enabled)
	}
	noEast := mustBuild(t, configYAML(t, []string{cityDB, asnDB},
		strings.Replace(stickyRecord, "address: 192.0.2.30, ", "address: 192.0.2.30, enabled: false, ", 1))).Get("sticky.example.com.")

	// 20,000 subnets: IPv4 /24s of 10.0.0.0/8 (the cidr rule) and IPv6
	// /56s of 2001:4860::/32 (US, so the continent rule).
	rnd := rand.New(rand.NewPCG(8, 9))
	const n = 20000
	var canary int
	seen := map[netip.Prefix]bool{}
	for len(seen) < n {
		var p netip.Prefix
		rule := 3
		if len(seen)%2 == 0 {
			p, _ = randomWithin(rnd, netip.MustParsePrefix("10.0.0.0/8")).Prefix(24)
		} else {
			p, _ = randomWithin(rnd, netip.MustParsePrefix("2001:4860::/32")).Prefix(56)
			rule = 2
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		q := &policy.Query{Client: p.Addr(), ClientBits: p.Bits(), Qtype: dns.TypeA, Up: r.Enabled}
		d := r.Decide(q)
		if d.Rule != rule || (d.Pools != usEast && d.Pools != usCanary) {
			t.Fatalf("%s: %+v", p, d)
		}
		if d.Scope < p.Bits() {
			t.Fatalf("%s: sticky scope %d is shorter than the client prefix", p, d.Scope)
		}
		for range 3 {
			if again := r.Decide(q); again.Pools != d.Pools || again.Scope != d.Scope {
				t.Fatalf("%s: %s then %s", p, poolNames(r, d.Pools), poolNames(r, again.Pools))
			}
		}
		if d.Pools == usCanary {
			canary++
		}
		q.Up = noCanary.Enabled
		if got := noCanary.Decide(q); got.Pools != usEast {
			t.Fatalf("%s with the canary disabled: %s", p, poolNames(r, got.Pools))
		}
		q.Up = noEast.Enabled
		if got := noEast.Decide(q); got.Pools != usCanary {
			t.Fatalf("%s with us-east disabled: %s", p, poolNames(r, got.Pools))
		}
		// With us-east down only the subnets us-east had move.
		q.Up = r.Enabled &^ usEast
		if d.Pools == usCanary {
			if got := r.Decide(q); got.Pools != usCanary {
				t.Fatalf("%s moved off the canary when us-east went down", p)
			}
		}
	}
	if pct := 100 * float64(canary) / n; pct < 3.5 || pct > 6.5 {
		t.Errorf("canary got %.2f%% of %d subnets, want 5 ± 1.5", pct, n)
	}

	// Any address sent within a subnet hashes as the subnet.
	for range 200 {
		p, _ := randomWithin(rnd, netip.MustParsePrefix("10.0.0.0/8")).Prefix(24)
		q := &policy.Query{Client: p.Addr(), ClientBits: 24, Qtype: dns.TypeA, Up: r.Enabled}
		want := r.Decide(q)
		for range 10 {
			q.Client = randomWithin(rnd, p)
			if got := r.Decide(q); got != want {
				t.Fatalf("%s in %s: %+v, the subnet got %+v", q.Client, p, got, want)
			}
		}
	}
	// The North American testdata networks.
	for _, c := range []string{"192.0.2.96/28", "192.0.2.128/28", "8.8.8.0/24", "203.0.113.128/26", "2001:db8:7::/48"} {
		p := netip.MustParsePrefix(c)
		q := &policy.Query{Client: p.Addr(), ClientBits: p.Bits(), Qtype: dns.TypeA, Up: r.Enabled}
		want := r.Decide(q)
		if want.Scope < p.Bits() || want.Rule != 2 {
			t.Errorf("%s: %+v", c, want)
		}
		for range 20 {
			if got := r.Decide(q); got != want {
				t.Fatalf("%s: %+v then %+v", c, want, got)
			}
		}
	}
}
