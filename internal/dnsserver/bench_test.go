package dnsserver_test

import (
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
)

func benchHandle(b *testing.B, m *dns.Msg, wantRcode int) {
	h := newTestHandler(b, srvOpts{})
	req, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 65535)
	out := h.Handle(req, dnsserver.UDP, buf)
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil || r.Rcode != wantRcode {
		b.Fatalf("rcode %v, %v", r.Rcode, err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	for b.Loop() {
		if h.Handle(req, dnsserver.UDP, buf) == nil {
			b.Fatal("no response")
		}
	}
}

// BenchmarkHandleStaticA answers a static A record, reusing the output buffer.
func BenchmarkHandleStaticA(b *testing.B) {
	benchHandle(b, query("static.example.com.", dns.TypeA), dns.RcodeSuccess)
}

// BenchmarkHandleStaticAEDNS is BenchmarkHandleStaticA with an OPT record.
func BenchmarkHandleStaticAEDNS(b *testing.B) {
	benchHandle(b, ednsQuery("static.example.com.", dns.TypeA, 1232), dns.RcodeSuccess)
}

// BenchmarkHandleNXDOMAIN answers a name that does not exist.
func BenchmarkHandleNXDOMAIN(b *testing.B) {
	benchHandle(b, query("nx.example.com.", dns.TypeA), dns.RcodeNameError)
}
