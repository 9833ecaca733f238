package steeringtest

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/internal/dnstest"
)

// badECS is one malformed ECS option (RFC 7871 §6, §7.1.1).
type badECS struct {
	name string
	data []byte
}

var badECSCases = []badECS{
	{"unknown family 3", []byte{0, 3, 24, 0, 192, 0, 2}},
	{"family 0 with a source prefix", []byte{0, 0, 24, 0, 192, 0, 2}},
	// RFC 7871 §7.2.1: an unknown FAMILY is a malformed option, FAMILY 0
	// /0 (as old dig sent) included, as gdnsd answers it.
	{"family 0 /0", []byte{0, 0, 0, 0}},
	{"IPv4 source 33 (5 octets)", []byte{0, 1, 33, 0, 192, 0, 2, 1, 0}},
	{"IPv4 source 33 (4 octets)", []byte{0, 1, 33, 0, 192, 0, 2, 1}},
	{"IPv6 source 129", append([]byte{0, 2, 129, 0}, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
	{"IPv4 /24 sent as 4 octets (192.0.2.1)", []byte{0, 1, 24, 0, 192, 0, 2, 1}},
	{"IPv4 /24 sent as 4 octets, zero padding", []byte{0, 1, 24, 0, 192, 0, 2, 0}},
	{"IPv4 /20 with bits beyond /20 set (192.0.2.0)", []byte{0, 1, 20, 0, 192, 0, 2}},
	{"IPv4 /28 with bits beyond /28 set", []byte{0, 1, 28, 0, 192, 0, 2, 49}},
	{"IPv4 /0 with an address octet", []byte{0, 1, 0, 0, 0}},
	{"IPv4 /24 with 2 octets", []byte{0, 1, 24, 0, 192, 0}},
	{"IPv4 /32 with no octets", []byte{0, 1, 32, 0}},
	{"IPv6 /56 with 8 octets", []byte{0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0}},
	{"IPv6 /56 with 6 octets", []byte{0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2}},
	{"IPv6 /52 with bits beyond /52 set", []byte{0, 2, 52, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0x01}},
	{"IPv4 scope 24 in a query", []byte{0, 1, 24, 24, 192, 0, 2}},
	{"IPv6 scope 48 in a query", []byte{0, 2, 56, 48, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0}},
	{"shorter than the fixed part", []byte{0, 1, 24}},
	{"empty", []byte{}},
}

// TestBadECSFormErr sends each malformed option over UDP and TCP: steer
// answers FORMERR, echoing the ID and the question, with no answer and no
// ECS option.
func TestBadECSFormErr(t *testing.T) {
	srv := start(t, cfgOpts{})
	for i, c := range badECSCases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			m := query(shop, dns.TypeA, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: c.data})
			m.Id = 0xBE00 + uint16(i)
			pkt := pack(t, m)
			// Raw UDP: the header as sent.
			out, err := dnstest.ExchangeRaw("udp", srv.V4, pkt)
			if err != nil {
				t.Fatalf("raw exchange: %v", err)
			}
			if id := binary.BigEndian.Uint16(out); id != m.Id {
				t.Errorf("ID %#04x, want %#04x", id, m.Id)
			}
			if out[2]&0x80 == 0 || out[3]&0x0F != dns.RcodeFormatError {
				t.Errorf("flags % x: want QR and rcode FORMERR", out[2:4])
			}
			r := new(dns.Msg)
			if err := r.Unpack(out); err != nil {
				t.Fatalf("unpacking the FORMERR: %v", err)
			}
			if r.Rcode != dns.RcodeFormatError || len(r.Answer) != 0 || r.Authoritative {
				t.Errorf("rcode %s aa %v answers %d, want FORMERR, no aa, no answer", dns.RcodeToString[r.Rcode], r.Authoritative, len(r.Answer))
			}
			if len(r.Question) != 1 || r.Question[0].Name != shop || r.Question[0].Qtype != dns.TypeA {
				t.Errorf("question %v, want the query's", r.Question)
			}
			// The OPT is echoed only when the miekg/dns decoder accepted the
			// option (steer's own ECS checks reject the rest); a FORMERR
			// for an OPT that does not decode carries none. Not required.
			if n := len(rawECS(t, out)); n != 0 {
				t.Errorf("%d ECS options in the FORMERR, want none", n)
			}
			// TCP, with the miekg/dns client.
			c := &dns.Client{Net: "tcp"}
			r, _, err = c.Exchange(m, srv.V4.String())
			if err != nil {
				t.Fatalf("tcp: %v", err)
			}
			if r.Id != m.Id || r.Rcode != dns.RcodeFormatError {
				t.Errorf("tcp: ID %#04x rcode %s, want %#04x FORMERR", r.Id, dns.RcodeToString[r.Rcode], m.Id)
			}
		})
	}

	// Well-formed neighbours of the bad cases are answered.
	for _, data := range [][]byte{
		{0, 1, 20, 0, 192, 0, 16},                  // 192.0.16.0/20
		{0, 1, 28, 0, 192, 0, 2, 48},               // Berlin /28
		{0, 1, 0, 0},                               // IPv4 /0
		{0, 2, 0, 0},                               // IPv6 /0
		{0, 1, 32, 0, 192, 0, 2, 50},               // /32
		{0, 2, 52, 0, 0x20, 1, 0xd, 0xb8, 0, 2, 0}, // 2001:db8:2::/52
	} {
		m := query(shop, dns.TypeA, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: data})
		r, out := exchangeRaw(t, srv.V4, m)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Errorf("option % x: rcode %s, %d answers; want NOERROR with an answer", data, dns.RcodeToString[r.Rcode], len(r.Answer))
			continue
		}
		ecs := rawECS(t, out)
		if len(ecs) != 1 || string(ecs[0][:3]) != string(data[:3]) || string(ecs[0][4:]) != string(data[4:]) {
			t.Errorf("option % x echoed as % x", data, ecs)
		}
	}
}
