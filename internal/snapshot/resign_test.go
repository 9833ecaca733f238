package snapshot

import (
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/zone"
)

// signedSet parses a small zone for origin, signs it at now with a fresh
// CSK and the validity given, and returns the precompiled set and signer.
func signedSet(t *testing.T, origin string, validity time.Duration, now time.Time) (*zone.Set, *dnssec.Signer) {
	t.Helper()
	key, err := dnssec.GenerateKey(origin, dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dnssec.NewSigner(origin, []*dnssec.Key{key}, dnssec.Options{Validity: validity})
	if err != nil {
		t.Fatal(err)
	}
	z, errs, _ := zone.Parse(nil, origin, "mem.zone", []byte(`$TTL 300
@    SOA ns1 hostmaster 1 7200 3600 1209600 60
     NS  ns1
ns1  A   192.0.2.53
www  A   192.0.2.80
txt  TXT "x"
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := z.Sign(s, now, 1); err != nil {
		t.Fatal(err)
	}
	set := zone.NewSet([]*zone.Zone{z})
	set.Precompile()
	return set, s
}

// TestResignedRenewsWhatIsDue: before any signature is due the snapshot
// is kept as it is; once they are, a new snapshot serves the zone with
// them renewed (and nothing else changed), the served one untouched.
func TestResignedRenewsWhatIsDue(t *testing.T) {
	now := time.Now()
	set, signer := signedSet(t, "example.com.", time.Hour, now)
	s := &Snapshot{Zones: set, marks: map[*zone.Zone][]*policy.Record{set.Zones()[0]: nil}}
	if got, err := s.Resigned(now.Add(time.Minute)); err != nil || got != s {
		t.Fatalf("nothing due: got a new snapshot (%v)", err)
	}
	z := set.Zones()[0]
	refresh, _ := z.SignatureTimes()
	at := time.Unix(int64(refresh), 0).Add(time.Second)
	got, err := s.Resigned(at)
	if err != nil || got == s {
		t.Fatalf("due at %v: %v, same snapshot %v", at, err, got == s)
	}
	if signer.Made(dnssec.ReasonRenew) == 0 {
		t.Fatal("no signature renewed")
	}
	nz := got.Zones.Zone("example.com.")
	if nz == z || nz.Signer() != signer {
		t.Fatalf("renewed zone %p (served %p), signer kept %v", nz, z, nz.Signer() == signer)
	}
	if _, ok := got.marks[nz]; !ok || len(got.marks) != 1 {
		t.Fatalf("marks not carried to the renewed zone: %v", got.marks)
	}
	if r2, _ := nz.SignatureTimes(); r2 <= refresh {
		t.Fatalf("renewed zone's first refresh %d, not after %d", r2, refresh)
	}
	if r1, _ := z.SignatureTimes(); r1 != refresh {
		t.Fatal("the served zone changed")
	}
	// Answers of the renewed zone carry signatures that verify, made at
	// the renewal.
	var a zone.Answer
	got.Zones.LookupWith(&a, "www.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true})
	var sig *dns.RRSIG
	for _, rr := range a.Answer {
		if s, ok := rr.(*dns.RRSIG); ok {
			sig = s
		}
	}
	if sig == nil {
		t.Fatalf("no RRSIG in %v", a.Answer)
	}
	key := signer.Keys()[0].DNSKEY
	if err := sig.Verify(key, a.Answer[:1]); err != nil || int64(sig.Inception) < at.Unix()-3600 {
		t.Fatalf("renewed RRSIG %v: %v", sig, err)
	}
}
