package policy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
)

// TestMultivalue: at most N addresses, all from the rule's pools.
func TestMultivalue(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: mv.example.com
    pools:
      a: { addresses: [192.0.2.1, 192.0.2.2, "2001:db8::1"] }
      b: { addresses: [192.0.2.3, 192.0.2.4] }
      c: { address: 192.0.2.5 }
      d: { address: 192.0.2.6 }
    rules:
      - match: { country: IN }
        multivalue: 3
        pools: [a, b, c]
      - default: { multivalue: 2 }
`))
	r := table.Get("mv.example.com.")
	allowed := map[string]bool{"192.0.2.1": true, "192.0.2.2": true, "192.0.2.3": true, "192.0.2.4": true, "192.0.2.5": true}
	seen := map[string]bool{}
	for range 300 {
		q := query(r, "192.0.2.0", 28, "")
		d := r.Decide(q)
		if d.Rule != 0 || d.Limit != 3 || d.Pools != 0b0111 {
			t.Fatalf("IN client: %+v", d)
		}
		rrs := r.AppendAnswer(nil, &d, dns.TypeA, nil)
		if len(rrs) != 3 {
			t.Fatalf("%d addresses, want 3: %v", len(rrs), rrs)
		}
		got := map[string]bool{}
		for _, rr := range rrs {
			a := rr.(*dns.A).A.String()
			if !allowed[a] || got[a] {
				t.Fatalf("answer %v: %s is not from the rule's pools or is repeated", rrs, a)
			}
			got[a] = true
			seen[a] = true
		}
	}
	if len(seen) != len(allowed) {
		t.Errorf("over 300 answers only %v were used (the answer should be shuffled)", seen)
	}
	// AAAA: only a has IPv6.
	d := r.Decide(&policy.Query{Client: addr("192.0.2.5"), ClientBits: 32, Qtype: dns.TypeAAAA, Up: r.Enabled})
	if rrs := r.AppendAnswer(nil, &d, dns.TypeAAAA, nil); d.Pools != 1 || len(rrs) != 1 {
		t.Errorf("AAAA: %+v %v", d, rrs)
	}
	// The default's multivalue without pools is every pool.
	d = r.Decide(query(r, "192.0.2.48", 28, ""))
	if d.Rule != 1 || d.Limit != 2 || d.Pools != 0b1111 {
		t.Errorf("default multivalue: %+v", d)
	}
	if rrs := r.AppendAnswer(nil, &d, dns.TypeA, nil); len(rrs) != 2 {
		t.Errorf("default multivalue: %d addresses", len(rrs))
	}
	// With pools down, only the usable ones answer.
	q := query(r, "192.0.2.0", 28, "")
	q.Up = r.Enabled &^ 0b011
	d = r.Decide(q)
	if d.Pools != 0b100 || d.Limit != 3 {
		t.Errorf("a and b down: %+v", d)
	}
	if rrs := r.AppendAnswer(nil, &d, dns.TypeA, nil); len(rrs) != 1 || rrs[0].(*dns.A).A.String() != "192.0.2.5" {
		t.Errorf("a and b down: %v", rrs)
	}
}

// TestFailoverAndFirst: failover and by: first pick the first usable pool.
func TestFailoverAndFirst(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: fo.example.com
    pools:
      primary:   { address: 192.0.2.1 }
      secondary: { address: 192.0.2.2, enabled: false }
      tertiary:  { address: 192.0.2.3 }
      other:     { address: 192.0.2.4 }
    rules:
      - match: { continent: EU }
        failover: [primary, secondary, tertiary]
      - default:
          by: first
          fallback: [secondary, tertiary, other]
`))
	r := table.Get("fo.example.com.")
	if r.Enabled != 0b1101 {
		t.Fatalf("enabled %b", r.Enabled)
	}
	tests := []struct {
		client string
		up     uint64
		rule   int
		pools  uint64
	}{
		{"192.0.2.48", r.Enabled, 0, 0b0001},
		{"192.0.2.48", r.Enabled &^ 0b0001, 0, 0b0100},            // secondary is disabled
		{"192.0.2.48", (r.Enabled &^ 0b0001) | 0b0010, 0, 0b0010}, // unless it is up
		{"192.0.2.48", 0b1000, 1, 0b1000},                         // the failover list is down: next rule
		{"192.0.2.0", r.Enabled, 1, 0b0100},
		{"192.0.2.0", 0b1011, 1, 0b0010},
		{"192.0.2.0", 0b1001, 1, 0b1000},
	}
	for _, tt := range tests {
		q := query(r, tt.client, 28, "")
		q.Up = tt.up
		d := r.Decide(q)
		if d.Rule != tt.rule || d.Pools != tt.pools || d.AllDown {
			t.Errorf("%s up %04b: %+v, want rule %d pools %04b", tt.client, tt.up, d, tt.rule, tt.pools)
		}
	}
}

// TestBias: Route 53 geoproximity bias scales distance by (1 - bias/100).
func TestBias(t *testing.T) {
	guwahati := [2]float64{26.1445, 91.7362}
	mumbai := [2]float64{19.08, 72.88}
	singapore := [2]float64{1.35, 103.82}
	dM := policy.Distance(guwahati[0], guwahati[1], mumbai[0], mumbai[1])
	dS := policy.Distance(guwahati[0], guwahati[1], singapore[0], singapore[1])
	// Guwahati is nearer Mumbai, but not twice as near.
	if !(dM < dS && dS*0.5 < dM) {
		t.Fatalf("precondition: Guwahati-Mumbai %.0f km, Guwahati-Singapore %.0f km", dM, dS)
	}
	rec := func(bias string) *policy.Record {
		return mustBuild(t, configYAML(t, []string{cityDB}, `
  - name: bias.example.com
    pools:
      ap-south:     { address: 192.0.2.1, location: { lat: 19.08, lon: 72.88 } }
      ap-southeast: { address: 192.0.2.2, location: { lat: 1.35, lon: 103.82 }`+bias+` }
    rules:
      - default: { by: geoproximity }
`)).Get("bias.example.com.")
	}
	const sgBit = 0b10
	for _, tt := range []struct {
		bias string
		want uint64
	}{
		{"", 0b01},
		{", bias: 10", 0b01}, // dS*0.9 is still further
		{", bias: 50", sgBit},
		{", bias: 99", sgBit},
		{", bias: -50", 0b01},
	} {
		r := rec(tt.bias)
		for _, c := range []string{"192.0.2.32", "2001:db8:3::"} { // Guwahati
			bits := 28
			if strings.Contains(c, ":") {
				bits = 48
			}
			d := r.Decide(query(r, c, bits, ""))
			if d.Pools != tt.want || d.Rule != 0 {
				t.Errorf("bias %q, %s: %s, want %s", tt.bias, c, poolNames(r, d.Pools), poolNames(r, tt.want))
			}
		}
		// Singapore itself always gets Singapore; Pune gets Mumbai unless the
		// bias is extreme.
		if d := r.Decide(query(r, "192.0.2.144", 28, "")); d.Pools != sgBit {
			t.Errorf("bias %q, Singapore: %s", tt.bias, poolNames(r, d.Pools))
		}
	}
	r := rec(", bias: 50")
	got := r.Ranking(0, guwahati[0], guwahati[1])
	if len(got) != 2 || !strings.HasPrefix(got[0], "ap-southeast") {
		t.Errorf("Ranking = %v", got)
	}
}

// TestProximityOrder: with the nearest pool down, the next nearest.
func TestProximityOrder(t *testing.T) {
	r := larkbook(t)
	// Lisbon falls through to geoproximity when eu-central is down:
	// Virginia is nearer than Mumbai.
	q := query(r, "192.0.2.80", 28, "")
	q.Up = r.Enabled &^ euCentral
	if d := r.Decide(q); d.Rule != 3 || d.Pools != usEast {
		t.Errorf("Lisbon without eu-central: %+v %s", d, poolNames(r, d.Pools))
	}
	// Singapore: Mumbai, then Frankfurt, then Virginia.
	q = query(r, "192.0.2.144", 28, "")
	for _, tt := range []struct{ up, want uint64 }{
		{r.Enabled, apSouth},
		{r.Enabled &^ apSouth, euCentral},
		{usEast | usCanary, usEast},
	} {
		q.Up = tt.up
		if d := r.Decide(q); d.Rule != 3 || d.Pools != tt.want {
			t.Errorf("Singapore up %04b: %+v", tt.up, d)
		}
	}
	// No location: the fallback list in order.
	q = query(r, "192.0.2.240", 28, "")
	q.Up = r.Enabled &^ apSouth
	if d := r.Decide(q); d.Rule != 3 || d.Pools != euCentral {
		t.Errorf("no location, ap-south down: %+v", d)
	}
	rk := r.Ranking(3, 1.3521, 103.8198)
	if len(rk) != 3 || !strings.HasPrefix(rk[0], "ap-south ") || !strings.HasPrefix(rk[1], "eu-central ") || !strings.HasPrefix(rk[2], "us-east ") {
		t.Errorf("Ranking from Singapore = %v", rk)
	}
	if r.Ranking(0, 0, 0) != nil {
		t.Error("Ranking of a pool rule is not nil")
	}
}

// TestDisabledPools: enabled: false and the when_all_down behaviours.
func TestDisabledPools(t *testing.T) {
	rec := func(disabled []string, extra string) *policy.Record {
		y := larkbookRecord
		for _, p := range disabled {
			i := strings.Index(y, "      "+p+":")
			j := strings.Index(y[i:], "{ ") + i
			y = y[:j] + "{ enabled: false, " + y[j+2:]
		}
		y = strings.Replace(y, "    on_unhealthy: next_rule\n", extra, 1)
		return mustBuild(t, configYAML(t, []string{cityDB, asnDB}, y)).Get("shop.example.com.")
	}
	pune := func(r *policy.Record) policy.Decision { return r.Decide(query(r, "192.0.2.0", 28, "")) }

	// next_rule: Pune falls through to geoproximity, nearest usable.
	r := rec([]string{"ap-south"}, "    on_unhealthy: next_rule\n")
	if r.Enabled != euCentral|usEast|usCanary {
		t.Fatalf("enabled %04b", r.Enabled)
	}
	if d := pune(r); d.Rule != 3 || d.Pools != euCentral || d.AllDown {
		t.Errorf("next_rule, ap-south disabled: %+v", d)
	}
	// The split rule loses its canary but keeps us-east.
	r = rec([]string{"us-east"}, "")
	for range 200 {
		if d := r.Decide(query(r, "192.0.2.96", 28, "")); d.Rule != 2 || d.Pools != usCanary {
			t.Fatalf("us-east disabled: %+v", d)
		}
	}
	// on_unhealthy: when_all_down goes straight to when_all_down.
	r = rec([]string{"ap-south"}, "    on_unhealthy: when_all_down\n")
	if d := pune(r); d.Rule != 0 || d.Pools != apSouth || !d.AllDown {
		t.Errorf("when_all_down, answer_all: %+v", d)
	}
	r = rec([]string{"ap-south"}, "    on_unhealthy: when_all_down\n    when_all_down: nodata\n")
	if d := pune(r); d.Rule != 0 || !d.NoData || !d.AllDown || d.Pools != 0 {
		t.Errorf("when_all_down, nodata: %+v", d)
	}

	all := []string{"ap-south", "eu-central", "us-east", "us-east-canary"}
	tests := []struct {
		whenAllDown string
		check       func(d policy.Decision) bool
	}{
		{"", func(d policy.Decision) bool { return d.Pools == apSouth && !d.NoData && !d.ServFail }},
		{"    when_all_down: answer_all\n", func(d policy.Decision) bool { return d.Pools == apSouth && !d.NoData && !d.ServFail }},
		{"    when_all_down: fallback_pool us-east-canary\n", func(d policy.Decision) bool { return d.Pools == usCanary && !d.NoData && !d.ServFail }},
		{"    when_all_down: nodata\n", func(d policy.Decision) bool { return d.Pools == 0 && d.NoData && !d.ServFail }},
		{"    when_all_down: servfail\n", func(d policy.Decision) bool { return d.Pools == 0 && !d.NoData && d.ServFail }},
	}
	for _, tt := range tests {
		r := rec(all, tt.whenAllDown)
		if r.Enabled != 0 {
			t.Fatalf("enabled %04b", r.Enabled)
		}
		d := pune(r)
		if !d.AllDown || d.Rule != 0 || !tt.check(d) {
			t.Errorf("all disabled, %q: %+v", strings.TrimSpace(tt.whenAllDown), d)
		}
		// answer_all answers every pool of the first matched rule.
		if tt.whenAllDown == "" {
			d := r.Decide(query(r, "192.0.2.96", 28, ""))
			if d.Rule != 2 || d.Pools != usEast|usCanary || !d.AllDown {
				t.Errorf("all disabled, Columbus: %+v", d)
			}
			d = r.Decide(query(r, "192.0.2.144", 28, ""))
			if d.Rule != 3 || d.Pools != apSouth|euCentral|usEast || !d.AllDown {
				t.Errorf("all disabled, Singapore: %+v", d)
			}
			if rrs := r.AppendAnswer(nil, &d, dns.TypeA, nil); len(rrs) != 3 {
				t.Errorf("all disabled, Singapore: %v", rrs)
			}
		}
	}
}

// TestQtypeFamily: an AAAA query on a record with IPv4 pools only is
// NODATA that depends on no rule.
func TestQtypeFamily(t *testing.T) {
	r := larkbook(t)
	for _, c := range []string{"192.0.2.0", "2001:db8:2::", "192.0.2.240"} {
		q := query(r, c, addr(c).BitLen(), "")
		q.Qtype = dns.TypeAAAA
		d := r.Decide(q)
		if !d.NoData || d.Rule != -1 || d.Pools != 0 || d.AllDown || d.Scope != 0 {
			t.Errorf("AAAA from %s: %+v", c, d)
		}
		q.Qtype = dns.TypeTXT
		if d := r.Decide(q); !d.NoData || d.Rule != -1 {
			t.Errorf("TXT from %s: %+v", c, d)
		}
	}
	// Mixed pools: AAAA answers from the IPv6 pools only and falls through
	// past rules whose pools have no IPv6.
	table := mustBuild(t, configYAML(t, []string{cityDB}, `
  - name: mixed.example.com
    pools:
      v4only: { address: 192.0.2.1 }
      dual:   { addresses: [192.0.2.2, "2001:db8::2"] }
    rules:
      - match: { country: IN }
        pool: v4only
      - default: { pool: dual }
  - name: alias.example.com
    type: CNAME
    pools:
      one: { target: one.example.net }
      two: { target: two.example.net }
    rules:
      - match: { continent: EU }
        pool: two
      - default: { pool: one }
`))
	r = table.Get("mixed.example.com.")
	q := query(r, "192.0.2.0", 28, "")
	if d := r.Decide(q); d.Rule != 0 || d.Pools != 1 {
		t.Errorf("mixed A: %+v", d)
	}
	q.Qtype = dns.TypeAAAA
	d := r.Decide(q)
	if d.Rule != 1 || d.Pools != 2 {
		t.Errorf("mixed AAAA: %+v", d)
	}
	if rrs := r.AppendAnswer(nil, &d, dns.TypeAAAA, nil); len(rrs) != 1 || rrs[0].(*dns.AAAA).AAAA.String() != "2001:db8::2" {
		t.Errorf("mixed AAAA answer %v", rrs)
	}
	// A CNAME record answers any type, with one target.
	c := table.Get("alias.example.com.")
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX} {
		q := query(c, "192.0.2.48", 28, "")
		q.Qtype = qt
		d := c.Decide(q)
		rrs := c.AppendAnswer(nil, &d, qt, nil)
		if d.Rule != 0 || len(rrs) != 1 || rrs[0].(*dns.CNAME).Target != "two.example.net." {
			t.Errorf("CNAME record, qtype %d: %+v %v", qt, d, rrs)
		}
	}
}

// TestResolverSource: source: resolver matches on the packet's source.
func TestResolverSource(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: res.example.com
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
      c: { address: 192.0.2.3 }
    rules:
      - match: { source: resolver, country: SG }
        pool: a
      - match: { country: IN }
        pool: b
      - default: { pool: c }
`))
	r := table.Get("res.example.com.")
	tests := []struct {
		client   string
		bits     int
		resolver string
		rule     int
	}{
		{"192.0.2.32", 28, "192.0.2.150", 0}, // Guwahati via Singapore
		{"192.0.2.32", 28, "192.0.2.20", 1},  // Guwahati via Mumbai
		{"192.0.2.48", 28, "192.0.2.20", 2},  // Berlin via Mumbai
		{"192.0.2.48", 28, "2001:db8:a::53", 0},
		{"192.0.2.48", 28, "::ffff:192.0.2.150", 0},
		{"192.0.2.32", 28, "", 1}, // no resolver address
	}
	for _, tt := range tests {
		d := r.Decide(query(r, tt.client, tt.bits, tt.resolver))
		if d.Rule != tt.rule || d.Pools != 1<<tt.rule {
			t.Errorf("%s via %s: %+v, want rule %d", tt.client, tt.resolver, d, tt.rule)
		}
	}
	geoInfoIN := geo.Info{Country: "IN", Continent: "AS"}
	traces := r.ExplainRules(&geoInfoIN, netip.MustParsePrefix("192.0.2.32/28"), nil, netip.Prefix{})
	if len(traces) != 3 || traces[0].Matched || traces[0].Source != "resolver" || !traces[1].Matched || !traces[2].Matched || !traces[2].Default {
		t.Errorf("ExplainRules = %+v", traces)
	}
	if !slices.Contains(traces[1].Why, "country IN is in [IN]") {
		t.Errorf("ExplainRules why = %v", traces[1].Why)
	}
}

// TestSplitZeroWeight: a zero-weight pool gets nothing while a weighted
// pool is usable, and serves when only zero-weight pools are (sticky or
// not, the same way).
func TestSplitZeroWeight(t *testing.T) {
	for _, sticky := range []string{"", "\n        sticky: client_subnet"} {
		table := mustBuild(t, configYAML(t, []string{cityDB}, `
  - name: zw.example.com
    pools:
      live:    { address: 192.0.2.1 }
      drained: { address: 192.0.2.2 }
      spare:   { address: 192.0.2.3 }
      other:   { address: 192.0.2.4 }
    rules:
      - match: { continent: EU }
        split:
          - { pool: live, weight: 1 }
          - { pool: drained, weight: 0 }
          - { pool: spare, weight: 0 }`+sticky+`
      - default: { pool: other }
`))
		r := table.Get("zw.example.com.")
		for i := range 500 {
			c := fmt.Sprintf("192.0.2.%d", 48+i%32) // Berlin and Frankfurt
			q := query(r, c, 32, "")
			if d := r.Decide(q); d.Pools != 0b0001 || d.Rule != 0 {
				t.Fatalf("sticky %q, %s: %+v, want live", sticky, c, d)
			}
			q.Up = 0b1110
			if d := r.Decide(q); d.Pools != 0b0010 || d.Rule != 0 || d.AllDown {
				t.Fatalf("sticky %q, %s, live down: %+v, want drained", sticky, c, d)
			}
			q.Up = 0b1100
			if d := r.Decide(q); d.Pools != 0b0100 || d.Rule != 0 || d.AllDown {
				t.Fatalf("sticky %q, %s, live and drained down: %+v, want spare", sticky, c, d)
			}
			q.Up = 0b1000
			if d := r.Decide(q); d.Pools != 0b1000 || d.Rule != 1 {
				t.Fatalf("sticky %q, %s, the split is down: %+v, want the next rule", sticky, c, d)
			}
		}
	}
}
