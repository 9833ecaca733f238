package keyroll

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// TestKSKRoll: a double-signature KSK rollover. Started, the new KSK is
// published and signs beside the old one, both in the CDS; a second
// start is refused, as is a start on a CSK zone. Completed, the old KSK
// leaves the CDS at once, signs until the linger has passed and is
// removed then; at no instant does the plan lack a signing KSK. The
// withdrawal survives encoding, and a ZSK rollover step leaves the KSKs
// alone.
func TestKSKRoll(t *testing.T) {
	p, ksk, zsk := kskZSK(t, t0)
	now := t0.Add(time.Hour)
	if r := p.RollingKSK(now); r != nil {
		t.Fatalf("a rollover before one started: %+v", r)
	}
	if _, _, err := p.CompleteKSKRoll(now, time.Hour); err == nil || !strings.Contains(err.Error(), "no KSK rollover is under way") {
		t.Fatalf("complete with none under way: %v", err)
	}
	q, nk, err := p.StartKSKRoll(now, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if nk.Role != RoleKSK || nk.Algorithm != dns.ECDSAP256SHA256 || nk.Source != SourceGenerated || !nk.Signing(now) || nk.Tag == ksk.Tag {
		t.Fatalf("new KSK: %+v", nk)
	}
	st, err := q.At(now)
	if err != nil || len(st.Sign) != 3 {
		t.Fatalf("at the start: %d signing keys (%v), want both KSKs and the ZSK", len(st.Sign), err)
	}
	r := q.RollingKSK(now)
	if r == nil || r.New.Tag != nk.Tag || len(r.Old) != 1 || r.Old[0].Tag != ksk.Tag {
		t.Fatalf("rolling: %+v", r)
	}
	if pk := q.ParentKeys(now); len(pk) != 2 {
		t.Fatalf("the parent should have %d DS during the rollover, want 2", len(pk))
	}
	s, err := dnssec.NewSigner(zone, st.Sign, dnssec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, cds, _ := s.Apex(300); len(cds) != 2 {
		t.Fatalf("CDS during the rollover: %v, want both KSKs", cds)
	}
	if _, _, err := q.StartKSKRoll(now, 0, nil); err == nil || !strings.Contains(err.Error(), "a KSK rollover is under way") {
		t.Fatalf("a second start: %v", err)
	}
	if len(p.Keys) != 2 {
		t.Fatal("StartKSKRoll changed the plan it was given")
	}

	done := now.Add(time.Hour)
	linger := 10 * time.Minute
	c, roll, err := q.CompleteKSKRoll(done, linger)
	if err != nil || roll.New.Tag != nk.Tag || len(roll.Old) != 1 {
		t.Fatalf("complete: %+v %v", roll, err)
	}
	if c.RollingKSK(done) != nil {
		t.Fatal("still rolling once completed")
	}
	if pk := c.ParentKeys(done); len(pk) != 1 || pk[0].Tag != nk.Tag {
		t.Fatalf("the parent should have: %v", pk)
	}
	st, err = c.At(done)
	if err != nil || len(st.Sign) != 3 {
		t.Fatalf("right after completing: %d signing keys (%v), want the old KSK still signing", len(st.Sign), err)
	}
	s, _ = dnssec.NewSigner(zone, st.Sign, dnssec.Options{})
	if _, cds, _ := s.Apex(300); len(cds) != 1 || cds[0].(*dns.CDS).KeyTag != nk.Tag {
		t.Fatalf("CDS after completing: %v, want the new KSK alone", cds)
	}
	if !st.Next.Equal(done.Add(linger)) {
		t.Errorf("next event %v, want the old KSK's removal at %v", st.Next, done.Add(linger))
	}
	after := done.Add(linger)
	st, err = c.At(after)
	if err != nil || len(st.Sign) != 2 || len(st.Publish) != 0 {
		t.Fatalf("after the linger: %d signing, %d published (%v)", len(st.Sign), len(st.Publish), err)
	}
	for _, k := range c.Keys {
		if k.Tag == ksk.Tag && k.State(after) != StateRemoved {
			t.Errorf("old KSK state %s after the linger", k.State(after))
		}
	}
	// The plan as stored keeps the withdrawal.
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode("test", b)
	if err != nil {
		t.Fatal(err)
	}
	if d.RollingKSK(done) != nil || len(d.ParentKeys(done)) != 1 {
		t.Fatal("withdrawal lost through Encode and Decode")
	}
	// A ZSK rollover step leaves the KSKs as they are.
	n, _, err := d.Next(done, Timings{ZSKLifetime: 30 * 24 * time.Hour, DNSKEYTTL: time.Hour, MaxZoneTTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pk := n.ParentKeys(done); len(pk) != 1 || pk[0].Tag != nk.Tag {
		t.Fatalf("after a ZSK step the parent should have %v", pk)
	}
	_ = zsk

	// Another algorithm on request; a CSK zone is refused.
	_, ek, err := p.StartKSKRoll(now, dns.ED25519, nil)
	if err != nil || ek.Algorithm != dns.ED25519 {
		t.Fatalf("roll to ED25519: %v %v", ek, err)
	}
	csk, err := New(zone, []*dnssec.Key{genKey(t, true)}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := csk.StartKSKRoll(now, 0, nil); err == nil || !strings.Contains(err.Error(), "is signed by a CSK") {
		t.Fatalf("a CSK zone: %v", err)
	}
}
