package dnssec

import (
	"bytes"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestNewEntryWire: an entry's Wire is, byte for byte, the RDATA of each
// RRSIG in a message miekg/dns packs with compression on.
func TestNewEntryWire(t *testing.T) {
	keys := []*Key{testKey(t, "Example.com.", dns.ED25519, true), testKey(t, "example.com.", dns.ECDSAP256SHA256, false)}
	keys[0].DNSKEY.Hdr.Name = "example.com."
	s, err := NewSigner("example.com.", keys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	nsec := CompactNSEC("nope.example.com.", 60, TypeNXNAME)
	sigs, err := s.Sign([]dns.RR{nsec}, now, ReasonDenial)
	if err != nil {
		t.Fatal(err)
	}
	// Two signatures: make one up from the other to test the order.
	sig2 := *sigs[0].(*dns.RRSIG)
	sig2.KeyTag++
	sigs = append(sigs, &sig2)
	k := DenialKey("nope.example.com.", 60, []uint16{TypeNXNAME})
	e := NewEntry(k, []dns.RR{nsec}, sigs, s.RefreshOf(sigs))
	if e.Key != k || len(e.Wire) != len(sigs) || e.RRs[0] != nsec {
		t.Fatalf("entry %+v", e)
	}
	if e.Refresh != RefreshAt(sigs[0].(*dns.RRSIG), DefaultRefresh) || e.Refresh <= uint32(now.Unix()) {
		t.Errorf("refresh %d", e.Refresh)
	}
	m := new(dns.Msg)
	m.SetQuestion("nope.example.com.", dns.TypeA)
	m.Compress = true
	m.Ns = append([]dns.RR{nsec}, sigs...)
	msg, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range e.Wire {
		if len(w) < 20 || !bytes.Contains(msg, w) {
			t.Fatalf("Wire[%d] (%d bytes) is not in the packed message", i, len(w))
		}
		// It is the RDATA: parse it back behind a header.
		hdr := []byte{0, 0, 46, 0, 1, 0, 0, 0, 60, byte(len(w) >> 8), byte(len(w))}
		rr, _, err := dns.UnpackRR(append(hdr, w...), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := rr.(*dns.RRSIG)
		want := sigs[i].(*dns.RRSIG)
		if got.Signature != want.Signature || got.KeyTag != want.KeyTag || got.SignerName != "example.com." {
			t.Fatalf("Wire[%d] reads back as %v", i, got)
		}
	}
	if e.Wire[0][len(e.Wire[0]):cap(e.Wire[0])] != nil && cap(e.Wire[0]) != len(e.Wire[0]) {
		t.Error("Wire[0] must not share capacity with Wire[1]")
	}
}
