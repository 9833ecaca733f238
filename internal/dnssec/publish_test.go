package dnssec

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A key only published is in the DNSKEY RRset (after the signing keys)
// but signs nothing and has no CDS; KeyTTL sets the apex RRsets' TTL.
func TestSignerPublishing(t *testing.T) {
	ksk := testKey(t, "example.com.", dns.ECDSAP256SHA256, true)
	zsk := testKey(t, "example.com.", dns.ECDSAP256SHA256, false)
	next := testKey(t, "example.com.", dns.ECDSAP256SHA256, false)
	s, err := NewSignerPublishing("example.com.", []*Key{ksk, zsk}, []*Key{next}, Options{KeyTTL: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dnskey, cds, _ := s.Apex(3600)
	if len(dnskey) != 3 || dnskey[2].(*dns.DNSKEY).PublicKey != next.DNSKEY.PublicKey || len(cds) != 1 {
		t.Fatalf("apex: %d DNSKEYs (want 3, the published one last), %d CDS (want 1)", len(dnskey), len(cds))
	}
	if ttl := dnskey[0].Header().Ttl; ttl != 7 {
		t.Errorf("DNSKEY TTL %d, want KeyTTL 7", ttl)
	}
	a, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.1")
	now := time.Now()
	sigs, err := s.Sign([]dns.RR{a}, now, ReasonLoad)
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 || sigs[0].(*dns.RRSIG).KeyTag != zsk.Tag {
		t.Fatalf("signed by %v, want the ZSK %d alone", sigs, zsk.Tag)
	}
	ks, _ := s.Sign(dnskey, now, ReasonLoad)
	if len(ks) != 1 || ks[0].(*dns.RRSIG).KeyTag != ksk.Tag {
		t.Fatalf("DNSKEY signed by %v, want the KSK alone", ks)
	}
	if err := ks[0].(*dns.RRSIG).Verify(ksk.DNSKEY, dnskey); err != nil {
		t.Fatal(err)
	}
	if len(s.Published()) != 1 || len(s.Keys()) != 2 {
		t.Fatal("Keys and Published")
	}
	if _, err := NewSignerPublishing("example.com.", []*Key{ksk, zsk}, []*Key{zsk}, Options{}); err == nil {
		t.Error("a key both signing and published: no error")
	}
	other := testKey(t, "example.net.", dns.ECDSAP256SHA256, false)
	if _, err := NewSignerPublishing("example.com.", []*Key{ksk, zsk}, []*Key{other}, Options{}); err == nil {
		t.Error("a published key of another zone: no error")
	}
}
