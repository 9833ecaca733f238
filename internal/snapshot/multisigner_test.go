package snapshot_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/snapshot"
)

// The zone a signer (BIND's dnssec-signzone here) signs for a
// multi-signer setup: shop is steered by steer, its A record the
// signer's stand-in.
const multiZone = `$ORIGIN example.com.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.53
www IN A 192.0.2.80
shop IN A 192.0.2.1
`

const multiConfig = `geo:
  databases: [geo.mmdb]
zones:
  - origin: example.com
    file: signed.zone
DNSSEC
records:
  - name: shop.example.com
    ttl: 60
    pools:
      de: { address: 10.0.0.1 }
      other: { address: 10.0.0.2 }
    rules:
      - match: { country: DE }
        pool: de
      - default: { pool: other }
`

// signElsewhere signs text (example.com.) as a signer would, with a KSK
// and a ZSK of its own made by dnssec-keygen, its DNSKEY RRset holding
// the DNSKEYs publish too (steer's ZSK), and returns the signed zone.
func signElsewhere(t *testing.T, text string, publish ...*dns.DNSKEY) string {
	t.Helper()
	dnstest.NeedTool(t, "dnssec-signzone")
	dir := t.TempDir()
	for _, k := range publish {
		text += k.String() + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "z"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", dir, "example.com")
	run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-K", dir, "example.com")
	run("dnssec-signzone", "-q", "-S", "-K", dir, "-o", "example.com", "-O", "full", "-f", "signed", "z")
	b, err := os.ReadFile(filepath.Join(dir, "signed"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// multiSetup writes the configuration with dnssecSection (indented under
// the zone, "" for none), the signed zone and the geo database.
func multiSetup(t *testing.T, dnssecSection, signed string) string {
	t.Helper()
	_, dir := write(t, map[string]string{
		"steer.yaml":  strings.Replace(multiConfig, "DNSSEC\n", dnssecSection, 1),
		"signed.zone": signed,
	})
	writeGeo(t, filepath.Join(dir, "geo.mmdb"), "DE")
	return dir
}

// TestMultiSigner: a zone signed elsewhere whose signer publishes
// steer's ZSK has its steered answer sets signed by that ZSK, its other
// data left as the signer signed it; each refusal says what to do.
func TestMultiSigner(t *testing.T) {
	t.Parallel()
	keyDir := t.TempDir()
	zskBase := filepath.Join(keyDir, writeKey(t, keyDir, "example.com.", false))
	zsk, err := dnssec.LoadKey(nil, zskBase)
	if err != nil {
		t.Fatal(err)
	}
	section := "    dnssec: { keys: [" + zskBase + "] }\n"
	published := signElsewhere(t, multiZone, zsk.DNSKEY)

	t.Run("published", func(t *testing.T) {
		dir := multiSetup(t, section, published)
		snap, _, err := snapshot.Build(reload(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		z := snap.Zones.Zone("example.com.")
		if !z.MultiSigner() || z.Signer() != nil || z.SteeredSigner() == nil || !z.SteeredSigner().ZSKOnly() {
			t.Fatalf("multi-signer %v, signer %v, steered signer %v", z.MultiSigner(), z.Signer(), z.SteeredSigner())
		}
		// Both answer sets (the pools) are signed ahead, by steer's ZSK.
		for _, addr := range []string{"10.0.0.1", "10.0.0.2"} {
			rr, _ := dns.NewRR("shop.example.com. 60 IN A " + addr)
			e := snap.Presigned.Lookup("shop.example.com.", dns.TypeA, dnssec.SetSum([]dns.RR{rr}))
			if e == nil || len(e.Sigs) != 1 {
				t.Fatalf("%s: not signed ahead (%v)", addr, e)
			}
			sig := e.Sigs[0].(*dns.RRSIG)
			if sig.KeyTag != zsk.Tag {
				t.Errorf("%s: signed by key %d, want steer's ZSK %d", addr, sig.KeyTag, zsk.Tag)
			}
			if err := sig.Verify(zsk.DNSKEY, []dns.RR{rr}); err != nil {
				t.Errorf("%s: %v", addr, err)
			}
		}
		expectAnswer(t, snap, "shop.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.1")
		expectAnswer(t, snap, "www.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.80")
		// A reload keeps the ZSK signer and the fresh steered signatures.
		next, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: snap})
		if err != nil {
			t.Fatal(err)
		}
		nz := next.Zones.Zone("example.com.")
		if nz.SteeredSigner() != z.SteeredSigner() || next.Presigned.Signed != 0 || next.Presigned.Reused != 2 {
			t.Errorf("reload: same signer %v, %d sets signed, %d reused; want the signer and 2 sets kept",
				nz.SteeredSigner() == z.SteeredSigner(), next.Presigned.Signed, next.Presigned.Reused)
		}
	})

	t.Run("export", func(t *testing.T) {
		dir := multiSetup(t, section, published)
		snap, _, err := snapshot.Build(reload(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		z := snap.Zones.Zone("example.com.")
		now := time.Now()
		fb := snap.Fallbacks(z)
		e, err := snapshot.BuildSignerExport(z, fb, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		// The signer's records and signatures as they came, but shop's
		// stand-in and its RRSIG: in their place the fallback, signed by
		// steer's ZSK alone.
		signer := map[string]bool{}
		for rr := range z.EachRecord {
			signer[rr.String()] = true
		}
		var shop, shopSigs []dns.RR
		for _, rr := range e.RRs {
			if rr.Header().Name == "shop.example.com." && (rr.Header().Rrtype == dns.TypeA || rr.Header().Rrtype == dns.TypeRRSIG && rr.(*dns.RRSIG).TypeCovered == dns.TypeA) {
				if rr.Header().Rrtype == dns.TypeA {
					shop = append(shop, rr)
				} else {
					shopSigs = append(shopSigs, rr)
				}
				continue
			}
			if !signer[rr.String()] {
				t.Errorf("not the signer's: %v", rr)
			}
			delete(signer, rr.String())
		}
		for rr := range signer {
			if !strings.HasPrefix(rr, "shop.example.com.") {
				t.Errorf("left out: %s", rr)
			}
		}
		if len(shop) != 1 || shop[0].(*dns.A).A.String() != "10.0.0.2" || len(shopSigs) != 1 || shopSigs[0].(*dns.RRSIG).KeyTag != zsk.Tag {
			t.Fatalf("shop: %v signed by %v; want the fallback 10.0.0.2 signed by steer's ZSK %d", shop, shopSigs, zsk.Tag)
		}
		if err := shopSigs[0].(*dns.RRSIG).Verify(zsk.DNSKEY, shop); err != nil {
			t.Error(err)
		}
		verifyZone(t, "example.com.", e.RRs)
		// The same serial keeps what it exported (the SOA, signed by
		// the signer, cannot move): another fallback changes nothing.
		other := []dns.RR{dns.Copy(fb[0])}
		other[0].(*dns.A).A = net.ParseIP("10.0.0.1")
		if again, err := snapshot.BuildSignerExport(z, other, e, now); err != nil || again != e {
			t.Errorf("same zone and serial: a new export (%v)", err)
		}
		// A zone parsed again (a reload) under the same serial too.
		snap2, _, err := snapshot.Build(reload(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		z2 := snap2.Zones.Zone("example.com.")
		again, err := snapshot.BuildSignerExport(z2, other, e, now.Add(time.Hour))
		if err != nil || z2 == z || again.Zone != z2 || !slices.Equal(rrTexts(again.RRs), rrTexts(e.RRs)) {
			t.Errorf("the same serial parsed again: another export (%v)", err)
		}
		// A fallback of a type the signer's chain does not list at the
		// name is refused, not exported.
		txt, _ := dns.NewRR("shop.example.com. 60 IN TXT \"x\"")
		if _, err := snapshot.BuildSignerExport(z, []dns.RR{txt}, nil, now); err == nil || !strings.Contains(err.Error(), "lists {A RRSIG NSEC}") {
			t.Errorf("TXT fallback: %v", err)
		}
		nx, _ := dns.NewRR("nx.example.com. 60 IN A 10.0.0.9")
		if _, err := snapshot.BuildSignerExport(z, []dns.RR{nx}, nil, now); err == nil || !strings.Contains(err.Error(), "has no NSEC or NSEC3 in the signer's chain") {
			t.Errorf("a name outside the chain: %v", err)
		}
	})

	t.Run("secondaries", func(t *testing.T) {
		// dnssec-signzone's signatures last 30 days; steer's, exported
		// for the signer's serial, must not run out first.
		for validity, warned := range map[string]bool{"1d": true, "60d": false} {
			section := "    dnssec: { keys: [" + zskBase + "], validity: " + validity + " }\n    secondaries:\n      - { address: 127.0.0.2, tsig: xfr-key }\n"
			_, dir := write(t, map[string]string{
				"steer.yaml":  "tsig:\n  xfr-key: { secret_file: xfr.key }\n" + strings.Replace(multiConfig, "DNSSEC\n", section, 1),
				"signed.zone": published, "xfr.key": xfrKey,
			})
			writeGeo(t, filepath.Join(dir, "geo.mmdb"), "DE")
			_, warns, err := snapshot.Build(reload(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			got := warns.Err() != nil && strings.Contains(warns.Err().Error(), "steer.yaml:8: zone example.com.: steer's signatures of the steered names last")
			if got != warned {
				t.Errorf("validity %s: warned %v, want %v: %v", validity, got, warned, warns.Err())
			}
		}
	})

	t.Run("denial", func(t *testing.T) {
		// The signer's chain is NSEC; the export cannot carry NSEC3.
		dir := multiSetup(t, "    dnssec: { keys: ["+zskBase+"], denial: nsec3 }\n", published)
		_, _, err := snapshot.Build(reload(t, dir))
		if err == nil || !strings.Contains(err.Error(), "steer.yaml:6: zones: example.com.: dnssec.denial: nsec3, but the zone is signed elsewhere with nsec") {
			t.Errorf("Build: %v", err)
		}
	})

	t.Run("not-published", func(t *testing.T) {
		dir := multiSetup(t, section, signElsewhere(t, multiZone))
		_, _, err := snapshot.Build(reload(t, dir))
		want := "add this DNSKEY to the signer's set: example.com.\t300\tIN\tDNSKEY\t256 3 13 " + zsk.DNSKEY.PublicKey
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Build: %v, want %q", err, want)
		}
		// A serving node serves the signer's data, the steered name
		// answered with its stand-in (signed by the signer), not with
		// answers signed by a key validators cannot find.
		snap, warns, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Degraded) != 1 || snap.Degraded[0].Serving != snapshot.ServingUnsteered || !strings.Contains(snap.Degraded[0].Problem, want) {
			t.Errorf("degraded: %+v", snap.Degraded)
		}
		if err := warns.Err(); err == nil || !strings.Contains(err.Error(), "record shop.example.com. is not steered") {
			t.Errorf("warnings: %v", err)
		}
		z := snap.Zones.Zone("example.com.")
		if z.MultiSigner() || z.SteeredSigner() != nil || snap.Presigned.Len() != 0 {
			t.Errorf("multi-signer %v, %d sets signed", z.MultiSigner(), snap.Presigned.Len())
		}
		expectAnswer(t, snap, "shop.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.1")
	})

	t.Run("no-zsk", func(t *testing.T) {
		dir := multiSetup(t, "", published)
		_, _, err := snapshot.Build(reload(t, dir))
		if err == nil || !strings.Contains(err.Error(), "steer.yaml:7: record shop.example.com. is in zone example.com., which is signed elsewhere") ||
			!strings.Contains(err.Error(), "steer dnssec keygen example.com. --role zsk") {
			t.Errorf("Build: %v", err)
		}
	})

	t.Run("unsigned-zone", func(t *testing.T) {
		dir := multiSetup(t, section, strings.Replace(multiZone, "shop IN A 192.0.2.1\n", "", 1))
		_, _, err := snapshot.Build(reload(t, dir))
		if err == nil || !strings.Contains(err.Error(), "carries no DNSKEY RRset and signatures, and no key has the SEP flag") {
			t.Errorf("Build: %v", err)
		}
		// A serving node does not serve it unsigned (a signer that
		// stopped signing): it fails as a zone that cannot be signed.
		snap, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Degraded) != 1 || snap.Degraded[0].Serving != snapshot.ServingServfail {
			t.Errorf("degraded: %+v", snap.Degraded)
		}
		expectAnswer(t, snap, "www.example.com.", dns.TypeA, "SERVFAIL")
	})

	t.Run("stand-ins", func(t *testing.T) {
		for what, c := range map[string]struct{ from, to, want string }{
			"missing": {"shop IN A 192.0.2.1\n", "shop IN TXT \"x\"\n", "the steered name shop.example.com. has no A record in the signer's zone"},
			"extra":   {"shop IN A 192.0.2.1\n", "shop IN A 192.0.2.1\nshop IN AAAA 2001:db8::1\n", "has AAAA records in the signer's zone but no pool of that family"},
		} {
			dir := multiSetup(t, section, signElsewhere(t, strings.Replace(multiZone, c.from, c.to, 1), zsk.DNSKEY))
			if _, _, err := snapshot.Build(reload(t, dir)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", what, err, c.want)
			}
		}
	})
}

// verifyZone runs BIND's dnssec-verify on rrs, the zone origin, and
// fails on its complaint.
func verifyZone(t *testing.T, origin string, rrs []dns.RR) {
	t.Helper()
	dnstest.NeedTool(t, "dnssec-verify")
	file := filepath.Join(t.TempDir(), "zone")
	var b strings.Builder
	for _, rr := range rrs {
		b.WriteString(rr.String() + "\n")
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("dnssec-verify", "-o", origin, file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Zone fully signed") {
		t.Errorf("dnssec-verify: %v\n%s", err, out)
	}
}

func rrTexts(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}
