package explain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// TestSignaturesVerified: every RRSIG of an answer is listed with its
// expiry and checked with the zone's key: a good one verifies, one over
// changed data or by a key the zone does not serve, or past its
// expiration, says why not.
func TestSignaturesVerified(t *testing.T) {
	key, err := dnssec.GenerateKey("example.com.", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dnssec.NewSigner("example.com.", []*dnssec.Key{key}, dnssec.Options{Validity: 48 * time.Hour, Jitter: -1})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.1")
	soa, _ := dns.NewRR("example.com. 3600 IN SOA ns.example.com. host.example.com. 1 7200 3600 1209600 300")
	asig, err := s.Sign([]dns.RR{a}, now, dnssec.ReasonLoad)
	if err != nil {
		t.Fatal(err)
	}
	soasig, err := s.Sign([]dns.RR{soa}, now, dnssec.ReasonLoad)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(signer string, tag uint16, alg uint8) (*dns.DNSKEY, string) {
		if signer == "example.com." && tag == key.Tag && alg == key.DNSKEY.Algorithm {
			return key.DNSKEY, "CSK"
		}
		return nil, ""
	}
	m := new(dns.Msg)
	m.Answer = []dns.RR{a, asig[0]}
	m.Ns = []dns.RR{soa, soasig[0]}
	got := signatures(m, keys, now)
	if len(got) != 2 {
		t.Fatalf("%d signatures, want 2: %+v", len(got), got)
	}
	for i, want := range []struct{ section, covers string }{{"answer", "A"}, {"authority", "SOA"}} {
		g := got[i]
		if g.Section != want.section || g.Covers != want.covers || !g.Verified || g.Check != fmt.Sprintf("verified with DNSKEY %d (CSK)", key.Tag) {
			t.Errorf("signature %d: %+v", i, g)
		}
		if g.KeyTag != key.Tag || g.Algorithm != "ECDSAP256SHA256" || g.Signer != "example.com." {
			t.Errorf("signature %d: %+v", i, g)
		}
		if d := g.Expiration.Sub(now.Add(48 * time.Hour)); d < -time.Second || d > time.Second {
			t.Errorf("signature %d expires %v, want %v", i, g.Expiration, now.Add(48*time.Hour))
		}
		if g.ExpiresIn != "1d23h59m" && g.ExpiresIn != "2d0h0m" {
			t.Errorf("signature %d expires in %q", i, g.ExpiresIn)
		}
	}

	// The data changed under the signature: it does not verify.
	b, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.99")
	m.Answer = []dns.RR{b, asig[0]}
	if g := signatures(m, keys, now)[0]; g.Verified || !strings.Contains(g.Check, "does not verify") {
		t.Errorf("changed data: %+v", g)
	}
	// No key of the zone has the tag.
	m.Answer = []dns.RR{a, asig[0]}
	none := func(string, uint16, uint8) (*dns.DNSKEY, string) { return nil, "" }
	if g := signatures(m, none, now)[0]; g.Verified || !strings.Contains(g.Check, "no DNSKEY") {
		t.Errorf("unknown key: %+v", g)
	}
	// Three days on it has expired.
	later := now.Add(72 * time.Hour)
	if g := signatures(m, keys, later)[0]; g.Verified || g.ExpiresIn != "expired" || !strings.Contains(g.Check, "not valid now") {
		t.Errorf("expired: %+v", g)
	}
	// The RRset is not in the section.
	m.Answer = []dns.RR{asig[0]}
	if g := signatures(m, keys, now)[0]; g.Verified || !strings.Contains(g.Check, "not in the section") {
		t.Errorf("no RRset: %+v", g)
	}

	rep := &Report{Query: "www.example.com. A", Rcode: "NOERROR", Answer: []string{a.String()}, Signatures: got}
	text := rep.Text()
	if !strings.Contains(text, "signature: answer www.example.com. A, ECDSAP256SHA256 key") || !strings.Contains(text, "(expires in ") {
		t.Errorf("text:\n%s", text)
	}
}

func TestSigTimeWraps(t *testing.T) {
	now := time.Unix(1<<32-100, 0) // just before 2106's wrap
	if got := sigTime(uint32(now.Unix())+200, now); got.Unix() != now.Unix()+200 {
		t.Errorf("sigTime across the wrap: %v", got)
	}
	if got := sigTime(uint32(now.Unix()-3600), now); got.Unix() != now.Unix()-3600 {
		t.Errorf("sigTime before now: %v", got)
	}
}
