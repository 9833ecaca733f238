package dnsserver_test

import (
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/snapshot"
)

// steeredHandler serves the test zone plus a deterministic steered record
// (single-address pools, no random split) on the synthetic geo databases.
func steeredHandler(tb testing.TB) (*dnsserver.Handler, *snapshot.Snapshot) {
	tb.Helper()
	return steeredHandlerWith(tb, "")
}

// nodeSteering makes steeredHandlerWith's node a Frankfurt one that
// steers unknown clients (anycast resolvers, unplaced addresses) by its
// location.
const nodeSteering = `node: { name: fra-1, region: eu, location: { lat: 50.11, lon: 8.68 }, country: DE }
ecs: { max_source_v4: 28, max_source_v6: 56, unknown_client: node, anycast_resolvers: [1.1.1.0/24, "2606:4700:4700::/48", 192.0.2.128/28] }
`

// steeredHandlerWith is steeredHandler with extra top-level keys (which
// may replace its ecs section).
func steeredHandlerWith(tb testing.TB, extra string) (*dnsserver.Handler, *snapshot.Snapshot) {
	tb.Helper()
	return steeredHandlerZone(tb, extra, "")
}

// steeredHandlerZone is steeredHandlerWith with zoneExtra added to the
// zone's entry (a dnssec section, say), in the configuration's directory
// (%DIR% in it is that directory).
func steeredHandlerZone(tb testing.TB, extra, zoneExtra string) (*dnsserver.Handler, *snapshot.Snapshot) {
	tb.Helper()
	ecsLine := "ecs: { max_source_v4: 28, max_source_v6: 56 }\n"
	if strings.Contains(extra, "ecs:") {
		ecsLine = ""
	}
	dir := tb.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.com.zone"))
	if err != nil {
		tb.Fatal(err)
	}
	city, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	asn, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-asn.mmdb"))
	cfg := fmt.Sprintf(`identity: fast-test
zones:
  - origin: example.com
    file: example.com.zone
%sgeo: { databases: [%q, %q] }
%shealth_checks:
  t: { type: tcp, port: 9 }
records:
  - name: steered.example.com
    ttl: 30
    ttl_while_degraded: 7
    pools:
      mumbai:    { addresses: [203.0.113.10, 203.0.113.11, "2001:db8:aa::10"], location: { lat: 19.08, lon: 72.88 }, health_check: t }
      frankfurt: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      virginia:  { addresses: [192.0.2.30, "2001:db8:cc::30"], location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: [IN] }
        pool: mumbai
      - match: { continent: EU, not: { asn: 64499 } }
        pool: frankfurt
      - match: { cidr: [10.20.0.0/16, "2001:db8:f::/48"] }
        failover: [frankfurt, virginia]
      - default: { by: geoproximity, fallback: [virginia, frankfurt, mumbai] }
`, strings.ReplaceAll(zoneExtra, "%DIR%", dir), city, asn, ecsLine+extra)
	files := map[string]string{"steer.yaml": cfg, "example.com.zone": string(zone)}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	c, err := config.Load(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	snap, _, err := snapshot.Build(c)
	if err != nil {
		tb.Fatal(err)
	}
	// No checker runs here: a fixed verdict (203.0.113.11 down) makes the
	// health masks take part deterministically.
	snap.Live.SetHealth(func(a netip.Addr, check string) bool {
		return a != netip.MustParseAddr("203.0.113.11")
	}, nil)
	return dnsserver.NewHandler(snap), snap
}

// TestFastPathTaken checks the fast path really answers the common queries
// (a broken classifier would silently send everything the general way).
func TestFastPathTaken(t *testing.T) {
	for _, withMetrics := range []bool{false, true} {
		for _, extra := range []string{"", nodeSteering} {
			h, _ := steeredHandlerWith(t, extra)
			if withMetrics {
				h.SetMetrics(metrics.New(prometheus.NewRegistry()))
			}
			fastPathTaken(t, h, "192.0.2.150")
			fastPathTaken(t, h, "1.1.1.1")
			fastPathTaken(t, h, "10.1.1.1")
		}
	}
}

func fastPathTaken(t *testing.T, h *dnsserver.Handler, fromAddr string) {
	cases := []struct {
		name  string
		qtype uint16
		ecs   string
	}{
		{"static.example.com.", dns.TypeA, ""},
		{"WWW.example.com.", dns.TypeAAAA, ""},
		{"nx.example.com.", dns.TypeA, ""},
		{"static.example.com.", dns.TypeMX, ""},
		{"steered.example.com.", dns.TypeA, "192.0.2.48/28"},
		{"steered.example.com.", dns.TypeAAAA, "2001:db8:2::/56"},
		{"steered.example.com.", dns.TypeA, ""},
	}
	for _, c := range cases {
		m := new(dns.Msg)
		m.SetQuestion(c.name, c.qtype)
		m.SetEdns0(1232, false)
		if c.ecs != "" {
			p := netip.MustParsePrefix(c.ecs)
			fam := uint16(1)
			if p.Addr().Is6() {
				fam = 2
			}
			o := m.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())})
		}
		req, _ := m.Pack()
		buf := make([]byte, 0, 4096)
		from := netip.MustParseAddr(fromAddr)
		allocs := testing.AllocsPerRun(100, func() {
			if h.HandleFrom(req, dnsserver.UDP, from, buf) == nil {
				t.Fatal("no answer")
			}
		})
		if allocs != 0 {
			t.Errorf("%s %s ecs=%q from %s: %.1f allocations per query; the fast path makes none", c.name, dns.TypeToString[c.qtype], c.ecs, fromAddr, allocs)
		}
	}
}

// TestHealthMasksAnswers: a pool answers only with its usable addresses,
// on the fast path and the general path alike.
func TestHealthMasksAnswers(t *testing.T) {
	h, _ := steeredHandler(t)
	m := new(dns.Msg)
	m.SetQuestion("steered.example.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	o := m.IsEdns0()
	o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 28, Address: net.ParseIP("192.0.2.0").To4()})
	req, _ := m.Pack()
	for name, answer := range map[string]func() []byte{
		"fast":    func() []byte { return h.HandleFrom(req, dnsserver.UDP, netip.MustParseAddr("127.0.0.1"), nil) },
		"general": func() []byte { return h.HandleGeneral(req, dnsserver.UDP, netip.MustParseAddr("127.0.0.1"), nil) },
	} {
		for range 20 {
			r := new(dns.Msg)
			if err := r.Unpack(answer()); err != nil {
				t.Fatal(err)
			}
			if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "203.0.113.10" {
				t.Fatalf("%s path: %v; want only the usable 203.0.113.10", name, r.Answer)
			}
		}
	}
}

// TestDegradedTTL: while a pool of the record is down (frankfurt),
// steered answers carry ttl_while_degraded on both paths; one dead address
// of a pool that is still up (203.0.113.11 of mumbai) does not count.
func TestDegradedTTL(t *testing.T) {
	h, snap := steeredHandler(t)
	snap.Live.SetHealth(func(a netip.Addr, _ string) bool { return a != netip.MustParseAddr("198.51.100.20") }, nil)
	m := new(dns.Msg)
	m.SetQuestion("steered.example.com.", dns.TypeA)
	req, _ := m.Pack()
	for _, out := range [][]byte{
		h.HandleFrom(req, dnsserver.UDP, netip.MustParseAddr("192.0.2.5"), nil),
		h.HandleGeneral(req, dnsserver.UDP, netip.MustParseAddr("192.0.2.5"), nil),
	} {
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil || len(r.Answer) == 0 {
			t.Fatalf("%v %v", r, err)
		}
		if ttl := r.Answer[0].Header().Ttl; ttl != 7 {
			t.Fatalf("TTL %d while degraded, want 7", ttl)
		}
	}
	// Only a dead address in a pool that is up: the record's own TTL.
	snap.Live.SetHealth(func(a netip.Addr, _ string) bool { return a != netip.MustParseAddr("203.0.113.11") }, nil)
	r := new(dns.Msg)
	r.Unpack(h.HandleFrom(req, dnsserver.UDP, netip.MustParseAddr("192.0.2.5"), nil))
	if len(r.Answer) == 0 || r.Answer[0].Header().Ttl != 30 {
		t.Fatalf("healthy: %v, want TTL 30", r.Answer)
	}
}

// TestMetricsCountECS: the path that answers a query reports its client
// subnet class and the scope returned, counted once per query.
func TestMetricsCountECS(t *testing.T) {
	h, _ := steeredHandler(t)
	m := metrics.New(prometheus.NewRegistry())
	h.SetMetrics(m)
	ask := func(opt dns.EDNS0) {
		q := new(dns.Msg)
		q.SetQuestion("steered.example.com.", dns.TypeA)
		q.SetEdns0(1232, false)
		if opt != nil {
			q.IsEdns0().Option = append(q.IsEdns0().Option, opt)
		}
		req, _ := q.Pack()
		h.HandleFrom(req, dnsserver.UDP, netip.MustParseAddr("192.0.2.150"), nil)
	}
	ask(&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 28, Address: net.ParseIP("192.0.2.48").To4()}) // fast path
	ask(nil)
	ask(&dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 24, 5, 192, 0, 2}}) // scope set in a query: FORMERR
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`steer_dns_ecs_queries_total{ecs="present"} 1`,
		`steer_dns_ecs_queries_total{ecs="absent"} 1`,
		`steer_dns_ecs_queries_total{ecs="invalid"} 1`,
		`steer_dns_ecs_scope_prefix_length_count{family="ipv4"} 1`,
		`steer_dns_queries_total{path="fast",qtype="A",rcode="NOERROR",transport="udp"} 2`,
		`steer_dns_queries_total{path="general",qtype="A",rcode="FORMERR",transport="udp"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}
