package dnsserver_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/rrl"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/tsig"
	"github.com/steer-dns/steer/internal/xfr"
)

// rrlPair is two handlers on the same zones, each with its own limiter of
// the same configuration and the same fixed clock: one answers through
// the fast path where it can, the other always through the general path,
// so each query is decided once by each and the answers must agree byte
// for byte.
type rrlPair struct {
	fast, general *dnsserver.Handler
	clock         *time.Time
}

func newRRLPair(t *testing.T, c rrl.Config, withCookies bool) *rrlPair {
	t.Helper()
	p := &rrlPair{clock: new(time.Time)}
	*p.clock = testNow
	for _, h := range []**dnsserver.Handler{&p.fast, &p.general} {
		l, err := rrl.New(c)
		if err != nil {
			t.Fatal(err)
		}
		g := &dnsserver.Guard{RRL: l}
		if withCookies {
			g.Cookies = testJar
		}
		hh, _ := steeredHandler(t)
		hh.SetGuard(g)
		hh.SetClock(func() time.Time { return *p.clock })
		*h = hh
	}
	return p
}

// ask answers m from from over tr on both handlers; nil means dropped.
func (p *rrlPair) ask(t *testing.T, m *dns.Msg, tr dnsserver.Transport, from netip.Addr) *dns.Msg {
	t.Helper()
	req, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	fast := p.fast.HandleFrom(req, tr, from, make([]byte, 0, 65535))
	general := p.general.HandleGeneral(req, tr, from, make([]byte, 0, 65535))
	if !bytes.Equal(fast, general) {
		a, b := new(dns.Msg), new(dns.Msg)
		a.Unpack(fast)
		b.Unpack(general)
		t.Fatalf("%v: fast and general differ:\nfast (%d bytes):\n%v\ngeneral (%d bytes):\n%v", m.Question[0], len(fast), a, len(general), b)
	}
	if fast == nil {
		return nil
	}
	r := new(dns.Msg)
	if err := r.Unpack(fast); err != nil {
		t.Fatal(err)
	}
	return r
}

// verdict names what became of an answer: "pass", "slip" (TC, empty),
// "badcookie" or "drop".
func verdict(r *dns.Msg) string {
	switch {
	case r == nil:
		return "drop"
	case r.Rcode == dns.RcodeBadCookie && len(r.Answer)+len(r.Ns) == 0:
		return "badcookie"
	case r.Truncated && len(r.Answer)+len(r.Ns) == 0:
		return "slip"
	}
	return "pass"
}

func rrlConfig(rate, slip int) rrl.Config {
	c := rrl.Defaults()
	c.ResponsesPerSecond, c.Slip, c.TableSize = rate, slip, 1<<14
	return c
}

// TestRateLimitSlipAndDrop: past R identical responses in a second, one
// source gets every second answer slipped (TC with empty sections, or
// BADCOOKIE with a fresh cookie when it sent a client cookie) and the
// others dropped, on both paths alike and for every class of answer.
// TCP and a valid server cookie are never limited; credit comes back
// with time.
func TestRateLimitSlipAndDrop(t *testing.T) {
	from := netip.MustParseAddr("192.0.2.150")
	for _, c := range []struct {
		name  string
		qtype uint16
	}{
		{"static.example.com.", dns.TypeA},       // positive, from a template
		{"static.example.com.", dns.TypeMX},      // NODATA
		{"nx.example.com.", dns.TypeA},           // NXDOMAIN
		{"steered.example.com.", dns.TypeA},      // steered
		{"x.wild.example.com.", dns.TypeTXT},     // a wildcard (general path)
		{"x.sub.example.com.", dns.TypeA},        // a referral
		{"example.org.", dns.TypeA},              // REFUSED: errors are dropped, never slipped
		{"static.example.com.", dns.TypeANY},     // general path
		{"www.example.com.", dns.TypeAAAA},       // positive
		{"deep.nx.nx.example.com.", dns.TypeTXT}, // NXDOMAIN
	} {
		p := newRRLPair(t, rrlConfig(3, 2), true)
		var got []string
		for range 9 {
			got = append(got, verdict(p.ask(t, withCookie(c.name, c.qtype, nil), dnsserver.UDP, from)))
		}
		want := "[pass pass pass slip drop slip drop slip drop]"
		if c.name == "example.org." {
			want = "[pass pass pass drop drop drop drop drop drop]"
		}
		if fmt.Sprint(got) != want {
			t.Errorf("%s %s: %v, want %s", c.name, dns.TypeToString[c.qtype], got, want)
		}
		// The same source over TCP, and with a valid cookie: answered.
		if v := verdict(p.ask(t, withCookie(c.name, c.qtype, nil), dnsserver.TCP, from)); v != "pass" {
			t.Errorf("%s over TCP: %s", c.name, v)
		}
		client := [8]byte{7, 7, 7, 7, 7, 7, 7, 7}
		valid := testJar.Mint(nil, client, from, testNow)
		if v := verdict(p.ask(t, withCookie(c.name, c.qtype, valid), dnsserver.UDP, from)); v != "pass" {
			t.Errorf("%s with a valid cookie: %s", c.name, v)
		}
		// A client cookie alone: the slip is BADCOOKIE, carrying the
		// server cookie that exempts the retry.
		var sawBad bool
		for range 4 {
			r := p.ask(t, withCookie(c.name, c.qtype, client[:]), dnsserver.UDP, from)
			if verdict(r) == "badcookie" {
				sawBad = true
				if ck := cookieOf(r); len(ck) != 24 || !bytes.Equal(ck, valid) {
					t.Errorf("%s: BADCOOKIE carries %x, want %x", c.name, ck, valid)
				}
			}
			if verdict(r) == "slip" {
				t.Errorf("%s: a query with a client cookie slipped as TC", c.name)
			}
		}
		if !sawBad && c.name != "example.org." {
			t.Errorf("%s: no BADCOOKIE slip", c.name)
		}
		// Another /24 has its own budget.
		if v := verdict(p.ask(t, withCookie(c.name, c.qtype, nil), dnsserver.UDP, netip.MustParseAddr("192.0.3.1"))); v != "pass" {
			t.Errorf("%s from another /24: %s", c.name, v)
		}
		// After the window, credit is back.
		*p.clock = p.clock.Add(16 * time.Second)
		if v := verdict(p.ask(t, withCookie(c.name, c.qtype, nil), dnsserver.UDP, from)); v != "pass" {
			t.Errorf("%s after the window: %s", c.name, v)
		}
	}
}

// TestRateLimitKeys checks what makes responses "identical": every name a
// wildcard answers counts as the wildcard, every NXDOMAIN of a zone as the
// zone; a steered answer's ECS scope block is part of the key (a resolver
// asking once per client /24 is never limited), while an unsteered name
// (scope 0) shares one bucket whatever the ECS.
func TestRateLimitKeys(t *testing.T) {
	from := netip.MustParseAddr("192.0.2.150")
	count := func(p *rrlPair, qs []*dns.Msg) map[string]int {
		n := map[string]int{}
		for _, m := range qs {
			n[verdict(p.ask(t, m, dnsserver.UDP, from))]++
		}
		return n
	}
	var wild, nx []*dns.Msg
	for i := range 10 {
		wild = append(wild, withCookie(fmt.Sprintf("n%d.wild.example.com.", i), dns.TypeA, nil))
		nx = append(nx, withCookie(fmt.Sprintf("nx%d.example.com.", i), dns.TypeA, nil))
	}
	for what, qs := range map[string][]*dns.Msg{"wildcard names": wild, "NXDOMAIN names": nx} {
		if n := count(newRRLPair(t, rrlConfig(3, 2), false), qs); n["pass"] != 3 {
			t.Errorf("%s: %v, want 3 answered (one bucket)", what, n)
		}
	}
	ecsQuery := func(name string, a net.IP) *dns.Msg {
		m := withCookie(name, dns.TypeA, nil)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: a})
		return m
	}
	// 200 client /24s spread over the address space, each asked twice:
	// first learn each answer's scope without limits, then expect each
	// scope block to get its own budget of R.
	var steered, static []*dns.Msg
	addr := func(i int) net.IP { return net.IPv4(byte(1+i%200), byte(i*7), 0, 0).To4() }
	for i := range 400 {
		steered = append(steered, ecsQuery("steered.example.com.", addr(i)))
		static = append(static, ecsQuery("static.example.com.", addr(i)))
	}
	unlimited := rrlConfig(1000000, 2)
	unlimited.AllPerSecond = 0
	free := newRRLPair(t, unlimited, false)
	perBlock := map[string]int{}
	for i, m := range steered {
		r := free.ask(t, m, dnsserver.UDP, from)
		for _, o := range r.IsEdns0().Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				a, _ := netip.AddrFromSlice(addr(i))
				perBlock[netip.PrefixFrom(a, int(s.SourceScope)).Masked().String()]++
			}
		}
	}
	want := 0
	for _, k := range perBlock {
		want += min(k, 3)
	}
	if len(perBlock) < 20 {
		t.Fatalf("only %d scope blocks among 200 /24s: the test needs many", len(perBlock))
	}
	n := count(newRRLPair(t, rrlConfig(3, 2), false), steered)
	if n["pass"] != want {
		t.Errorf("steered over %d scope blocks: %v, want %d answered", len(perBlock), n, want)
	}
	t.Logf("steered: %d scope blocks, %v", len(perBlock), n)
	if n := count(newRRLPair(t, rrlConfig(3, 2), false), static); n["pass"] != 3 {
		t.Errorf("unsteered name with 200 ECS /24s: %v, want 3 answered (scope 0 is one bucket)", n)
	}
}

// TestRateLimitAllocs: rate limiting costs the fast path no allocation.
func TestRateLimitAllocs(t *testing.T) {
	p := newRRLPair(t, rrl.Defaults(), true)
	from := netip.MustParseAddr("192.0.2.150")
	for _, name := range []string{"static.example.com.", "steered.example.com.", "nx.example.com."} {
		req, _ := withCookie(name, dns.TypeA, nil).Pack()
		buf := make([]byte, 0, 4096)
		if a := testing.AllocsPerRun(200, func() { p.fast.HandleFrom(req, dnsserver.UDP, from, buf) }); a != 0 {
			t.Errorf("%s: %.1f allocations per query with RRL on", name, a)
		}
	}
}

// TestAbuseMetrics counts cookie results, the bytes of UDP without a
// valid cookie, and the rate limiter's verdicts by class.
func TestAbuseMetrics(t *testing.T) {
	p := newRRLPair(t, rrlConfig(2, 2), true)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	p.fast.SetMetrics(m)
	l := p.fast.Guard().RRL
	tcp := dnsserver.TCPStats{Current: 3, Accepted: 7}
	tcp.Closed[dnsserver.TCPEvictedGlobal] = 4
	reg.MustRegister(rrl.NewCollector(func() *rrl.Limiter { return l }),
		dnsserver.NewTCPCollector(func() dnsserver.TCPStats { return tcp }))
	from := netip.MustParseAddr("192.0.2.150")
	client := [8]byte{1}
	valid := testJar.Mint(nil, client, from, testNow)
	var in, out int
	for range 6 { // 2 pass, then slip, drop, slip, drop
		req, _ := withCookie("static.example.com.", dns.TypeA, nil).Pack()
		in += len(req)
		out += len(p.fast.HandleFrom(req, dnsserver.UDP, from, make([]byte, 0, 4096)))
	}
	for _, c := range [][]byte{client[:], valid, client[:7]} {
		req, _ := withCookie("nx.example.com.", dns.TypeA, c).Pack()
		resp := p.fast.HandleFrom(req, dnsserver.UDP, from, make([]byte, 0, 4096))
		if !bytes.Equal(c, valid) {
			in, out = in+len(req), out+len(resp)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`steer_dns_cookies_total{result="none"} 6`,
		`steer_dns_cookies_total{result="client_only"} 1`,
		`steer_dns_cookies_total{result="valid"} 1`,
		`steer_dns_cookies_total{result="malformed"} 1`,
		fmt.Sprintf(`steer_dns_nocookie_udp_bytes_total{direction="in"} %d`, in),
		fmt.Sprintf(`steer_dns_nocookie_udp_bytes_total{direction="out"} %d`, out),
		`steer_rrl_responses_total{class="positive",outcome="passed"} 2`,
		`steer_rrl_responses_total{class="positive",outcome="slipped"} 2`,
		`steer_rrl_responses_total{class="positive",outcome="dropped"} 2`,
		`steer_rrl_responses_total{class="nxdomain",outcome="passed"} 1`,
		`steer_tcp_connections 3`,
		`steer_tcp_connections_closed_total{reason="evicted_global"} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestExplainPeeksTheLimiter: explain says what the limiter would do with
// the answer now, without debiting it, and how the response is keyed.
func TestExplainPeeksTheLimiter(t *testing.T) {
	p := newRRLPair(t, rrlConfig(2, 2), true)
	h := p.fast
	from := netip.MustParseAddr("192.0.2.150")
	req, _ := withCookie("static.example.com.", dns.TypeA, nil).Pack()
	explain := func() dnsserver.GuardReport {
		out, rep := h.Explain(req, from, func(*snapshot.Snapshot, *policy.Record, *policy.Query, *policy.Decision) {})
		if r := new(dns.Msg); out == nil || r.Unpack(out) != nil || len(r.Answer) != 1 {
			t.Fatalf("explain's answer: %x", out)
		}
		return rep
	}
	for range 5 { // explaining costs no credit
		if rep := explain(); rep.RateLimit != "pass" || rep.Class != "positive" || rep.Key != "static.example.com. A" || rep.Cookie != "absent" {
			t.Fatalf("before any query: %+v", rep)
		}
	}
	for range 2 {
		h.HandleFrom(req, dnsserver.UDP, from, make([]byte, 0, 4096))
	}
	if rep := explain(); rep.RateLimit != "slip" {
		t.Errorf("after R queries: %+v, want slip", rep)
	}
	h.HandleFrom(req, dnsserver.UDP, from, make([]byte, 0, 4096)) // slipped
	if rep := explain(); rep.RateLimit != "drop" {
		t.Errorf("after a slip: %+v, want drop", rep)
	}
	client := [8]byte{3}
	valid := testJar.Mint(nil, client, from, testNow)
	vreq, _ := withCookie("static.example.com.", dns.TypeA, valid).Pack()
	if _, rep := h.Explain(vreq, from, func(*snapshot.Snapshot, *policy.Record, *policy.Query, *policy.Decision) {}); rep.RateLimit != "exempt (valid server cookie)" || rep.Cookie != "valid" {
		t.Errorf("with a valid cookie: %+v", rep)
	}
}

// TestRateLimitSigned: a request carrying TSIG passes the same guard as
// any other. 100 identical queries from one source signed with a key the
// server does not have (each answered NOTAUTH, BADKEY), or signed with a
// wrong secret (BADSIG), get no more replies than the same 100 unsigned;
// signed with the right key, they get as many as unsigned, and each one
// answered is signed over the request's MAC. NOTIFYs too: signed with an
// unknown key, or unsigned for a zone not served as a secondary here
// (NOTAUTH from the transfer service), they are limited like any answer.
func TestRateLimitSigned(t *testing.T) {
	from := netip.MustParseAddr("192.0.2.150")
	const secret = "c3RlZXIgdGVzdCBrZXkgb2YgdGhpcnR5LXR3byBieXRlcyE="
	key := tsig.Key{Name: "known.", Algorithm: dns.HmacSHA256, Secret: secret}
	sign := func(m *dns.Msg, name, secret string) []byte {
		m.SetTsig(name, dns.HmacSHA256, 300, time.Now().Unix())
		b, _, err := dns.TsigGenerate(m, secret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// signed returns m signed, and as sent (with the MAC).
	signed := func(m *dns.Msg, name, secret string) ([]byte, *dns.Msg) {
		b := sign(m, name, secret)
		sent := new(dns.Msg)
		if err := sent.Unpack(b); err != nil {
			t.Fatal(err)
		}
		return b, sent
	}
	type reqs func() ([]byte, *dns.Msg)
	query := func(name, secret string) reqs {
		return func() ([]byte, *dns.Msg) {
			m := query("static.example.com.", dns.TypeA)
			if name == "" {
				b, _ := m.Pack()
				return b, m
			}
			return signed(m, name, secret)
		}
	}
	notify := func(name, secret string) reqs {
		return func() ([]byte, *dns.Msg) {
			m := new(dns.Msg)
			m.SetNotify("example.com.")
			if name == "" {
				b, _ := m.Pack()
				return b, m
			}
			return signed(m, name, secret)
		}
	}
	// replies sends 100 requests to a handler with a fresh limiter (3
	// per second, every second one slipped) and counts the replies; check
	// sees each reply with the request it answers.
	replies := func(what string, next reqs, check func(req *dns.Msg, wire []byte)) int {
		h, snap := steeredHandler(t)
		snap.SetTSIG(map[string]tsig.Key{"known": key})
		l, err := rrl.New(rrlConfig(3, 2))
		if err != nil {
			t.Fatal(err)
		}
		h.SetGuard(&dnsserver.Guard{RRL: l})
		h.SetClock(func() time.Time { return testNow })
		h.SetTransfers(xfr.New(xfr.Options{}))
		n := 0
		for range 100 {
			b, m := next()
			out := h.HandleFrom(b, dnsserver.UDP, from, make([]byte, 0, 4096))
			if out == nil {
				continue
			}
			n++
			if check != nil {
				check(m, out)
			}
		}
		t.Logf("%s: %d replies to 100", what, n)
		return n
	}
	rcode := func(want int, tsigErr uint16) func(*dns.Msg, []byte) {
		return func(_ *dns.Msg, wire []byte) {
			t.Helper()
			r := new(dns.Msg)
			if err := r.Unpack(wire); err != nil {
				t.Fatal(err)
			}
			if r.Rcode != want {
				t.Fatalf("rcode %s, want %s:\n%v", dns.RcodeToString[r.Rcode], dns.RcodeToString[want], r)
			}
			if tr := r.IsTsig(); tsigErr != 0 && (tr == nil || tr.Error != tsigErr) {
				t.Fatalf("TSIG %v, want error %s", tr, dns.RcodeToString[int(tsigErr)])
			}
		}
	}
	unsigned := replies("unsigned", query("", ""), nil)
	if unsigned >= 100 {
		t.Fatalf("unsigned: %d replies to 100: not limited, the test proves nothing", unsigned)
	}
	for what, n := range map[string]int{
		"unknown key":         replies("unknown key", query("unknown.", secret), rcode(dns.RcodeNotAuth, dns.RcodeBadKey)),
		"wrong secret":        replies("wrong secret", query("known.", "d3JvbmcgdGVzdCBrZXkgb2YgdGhpcnR5LXR3byBieXRlcyE="), rcode(dns.RcodeNotAuth, dns.RcodeBadSig)),
		"notify, unknown key": replies("notify, unknown key", notify("unknown.", secret), rcode(dns.RcodeNotAuth, dns.RcodeBadKey)),
		"notify, unsigned":    replies("notify, unsigned", notify("", ""), rcode(dns.RcodeNotAuth, 0)),
	} {
		if n > unsigned {
			t.Errorf("%s: %d replies to 100 signed queries, more than the %d to unsigned ones", what, n, unsigned)
		}
	}
	withKey := replies("known key", query("known.", secret), func(req *dns.Msg, wire []byte) {
		r := new(dns.Msg)
		if err := r.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		if r.IsTsig() == nil {
			t.Fatalf("a reply to a signed query is unsigned:\n%v", r)
		}
		if err := dns.TsigVerify(wire, secret, req.IsTsig().MAC, false); err != nil {
			t.Fatalf("the reply's TSIG does not verify: %v\n%v", err, r)
		}
	})
	if withKey != unsigned {
		t.Errorf("known key: %d replies to 100 signed queries, %d to unsigned ones", withKey, unsigned)
	}
}

// TestSignedAnswerFits: the size limit holds for signed answers too. An
// answer that fills 512 bytes without EDNS does not fit with its TSIG
// record: over UDP it is sent as RFC 8945 §5.3 says, the question and the
// TSIG with TC set, still verifying; over TCP it is sent whole, signed.
func TestSignedAnswerFits(t *testing.T) {
	const secret = "c3RlZXIgdGVzdCBrZXkgb2YgdGhpcnR5LXR3byBieXRlcyE="
	h, snap := steeredHandler(t)
	snap.SetTSIG(map[string]tsig.Key{"known": {Name: "known.", Algorithm: dns.HmacSHA256, Secret: secret}})
	m := query("edge512.example.com.", dns.TypeTXT)
	plain, _ := m.Pack()
	if out := h.HandleFrom(plain, dnsserver.UDP, netip.MustParseAddr("192.0.2.1"), nil); len(out) != 512 {
		t.Fatalf("unsigned: %d bytes, the test needs an answer of exactly 512", len(out))
	}
	m.SetTsig("known.", dns.HmacSHA256, 300, time.Now().Unix())
	req, mac, err := dns.TsigGenerate(m, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []dnsserver.Transport{dnsserver.UDP, dnsserver.TCP} {
		out := h.HandleFrom(req, tr, netip.MustParseAddr("192.0.2.1"), nil)
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatalf("%v: %v", tr, err)
		}
		if err := dns.TsigVerify(out, secret, mac, false); err != nil || r.IsTsig() == nil {
			t.Errorf("%v: the reply's TSIG does not verify: %v\n%v", tr, err, r)
		}
		switch {
		case tr == dnsserver.UDP && (len(out) > 512 || !r.Truncated || len(r.Answer) != 0 || len(r.Question) != 1):
			t.Errorf("UDP: %d bytes, TC %v, %d answers; want the question and the TSIG in at most 512 bytes, TC set", len(out), r.Truncated, len(r.Answer))
		case tr == dnsserver.TCP && (r.Truncated || len(r.Answer) != 1):
			t.Errorf("TCP: TC %v, %d answers; want the whole answer\n%v", r.Truncated, len(r.Answer), r)
		}
	}
}
