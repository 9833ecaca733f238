package dnsserver_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
)

// TestECSUnknownFamilyFormErr: an ECS option whose FAMILY is neither 1 nor
// 2 is malformed (RFC 7871 §7.2.1), FAMILY 0 with a /0 source included, as
// gdnsd has it: FORMERR with the question and an OPT without options (no
// ECS echoed), the same bytes from the fast and the general path.
func TestECSUnknownFamilyFormErr(t *testing.T) {
	h, _ := steeredHandler(t)
	from := netip.MustParseAddr("192.0.2.150")
	for _, data := range [][]byte{
		{0, 0, 0, 0},             // FAMILY 0 /0
		{0, 3, 0, 0},             // FAMILY 3 /0
		{0, 0, 24, 0, 192, 0, 2}, // FAMILY 0 /24
		{0xff, 0xff, 0, 0},
	} {
		for _, name := range []string{"steered.example.com.", "www.example.com.", "nx.example.com."} {
			for _, tr := range []dnsserver.Transport{dnsserver.UDP, dnsserver.TCP} {
				m := new(dns.Msg)
				m.SetQuestion(name, dns.TypeA)
				m.SetEdns0(1232, true)
				o := m.IsEdns0()
				o.Option = append(o.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID}, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: data})
				req, err := m.Pack()
				if err != nil {
					t.Fatal(err)
				}
				fast := h.HandleFrom(req, tr, from, make([]byte, 0, 4096))
				general := h.HandleGeneral(req, tr, from, make([]byte, 0, 4096))
				if !bytes.Equal(fast, general) {
					t.Errorf("% x %s %v: fast and general differ\n% x\n% x", data, name, tr, fast, general)
				}
				r := new(dns.Msg)
				if err := r.Unpack(fast); err != nil {
					t.Fatalf("% x %s: %v", data, name, err)
				}
				if r.Rcode != dns.RcodeFormatError {
					t.Errorf("% x %s %v: rcode %s, want FORMERR", data, name, tr, dns.RcodeToString[r.Rcode])
				}
				if len(r.Question) != 1 || r.Question[0].Name != name || len(r.Answer)+len(r.Ns) != 0 {
					t.Errorf("% x %s: question %v, %d records", data, name, r.Question, len(r.Answer)+len(r.Ns))
				}
				ro := r.IsEdns0()
				if ro == nil || len(r.Extra) != 1 || len(ro.Option) != 0 || !ro.Do() || ro.Version() != 0 {
					t.Errorf("% x %s: additional %v, want an OPT with DO and no options", data, name, r.Extra)
				}
			}
		}
	}
}
