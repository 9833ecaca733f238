package dnsserver_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
)

// TestUnknownClientByNode: with ecs.unknown_client: node a query with no
// usable ECS from an anycast resolver, or from an address the databases
// do not place, is steered by the node's location (Frankfurt, in the EU:
// rule 2), on both paths; with a subnet it is steered by the subnet.
func TestUnknownClientByNode(t *testing.T) {
	node, _ := steeredHandlerWith(t, nodeSteering)
	plain, _ := steeredHandler(t)
	const fra, bom, iad = "198.51.100.20", "203.0.113.10", "192.0.2.30"
	for _, c := range []struct {
		from      string
		ecs       string // "" none
		node      string // the answer with unknown_client: node
		plain     string // with the default, resolver
		nodeScope int    // either way; -1: no ECS option in the answer
	}{
		// 1.1.1.1 is placed in Sydney: nearest Mumbai by its address.
		{"1.1.1.1", "", fra, bom, -1},
		{"1.1.1.1", "0.0.0.0/0", fra, bom, 0},
		{"2606:4700:4700::1111", "::/0", fra, iad, 0},
		// 192.0.2.128/28 is Ashburn, listed as anycast here.
		{"192.0.2.130", "", fra, iad, -1},
		// 127.0.0.1 is in no database: the fallback order by default.
		{"127.0.0.1", "", fra, iad, -1},
		{"127.0.0.1", "0.0.0.0/0", fra, iad, 0},
		// A placed resolver that is not listed: its own address.
		{"192.0.2.20", "", bom, bom, -1},
		// A subnet steers, whoever sends it.
		{"1.1.1.1", "192.0.2.16/28", bom, bom, 27},   // Pune and Mumbai: one answer
		{"127.0.0.1", "192.0.2.96/28", iad, iad, 27}, // Columbus and Chicago
	} {
		m := new(dns.Msg)
		m.SetQuestion("steered.example.com.", dns.TypeA)
		if c.ecs != "" {
			m.SetEdns0(1232, false)
			p := netip.MustParsePrefix(c.ecs)
			fam := uint16(1)
			if p.Addr().Is6() {
				fam = 2
			}
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
		}
		req, _ := m.Pack()
		from := netip.MustParseAddr(c.from)
		for _, h := range []struct {
			name   string
			answer func() []byte
			want   string
			scope  int
		}{
			{"node, fast", func() []byte { return node.HandleFrom(req, dnsserver.UDP, from, nil) }, c.node, c.nodeScope},
			{"node, general", func() []byte { return node.HandleGeneral(req, dnsserver.UDP, from, nil) }, c.node, c.nodeScope},
			{"resolver, fast", func() []byte { return plain.HandleFrom(req, dnsserver.UDP, from, nil) }, c.plain, c.nodeScope},
			{"resolver, general", func() []byte { return plain.HandleGeneral(req, dnsserver.UDP, from, nil) }, c.plain, c.nodeScope},
		} {
			r := new(dns.Msg)
			if err := r.Unpack(h.answer()); err != nil {
				t.Fatal(err)
			}
			if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != h.want {
				t.Errorf("%s: from %s ecs %q: %v, want %s", h.name, c.from, c.ecs, r.Answer, h.want)
			}
			scope := -1
			if o := r.IsEdns0(); o != nil {
				for _, opt := range o.Option {
					if s, ok := opt.(*dns.EDNS0_SUBNET); ok {
						scope = int(s.SourceScope)
					}
				}
			}
			if scope != h.scope {
				t.Errorf("%s: from %s ecs %q: scope %d, want %d", h.name, c.from, c.ecs, scope, h.scope)
			}
		}
	}
}
