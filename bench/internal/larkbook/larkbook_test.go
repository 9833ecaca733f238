package larkbook

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

func TestExpected(t *testing.T) {
	for _, c := range []struct{ country, continent, want string }{
		{"IN", "AS", Mumbai}, {"LK", "AS", Mumbai}, {"BD", "AS", Mumbai}, {"NP", "AS", Mumbai},
		{"PK", "AS", Virginia}, {"DE", "EU", Frankfurt}, {"RU", "EU", Frankfurt},
		{"US", "NA", Virginia}, {"BR", "SA", Virginia}, {"AU", "OC", Virginia},
		{"ZA", "AF", Virginia}, {"", "", Virginia},
	} {
		if got := Expected(c.country, c.continent); got != c.want {
			t.Errorf("Expected(%q, %q) = %s, want %s", c.country, c.continent, got, c.want)
		}
	}
}

func TestQuery(t *testing.T) {
	wire, err := Query("shop.example.com.", netip.MustParsePrefix("49.36.1.0/24"), 7)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	if m.Id != 7 || m.RecursionDesired || len(m.Question) != 1 || m.Question[0].Name != "shop.example.com." || m.Question[0].Qtype != dns.TypeA {
		t.Fatalf("unexpected header or question: %v", m)
	}
	opt := m.IsEdns0()
	if opt == nil || opt.UDPSize() != 1232 || len(opt.Option) != 1 {
		t.Fatalf("want one EDNS option with buffer 1232, got %v", opt)
	}
	ecs, ok := opt.Option[0].(*dns.EDNS0_SUBNET)
	if !ok || ecs.Family != 1 || ecs.SourceNetmask != 24 || ecs.SourceScope != 0 || ecs.Address.String() != "49.36.1.0" {
		t.Fatalf("bad ECS option %v", opt.Option[0])
	}
}
