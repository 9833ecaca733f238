//go:build !race

package dnsserver_test

// The differential tests of the fast path: hundreds of thousands of
// queries answered by both paths on one goroutine. They are computation,
// where the race detector has nothing to find and costs fivefold (50 s of
// the race stage's longest package); they run plain, beside the plain
// stage, as scripts/test.sh runs every raced package's !race files. The
// fast path's concurrent use stays raced (TestFastPathTaken, the server
// tests).

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnsserver"
)

// randomCase flips the case of letters at random (DNS 0x20).
func randomCase(r *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' && r.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestFastPathMatchesGeneral builds a large corpus of queries (every name of
// the zone, names that do not exist, the steered name; every common type;
// random case; with and without EDNS, DO, NSID, keepalive and client
// subnets of every length; UDP and TCP) and requires the fast path to
// answer each one it takes with exactly the bytes the general path writes.
func TestFastPathMatchesGeneral(t *testing.T) {
	h, snap := steeredHandler(t)
	t.Run("one address down", func(t *testing.T) { matchCorpus(t, h) })
	// Cookies on, with a fixed clock: the corpus's cookies (client-only,
	// valid, stale, forged) are answered alike by both paths, and the
	// cap on answers without a valid cookie truncates alike.
	jar := cookie.NewJar(cookie.Secret{1, 2, 3, 4}, nil)
	h.SetGuard(&dnsserver.Guard{Cookies: jar, MaxNoCookieUDP: 600})
	h.SetClock(func() time.Time { return testNow })
	t.Run("cookies", func(t *testing.T) { matchCorpus(t, h) })
	h.SetGuard(nil)
	// A whole pool down: failover, fallback and ttl_while_degraded.
	snap.Live.SetHealth(func(a netip.Addr, _ string) bool {
		return a != netip.MustParseAddr("198.51.100.20") && a != netip.MustParseAddr("203.0.113.11")
	}, nil)
	t.Run("a pool down", func(t *testing.T) { matchCorpus(t, h) })
	// Mumbai down: Indian networks merge with their neighbours, and both
	// paths answer with the scopes health widened.
	snap.Live.SetHealth(func(a netip.Addr, _ string) bool {
		return a != netip.MustParseAddr("203.0.113.10") && a != netip.MustParseAddr("203.0.113.11")
	}, nil)
	if ws := snap.Live.WidenStats(); ws.Records == 0 {
		t.Fatalf("mumbai down: no scope widened (%+v)", ws)
	}
	t.Run("mumbai down, scopes widened", func(t *testing.T) { matchCorpus(t, h) })
	// Unknown clients steered by the node: anycast resolvers and
	// addresses the databases do not place (127.0.0.1, 10.20.1.1).
	h, _ = steeredHandlerWith(t, nodeSteering)
	t.Run("unknown clients by the node", func(t *testing.T) { matchCorpus(t, h) })
}

func matchCorpus(t *testing.T, h *dnsserver.Handler) {
	r := rand.New(rand.NewPCG(1, 2))
	var names []string
	zone, _ := os.ReadFile(filepath.Join("testdata", "example.com.zone"))
	for _, line := range strings.Split(string(zone), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], ";") || strings.HasPrefix(f[0], "$") || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if f[0] == "@" {
			names = append(names, "example.com.")
		} else {
			names = append(names, f[0]+".example.com.")
		}
	}
	names = append(names, "steered.example.com.", "nx.example.com.", "a.b.c.nx.example.com.", "x.www.example.com.",
		"nope.ent.example.com.", "ent.example.com.", "foo.wild.example.com.", "x.sub.example.com.", "example.org.")
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypeNS, dns.TypeSOA, dns.TypeSRV,
		dns.TypeCAA, dns.TypeCNAME, dns.TypeHINFO, dns.TypePTR, 666, dns.TypeANY, dns.TypeDS, dns.TypeDNAME}
	subnets := []string{"192.0.2.0/28", "192.0.2.16/28", "192.0.2.48/28", "192.0.2.80/28", "192.0.2.96/24",
		"10.20.30.0/24", "198.51.100.64/26", "203.0.113.64/26", "2001:db8:2::/56", "2001:db8:4::/48",
		"2001:db8:f::/56", "3fff:0:5::/48", "8.8.8.0/24", "0.0.0.0/0", "192.0.2.1/32", "2001:db8:9::1/128"}
	froms := []string{"192.0.2.150", "192.0.2.130", "2001:db8:3::53", "127.0.0.1", "10.20.1.1", "1.1.1.1", "2606:4700:4700::1111"}

	buf1 := make([]byte, 0, 65535)
	buf2 := make([]byte, 0, 65535)
	total := 0
	for i := 0; i < 30000; i++ {
		name := names[r.IntN(len(names))]
		if name == "steered.example.com." && r.IntN(2) == 0 {
			name = "steered.example.com." // weight the steered name up
		}
		qtype := types[r.IntN(len(types))]
		if r.IntN(3) == 0 {
			qtype = []uint16{dns.TypeA, dns.TypeAAAA}[r.IntN(2)]
		}
		m := new(dns.Msg)
		m.SetQuestion(randomCase(r, name), qtype)
		m.RecursionDesired = r.IntN(2) == 0
		m.CheckingDisabled = r.IntN(4) == 0
		if r.IntN(5) > 0 {
			m.SetEdns0([]uint16{512, 1232, 4096, 100, 1400}[r.IntN(5)], r.IntN(2) == 0)
			o := m.IsEdns0()
			if o.Do() && r.IntN(4) == 0 {
				o.SetCo() // RFC 9824: NXDOMAIN kept in a compact denial
			}
			if r.IntN(3) == 0 {
				o.Option = append(o.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
			}
			if r.IntN(4) == 0 {
				o.Option = append(o.Option, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
			}
			if r.IntN(3) > 0 {
				p := netip.MustParsePrefix(subnets[r.IntN(len(subnets))])
				fam := uint16(1)
				if p.Addr().Is6() {
					fam = 2
				}
				o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
			}
			if r.IntN(5) == 0 {
				o.Option = append(o.Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2, 3}})
			}
			if r.IntN(3) == 0 {
				o.Option = append(o.Option, corpusCookie(r, netip.MustParseAddr(froms[i%len(froms)])))
			}
		}
		req, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		tr := dnsserver.UDP
		if r.IntN(4) == 0 {
			tr = dnsserver.TCP
		}
		from := netip.MustParseAddr(froms[i%len(froms)])
		general := h.HandleGeneral(req, tr, from, buf1[:0])
		got := h.HandleFrom(req, tr, from, buf2[:0])
		total++
		if !bytes.Equal(general, got) {
			a, b := new(dns.Msg), new(dns.Msg)
			a.Unpack(general)
			b.Unpack(got)
			t.Fatalf("query %d %s %s over %v from %s: the answers differ\nrequest: %v\ngeneral (%d bytes):\n%v\nfast (%d bytes):\n%v\n% x\n% x",
				i, m.Question[0].Name, dns.TypeToString[qtype], tr, from, m, len(general), a, len(got), b, general, got)
		}
	}
	t.Logf("%d queries compared", total)
}

// TestFastPathMatchesGeneralDO is TestFastPathMatchesGeneral for a signed
// zone: every query the fast path takes (half of them with DO, some with
// CO) is answered with exactly the general path's bytes, RRSIGs included.
func TestFastPathMatchesGeneralDO(t *testing.T) {
	h, snap, _ := signedHandler(t, "")
	t.Run("one address down", func(t *testing.T) { matchCorpus(t, h) })
	snap.Live.SetHealth(func(a netip.Addr, _ string) bool {
		return a != netip.MustParseAddr("198.51.100.20") && a != netip.MustParseAddr("203.0.113.11")
	}, nil)
	t.Run("a pool down", func(t *testing.T) { matchCorpus(t, h) })
}
