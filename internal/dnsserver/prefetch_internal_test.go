package dnsserver

import (
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// ecsHint reads a query's ECS address (what the UDP
// reader prefetches the next datagram's partition entry for) wherever the
// option stands among others, declines queries without one or with a
// source shorter than /16, and never reads past a cut datagram.
func TestECSHint(t *testing.T) {
	pack := func(subnet string, cookieFirst bool) []byte {
		m := new(dns.Msg)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		if cookieFirst {
			o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString([]byte("8 bytes!"))})
		}
		if subnet != "" {
			p := netip.MustParsePrefix(subnet)
			fam := uint16(1)
			if p.Addr().Is6() {
				fam = 2
			}
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
		}
		o.Option = append(o.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		subnet      string
		cookieFirst bool
		want        string // "" for no hint
	}{
		{"81.2.69.0/24", false, "81.2.69.0"},
		{"81.2.69.0/24", true, "81.2.69.0"},
		{"2001:db8:1:2300::/56", true, "2001:db8:1:2300::"},
		{"81.2.0.0/16", false, "81.2.0.0"},
		{"81.0.0.0/8", false, ""},
		{"", true, ""},
	} {
		req := pack(c.subnet, c.cookieFirst)
		a, ok := ecsHint(req)
		if got := ""; ok {
			got = a.String()
			if got != c.want {
				t.Errorf("%s (cookie first %v): hint %s, want %q", c.subnet, c.cookieFirst, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%s (cookie first %v): no hint, want %s", c.subnet, c.cookieFirst, c.want)
		}
		for n := range len(req) {
			ecsHint(req[:n]) // must not panic
		}
	}
	m := new(dns.Msg)
	m.SetQuestion("static.example.com.", dns.TypeA)
	if b, _ := m.Pack(); b != nil {
		if _, ok := ecsHint(b); ok {
			t.Error("a query without EDNS gave a hint")
		}
	}
}
