package dnsserver_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
)

// fuzzSeeds are real queries: several names and types, with and without
// EDNS and options, and odd flags.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	add := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"www.example.com.", dns.TypeA}, {"example.com.", dns.TypeSOA}, {"example.com.", dns.TypeNS},
		{"example.com.", dns.TypeMX}, {"example.com.", dns.TypeANY}, {"nx.example.com.", dns.TypeA},
		{"alias.example.com.", dns.TypeA}, {"foo.wild.example.com.", dns.TypeTXT}, {"www.sub.example.com.", dns.TypeA},
		{"sub.example.com.", dns.TypeDS}, {"host.legacy.example.com.", dns.TypeA}, {"huge.example.com.", dns.TypeTXT},
		{"big.example.com.", dns.TypeTXT}, {"example.org.", dns.TypeA}, {"ExAmPle.CoM.", dns.TypeSOA},
		{"_sip._tcp.example.com.", dns.TypeSRV}, {"example.com.", dns.TypeAXFR}, {"example.com.", 666},
	} {
		add(query(q.name, q.qtype))
		m := ednsQuery(q.name, q.qtype, 4096)
		add(m)
		m = ednsQuery(q.name, q.qtype, 512)
		o := m.IsEdns0()
		o.SetDo()
		o.Option = []dns.EDNS0{
			&dns.EDNS0_NSID{Code: dns.EDNS0NSID},
			&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"},
			&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(192, 0, 2, 0)},
			&dns.EDNS0_EXPIRE{Code: dns.EDNS0EXPIRE, Empty: true},
			&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE},
			&dns.EDNS0_LOCAL{Code: 100},
		}
		add(m)
	}
	m := query("id.server.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	add(m)
	m = ednsQuery("www.example.com.", dns.TypeA, 4096)
	m.IsEdns0().SetVersion(1)
	add(m)
	m = query("www.example.com.", dns.TypeA)
	m.Opcode = dns.OpcodeNotify
	add(m)
	m = query("www.example.com.", dns.TypeA)
	m.Zero, m.CheckingDisabled, m.AuthenticatedData, m.RecursionDesired = true, true, true, true
	add(m)
	for _, g := range allGenTests() {
		seeds = append(seeds, genQuery(g, 0x1234))
	}
	for _, c := range malformedCases {
		seeds = append(seeds, c.pkt)
	}
	return seeds
}

// hasOPT reports whether req carries a decodable OPT record anywhere: the
// handler may then use up to 1232 bytes over UDP.
func hasOPT(req []byte) bool {
	if len(req) < 12 {
		return false
	}
	off := 12
	for i := 0; i < int(binary.BigEndian.Uint16(req[4:])); i++ {
		_, off1, err := dns.UnpackDomainName(req, off)
		if err != nil || off1+4 > len(req) {
			return false
		}
		off = off1 + 4
	}
	// Record headers only: an OPT counts by its type, as the server reads
	// it (miekg/dns's option decoders refuse some well-framed options
	// the server must ignore, such as an empty UL lease).
	n := int(binary.BigEndian.Uint16(req[6:])) + int(binary.BigEndian.Uint16(req[8:])) + int(binary.BigEndian.Uint16(req[10:]))
	for i := 0; i < n && off < len(req); i++ {
		_, off1, err := dns.UnpackDomainName(req, off)
		if err != nil || off1+10 > len(req) {
			return false
		}
		if binary.BigEndian.Uint16(req[off1:]) == dns.TypeOPT {
			return true
		}
		off = off1 + 10 + int(binary.BigEndian.Uint16(req[off1+8:]))
	}
	return false
}

// FuzzHandle feeds arbitrary packets to the handler over both transports:
// it must never panic nor modify the query; a response must unpack, have
// QR set and the query's ID, and fit the transport's size limit.
func FuzzHandle(f *testing.F) {
	h := newTestHandler(f, srvOpts{})
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		orig := bytes.Clone(req)
		var rcodes [2]int
		var truncated bool
		for i, tr := range []dnsserver.Transport{dnsserver.UDP, dnsserver.TCP} {
			var buf []byte
			if tr == dnsserver.UDP {
				buf = make([]byte, 0, 65535) // as the UDP reader's buffer
			}
			out := h.HandleFrom(req, tr, netip.Addr{}, buf)
			if !bytes.Equal(req, orig) {
				t.Fatalf("%s: Handle modified the query", tr)
			}
			if out == nil {
				rcodes[i] = -1
				continue
			}
			if tr == dnsserver.UDP {
				limit := dnsserver.MinUDPSize
				if hasOPT(req) {
					limit = dnsserver.AdvertisedUDPSize
				}
				if len(out) > limit {
					t.Fatalf("udp: %d-byte response, limit %d", len(out), limit)
				}
			} else if len(out) > 65535 {
				t.Fatalf("tcp: %d-byte response", len(out))
			}
			r := new(dns.Msg)
			if err := r.Unpack(out); err != nil {
				t.Fatalf("%s: response does not unpack: %v\n% x", tr, err, out)
			}
			if !r.Response {
				t.Fatalf("%s: QR clear", tr)
			}
			if len(req) < 2 || r.Id != binary.BigEndian.Uint16(req) {
				t.Fatalf("%s: id %d, query's %x", tr, r.Id, req[:min(2, len(req))])
			}
			rcodes[i] = r.Rcode
			if tr == dnsserver.UDP {
				truncated = r.Truncated
			}
		}
		// Both transports drop or answer alike, with the same rcode unless
		// UDP had to truncate.
		if (rcodes[0] == -1) != (rcodes[1] == -1) || (!truncated && rcodes[0] != rcodes[1]) {
			t.Fatalf("udp rcode %d, tcp rcode %d", rcodes[0], rcodes[1])
		}
	})
}
