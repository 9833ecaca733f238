package dnsserver_test

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
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
