package dnsserver_test

import (
	"encoding/hex"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/rrl"
)

func benchHandle(b *testing.B, m *dns.Msg, wantRcode int) {
	h := newTestHandler(b, srvOpts{})
	req, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 65535)
	out := h.HandleFrom(req, dnsserver.UDP, netip.Addr{}, buf)
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil || r.Rcode != wantRcode {
		b.Fatalf("rcode %v, %v", r.Rcode, err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	for b.Loop() {
		if h.HandleFrom(req, dnsserver.UDP, netip.Addr{}, buf) == nil {
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
	answerLoop(b, h, reqs)
}

// answerLoop has h answer the 4096 requests reqs in turn, from one
// resolver's address over UDP into a reused buffer, until the benchmark
// ends.
func answerLoop(b *testing.B, h *dnsserver.Handler, reqs [][]byte) {
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

// BenchmarkGuard measures what cookies and rate limiting add to a fast
// path answer: the same steered query from 4096 client /24s (each in its
// own scope block, so never limited), with the guard off, with rate
// limiting and cookies on and no cookie in the query, and with a valid
// client+server cookie (checked, echoed, exempt from the limiter).
func BenchmarkGuard(b *testing.B) {
	client := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, c := range []struct {
		name   string
		guard  bool
		cookie bool
	}{{"off", false, false}, {"rrl+cookies/no-cookie", true, false}, {"rrl+cookies/valid-cookie", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			h, _ := steeredHandler(b)
			if c.guard {
				// Rates no benchmark reaches: every query is decided
				// (hash, lock, bucket) and passes.
				cfg := rrl.Defaults()
				cfg.ResponsesPerSecond, cfg.AllPerSecond = 1_000_000, 1_000_000
				l, err := rrl.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				h.SetGuard(&dnsserver.Guard{Cookies: testJar, MaxNoCookieUDP: 1232, RRL: l})
			}
			var reqs [][]byte
			for i := range 4096 {
				m := new(dns.Msg)
				m.SetQuestion("steered.example.com.", dns.TypeA)
				m.SetEdns0(1232, false)
				o := m.IsEdns0()
				o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24,
					Address: net.IPv4(byte(1+i/256), byte(i), 0, 0).To4()})
				if c.cookie {
					o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE,
						Cookie: hex.EncodeToString(testJar.Mint(nil, client, netip.AddrFrom4([4]byte{10, byte((i * 7) >> 8 & 15), byte(i * 7), 1}), time.Now().Add(-time.Minute)))})
				}
				req, err := m.Pack()
				if err != nil {
					b.Fatal(err)
				}
				reqs = append(reqs, req)
			}
			// Sources spread over 4096 /24s: each source block stays
			// under all_per_second at any benchmark speed.
			var froms []netip.Addr
			for i := range 4096 {
				froms = append(froms, netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}))
			}
			buf := make([]byte, 0, 65535)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if h.HandleFrom(reqs[i&4095], dnsserver.UDP, froms[(i*7)&4095], buf) == nil {
					b.Fatal("dropped")
				}
				i++
			}
		})
	}
}

// BenchmarkHandleSteeredNoECS answers the steered name with no ECS, from
// an anycast resolver and from a placed one, with ecs.unknown_client:
// resolver (the default) and node.
func BenchmarkHandleSteeredNoECS(b *testing.B) {
	for _, mode := range []struct{ name, extra string }{{"resolver", ""}, {"node", nodeSteering}} {
		for _, from := range []string{"1.1.1.1", "192.0.2.20"} {
			b.Run(mode.name+"/"+from, func(b *testing.B) {
				h, _ := steeredHandlerWith(b, mode.extra)
				m := new(dns.Msg)
				m.SetQuestion("steered.example.com.", dns.TypeA)
				m.SetEdns0(1232, false)
				req, err := m.Pack()
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, 0, 65535)
				src := netip.MustParseAddr(from)
				b.ReportAllocs()
				for b.Loop() {
					if h.HandleFrom(req, dnsserver.UDP, src, buf) == nil {
						b.Fatal("no response")
					}
				}
			})
		}
	}
}
