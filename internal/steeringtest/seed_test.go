package steeringtest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/servertest"
)

// seedCase is one client subnet of the Larkbook data and what steering
// answers it.
type seedCase struct {
	city   string
	subnet string
	want   []string // acceptable addresses (a split allows either pool)
	// scope is the expected ECS scope: the depth of the subnet's leaf in the
	// compiled partition (see seedCases); -1 takes it from policy.Decide.
	scope int
	rule  int // the deciding rule, 0-based
}

// seedCases are the probes of testdata/geo/README.md. The hard-coded
// scopes come from the data: The partition merges two
// sibling prefixes when every rule matches both the same way and the
// default rule's geoproximity ranks the pools in the same order for both:
//
//   - Pune (.0/28) and Mumbai (.16/28) are both IN with the ranking
//     ap-south, eu-central, us-east: 192.0.2.0/27, scope 27.
//   - Guwahati (.32/28, IN) and Berlin (.48/28, EU) differ: scope 28 each.
//   - Frankfurt (.64/28) and Lisbon (.80/28) are both EU and both rank
//     eu-central, us-east, ap-south (Frankfurt is 6,553 km from us-east and
//     6,564 km from ap-south): 192.0.2.64/27, scope 27.
//   - Columbus (.96/28) and Chicago (.112/28) are both NA, ranked alike: 27.
//   - Ashburn (.128) and Singapore (.144) differ: 28; Tokyo (.224) and the
//     empty 192.0.2.240/28 differ: 28.
//   - IPv6: 2001:db8:2::/48 (Mumbai) and 2001:db8:3::/48 (Guwahati) merge
//     into 2001:db8:2::/47; 2001:db8:1::/48 (Pune) has the unassigned
//     2001:db8::/48 beside it, so it stays a /48.
var seedCases = []seedCase{
	{"Pune", punePfx, []string{apSouth}, 27, 0},
	{"Mumbai", mumbaiPfx, []string{apSouth}, 27, 0},
	{"Guwahati", guwahatiPfx, []string{apSouth}, 28, 0},
	{"Berlin", berlinPfx, []string{euCentral}, 28, 1},
	{"Frankfurt", frankfurtPfx, []string{euCentral}, 27, 1},
	{"Lisbon", lisbonPfx, []string{euCentral}, 27, 1},
	{"Columbus", columbusPfx, []string{usEast, usEastCanary}, 27, 2},
	{"Chicago", chicagoPfx, []string{usEast, usEastCanary}, 27, 2},
	{"Ashburn", ashburnPfx, []string{usEast, usEastCanary}, 28, 2},
	// Singapore and Tokyo match no rule: the default's geoproximity picks
	// the nearest pool, Mumbai.
	{"Singapore", singaporePfx, []string{apSouth}, 28, 3},
	{"Sao Paulo", "192.0.2.192/28", []string{usEast, usEastCanary}, 28, 2},
	{"Tokyo", "192.0.2.224/28", []string{apSouth}, 28, 3},
	// Not in the databases: no location, so the fallback order's first.
	{"not found", "192.0.2.240/28", []string{apSouth}, 28, 3},
	{"Pune v6", "2001:db8:1::/56", []string{apSouth}, 48, 0},
	{"Mumbai v6", "2001:db8:2::/56", []string{apSouth}, 47, 0},
	{"Berlin v6", "2001:db8:4::/56", []string{euCentral}, -1, 1},
	{"Lisbon v6", "2001:db8:6::/56", []string{euCentral}, -1, 1},
	{"Columbus v6", "2001:db8:7::/56", []string{usEast, usEastCanary}, -1, 2},
	// Real-looking rows.
	{"Mumbai 49.36/14", "49.36.1.0/24", []string{apSouth}, -1, 0},
	{"Berlin 91.64/14", "91.64.0.0/24", []string{euCentral}, -1, 1},
	{"Mountain View", "8.8.8.0/24", []string{usEast, usEastCanary}, -1, 2},
	{"Sydney 1.1.1/24", "1.1.1.0/24", []string{apSouth}, -1, 3},
}

// expectedScope returns c's scope, asking the compiled record when the
// table leaves it open, and checks that the record agrees with the table.
func expectedScope(t *testing.T, srv *servertest.Server, c seedCase) int {
	t.Helper()
	p := netip.MustParsePrefix(c.subnet)
	d := decide(t, srv, shop, p, netip.Addr{}, dns.TypeA)
	if d.Rule != c.rule {
		t.Errorf("%s: Decide chose rule %d, want %d", c.city, d.Rule+1, c.rule+1)
	}
	if c.scope >= 0 && d.Scope != c.scope {
		t.Errorf("%s: Decide's partition scope is %d, want %d", c.city, d.Scope, c.scope)
	}
	if c.scope < 0 {
		if d.Scope <= 0 || d.Scope > 128 {
			t.Fatalf("%s: Decide's scope %d is not a prefix length", c.city, d.Scope)
		}
		return d.Scope
	}
	return c.scope
}

// TestSeedTable sends each Larkbook client subnet in an ECS option over
// real sockets, with the miekg/dns client (checking the ECS option byte for
// byte on the wire) and with kdig +subnet, over IPv4 and IPv6 transports.
func TestSeedTable(t *testing.T) {
	srv := start(t, cfgOpts{})
	transports := []netip.AddrPort{srv.V4}
	if srv.V6.IsValid() {
		transports = append(transports, srv.V6)
	}
	for _, c := range seedCases {
		t.Run(strings.ReplaceAll(c.city, " ", "_"), func(t *testing.T) {
			scope := expectedScope(t, srv, c)
			sent := netip.MustParsePrefix(c.subnet)
			for _, addr := range transports {
				// miekg/dns over UDP and TCP.
				for _, network := range []string{"udp", "tcp"} {
					m := ecsQuery(shop, dns.TypeA, c.subnet)
					r := dnstest.Exchange(t, network, addr, m)
					if r.Id != m.Id {
						t.Errorf("%s: ID %d, want %d", network, r.Id, m.Id)
					}
					wantAnswer(t, r, c.want...)
					wantECS(t, r, sent, scope)
				}
				// Raw UDP: the option as it is on the wire.
				r, pkt := exchangeRaw(t, addr, ecsQuery(shop, dns.TypeA, c.subnet))
				wantAnswer(t, r, c.want...)
				wantECSWire(t, pkt, sent, scope)

				// kdig +subnet.
				k := kdigA(t, addr, shop, c.subnet)
				if k.status != "NOERROR" || !k.hasFlag("aa") || !k.hasFlag("qr") {
					t.Errorf("kdig: status %s flags %v, want NOERROR with qr aa\n%s", k.status, k.flags, k.raw)
				}
				if len(k.answers) != 1 || k.answers[0].typ != "A" || k.answers[0].ttl != 60 || k.answers[0].name != shop || !contains(c.want, k.answers[0].rdata) {
					t.Errorf("kdig: answers %+v, want one A %v with TTL 60\n%s", k.answers, c.want, k.raw)
				}
				if want := fmt.Sprintf("%s/%d", c.subnet, scope); k.ecs != want {
					t.Errorf("kdig: CLIENT-SUBNET %q, want %q\n%s", k.ecs, want, k.raw)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestNoClientSubnet covers queries without ECS: steering looks at the
// packet's source address, the resolver, and the response carries no ECS
// option at all.
func TestNoClientSubnet(t *testing.T) {
	srv := start(t, cfgOpts{})
	h := srv.Handler()
	for _, c := range []struct {
		name string
		from string
		want []string
	}{
		// A Guwahati user through a resolver in Singapore: no rule matches
		// Singapore, and geoproximity's nearest pool is Mumbai.
		{"Singapore resolver", singaporeResolver, []string{apSouth}},
		// A Lisbon user through a VPN whose resolver is in Ashburn: NA split.
		{"Ashburn resolver", ashburnResolver, []string{usEast, usEastCanary}},
		{"Berlin resolver", berlinHost, []string{euCentral}},
		{"Pune resolver v4-mapped", "::ffff:192.0.2.5", []string{apSouth}},
		{"Mumbai resolver v6", "2001:db8:2::53", []string{apSouth}},
		// Unknown to the databases: fallback order, ap-south first.
		{"loopback resolver", "127.0.0.1", []string{apSouth}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			// With EDNS but no ECS option.
			r, _ := handleFrom(t, h, query(shop, dns.TypeA), c.from)
			wantAnswer(t, r, c.want...)
			if r.IsEdns0() == nil {
				t.Errorf("no OPT in the response to an EDNS query")
			}
			wantNoECS(t, r)
			// Without EDNS at all.
			r, _ = handleFrom(t, h, dnstest.Query(shop, dns.TypeA), c.from)
			wantAnswer(t, r, c.want...)
			if r.IsEdns0() != nil {
				t.Errorf("OPT in the response to a query without EDNS")
			}
			// The compiled record agrees (resolver = client, full length).
			from := netip.MustParseAddr(c.from).Unmap()
			d := decide(t, srv, shop, netip.PrefixFrom(from, from.BitLen()), from, dns.TypeA)
			if d.Pools == 0 {
				t.Errorf("Decide chose no pool")
			}
		})
	}

	// An ECS subnet wins over the resolver's address: a Pune client behind
	// the Ashburn resolver gets Mumbai, with the scope of Pune's leaf.
	t.Run("ECS_beats_resolver", func(t *testing.T) {
		r, pkt := handleFrom(t, h, ecsQuery(shop, dns.TypeA, punePfx), ashburnResolver)
		wantAnswer(t, r, apSouth)
		wantECSWire(t, pkt, netip.MustParsePrefix(punePfx), 27)
	})
	// A /0 source carries no client information: the resolver's address
	// decides, and the scope is 0.
	t.Run("ECS_slash0_uses_resolver", func(t *testing.T) {
		r, pkt := handleFrom(t, h, ecsQuery(shop, dns.TypeA, "0.0.0.0/0"), berlinHost)
		wantAnswer(t, r, euCentral)
		wantECSWire(t, pkt, netip.MustParsePrefix("0.0.0.0/0"), 0)
		r, pkt = handleFrom(t, h, ecsQuery(shop, dns.TypeA, "::/0"), singaporeResolver)
		wantAnswer(t, r, apSouth)
		wantECSWire(t, pkt, netip.MustParsePrefix("::/0"), 0)
	})

	// Over the wire from 127.0.0.1 (unknown to the databases), with and
	// without EDNS: ap-south, and no ECS option.
	t.Run("wire", func(t *testing.T) {
		k := kdigA(t, srv.V4, shop, "")
		if k.status != "NOERROR" || !k.hasFlag("aa") || len(k.answers) != 1 || k.answers[0].rdata != apSouth || k.answers[0].ttl != 60 {
			t.Errorf("kdig without +subnet: %s", k.raw)
		}
		if k.ecs != "" {
			t.Errorf("kdig without +subnet got CLIENT-SUBNET %s", k.ecs)
		}
		r, pkt := exchangeRaw(t, srv.V4, query(shop, dns.TypeA))
		wantAnswer(t, r, apSouth)
		if n := len(rawECS(t, pkt)); n != 0 {
			t.Errorf("%d ECS options in the response to a query without one", n)
		}
	})
}
