package dnssec

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestZSKSigner: a ZSK-only signer signs data with every ZSK, signs no
// key RRset, publishes nothing, and refuses a SEP key.
func TestZSKSigner(t *testing.T) {
	zsk := testKey(t, "example.com.", dns.ECDSAP256SHA256, false)
	ksk := testKey(t, "example.com.", dns.ECDSAP256SHA256, true)
	if _, err := NewZSKSigner("example.com.", []*Key{zsk, ksk}, Options{}); err == nil || !strings.Contains(err.Error(), "the signer holds the KSK") {
		t.Errorf("a KSK: %v", err)
	}
	if _, err := NewZSKSigner("example.com.", nil, Options{}); err == nil {
		t.Error("no key: no error")
	}
	if _, err := NewZSKSigner("example.org.", []*Key{zsk}, Options{}); err == nil {
		t.Error("another zone's key: no error")
	}
	s, err := NewZSKSigner("Example.COM.", []*Key{zsk}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ZSKOnly() || len(s.Keys()) != 1 || s.Keys()[0] != zsk {
		t.Errorf("ZSKOnly %v keys %v", s.ZSKOnly(), s.Keys())
	}
	if k, c, cd := s.Apex(300); k != nil || c != nil || cd != nil {
		t.Errorf("Apex publishes %v %v %v", k, c, cd)
	}
	now := time.Now()
	a, _ := dns.NewRR("shop.example.com. 30 IN A 192.0.2.1")
	sigs, err := s.Sign([]dns.RR{a}, now, ReasonSteered)
	if err != nil || len(sigs) != 1 {
		t.Fatalf("%v %v", sigs, err)
	}
	sig := sigs[0].(*dns.RRSIG)
	if sig.KeyTag != zsk.Tag || sig.SignerName != "example.com." {
		t.Errorf("signature %v", sig)
	}
	if err := sig.Verify(zsk.DNSKEY, []dns.RR{a}); err != nil {
		t.Errorf("verify: %v", err)
	}
	if !s.Fresh(sigs, dns.TypeA, now) {
		t.Error("fresh signature not Fresh")
	}
	dk, _ := dns.NewRR(zsk.DNSKEY.String())
	if _, err := s.Sign([]dns.RR{dk}, now, ReasonLoad); err == nil {
		t.Error("a ZSK-only signer signed a DNSKEY RRset")
	}
	if n := s.Made(ReasonSteered); n != 1 {
		t.Errorf("made %d steered signatures", n)
	}
}

// TestPublishedIn: the signer's DNSKEY RRset must hold steer's ZSK (the
// error gives the record to add), and use no other algorithm.
func TestPublishedIn(t *testing.T) {
	zsk := testKey(t, "example.com.", dns.ECDSAP256SHA256, false)
	other := testKey(t, "example.com.", dns.ECDSAP256SHA256, false)
	ksk := testKey(t, "example.com.", dns.ECDSAP256SHA256, true)
	rsa := algKeys(t)["rsa"]
	s, err := NewZSKSigner("example.com.", []*Key{zsk}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rr := func(k *Key, spaced bool) dns.RR {
		d := *k.DNSKEY
		d.Hdr = dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600}
		if spaced { // as a zone file may break it
			d.PublicKey = d.PublicKey[:20] + " " + d.PublicKey[20:]
		}
		return &d
	}
	if err := s.PublishedIn([]dns.RR{rr(ksk, false), rr(other, false), rr(zsk, true)}); err != nil {
		t.Errorf("published: %v", err)
	}
	err = s.PublishedIn([]dns.RR{rr(ksk, false), rr(other, false)})
	want := "add this DNSKEY to the signer's set: example.com.\t3600\tIN\tDNSKEY\t256 3 13 " + zsk.DNSKEY.PublicKey
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("not published: %v, want %q", err, want)
	}
	if err := s.PublishedIn(nil); err == nil || !strings.Contains(err.Error(), "no DNSKEY RRset") {
		t.Errorf("no DNSKEY RRset: %v", err)
	}
	if err := s.PublishedIn([]dns.RR{rr(rsa, false), rr(zsk, false)}); err == nil || !strings.Contains(err.Error(), "same algorithm") {
		t.Errorf("another algorithm: %v", err)
	}
	// Flags count: the same public key as a KSK is not this ZSK.
	sep := rr(zsk, false).(*dns.DNSKEY)
	sep.Flags |= dns.SEP
	if err := s.PublishedIn([]dns.RR{rr(ksk, false), sep}); err == nil {
		t.Error("the key published with the SEP flag passed")
	}
}
