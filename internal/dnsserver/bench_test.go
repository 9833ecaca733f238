package dnsserver_test

import (
	"math/rand/v2"
	"net"
	"net/netip"
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

// BenchmarkHandleSteeredECS answers the steered name for client subnets
// drawn at random from the synthetic database's networks (4096 distinct
// queries, cycled), with a reused output buffer.
func BenchmarkHandleSteeredECS(b *testing.B) {
	h, _ := steeredHandler(b)
	r := rand.New(rand.NewPCG(3, 4))
	bases := []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "10.20.0.0/16", "8.8.8.0/24", "91.64.0.0/14"}
	var reqs [][]byte
	for i := 0; i < 4096; i++ {
		base := netip.MustParsePrefix(bases[r.IntN(len(bases))])
		a := base.Addr().As4()
		for j := base.Bits() / 8; j < 3; j++ {
			a[j] = byte(r.IntN(256))
		}
		a[3] = 0
		m := new(dns.Msg)
		m.SetQuestion("steered.example.com.", dns.TypeA)
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IP(a[:])})
		req, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	buf := make([]byte, 0, 65535)
	from := netip.MustParseAddr("192.0.2.150")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if h.HandleFrom(reqs[i&4095], dnsserver.UDP, from, buf) == nil {
			b.Fatal("no response")
		}
		i++
	}
}
