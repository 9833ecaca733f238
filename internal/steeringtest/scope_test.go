package steeringtest

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/servertest"
)

// scopeCase is one ECS query and the response expected for it.
type scopeCase struct {
	name   string
	qname  string
	qtype  uint16
	subnet string
	want   []string // addresses owned by qname; nil: check nothing
	scope  int
}

func runScopeCases(t *testing.T, srv *servertest.Server, cases []scopeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			sent := netip.MustParsePrefix(c.subnet)
			r, pkt := exchangeRaw(t, srv.V4, ecsQuery(c.qname, c.qtype, c.subnet))
			if r.Rcode != dns.RcodeSuccess || !r.Authoritative {
				t.Fatalf("rcode %s aa %v\n%v", dns.RcodeToString[r.Rcode], r.Authoritative, r)
			}
			if c.want != nil {
				got := addrs(r, c.qname)
				if len(got) != 1 || !contains(c.want, got[0]) {
					t.Errorf("answer %v, want one of %v\n%v", got, c.want, r)
				}
				ttl := uint32(60)
				if !strings.HasSuffix(c.qname, "lab.example.com.") && c.qname != shop {
					ttl = 3600 // from the zone file
				}
				for _, rr := range r.Answer {
					if rr.Header().Name == c.qname && rr.Header().Ttl != ttl {
						t.Errorf("TTL %d, want %d", rr.Header().Ttl, ttl)
					}
				}
			}
			wantECSWire(t, pkt, sent, c.scope)
			wantECS(t, r, sent, c.scope)
			if c.qtype == dns.TypeA {
				k := kdigA(t, srv.V4, c.qname, c.subnet)
				if want := c.subnet + "/" + itoa(c.scope); k.ecs != want {
					t.Errorf("kdig CLIENT-SUBNET %q, want %q", k.ecs, want)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestScope checks the SCOPE PREFIX-LENGTH steer answers with: the depth of
// the client's leaf in the compiled partition, 0 when the answer does not
// depend on the client, capped at the truncated source prefix.
func TestScope(t *testing.T) {
	srv := start(t, cfgOpts{extra: cidrRecord})
	const lab = "lab.example.com."
	runScopeCases(t, srv, []scopeCase{
		// cidr 10.20.0.0/16 -> x; everything else -> y. The partition is
		// the /16 and its complement, so a client inside gets scope 16
		// whatever its source prefix.
		{"cidr inside /24", lab, dns.TypeA, "10.20.5.0/24", []string{"10.99.0.1"}, 16},
		{"cidr inside /16", lab, dns.TypeA, "10.20.0.0/16", []string{"10.99.0.1"}, 16},
		{"cidr inside /28", lab, dns.TypeA, "10.20.255.240/28", []string{"10.99.0.1"}, 16},
		// The /16 next door is a leaf of the same depth with the default.
		{"cidr sibling", lab, dns.TypeA, "10.21.0.0/24", []string{"10.99.0.2"}, 16},
		// 128.0.0.0/1 holds no CIDR: one leaf at depth 1.
		{"cidr far away", lab, dns.TypeA, "192.0.2.0/24", []string{"10.99.0.2"}, 1},
		// A source shorter than the partition: the scope is the leaf's
		// depth, longer than the source (RFC 7871 §7.2.1 allows it).
		{"cidr source shorter than leaf", lab, dns.TypeA, "10.20.0.0/15", []string{"10.99.0.1"}, 16},
		// IPv6: no rule looks at IPv6 space, so one leaf covers it all.
		{"cidr record v6 client", lab, dns.TypeA, "2001:db8:4::/56", []string{"10.99.0.2"}, 0},

		// A static name's answer does not depend on the client: scope 0,
		// the option still echoed.
		{"static v4", "static.example.com.", dns.TypeA, berlinPfx, []string{"192.0.2.80"}, 0},
		{"static v6 source", "static.example.com.", dns.TypeA, "2001:db8:2::/56", []string{"192.0.2.80"}, 0},
		{"static SOA", "example.com.", dns.TypeSOA, punePfx, nil, 0},

		// A /0 source: no client information, scope 0.
		{"source /0 v4", shop, dns.TypeA, "0.0.0.0/0", []string{apSouth}, 0},
		{"source /0 v6", shop, dns.TypeA, "::/0", []string{apSouth}, 0},

		// IPv6 /56 sources get their leaf: Mumbai's /47, Pune's /48.
		{"v6 Mumbai /56", shop, dns.TypeA, "2001:db8:2::/56", []string{apSouth}, 47},
		{"v6 Guwahati /56", shop, dns.TypeA, "2001:db8:3:ff00::/56", []string{apSouth}, 47},
		{"v6 Pune /56", shop, dns.TypeA, "2001:db8:1::/56", []string{apSouth}, 48},
		// Longer than max_source_v6 (56): truncated to /56, the leaf is
		// shorter, so the scope is still the leaf's.
		{"v6 Mumbai /64 truncated", shop, dns.TypeA, "2001:db8:2:ab::/64", []string{apSouth}, 47},
		{"v6 Mumbai /128 truncated", shop, dns.TypeA, "2001:db8:2::1/128", []string{apSouth}, 47},

		// max_source_v4 is 28 here: a /32 in Berlin is cut to 192.0.2.48/28,
		// still Berlin, scope 28 (the leaf, and the truncated source).
		{"v4 /32 truncated to /28", shop, dns.TypeA, "192.0.2.50/32", []string{euCentral}, 28},
		{"v4 /30 truncated to /28", shop, dns.TypeA, "192.0.2.84/30", []string{euCentral}, 27},
		// Sources shorter than the leaf: the whole 192.0.2.0/24 is
		// answered for its first address (Pune), the scope is the leaf's.
		{"v4 /24 Pune leaf", shop, dns.TypeA, "192.0.2.0/24", []string{apSouth}, 27},
	})

	// The values above agree with the compiled partition.
	for _, c := range []struct {
		name, subnet string
		scope        int
	}{
		{shop, "2001:db8:2::/56", 47},
		{shop, "2001:db8:1::/56", 48},
		{lab, "10.20.5.0/24", 16},
		{lab, "192.0.2.0/24", 1},
		{lab, "2001:db8:4::/56", 0},
	} {
		if d := decide(t, srv, c.name, netip.MustParsePrefix(c.subnet), netip.Addr{}, dns.TypeA); d.Scope != c.scope {
			t.Errorf("Decide(%s, %s) scope = %d, want %d", c.name, c.subnet, d.Scope, c.scope)
		}
	}
}

// TestScopeTruncation24 runs the demo's max_source_v4: 24. Every source
// longer than /24 is cut to its /24 before steering, so all of
// 192.0.2.0/24 gets the answer for 192.0.2.0 (Pune), and the scope is
// capped at 24: the answer was chosen for the /24, and more bits would not
// change it. The option still echoes the source prefix and address sent.
func TestScopeTruncation24(t *testing.T) {
	srv := start(t, cfgOpts{maxV4: 24})
	runScopeCases(t, srv, []scopeCase{
		{"v4 /32 Berlin host", shop, dns.TypeA, "192.0.2.50/32", []string{apSouth}, 24},
		{"v4 /28 Berlin", shop, dns.TypeA, berlinPfx, []string{apSouth}, 24},
		{"v4 /28 Pune", shop, dns.TypeA, punePfx, []string{apSouth}, 24},
		{"v4 /25 Columbus half", shop, dns.TypeA, "192.0.2.128/25", []string{apSouth}, 24},
		// A /24 is not cut: steering uses it as sent, and the scope is
		// Pune's leaf, 27, longer than the source (allowed).
		{"v4 /24 not truncated", shop, dns.TypeA, "192.0.2.0/24", []string{apSouth}, 27},
	})
	// At or below the maximum nothing is cut: 91.64.0.0/24 (Berlin, in a
	// real-looking /14 of one city) gets its leaf's scope, which is wider
	// than the /24.
	d := decide(t, srv, shop, netip.MustParsePrefix("91.64.0.0/24"), netip.Addr{}, dns.TypeA)
	if d.Scope <= 0 || d.Scope > 14 {
		t.Errorf("91.64.0.0/24 lies in a /14 of one city, yet its leaf is /%d", d.Scope)
	}
	runScopeCases(t, srv, []scopeCase{{"v4 /24 Berlin 91.64", shop, dns.TypeA, "91.64.0.0/24", []string{euCentral}, d.Scope}})
	// The decision for a truncated /24 is the one Decide makes for the /24.
	d = decide(t, srv, shop, netip.MustParsePrefix("192.0.2.0/24"), netip.Addr{}, dns.TypeA)
	if d.Rule != 0 || d.Scope != 27 {
		t.Errorf("Decide(192.0.2.0/24) = rule %d scope %d, want rule 1 scope 27", d.Rule+1, d.Scope)
	}
}

// TestScopeV4MappedECS: an IPv4-mapped address in a FAMILY 2 option is
// steered by its IPv4 address, so the IPv4 partition's depth counts after
// the 96 bits of ::ffff:0:0/96. (Without max_source_v6 above 96 the mapped
// part is cut away and the client is just "::".)
func TestScopeV4MappedECS(t *testing.T) {
	srv := start(t, cfgOpts{maxV6: 128, extra: cidrRecord})
	const lab = "lab.example.com."
	runScopeCases(t, srv, []scopeCase{
		{"mapped Berlin", shop, dns.TypeA, "::ffff:192.0.2.48/124", []string{euCentral}, 96 + 28},
		{"mapped Pune", shop, dns.TypeA, "::ffff:192.0.2.0/120", []string{apSouth}, 96 + 27},
		{"mapped cidr", lab, dns.TypeA, "::ffff:10.20.0.0/112", []string{"10.99.0.1"}, 96 + 16},
		// The IPv4 default leaf is 128.0.0.0/1: ::ffff:128.0.0.0/97, never
		// a scope short enough to cover real IPv6 clients.
		{"mapped default", lab, dns.TypeA, "::ffff:192.0.2.0/120", []string{"10.99.0.2"}, 96 + 1},
	})
}

// TestECSDisabled: with ecs.enabled false steer ignores the option (even a
// malformed one), never echoes it, and steers on the packet's source.
func TestECSDisabled(t *testing.T) {
	srv := start(t, cfgOpts{ecsDisabled: true})
	h := srv.Handler()
	// A Pune subnet from a Berlin resolver: Berlin decides.
	r, pkt := handleFrom(t, h, ecsQuery(shop, dns.TypeA, punePfx), berlinHost)
	wantAnswer(t, r, euCentral)
	wantNoECS(t, r)
	if n := len(rawECS(t, pkt)); n != 0 {
		t.Errorf("%d ECS options on the wire, want none", n)
	}
	if r.IsEdns0() == nil {
		t.Errorf("no OPT in the response to an EDNS query")
	}
	// A Berlin subnet from the Singapore resolver: Singapore decides.
	r, _ = handleFrom(t, h, ecsQuery(shop, dns.TypeA, berlinPfx), singaporeResolver)
	wantAnswer(t, r, apSouth)
	wantNoECS(t, r)
	// A malformed option that the miekg/dns decoder accepts (non-zero
	// SCOPE, bits beyond the source prefix) is not even read: NOERROR.
	// (Options the decoder rejects are TestECSDisabledIgnoresBadFamily.)
	for _, data := range [][]byte{
		{0, 1, 24, 24, 192, 0, 2},
		{0, 1, 20, 0, 192, 0, 2},
		{0, 1, 24, 0, 192, 0, 2, 1},
	} {
		bad := query(shop, dns.TypeA, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: data})
		r, _ = handleFrom(t, h, bad, berlinHost)
		wantAnswer(t, r, euCentral)
		wantNoECS(t, r)
	}

	// Over the wire from 127.0.0.1 (no geo data): the fallback's first
	// pool whatever the subnet says, and no CLIENT-SUBNET in kdig's view.
	for _, subnet := range []string{berlinPfx, columbusPfx, "2001:db8:4::/56"} {
		k := kdigA(t, srv.V4, shop, subnet)
		if k.status != "NOERROR" || len(k.answers) != 1 || k.answers[0].rdata != apSouth {
			t.Errorf("kdig +subnet=%s with ECS disabled:\n%s", subnet, k.raw)
		}
		if k.ecs != "" || !k.hasEDNS {
			t.Errorf("kdig +subnet=%s with ECS disabled: CLIENT-SUBNET %q, EDNS %v", subnet, k.ecs, k.hasEDNS)
		}
		r, pkt := exchangeRaw(t, srv.V4, ecsQuery(shop, dns.TypeA, subnet))
		wantAnswer(t, r, apSouth)
		if n := len(rawECS(t, pkt)); n != 0 {
			t.Errorf("%d ECS options on the wire, want none", n)
		}
	}
}

// TestECSDisabledIgnoresBadFamily: with ecs.enabled false the option is
// documented as ignored (config.ECS.Enabled), as RFC 6891 §6.1.2 wants for
// options a server does not process. Yet an ECS option the miekg/dns
// decoder rejects (unknown FAMILY, SOURCE beyond the family's length)
// makes the handler's parse fail, so the query gets FORMERR.
func TestECSDisabledIgnoresBadFamily(t *testing.T) {
	srv := start(t, cfgOpts{ecsDisabled: true})
	for _, data := range [][]byte{
		{0, 3, 24, 0, 192, 0, 2},       // FAMILY 3
		{0, 1, 33, 0, 192, 0, 2, 0, 0}, // IPv4 /33
		{0, 2, 129, 0, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // IPv6 /129
	} {
		m := query(shop, dns.TypeA, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: data})
		r, _ := handleFrom(t, srv.Handler(), m, berlinHost)
		if r.Rcode != dns.RcodeSuccess {
			t.Errorf("ECS disabled, option % x: rcode %s, want NOERROR (the option ignored)", data, dns.RcodeToString[r.Rcode])
			continue
		}
		wantAnswer(t, r, euCentral)
		wantNoECS(t, r)
	}
}
