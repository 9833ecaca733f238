package difftest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/snapshot"
)

// target is one server the questions are asked of.
type target struct {
	name string
	addr netip.AddrPort
}

// startSteer serves zones from an in-process steer on a free loopback
// port, as a node does (a zone that fails to load fails alone), and
// returns it with the zones that did not load.
func startSteer(t *testing.T, zones []peerZone) (netip.AddrPort, *snapshot.Snapshot) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("identity: difftest\nlisten: [\"127.0.0.1:0\"]\nzones:\n")
	for _, z := range zones {
		fmt.Fprintf(&b, "  - origin: %q\n    file: %q\n", z.Origin, z.File)
	}
	path := filepath.Join(dir, "steer.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := dnsserver.New(snap, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.Addrs()[0], snap
}

func peerZones(zones []peerZone) []peertest.Zone {
	var out []peertest.Zone
	for _, z := range zones {
		out = append(out, peertest.Zone{Origin: z.Origin, File: z.File})
	}
	return out
}

// transfer reads a zone's records from Knot by AXFR: the questions are
// made from what a reference server serves, not from steer's own parse.
func transfer(t *testing.T, addr netip.AddrPort, origin string) []dns.RR {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr(origin)
	tr := &dns.Transfer{DialTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second}
	env, err := tr.In(m, addr.String())
	if err != nil {
		t.Fatalf("AXFR %s: %v", origin, err)
	}
	var rrs []dns.RR
	for e := range env {
		if e.Error != nil {
			t.Fatalf("AXFR %s: %v", origin, e.Error)
		}
		rrs = append(rrs, e.RR...)
	}
	return rrs
}

// ask sends q to addr, retrying a lost UDP datagram twice.
func ask(addr netip.AddrPort, q question) reply {
	network := "udp"
	if q.tcp {
		network = "tcp"
	}
	c := &dns.Client{Net: network, Timeout: 2 * time.Second, UDPSize: 1232}
	if !q.edns {
		c.UDPSize = 512
	}
	var err error
	for try := 0; try < 3; try++ {
		var m *dns.Msg
		m, _, err = c.Exchange(q.msg(), addr.String())
		if err == nil {
			return reduce(m, nil)
		}
	}
	return reduce(nil, err)
}

// result is one question's three answers.
type result struct {
	q                question
	steer, knot, nsd reply
}

// TestDifferential serves the peer zones (with the lines some server
// refuses commented out: see strip) from steer, Knot and NSD, asks all
// three every generated question and PowerDNS's own test queries, and
// requires steer's answer to equal Knot's or NSD's, or to be a difference
// the allow list explains.
func TestDifferential(t *testing.T) {
	dir := peerDir(t)
	all := readZones(t, dir)
	zones := prepare(t, all, t.TempDir())

	knot := peertest.StartKnot(t, peerZones(zones), peertest.Options{
		Top:  "acl:\n  - id: xfr\n    address: 127.0.0.0/8\n    action: transfer",
		Zone: "acl: xfr",
	})
	nsd := peertest.StartNSD(t, peerZones(zones), peertest.Options{})
	steer, snap := startSteer(t, zones)
	for _, z := range zones {
		if !knot.Loaded(z.Origin) {
			t.Fatalf("Knot did not load %s (strip its bad lines):\n%s", z.Origin, knot.Log)
		}
		if !nsd.Loaded(z.Origin) {
			t.Fatalf("NSD did not load %s (strip its bad lines):\n%s", z.Origin, nsd.Log)
		}
	}
	for _, d := range snap.Degraded {
		t.Errorf("steer did not load %s: %s", d.Origin, d.Problem)
	}

	r := rand.New(rand.NewPCG(13, 7))
	var qs []question
	for _, z := range zones {
		qs = append(qs, zoneQuestions(r, z.Origin, transfer(t, knot.Addr, z.Origin))...)
	}
	qs = append(qs, pdnsQuestions(t, dir)...)

	results := make([]result, len(qs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = result{q: qs[i], steer: ask(steer, qs[i]), knot: ask(knot.Addr, qs[i]), nsd: ask(nsd.Addr, qs[i])}
			}
		}()
	}
	start := time.Now()
	for i := range qs {
		next <- i
	}
	close(next)
	wg.Wait()

	var failures []result
	allowed := map[string]int{}
	same := 0
	for _, res := range results {
		if res.knot.err != "" || res.nsd.err != "" {
			t.Errorf("%v: a reference did not answer: knot %q nsd %q", res.q, res.knot.err, res.nsd.err)
			continue
		}
		if res.steer.equal(res.knot) || res.steer.equal(res.nsd) {
			same++
			continue
		}
		if why := allow(res); why != "" {
			allowed[why]++
			continue
		}
		failures = append(failures, res)
	}
	t.Logf("%d questions over %d zones in %v: %d answered like Knot or NSD, %d allowed differences, %d failures",
		len(qs), len(zones), time.Since(start).Round(time.Millisecond), same, len(qs)-same-len(failures), len(failures))
	var whys []string
	for why, n := range allowed {
		whys = append(whys, fmt.Sprintf("%5d  %s", n, why))
	}
	sort.Strings(whys)
	for _, w := range whys {
		t.Log(w)
	}
	for i, f := range failures {
		if i == maxShown() {
			t.Errorf("... and %d more", len(failures)-i)
			break
		}
		t.Errorf("%v\nsteer:\n%sknot:\n%snsd:\n%s", f.q, f.steer, f.knot, f.nsd)
	}

	t.Run("fast path matches general", func(t *testing.T) { fastMatchesGeneral(t, dnsserver.NewHandler(snap), qs, 30000) })
}

// fastMatchesGeneral asks the handler each question in nine forms (EDNS
// sizes, DO, NSID, a client subnet, no EDNS, TCP, random case) and
// requires the fast path to write exactly the bytes the general path
// does, on these zones as on steer's own test zone; at least least
// queries are compared.
func fastMatchesGeneral(t *testing.T, h *dnsserver.Handler, qs []question, least int) {
	r := rand.New(rand.NewPCG(3, 4))
	buf1 := make([]byte, 0, 65535)
	buf2 := make([]byte, 0, 65535)
	from := netip.MustParseAddr("192.0.2.53")
	n := 0
	for _, q := range qs {
		for v := range 9 {
			m := q.msg()
			m.Question[0].Name = randomCase(r, q.name)
			tr := dnsserver.UDP
			switch v {
			case 0:
				m.Extra = nil
			case 1, 2, 3:
				m.SetEdns0([]uint16{512, 1232, 4096}[v-1], false)
			case 4:
				m.SetEdns0(1232, true)
			case 5:
				m.SetEdns0(1232, false)
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
			case 6:
				m.SetEdns0(1232, false)
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1,
					SourceNetmask: 24, Address: net.IPv4(198, 51, byte(r.IntN(256)), 0).To4()})
			case 7:
				tr = dnsserver.TCP
			case 8:
				m.Extra = nil
				tr = dnsserver.TCP
			}
			req, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			general := h.HandleGeneral(req, tr, from, buf1[:0])
			fast := h.HandleFrom(req, tr, from, buf2[:0])
			n++
			if !bytes.Equal(general, fast) {
				a, b := new(dns.Msg), new(dns.Msg)
				a.Unpack(general)
				b.Unpack(fast)
				t.Fatalf("%v (form %d over %v): the answers differ\ngeneral:\n%v\nfast:\n%v", q, v, tr, a, b)
			}
		}
	}
	if n < least {
		t.Errorf("only %d queries compared", n)
	}
	t.Logf("%d queries compared", n)
}

// randomCase flips the case of letters at random (DNS 0x20).
func randomCase(r *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' && r.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		} else if c >= 'A' && c <= 'Z' && r.IntN(2) == 0 {
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// maxShown is how many failures are printed: 40, or all with
// STEER_DIFF_ALL=1.
func maxShown() int {
	if os.Getenv("STEER_DIFF_ALL") == "1" {
		return 1 << 30
	}
	return 40
}
