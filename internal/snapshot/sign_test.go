package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/zone"
)

// writeKey writes a dnssec-keygen style pair for zone in dir and
// returns its base name (relative to dir).
func writeKey(t *testing.T, dir, zone string, sep bool) string {
	t.Helper()
	k, err := dnssec.GenerateKey(zone, dns.ECDSAP256SHA256, sep)
	if err != nil {
		t.Fatal(err)
	}
	base, err := dnssec.WriteKey(dir, k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(base)
}

const signedZone = `$ORIGIN example.com.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.2
txt IN TXT "signed"
`

// signedConfig writes a configuration serving example.com signed with a
// new CSK and example.org unsigned.
func signedConfig(t *testing.T) (cfgPath, dir, key string) {
	t.Helper()
	dir = t.TempDir()
	key = writeKey(t, dir, "example.com.", true)
	cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
zones:
  - origin: example.com
    file: com.zone
    dnssec:
      keys: [%s]
  - origin: example.org
    file: org.zone
`, key)
	for name, body := range map[string]string{"steer.yaml": cfg, "com.zone": signedZone, "org.zone": orgZone} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "steer.yaml"), dir, key
}

// verifyAnswer asks snap for name/qtype with DO and checks that the
// answer's RRset carries an RRSIG that verifies with the zone's key.
func verifyAnswer(t *testing.T, snap *snapshot.Snapshot, name string, qtype uint16, now time.Time) {
	t.Helper()
	var a zone.Answer
	snap.Zones.LookupWith(&a, name, qtype, nil, &zone.LookupOptions{DO: true})
	var set []dns.RR
	var sig *dns.RRSIG
	for _, rr := range a.Answer {
		if s, ok := rr.(*dns.RRSIG); ok {
			sig = s
		} else {
			set = append(set, rr)
		}
	}
	if sig == nil || len(set) == 0 {
		t.Fatalf("%s %s: answer %v, want an RRset and its RRSIG", name, dns.TypeToString[qtype], a.Answer)
	}
	s := a.Zone.Signer()
	if s == nil {
		t.Fatalf("%s: zone not signed", name)
	}
	if err := sig.Verify(s.Keys()[0].DNSKEY, set); err != nil || !sig.ValidityPeriod(now) {
		t.Errorf("%s %s: %v (valid now: %v)", name, dns.TypeToString[qtype], err, sig.ValidityPeriod(now))
	}
}

func TestBuildSignsZones(t *testing.T) {
	path, dir, _ := signedConfig(t)
	cfg := reload(t, dir)
	_ = path
	now := time.Now()
	first, _, err := snapshot.BuildWith(cfg, snapshot.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	com, org := first.Zones.Zone("example.com."), first.Zones.Zone("example.org.")
	if !com.Signed() || org.Signed() {
		t.Fatalf("signed: example.com %v, example.org %v", com.Signed(), org.Signed())
	}
	for _, q := range []struct {
		name string
		t    uint16
	}{{"example.com.", dns.TypeSOA}, {"example.com.", dns.TypeDNSKEY}, {"example.com.", dns.TypeNS}, {"www.example.com.", dns.TypeA}, {"txt.example.com.", dns.TypeTXT}} {
		verifyAnswer(t, first, q.name, q.t, now)
	}
	var a zone.Answer
	first.Zones.LookupWith(&a, "www.example.org.", dns.TypeA, nil, &zone.LookupOptions{DO: true})
	if len(a.Answer) != 1 {
		t.Errorf("unsigned zone with DO: %v", a.Answer)
	}
	made := com.Signer().Made(dnssec.ReasonLoad)
	if made < 7 { // SOA NS DNSKEY CDS CDNSKEY ns1 www txt
		t.Errorf("%d signatures at load", made)
	}
	if r, e := com.SignatureTimes(); r <= uint32(now.Unix()) || e <= r {
		t.Errorf("signatures due %d, expire %d", r, e)
	}

	// An unchanged reload keeps the zone, its signer and its signatures.
	same, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: first, Now: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if same.Zones.Zone("example.com.") != com || com.Signer().Made(dnssec.ReasonLoad) != made {
		t.Errorf("unchanged reload: zone kept %v, %d signatures made", same.Zones.Zone("example.com.") == com, com.Signer().Made(dnssec.ReasonLoad)-made)
	}

	// One record changed (and the serial): two signatures.
	changed := strings.Replace(signedZone, "www IN A 192.0.2.2", "www IN A 192.0.2.9", 1)
	changed = strings.Replace(changed, "hostmaster 1 ", "hostmaster 2 ", 1)
	writeFile(t, filepath.Join(dir, "com.zone"), changed)
	next, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: same, Now: now.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	nz := next.Zones.Zone("example.com.")
	if nz == com || nz.Signer() != com.Signer() {
		t.Fatalf("changed reload: zone kept %v, signer kept %v", nz == com, nz.Signer() == com.Signer())
	}
	if got := nz.Signer().Made(dnssec.ReasonLoad) - made; got != 2 {
		t.Errorf("a reload changing one record made %d signatures, want 2", got)
	}
	verifyAnswer(t, next, "www.example.com.", dns.TypeA, now.Add(2*time.Minute))
	verifyAnswer(t, next, "txt.example.com.", dns.TypeTXT, now.Add(2*time.Minute))

	// The renewal step: nothing due at once; past the refresh point,
	// everything renewed, nothing read.
	if r, err := next.Resigned(now.Add(time.Hour)); err != nil || r != next {
		t.Errorf("renewal with nothing due: %v %v", r == next, err)
	}
	later := now.Add(13 * 24 * time.Hour)
	os.Remove(filepath.Join(dir, "com.zone")) // not read
	renewed, err := next.Resigned(later)
	if err != nil || renewed == next {
		t.Fatalf("renewal: %v", err)
	}
	if got := nz.Signer().Made(dnssec.ReasonRenew); got < 7 {
		t.Errorf("renewal made %d signatures", got)
	}
	verifyAnswer(t, renewed, "www.example.com.", dns.TypeA, later)
	verifyAnswer(t, renewed, "example.com.", dns.TypeDNSKEY, later)
	if renewed.Zones.Zone("example.org.") != next.Zones.Zone("example.org.") {
		t.Error("the unsigned zone was not kept by the renewal")
	}
	if r, _ := renewed.Zones.Zone("example.com.").SignatureTimes(); r <= uint32(later.Unix()) {
		t.Errorf("after renewal, due %d", r)
	}
}

// A reload with a new key signs everything again with it.
func TestBuildNewKeyResigns(t *testing.T) {
	_, dir, key := signedConfig(t)
	now := time.Now()
	first, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	key2 := writeKey(t, dir, "example.com.", true)
	b, _ := os.ReadFile(filepath.Join(dir, "steer.yaml"))
	writeFile(t, filepath.Join(dir, "steer.yaml"), strings.Replace(string(b), key, key2, 1))
	next, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: first, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	z := next.Zones.Zone("example.com.")
	if z.Signer() == first.Zones.Zone("example.com.").Signer() || z.Signer().Keys()[0].File != filepath.Join(dir, key2) {
		t.Fatalf("signer kept across a key change")
	}
	verifyAnswer(t, next, "www.example.com.", dns.TypeA, now)
	verifyAnswer(t, next, "example.com.", dns.TypeDNSKEY, now)
}

// A reload that changes the signing section gives the zone a signer
// drawing on the new budget (the published one is never written), and
// keeps every signature.
func TestBuildSigningSectionChange(t *testing.T) {
	_, dir, _ := signedConfig(t)
	now := time.Now()
	first, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	s1 := first.Zones.Zone("example.com.").Signer()
	if s1.Budget == nil || s1.Budget != first.Signing.Budget || s1.Cache != first.Signing.Cache {
		t.Fatal("the zone's signer does not draw on the node's budget and cache")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "steer.yaml"))
	writeFile(t, filepath.Join(dir, "steer.yaml"), string(b)+"signing:\n  budget_per_core: 100\n")
	next, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: first, Now: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	s2 := next.Zones.Zone("example.com.").Signer()
	if s2 == s1 || s2.Budget != next.Signing.Budget || next.Signing.Budget == first.Signing.Budget {
		t.Fatalf("signer kept %v, on the new budget %v", s2 == s1, s2.Budget == next.Signing.Budget)
	}
	if n := s2.Made(dnssec.ReasonLoad); n != 0 {
		t.Errorf("a new budget made %d signatures, want 0 (all fresh)", n)
	}
	verifyAnswer(t, next, "www.example.com.", dns.TypeA, now)
	verifyAnswer(t, next, "example.com.", dns.TypeDNSKEY, now)
}
