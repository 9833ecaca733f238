package dnsserver_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/rrl"
)

// TestDenialInNodeCache: a compact denial signed for one query (over TCP,
// beyond the budget) is kept in the node's cache, so the same denial over
// UDP is answered signed instead of TC=1, with NXDOMAIN kept for CO and
// the CO flag echoed.
func TestDenialInNodeCache(t *testing.T) {
	h, snap, _ := signedHandler(t, "signing: { budget_per_core: 1 }\n")
	from := netip.MustParseAddr("192.0.2.151")
	buf := make([]byte, 0, 65535)
	_, _, before := snap.Signing.Cache.Stats()
	m := new(dns.Msg)
	if err := m.Unpack(h.HandleFrom(doQuery(t, "cached-nope.example.com.", dns.TypeA, false, ""), dnsserver.TCP, from, buf[:0])); err != nil {
		t.Fatal(err)
	}
	if _, _, after := snap.Signing.Cache.Stats(); after != before+1 {
		t.Fatalf("node cache inserts %d → %d, want one more", before, after)
	}
	for _, co := range []bool{false, true} {
		m = new(dns.Msg)
		if err := m.Unpack(h.HandleFrom(doQuery(t, "cached-nope.example.com.", dns.TypeA, co, ""), dnsserver.UDP, from, buf[:0])); err != nil {
			t.Fatal(err)
		}
		want := dns.RcodeSuccess
		if co {
			want = dns.RcodeNameError
		}
		var nsec *dns.NSEC
		for _, rr := range m.Ns {
			if n, ok := rr.(*dns.NSEC); ok {
				nsec = n
			}
		}
		if m.Truncated || m.Rcode != want || nsec == nil || nsec.NextDomain != `\000.cached-nope.example.com.` {
			t.Fatalf("UDP, CO %v: want the cached denial, rcode %s:\n%v", co, dns.RcodeToString[want], m)
		}
		// RFC 9824: the CO flag is echoed, so a resolver knows the
		// NXDOMAIN with NXNAME is a compact answer kept for it.
		if o := m.IsEdns0(); o == nil || !o.Do() || o.Co() != co {
			t.Fatalf("UDP, CO %v: OPT %v, want DO and CO echoed", co, o)
		}
	}
}

// TestRateLimitCompactDenial: a compact denial answers NOERROR, but rate
// limiting counts it as the NXDOMAIN it is, per zone: a random-subdomain
// flood with DO from one source is limited as one without DO.
func TestRateLimitCompactDenial(t *testing.T) {
	from := netip.MustParseAddr("192.0.2.152")
	for _, do := range []bool{false, true} {
		h, _, _ := signedHandler(t, "")
		l, err := rrl.New(rrlConfig(3, 2))
		if err != nil {
			t.Fatal(err)
		}
		h.SetGuard(&dnsserver.Guard{RRL: l})
		h.SetClock(func() time.Time { return testNow })
		n := map[string]int{}
		for i := range 10 {
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("flood%d.example.com.", i), dns.TypeA)
			m.SetEdns0(1232, do)
			req, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			out := h.HandleFrom(req, dnsserver.UDP, from, make([]byte, 0, 4096))
			var r *dns.Msg
			if out != nil {
				r = new(dns.Msg)
				if err := r.Unpack(out); err != nil {
					t.Fatal(err)
				}
				if v := verdict(r); v == "pass" && do && (r.Rcode != dns.RcodeSuccess || len(r.Ns) < 4) {
					t.Fatalf("DO: want a compact denial:\n%v", r)
				}
			}
			n[verdict(r)]++
		}
		if n["pass"] != 3 {
			t.Errorf("DO %v: %v, want 3 answered (the zone's NXDOMAIN bucket)", do, n)
		}
	}
}

// TestNXNAMEQuery: a query for the NXNAME meta-type is FORMERR with EDE
// 30 (RFC 9824 §3.5), on both paths.
func TestNXNAMEQuery(t *testing.T) {
	h, _, _ := signedHandler(t, "")
	from := netip.MustParseAddr("192.0.2.153")
	for _, do := range []bool{false, true} {
		m := new(dns.Msg)
		m.SetQuestion("www.example.com.", dns.TypeNXNAME)
		m.SetEdns0(1232, do)
		req, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		fast := h.HandleFrom(req, dnsserver.UDP, from, make([]byte, 0, 4096))
		general := h.HandleGeneral(req, dnsserver.UDP, from, make([]byte, 0, 4096))
		r := new(dns.Msg)
		if err := r.Unpack(fast); err != nil || string(fast) != string(general) {
			t.Fatalf("DO %v: fast and general differ, or %v", do, err)
		}
		var ede *dns.EDNS0_EDE
		if o := r.IsEdns0(); o != nil {
			for _, opt := range o.Option {
				if e, ok := opt.(*dns.EDNS0_EDE); ok {
					ede = e
				}
			}
		}
		if r.Rcode != dns.RcodeFormatError || len(r.Answer)+len(r.Ns) != 0 || ede == nil || ede.InfoCode != 30 {
			t.Fatalf("DO %v: want FORMERR with EDE 30:\n%v", do, r)
		}
	}
}
