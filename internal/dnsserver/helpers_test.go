package dnsserver_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/servertest"
	"github.com/steer-dns/steer/internal/snapshot"
)

// testIdentity is the identity the test servers answer id.server and NSID with.
const testIdentity = "steer-test"

// srvOpts varies the test configuration; the zero value is the default.
type srvOpts struct {
	noIdentity bool          // no identity: id.server and NSID are refused
	version    string        // version_bind; "" means hide
	maxConns   int           // tcp.max_connections; 0 means 100
	idle       time.Duration // tcp.idle_timeout; 0 means 5s
}

// testFiles returns the configuration and zone for o, as servertest.Start takes them.
func testFiles(tb testing.TB, o srvOpts) map[string]string {
	tb.Helper()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.com.zone"))
	if err != nil {
		tb.Fatal(err)
	}
	identity := testIdentity
	if o.noIdentity {
		identity = ""
	}
	version := o.version
	if version == "" {
		version = "hide"
	}
	maxConns := o.maxConns
	if maxConns == 0 {
		maxConns = 100
	}
	idle := o.idle
	if idle == 0 {
		idle = 5 * time.Second
	}
	yaml := fmt.Sprintf(`listen: ["127.0.0.1:0"]
identity: %q
version_bind: %q
tcp: { max_connections: %d, idle_timeout: %s }
zones:
  - origin: example.com
    file: example.com.zone
`, identity, version, maxConns, idle)
	return map[string]string{"steer.yaml": yaml, "example.com.zone": string(zone)}
}

// startServer serves the test zone on free loopback ports until the test ends.
func startServer(tb testing.TB, o srvOpts) *servertest.Server {
	tb.Helper()
	return servertest.Start(tb, testFiles(tb, o))
}

// newTestHandler builds a Handler for the test zone without any socket.
func newTestHandler(tb testing.TB, o srvOpts) *dnsserver.Handler {
	tb.Helper()
	dir := tb.TempDir()
	dnstest.WriteFiles(tb, dir, testFiles(tb, o))
	cfg, err := config.Load(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return dnsserver.NewHandler(snap)
}

type target struct {
	name string // "v4" or "v6"
	addr netip.AddrPort
}

// targets lists the server's loopback addresses: IPv4, and IPv6 when the
// machine has ::1.
func targets(s *servertest.Server) []target {
	ts := []target{{"v4", s.V4}}
	if s.V6.IsValid() {
		ts = append(ts, target{"v6", s.V6})
	}
	return ts
}

// ioTimeout bounds every socket operation of the tests.
const ioTimeout = 3 * time.Second

// mustExchangeRaw is exchangeRaw that fails the test on error.
func mustExchangeRaw(t testing.TB, network string, addr netip.AddrPort, pkt []byte) []byte {
	t.Helper()
	resp, err := dnstest.ExchangeRaw(network, addr, pkt)
	if err != nil {
		t.Fatalf("%s %s: %v", network, addr, err)
	}
	return resp
}

// exchangeMsg packs m, sends it with exchangeRaw and unpacks the answer,
// returning the wire form too.
func exchangeMsg(t testing.TB, network string, addr netip.AddrPort, m *dns.Msg) (*dns.Msg, []byte) {
	t.Helper()
	pkt, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	wire := mustExchangeRaw(t, network, addr, pkt)
	r := new(dns.Msg)
	if err := r.Unpack(wire); err != nil {
		t.Fatalf("unpack response: %v", err)
	}
	return r, wire
}

// expectNoUDPResponse asserts that nothing answers pkt within wait.
func expectNoUDPResponse(t testing.TB, addr netip.AddrPort, pkt []byte, wait time.Duration) {
	t.Helper()
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("got a %d-byte response, want none", n)
	}
}

// query builds a query with RD clear, as an authoritative client sends.
func query(name string, qtype uint16) *dns.Msg {
	return dnstest.Query(name, qtype)
}

// ednsQuery is query with an OPT record advertising size.
func ednsQuery(name string, qtype uint16, size uint16) *dns.Msg {
	m := query(name, qtype)
	m.SetEdns0(size, false)
	return m
}

// rrs parses presentation-format records into their canonical String form.
func rrs(t testing.TB, lines ...string) []string {
	t.Helper()
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil || rr == nil {
			t.Fatalf("bad expected record %q: %v", l, err)
		}
		out = append(out, rr.String())
	}
	return out
}

func rrStrings(section []dns.RR) []string {
	var out []string
	for _, rr := range section {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, rr.String())
	}
	return out
}

// want describes a response completely.
type want struct {
	rcode  int // full (extended) rcode
	aa, tc bool
	// question is the expected question section; nil means exactly what was
	// sent (name case included).
	question []dns.Question
	answer   []string // in order
	ns       []string // any order
	extra    []string // any order, OPT excluded
	// ednsResp, when set, is the expected response OPT; when nil the
	// response must carry an OPT exactly when the query did.
	noOPT bool
	opt   *wantOPT
	// ede is the Extended DNS Error (RFC 8914) the OPT carries, when the
	// response has one: "code" or "code:extra text"; "" for none.
	ede string
}

// wantOPT describes the response's OPT record beyond what every one has
// (UDP size 1232, version 0, no flag but DO).
type wantOPT struct {
	do   bool
	co   bool   // Compact Answers OK echoed (RFC 9824)
	nsid string // the identity, when NSID is expected
	// keepalive is the expected edns-tcp-keepalive timeout, in 100 ms units.
	keepalive uint16
	hasKA     bool
}

// checkResponse compares r, the answer to q, with w, including every header
// flag an authoritative server's answer fixes.
func checkResponse(t testing.TB, q, r *dns.Msg, w want) {
	t.Helper()
	if r.Id != q.Id {
		t.Errorf("id = %d, want %d", r.Id, q.Id)
	}
	if !r.Response {
		t.Errorf("QR clear")
	}
	if r.Opcode != q.Opcode {
		t.Errorf("opcode = %d, want %d", r.Opcode, q.Opcode)
	}
	if r.Rcode != w.rcode {
		t.Errorf("rcode = %s, want %s", rcodeName(r.Rcode), rcodeName(w.rcode))
	}
	if r.Authoritative != w.aa {
		t.Errorf("AA = %v, want %v", r.Authoritative, w.aa)
	}
	if r.Truncated != w.tc {
		t.Errorf("TC = %v, want %v", r.Truncated, w.tc)
	}
	if r.RecursionDesired != q.RecursionDesired {
		t.Errorf("RD = %v, want it copied (%v)", r.RecursionDesired, q.RecursionDesired)
	}
	if r.RecursionAvailable {
		t.Errorf("RA set by an authoritative-only server")
	}
	if r.Zero {
		t.Errorf("Z set")
	}
	if r.AuthenticatedData {
		t.Errorf("AD set without DNSSEC")
	}
	if r.CheckingDisabled != q.CheckingDisabled {
		t.Errorf("CD = %v, want it copied (%v)", r.CheckingDisabled, q.CheckingDisabled)
	}
	wq := w.question
	if wq == nil {
		wq = q.Question
	}
	if !slices.Equal(r.Question, wq) {
		t.Errorf("question = %v, want %v", r.Question, wq)
	}
	if got := rrStrings(r.Answer); !slices.Equal(got, w.answer) {
		t.Errorf("answer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(w.answer, "\n"))
	}
	if got := rrStrings(r.Ns); !sameSet(got, w.ns) {
		t.Errorf("authority:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(w.ns, "\n"))
	}
	if got := rrStrings(r.Extra); !sameSet(got, w.extra) {
		t.Errorf("additional:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(w.extra, "\n"))
	}
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range sec {
			if rr.Header().Rrtype == dns.TypeOPT {
				t.Errorf("OPT outside the additional section")
			}
		}
	}
	checkOPT(t, q, r, w)
}

func checkOPT(t testing.TB, q, r *dns.Msg, w want) {
	t.Helper()
	n := 0
	for _, rr := range r.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			n++
		}
	}
	ro := r.IsEdns0()
	expectOPT := q.IsEdns0() != nil && !w.noOPT
	switch {
	case n > 1:
		t.Errorf("%d OPT records", n)
		return
	case !expectOPT && ro != nil:
		t.Errorf("response has an OPT; want none")
		return
	case expectOPT && ro == nil:
		t.Errorf("response has no OPT")
		return
	case ro == nil:
		return
	}
	if ro.Hdr.Name != "." {
		t.Errorf("OPT owner %q", ro.Hdr.Name)
	}
	if ro.UDPSize() != dnsserver.AdvertisedUDPSize {
		t.Errorf("OPT UDP size = %d, want %d", ro.UDPSize(), dnsserver.AdvertisedUDPSize)
	}
	if ro.Version() != 0 {
		t.Errorf("OPT version = %d, want 0", ro.Version())
	}
	wo := w.opt
	if wo == nil {
		wo = &wantOPT{do: q.IsEdns0().Do(), co: q.IsEdns0().Co()}
	}
	if ro.Do() != wo.do {
		t.Errorf("DO = %v, want %v", ro.Do(), wo.do)
	}
	if ro.Co() != wo.co {
		t.Errorf("CO = %v, want %v", ro.Co(), wo.co)
	}
	if flags := ro.Hdr.Ttl & 0x3FFF; flags != 0 {
		t.Errorf("EDNS flags other than DO and CO set: %#04x", flags)
	}
	var wantOpts []string
	if wo.nsid != "" {
		wantOpts = append(wantOpts, fmt.Sprintf("nsid=%x", wo.nsid))
	}
	if wo.hasKA {
		wantOpts = append(wantOpts, fmt.Sprintf("keepalive=%d", wo.keepalive))
	}
	if w.ede != "" {
		wantOpts = append(wantOpts, "ede="+w.ede)
	}
	var got []string
	for _, o := range ro.Option {
		switch o := o.(type) {
		case *dns.EDNS0_NSID:
			got = append(got, "nsid="+o.Nsid)
		case *dns.EDNS0_TCP_KEEPALIVE:
			got = append(got, fmt.Sprintf("keepalive=%d", o.Timeout))
		case *dns.EDNS0_EDE:
			e := fmt.Sprintf("ede=%d", o.InfoCode)
			if o.ExtraText != "" {
				e += ":" + o.ExtraText
			}
			got = append(got, e)
		default:
			got = append(got, fmt.Sprintf("option%d=%s", o.Option(), o.String()))
		}
	}
	if !slices.Equal(got, wantOpts) {
		t.Errorf("OPT options = %v, want %v", got, wantOpts)
	}
}

// rcodeName names rc; miekg/dns calls 16 BADSIG, which a query's rcode never is.
func rcodeName(rc int) string {
	if rc == dns.RcodeBadVers {
		return "BADVERS"
	}
	if n, ok := dns.RcodeToString[rc]; ok {
		return n
	}
	return fmt.Sprintf("RCODE%d", rc)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
