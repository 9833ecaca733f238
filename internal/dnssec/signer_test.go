package dnssec

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testKey makes a key pair for zone in memory with GenerateKey.
func testKey(t testing.TB, zone string, alg uint8, sep bool) *Key {
	t.Helper()
	k, err := GenerateKey(zone, alg, sep)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignVerifies(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []*Key
	}{
		{"csk-p256", []*Key{testKey(t, "example.com.", dns.ECDSAP256SHA256, true)}},
		{"ksk-zsk-ed25519", []*Key{testKey(t, "example.com.", dns.ED25519, true), testKey(t, "example.com.", dns.ED25519, false)}},
		{"rsa-ksk-p256-zsk", []*Key{algKeys(t)["rsa"], testKey(t, "example.com.", dns.ECDSAP256SHA256, false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSigner("Example.COM.", tc.keys, Options{})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			a1, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.1")
			a2, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.2")
			sigs, err := s.Sign([]dns.RR{a1, a2}, now, ReasonLoad)
			if err != nil {
				t.Fatal(err)
			}
			// One signature by the ZSK (or CSK) and, RFC 4035 §2.2, one by
			// a key of each other algorithm of the zone's keys.
			zsk := tc.keys[len(tc.keys)-1]
			algs := map[uint8]*Key{}
			for _, k := range tc.keys {
				if algs[k.DNSKEY.Algorithm] == nil || !k.SEP() {
					algs[k.DNSKEY.Algorithm] = k
				}
			}
			if len(sigs) != len(algs) || sigs[0].(*dns.RRSIG).KeyTag != zsk.Tag {
				t.Fatalf("sigs %v, want %d, the first by key %d", sigs, len(algs), zsk.Tag)
			}
			for _, rr := range sigs {
				sig := rr.(*dns.RRSIG)
				k := algs[sig.Algorithm]
				if k == nil || sig.KeyTag != k.Tag {
					t.Fatalf("signature by key %d (algorithm %d), want one per algorithm", sig.KeyTag, sig.Algorithm)
				}
				if err := sig.Verify(k.DNSKEY, []dns.RR{a2, a1}); err != nil {
					t.Fatalf("verify: %v", err)
				}
				delete(algs, sig.Algorithm)
			}
			if !s.Fresh(sigs, dns.TypeA, now) || s.Fresh(sigs, dns.TypeA, now.Add(12*24*time.Hour)) {
				t.Error("Fresh: want fresh now and due after 12 of 14 days")
			}
			dnskey, cds, cdnskey := s.Apex(3600)
			if len(dnskey) != len(tc.keys) || len(cds) != 1 || len(cdnskey) != 1 {
				t.Fatalf("apex: %d DNSKEY %d CDS %d CDNSKEY", len(dnskey), len(cds), len(cdnskey))
			}
			ksigs, err := s.Sign(dnskey, now, ReasonLoad)
			if err != nil {
				t.Fatal(err)
			}
			if err := ksigs[0].(*dns.RRSIG).Verify(tc.keys[0].DNSKEY, dnskey); err != nil {
				t.Fatalf("DNSKEY verify: %v", err)
			}
			if len(ksigs) != len(sigs) {
				t.Fatalf("DNSKEY RRset has %d signatures, want one per algorithm (%d)", len(ksigs), len(sigs))
			}
			w, _ := dns.NewRR("*.example.com. 300 IN TXT x")
			wsig, _ := s.Sign([]dns.RR{w}, now, ReasonLoad)
			if got := wsig[0].(*dns.RRSIG).Labels; got != 2 {
				t.Errorf("wildcard labels %d, want 2", got)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(1000) // 1 ms each, 100 ms burst
	now := time.Now().UnixNano()
	n := 0
	for b.Take(now) {
		n++
	}
	if n < 99 || n > 101 || b.Refused() != 1 {
		t.Fatalf("burst %d refused %d, want 100 and 1", n, b.Refused())
	}
	if !b.Take(now + int64(2*time.Millisecond)) {
		t.Fatal("no credit after 2 ms")
	}
}

func TestCache(t *testing.T) {
	c := NewCache(4)
	k := CacheKey{Name: "x.example.com.", Type: dns.TypeNSEC, Sum: 7}
	if c.Get(k, 10) != nil {
		t.Fatal("hit in an empty cache")
	}
	c.Put(&Entry{Key: k, Refresh: 100})
	if c.Get(k, 10) == nil || c.Get(k, 100) != nil {
		t.Fatal("want a hit before refresh, a miss at it")
	}
	k2 := k
	k2.Sum = 8
	if c.Get(k2, 10) != nil {
		t.Fatal("hit for another sum")
	}
	if allocs := testing.AllocsPerRun(100, func() { c.Get(k, 10) }); allocs != 0 {
		t.Fatalf("Get allocates %v", allocs)
	}
}

func TestSetSumOrderFree(t *testing.T) {
	a1, _ := dns.NewRR("x. 60 IN A 192.0.2.1")
	a2, _ := dns.NewRR("x. 60 IN A 192.0.2.2")
	if SetSum([]dns.RR{a1, a2}) != SetSum([]dns.RR{a2, a1}) || SetSum([]dns.RR{a1}) == SetSum([]dns.RR{a2}) {
		t.Fatal("SetSum must be order-free and tell sets apart")
	}
	if SetSum([]dns.RR{a1}) != RdataSum([]byte{192, 0, 2, 1}) {
		t.Fatal("SetSum of one A must be the RdataSum of its 4 bytes")
	}
}

// TestShortValidityFresh: with a validity of minutes (as tests set), a
// signature just made is fresh and falls due before it expires, near
// the refresh share of its validity.
func TestShortValidityFresh(t *testing.T) {
	k := testKey(t, "example.com.", dns.ECDSAP256SHA256, true)
	s, err := NewSigner("example.com.", []*Key{k}, Options{Validity: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.1")
	sigs, err := s.Sign([]dns.RR{a}, now, ReasonLoad)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Fresh(sigs, dns.TypeA, now) {
		t.Fatalf("a signature just made is not fresh: %v", sigs[0])
	}
	sig := sigs[0].(*dns.RRSIG)
	due := time.Unix(int64(RefreshAt(sig, s.Options().Refresh)), 0)
	if d := due.Sub(now); d < time.Minute || d > 100*time.Second || due.Unix() >= int64(sig.Expiration) {
		t.Fatalf("due %v after signing (expires %v after)", d, time.Unix(int64(sig.Expiration), 0).Sub(now))
	}
	if s.Fresh(sigs, dns.TypeA, due) {
		t.Fatal("fresh at its refresh point")
	}
	if got := (Options{}).withDefaults().Backdate; got != DefaultBackdate {
		t.Fatalf("default backdate %v", got)
	}
}

// TestApexWithdrawn: a KSK being rolled out stays in the DNSKEY RRset
// and signs it, but the CDS and CDNSKEY name only the KSK the parent
// should keep.
func TestApexWithdrawn(t *testing.T) {
	old, err := GenerateKey("example.com", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	nw, _ := GenerateKey("example.com", dns.ECDSAP256SHA256, true)
	zsk, _ := GenerateKey("example.com", dns.ECDSAP256SHA256, false)
	w := *old
	w.Withdrawn = true
	s, err := NewSigner("example.com", []*Key{&w, nw, zsk}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dnskey, cds, cdnskey := s.Apex(300)
	if len(dnskey) != 3 || len(cds) != 1 || len(cdnskey) != 1 || cds[0].(*dns.CDS).KeyTag != nw.Tag || cdnskey[0].(*dns.CDNSKEY).PublicKey != nw.DNSKEY.PublicKey {
		t.Fatalf("apex: %d DNSKEY, CDS %v, CDNSKEY %v", len(dnskey), cds, cdnskey)
	}
	sigs, err := s.Sign(dnskey, time.Now(), ReasonLoad)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("DNSKEY RRset signed by %d keys (%v), want both KSKs", len(sigs), err)
	}
}
