package dnsserver_test

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
)

// testNow is the clock of the cookie tests.
var testNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var testJar = cookie.NewJar(cookie.Secret{1, 2, 3, 4}, nil)

// corpusCookie is a COOKIE option of a random kind for a query from
// from: client-only, valid under testJar at testNow, two hours old,
// forged, or malformed.
func corpusCookie(r *rand.Rand, from netip.Addr) *dns.EDNS0_COOKIE {
	var client [8]byte
	for i := range client {
		client[i] = byte(r.IntN(256))
	}
	var b []byte
	switch r.IntN(6) {
	case 0, 1:
		b = client[:]
	case 2:
		b = testJar.Mint(nil, client, from, testNow.Add(-time.Minute))
	case 3:
		b = testJar.Mint(nil, client, from, testNow.Add(-2*time.Hour))
	case 4:
		b = testJar.Mint(nil, client, from, testNow)
		b[len(b)-1] ^= 1
	case 5:
		b = client[:7]
	}
	return &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(b)}
}

func cookieHandler(t *testing.T, g *dnsserver.Guard) *dnsserver.Handler {
	t.Helper()
	h, _ := steeredHandler(t)
	h.SetGuard(g)
	h.SetClock(func() time.Time { return testNow })
	return h
}

// ask sends m to h (fast path when it can) and unpacks the answer.
func askHandler(t *testing.T, h *dnsserver.Handler, m *dns.Msg, tr dnsserver.Transport, from netip.Addr) *dns.Msg {
	t.Helper()
	req, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	out := h.HandleFrom(req, tr, from, make([]byte, 0, 65535))
	if general := h.HandleGeneral(req, tr, from, make([]byte, 0, 65535)); !bytes.Equal(out, general) {
		t.Fatalf("%v: fast and general paths differ", m.Question[0])
	}
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil {
		t.Fatal(err)
	}
	return r
}

func cookieOf(r *dns.Msg) []byte {
	if o := r.IsEdns0(); o != nil {
		for _, x := range o.Option {
			if c, ok := x.(*dns.EDNS0_COOKIE); ok {
				b, _ := hex.DecodeString(c.Cookie)
				return b
			}
		}
	}
	return nil
}

func withCookie(name string, qtype uint16, b []byte) *dns.Msg {
	m := query(name, qtype)
	m.SetEdns0(1232, false)
	if b != nil {
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(b)})
	}
	return m
}

// TestCookies checks what a response's COOKIE option holds (RFC 7873
// §5.2): a fresh server cookie for a client-only or invalid one, the same
// cookie echoed for a valid fresh one, a new one for a valid old one, and
// FORMERR for a malformed option; none when cookies are off.
func TestCookies(t *testing.T) {
	h := cookieHandler(t, &dnsserver.Guard{Cookies: testJar})
	from := netip.MustParseAddr("192.0.2.150")
	client := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	fresh := testJar.Mint(nil, client, from, testNow)
	for _, name := range []string{"static.example.com.", "steered.example.com.", "nx.example.com.", "cname.example.com."} {
		for _, tr := range []dnsserver.Transport{dnsserver.UDP, dnsserver.TCP} {
			r := askHandler(t, h, withCookie(name, dns.TypeA, client[:]), tr, from)
			if got := cookieOf(r); !bytes.Equal(got, fresh) {
				t.Errorf("%s client-only over %v: cookie %x, want %x", name, tr, got, fresh)
			}
			old := testJar.Mint(nil, client, from, testNow.Add(-10*time.Minute))
			if got := cookieOf(askHandler(t, h, withCookie(name, dns.TypeA, old), tr, from)); !bytes.Equal(got, old) {
				t.Errorf("%s valid: cookie %x, want it echoed %x", name, got, old)
			}
			stale := testJar.Mint(nil, client, from, testNow.Add(-40*time.Minute))
			if got := cookieOf(askHandler(t, h, withCookie(name, dns.TypeA, stale), tr, from)); !bytes.Equal(got, fresh) {
				t.Errorf("%s valid but older than 30 min: cookie %x, want a fresh one %x", name, got, fresh)
			}
			forged := append([]byte(nil), fresh...)
			forged[20] ^= 0xFF
			if got := cookieOf(askHandler(t, h, withCookie(name, dns.TypeA, forged), tr, from)); !bytes.Equal(got, fresh) {
				t.Errorf("%s forged: cookie %x, want a fresh one %x", name, got, fresh)
			}
			other := netip.MustParseAddr("198.51.100.7") // the cookie is bound to the address
			if got := cookieOf(askHandler(t, h, withCookie(name, dns.TypeA, fresh), tr, other)); bytes.Equal(got, fresh) || len(got) != 24 {
				t.Errorf("%s from another address: cookie %x echoed", name, got)
			}
			if r := askHandler(t, h, withCookie(name, dns.TypeA, client[:7]), tr, from); r.Rcode != dns.RcodeFormatError {
				t.Errorf("%s malformed cookie: %s, want FORMERR", name, dns.RcodeToString[r.Rcode])
			}
		}
	}
	off := cookieHandler(t, nil)
	if r := askHandler(t, off, withCookie("static.example.com.", dns.TypeA, client[:]), dnsserver.UDP, from); cookieOf(r) != nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("cookies off: %v", r)
	}
	if r := askHandler(t, off, withCookie("static.example.com.", dns.TypeA, client[:7]), dnsserver.UDP, from); r.Rcode != dns.RcodeSuccess {
		t.Errorf("cookies off, malformed option ignored: %s", dns.RcodeToString[r.Rcode])
	}
}

// TestCookiesNeverChangeTheAnswer asks every name and type of the corpus
// with no cookie, a client-only, a valid, a stale and a forged cookie and
// requires the same header and sections every time: only the OPT record
// differs (the lesson of answers that changed with +cookie at one DNS
// host, tailscale#20892).
func TestCookiesNeverChangeTheAnswer(t *testing.T) {
	h := cookieHandler(t, &dnsserver.Guard{Cookies: testJar})
	r := rand.New(rand.NewPCG(5, 6))
	from := netip.MustParseAddr("192.0.2.150")
	names := []string{"example.com.", "static.example.com.", "www.example.com.", "steered.example.com.", "nx.example.com.",
		"cname.example.com.", "foo.wild.example.com.", "x.sub.example.com.", "ent.example.com.", "example.org."}
	types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypeNS, dns.TypeSOA, dns.TypeANY, dns.TypeDS}
	n := 0
	for _, name := range names {
		for _, qt := range types {
			for _, tr := range []dnsserver.Transport{dnsserver.UDP, dnsserver.TCP} {
				base := askHandler(t, h, withCookie(name, qt, nil), tr, from)
				for range 4 {
					c := corpusCookie(r, from)
					if len(c.Cookie) == 14 {
						continue // malformed: FORMERR, not an answer
					}
					m := withCookie(name, qt, nil)
					m.IsEdns0().Option = append(m.IsEdns0().Option, c)
					got := askHandler(t, h, m, tr, from)
					if a, b := sections(base), sections(got); a != b {
						t.Errorf("%s %s over %v with cookie %s:\nwithout:\n%s\nwith:\n%s", name, dns.TypeToString[qt], tr, c.Cookie, a, b)
					}
					n++
				}
			}
		}
	}
	if n < 300 {
		t.Errorf("only %d answers compared", n)
	}
}

// sections prints a response without its OPT record.
func sections(m *dns.Msg) string {
	c := m.Copy()
	c.Id = 0
	var extra []dns.RR
	for _, rr := range c.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	c.Extra = extra
	s := c.String()
	// The OPT pseudo-section is printed apart; drop any trace of it.
	if i := strings.Index(s, ";; OPT PSEUDOSECTION"); i >= 0 {
		s = s[:i]
	}
	return s
}

// TestNoCookieCap truncates a UDP answer larger than max_nocookie_udp to a
// query without a valid server cookie, and answers it whole with one, or
// over TCP.
func TestNoCookieCap(t *testing.T) {
	h := cookieHandler(t, &dnsserver.Guard{Cookies: testJar, MaxNoCookieUDP: 512})
	from := netip.MustParseAddr("192.0.2.150")
	client := [8]byte{9, 9, 9, 9, 9, 9, 9, 9}
	valid := testJar.Mint(nil, client, from, testNow)
	name := "big.example.com."
	full := askHandler(t, h, withCookie(name, dns.TypeTXT, nil), dnsserver.TCP, from)
	if full.Truncated || len(full.Answer) == 0 {
		t.Fatalf("the test zone's %s TXT: %v", name, full)
	}
	size := full.Len()
	if size <= 512 || size > 1232 {
		t.Fatalf("the test needs an answer between 512 and 1232 bytes; %s TXT is %d", name, size)
	}
	for _, c := range []struct {
		what   string
		cookie []byte
		tr     dnsserver.Transport
		tc     bool
	}{
		{"no cookie", nil, dnsserver.UDP, true},
		{"client-only", client[:], dnsserver.UDP, true},
		{"forged", append(append([]byte(nil), valid[:23]...), valid[23]^1), dnsserver.UDP, true},
		{"valid", valid, dnsserver.UDP, false},
		{"no cookie over TCP", nil, dnsserver.TCP, false},
	} {
		r := askHandler(t, h, withCookie(name, dns.TypeTXT, c.cookie), c.tr, from)
		if r.Truncated != c.tc || (c.tc && len(r.Answer)+len(r.Ns) != 0) || (!c.tc && len(r.Answer) == 0) {
			t.Errorf("%s: TC=%v with %d answers, want TC=%v", c.what, r.Truncated, len(r.Answer), c.tc)
		}
		if c.cookie != nil && len(cookieOf(r)) != 24 {
			t.Errorf("%s: the truncated answer carries no cookie for the retry", c.what)
		}
	}
}

// TestCookieFastPathAllocs: a cookie costs the fast path no allocation.
func TestCookieFastPathAllocs(t *testing.T) {
	h := cookieHandler(t, &dnsserver.Guard{Cookies: testJar, MaxNoCookieUDP: 1232})
	from := netip.MustParseAddr("192.0.2.150")
	client := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, c := range [][]byte{client[:], testJar.Mint(nil, client, from, testNow.Add(-time.Minute))} {
		req, _ := withCookie("static.example.com.", dns.TypeA, c).Pack()
		buf := make([]byte, 0, 4096)
		if allocs := testing.AllocsPerRun(100, func() { h.HandleFrom(req, dnsserver.UDP, from, buf) }); allocs != 0 {
			t.Errorf("cookie %x: %.1f allocations per query", c, allocs)
		}
	}
}

// TestAnswersWithCookies asks every answer case of TestAnswers with a
// client cookie and with a valid server cookie, over UDP and TCP, of a
// server answering cookies: the response carries the cookie (the client's
// own first 8 bytes, and a server cookie), and with the COOKIE option set
// aside is exactly what the case wants without one.
func TestAnswersWithCookies(t *testing.T) {
	s := startServer(t, srvOpts{})
	jar := cookie.Random()
	s.Handler().SetGuard(&dnsserver.Guard{Cookies: jar})
	client := [8]byte{0xc0, 0x01, 0xc0, 0x0c, 0x1e, 0x00, 0x00, 0x01}
	from := s.V4.Addr()
	for _, c := range answerCases {
		for _, network := range []string{"udp", "tcp"} {
			for _, kind := range []string{"client-only", "valid"} {
				b := client[:]
				if kind == "valid" {
					b = jar.Mint(nil, client, from, time.Now().Add(-time.Minute))
				}
				q := c.query(true)
				q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(b)})
				r := dnstest.Exchange(t, network, s.V4, q)
				got := cookieOf(r)
				if len(got) != 24 || !bytes.Equal(got[:8], client[:]) || jar.Check(got, from, time.Now()).Status != cookie.Valid {
					t.Errorf("%s %s %s: cookie %x", c.name, network, kind, got)
				}
				if o := r.IsEdns0(); o != nil {
					o.Option = slicesDeleteCookie(o.Option)
				}
				if c.fold {
					foldSections(t, r)
				}
				checkResponse(t, q, r, c.want(t))
			}
		}
	}
}

func slicesDeleteCookie(opts []dns.EDNS0) []dns.EDNS0 {
	var out []dns.EDNS0
	for _, o := range opts {
		if _, ok := o.(*dns.EDNS0_COOKIE); !ok {
			out = append(out, o)
		}
	}
	return out
}
