package dnsserver_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/rrl"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/traffic"
)

// The cost of one query as a node answers it: bench/run.sh's Larkbook
// record and zone, with everything a node puts on the query path (the
// query and steering metrics, the dashboard's traffic recorder, cookies,
// the size cap and rate limiting with their defaults, loopback exempt).
// TestServingAllocs asserts the path allocates nothing in every case the
// benchmark meets and in those the guard decides; BenchmarkServing is the
// in-process side of the pinned comparison with gdnsd (bench/README.md).

// servingHandler builds that handler with the Larkbook database given
// (the synthetic country database of testdata/geo by default).
func servingHandler(tb testing.TB) *dnsserver.Handler {
	tb.Helper()
	dir := tb.TempDir()
	records, err := os.ReadFile(filepath.Join("..", "..", "bench", "lib", "larkbook-records.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	db, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	if f := os.Getenv("STEER_SERVING_DB"); f != "" {
		db = f // bench/run.sh's converted database: the partition's real size
	}
	cfgText := fmt.Sprintf(`listen: ["127.0.0.1:0"]
identity: steer-bench
zones:
  - origin: example.com
    file: example.com.zone
geo: { databases: [%q] }
ecs: { enabled: true, max_source_v4: 24, max_source_v6: 56 }
records:
%s`, db, records)
	zone := `$ORIGIN example.com.
$TTL 3600
@       300 IN SOA  ns1.example.com. hostmaster.example.com. 2026113001 7200 3600 1209600 300
        IN NS   ns1
        IN NS   ns2
        IN MX   10 mail
        IN TXT  "v=spf1 mx -all"
ns1     IN A    192.0.2.53
ns2     IN A    198.51.100.53
        IN AAAA 2001:db8::53
mail    IN A    192.0.2.25
static  IN A    192.0.2.80
        IN AAAA 2001:db8::80
`
	for name, body := range map[string]string{"steer.yaml": cfgText, "example.com.zone": zone} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	// What node.build and node.New wire: the steering hooks count into
	// the metrics and the traffic recorder.
	met := metrics.New(prometheus.NewRegistry())
	tr := traffic.New()
	snap, _, err := snapshot.BuildWith(cfg, snapshot.Options{Hooks: policy.Hooks{Answered: func(record int, d policy.Decision, ecs int) {
		met.Answered(record, d.Pools, d.Rule, d.AllDown)
		tr.Answered(record, &d, ecs)
	}}})
	if err != nil {
		tb.Fatal(err)
	}
	met.SetRecords(snap.MetricRecords())
	tr.SetRecords(traffic.RecordsOf(snap.Policies))
	h := dnsserver.NewHandler(snap)
	h.SetMetrics(met)
	// The guard as node.guardWiring makes it from the defaults.
	if !*cfg.Cookies.Enabled || !cfg.RRL.Enabled {
		tb.Fatal("cookies and rate limiting should be on by default")
	}
	l, err := rrl.New(cfg.RRL.Config)
	if err != nil {
		tb.Fatal(err)
	}
	h.SetGuard(&dnsserver.Guard{Cookies: cookie.Random(), MaxNoCookieUDP: cfg.Cookies.MaxNoCookieUDP, RRL: l})
	return h
}

// servingQuery packs the query for name and type, with EDNS (1232) and,
// when subnet is valid, an ECS option for it, and, when cookie is not nil,
// a COOKIE option with that data.
func servingQuery(tb testing.TB, name string, qtype uint16, edns bool, subnet netip.Prefix, cookieData []byte) []byte {
	tb.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	if edns {
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		if subnet.IsValid() {
			fam := uint16(1)
			if subnet.Addr().Is6() {
				fam = 2
			}
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(subnet.Bits()), Address: net.IP(subnet.Addr().AsSlice())})
		}
		if cookieData != nil {
			o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(cookieData)})
		}
	}
	req, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// TestServingAllocs: the query path allocates nothing as a node runs it,
// for the benchmark's queries (static without EDNS, steered with ECS, from
// loopback, which rate limiting exempts) and for the same queries the guard
// decides (from another address: rate limited, cookies checked and
// minted). An allocation added anywhere on that path fails it.
func TestServingAllocs(t *testing.T) {
	h := servingHandler(t)
	client := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	// A client+server cookie the handler's jar minted: answer a query with
	// only the client cookie and take the server's part from the reply.
	var valid []byte
	{
		out := h.HandleFrom(servingQuery(t, "static.example.com.", dns.TypeA, true, netip.Prefix{}, client), dnsserver.UDP, netip.MustParseAddr("192.0.2.7"), nil)
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatal(err)
		}
		for _, o := range r.IsEdns0().Option {
			if c, ok := o.(*dns.EDNS0_COOKIE); ok {
				valid, _ = hex.DecodeString(c.Cookie)
			}
		}
		if len(valid) <= 8 {
			t.Fatalf("no server cookie in %v", r)
		}
	}
	loop, other := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.7")
	ecsIN := netip.MustParsePrefix("192.0.2.0/24")
	for _, c := range []struct {
		name   string
		req    []byte
		from   netip.Addr
		answer string // the A record expected, "" for none
	}{
		{"static, loopback", servingQuery(t, "static.example.com.", dns.TypeA, false, netip.Prefix{}, nil), loop, "192.0.2.80"},
		{"static EDNS, loopback", servingQuery(t, "static.example.com.", dns.TypeA, true, netip.Prefix{}, nil), loop, "192.0.2.80"},
		{"steered ECS, loopback", servingQuery(t, "shop.example.com.", dns.TypeA, true, ecsIN, nil), loop, ""},
		{"steered no ECS, loopback", servingQuery(t, "shop.example.com.", dns.TypeA, true, netip.Prefix{}, nil), loop, "192.0.2.30"},
		{"NXDOMAIN, loopback", servingQuery(t, "nx.example.com.", dns.TypeA, true, netip.Prefix{}, nil), loop, ""},
		{"static, rate limited", servingQuery(t, "static.example.com.", dns.TypeA, false, netip.Prefix{}, nil), other, "192.0.2.80"},
		{"steered ECS, rate limited", servingQuery(t, "shop.example.com.", dns.TypeA, true, ecsIN, nil), other, ""},
		{"steered ECS, client cookie", servingQuery(t, "shop.example.com.", dns.TypeA, true, ecsIN, client), other, ""},
		{"steered ECS, valid cookie", servingQuery(t, "shop.example.com.", dns.TypeA, true, ecsIN, valid), other, ""},
	} {
		buf := make([]byte, 0, 4096)
		out := h.HandleFrom(c.req, dnsserver.UDP, c.from, buf)
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.answer != "" && (len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != c.answer) {
			t.Fatalf("%s: answer %v, want %s", c.name, r.Answer, c.answer)
		}
		// Few runs: the rate limiter's defaults (20 responses a second)
		// would start slipping and dropping, a path of its own.
		if allocs := testing.AllocsPerRun(10, func() { h.HandleFrom(c.req, dnsserver.UDP, c.from, buf) }); allocs != 0 {
			t.Errorf("%s: %.1f allocations per query; the query path makes none", c.name, allocs)
		}
		// As the batched UDP reader answers it, the counts kept in its
		// batch until the batch ends.
		var batch dnsserver.Batch
		if allocs := testing.AllocsPerRun(10, func() {
			h.StartBatch(&batch)
			h.HandleBatched(c.req, c.from, buf, &batch)
			batch.FlushBatch()
		}); allocs != 0 {
			t.Errorf("%s, batched: %.1f allocations per query; the query path makes none", c.name, allocs)
		}
	}
}

// BenchmarkServing answers bench/run.sh's two query files as a node's
// batched UDP reader does, from loopback, in batches of 16 datagrams
// (the time read and the counts added once per batch):
// static.example.com A without EDNS, and shop.example.com A with an ECS
// option for one of 4096 client /24s in turn (EDNS 1232, RD clear).
func BenchmarkServing(b *testing.B) {
	h := servingHandler(b)
	from := netip.MustParseAddr("127.0.0.1")
	static := [][]byte{servingQuery(b, "static.example.com.", dns.TypeA, false, netip.Prefix{}, nil)}
	var steered [][]byte
	for i := range 4096 {
		// Spread over the synthetic database's networks and beyond it.
		a := [4]byte{byte(i * 37), byte(i >> 4), byte(i), 0}
		steered = append(steered, servingQuery(b, "shop.example.com.", dns.TypeA, true, netip.PrefixFrom(netip.AddrFrom4(a), 24), nil))
	}
	for _, c := range []struct {
		name string
		reqs [][]byte
	}{{"static", static}, {"steered-ecs", steered}} {
		b.Run(c.name, func(b *testing.B) {
			// The loop's own thread CPU time per query, as well as the
			// wall time: on a shared machine only the first is steady.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			var batch dnsserver.Batch
			cpu0, ok := threadCPU()
			i := 0
			for b.Loop() {
				if i%16 == 0 {
					batch.FlushBatch()
					h.StartBatch(&batch)
				}
				if h.HandleBatched(c.reqs[i%len(c.reqs)], from, buf, &batch) == nil {
					b.Fatal("no response")
				}
				i++
			}
			batch.FlushBatch()
			if cpu1, _ := threadCPU(); ok && i > 0 {
				b.ReportMetric(float64(cpu1-cpu0)/float64(i), "cpu-ns/op")
			}
		})
	}
}

// TestBatchedAnswersSame: queries answered as datagrams of one batch get
// the bytes HandleFrom gives them one by one, whatever the order of names
// (the batch remembers the last name it classified), and a snapshot
// swapped in mid-batch answers the batch's next queries.
func TestBatchedAnswersSame(t *testing.T) {
	h := servingHandler(t)
	at := time.Unix(1_800_000_000, 0)
	h.SetClock(func() time.Time { return at })
	loop := netip.MustParseAddr("127.0.0.1")
	var reqs [][]byte
	for _, q := range []struct {
		name   string
		qtype  uint16
		subnet string
	}{
		{"shop.example.com.", dns.TypeA, "192.0.2.0/24"},
		{"shop.example.com.", dns.TypeA, "81.2.69.0/24"},
		{"SHOP.Example.com.", dns.TypeA, "81.2.69.0/24"},
		{"shop.example.com.", dns.TypeAAAA, ""},
		{"static.example.com.", dns.TypeA, ""},
		{"static.example.com.", dns.TypeAAAA, ""},
		{"static.example.com.", dns.TypeMX, ""},
		{"nx.example.com.", dns.TypeA, ""},
		{"shop.example.com.", dns.TypeA, ""},
		{"example.com.", dns.TypeSOA, ""},
	} {
		var p netip.Prefix
		if q.subnet != "" {
			p = netip.MustParsePrefix(q.subnet)
		}
		reqs = append(reqs, servingQuery(t, q.name, q.qtype, true, p, nil))
	}
	want := func(req []byte) []byte { return h.HandleFrom(req, dnsserver.UDP, loop, nil) }
	var b dnsserver.Batch
	h.StartBatch(&b)
	// Every query after every other, and each twice in a row.
	for _, i := range []int{0, 0, 1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 9, 0, 5, 2, 7, 1} {
		if got, w := h.HandleBatched(reqs[i], loop, nil, &b), want(reqs[i]); !bytes.Equal(got, w) {
			t.Fatalf("query %d in a batch:\n%x\nalone:\n%x", i, got, w)
		}
	}
	// Another snapshot (the fast-path tests' zone: static has another
	// address, shop does not exist) mid-batch.
	staticA := servingQuery(t, "static.example.com.", dns.TypeA, true, netip.Prefix{}, nil)
	h.HandleBatched(staticA, loop, nil, &b)
	_, other := steeredHandler(t)
	h.Swap(other)
	for _, req := range [][]byte{staticA, reqs[0]} {
		if got, w := h.HandleBatched(req, loop, nil, &b), want(req); !bytes.Equal(got, w) {
			t.Fatalf("after the swap, in the batch:\n%x\nalone:\n%x", got, w)
		}
	}
	r := new(dns.Msg)
	if err := r.Unpack(h.HandleBatched(staticA, loop, nil, &b)); err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.81" {
		t.Fatalf("after the swap: %v %v, want the new snapshot's 192.0.2.81", r, err)
	}
	b.FlushBatch()
	// A reader idle after its batch keeps no replaced snapshot alive.
	if b.Holds() {
		t.Error("the batch still points into a snapshot after its flush")
	}
}
