package config_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
)

func TestDNSSECSection(t *testing.T) {
	c := mustParse(t, `zones:
  - origin: example.com
    file: example.com.zone
    dnssec:
      keys: [keys/Kexample.com.+013+04565, /etc/steer/Kexample.com.+013+00001]
      validity: 7d
      refresh: 0.5
  - origin: example.org
    file: example.org.zone
    dnssec:
      keys: [Kexample.org.+015+11111]
  - origin: example.net
    file: example.net.zone
    dnssec: { keys: [K], validity: 36h }
  - origin: plain.example
    file: plain.zone
`)
	if c.Signing.BudgetPerCore != dnssec.DefaultBudgetPerCore || c.Signing.CacheEntries != dnssec.DefaultCacheSize {
		t.Errorf("signing defaults %+v", c.Signing)
	}
	d := c.Zones[0].DNSSEC
	if d == nil || d.Validity != 7*24*time.Hour || d.Refresh != 0.5 || d.Line != 4 || len(d.Keys) != 2 {
		t.Fatalf("zone 0 dnssec %+v", d)
	}
	if got := c.KeyBases(0); got[0] != filepath.Join(".", "keys/Kexample.com.+013+04565") || got[1] != "/etc/steer/Kexample.com.+013+00001" {
		t.Errorf("key bases %q", got)
	}
	if o := d.Options(); o.Validity != 7*24*time.Hour || o.Refresh != 0.5 {
		t.Errorf("options %+v", o)
	}
	if d := c.Zones[1].DNSSEC; d.Validity != dnssec.DefaultValidity || d.Refresh != dnssec.DefaultRefresh {
		t.Errorf("zone 1 defaults %+v", d)
	}
	if d := c.Zones[2].DNSSEC; d.Validity != 36*time.Hour {
		t.Errorf("zone 2 validity %v", d.Validity)
	}
	if !c.Zones[0].Signed() || c.Zones[3].Signed() || c.Zones[3].DNSSEC != nil {
		t.Errorf("Signed: %v %v", c.Zones[0].Signed(), c.Zones[3].Signed())
	}

	c = mustParse(t, `signing:
  budget_per_core: 500
  cache_entries: 1024
`)
	if c.Signing.BudgetPerCore != 500 || c.Signing.CacheEntries != 1024 || c.Signing.BudgetPerSecond() != 500*runtime.GOMAXPROCS(0) {
		t.Errorf("signing %+v", c.Signing)
	}
}

func TestDNSSECProblems(t *testing.T) {
	_, ps := parse(t, `tsig:
  k: { secret_file: k.key }
zones:
  - origin: a.example
    file: a.zone
    dnssec:
      keys: []
      validity: 2w
      refresh: 1.5
  - origin: b.example
    file: b.zone
    dnssec:
      keys: [Kb, "", Kb.private, Kb]
      validity: 0s
      refresh: 0
  - origin: c.example
    file: c.zone
    dnssec: { keys: [Kc], validity: 400d, denial: nsec5 }
    secondaries:
      - { address: 192.0.2.1, tsig: k }
  - origin: d.example
    primaries: [192.0.2.1]
    dnssec: { keys: [Kd], salt: x }
  - origin: e.example
    file: e.zone
    dnssec: { keys: [Ke], validity: [1] }
signing:
  budget_per_core: -1
  cache_entries: 100000000
`)
	checkProblems(t, ps, []prob{
		{8, "a.example: dnssec.validity: invalid validity \"2w\""},
		{23, `unknown key "salt" in zones[3].dnssec (known keys: denial, dnskey_ttl, keys, max_zone_ttl, presigned, propagation_delay, refresh, validity, zsk_lifetime)`},
		{26, "e.example: dnssec.validity: a validity must be a string"},
	})
	_, ps = parse(t, `tsig:
  k: { secret_file: k.key }
zones:
  - origin: a.example
    file: a.zone
    dnssec:
      keys: []
      refresh: 1.5
  - origin: b.example
    file: b.zone
    dnssec:
      keys: [Kb, "", Kb.private, Kb]
      validity: 0s
      refresh: 0
  - origin: c.example
    file: c.zone
    dnssec: { keys: [Kc], validity: 400d, denial: nsec5 }
    secondaries:
      - { address: 192.0.2.1, tsig: k }
  - origin: d.example
    primaries: [192.0.2.1]
    dnssec: { keys: [Kd] }
signing:
  budget_per_core: -1
  cache_entries: 100000000
`)
	checkProblems(t, ps, []prob{
		{7, "dnssec.keys: list the base paths"},
		{8, "dnssec.refresh: 1.5 is not between 0 and 1"},
		{12, "dnssec.keys[1]: an empty key path"},
		{12, `dnssec.keys[2]: "Kb.private": give the key's base path`},
		{12, `dnssec.keys[3]: "Kb" is listed twice (line 12)`},
		{13, "dnssec.validity: must be more than 0"},
		{14, "dnssec.refresh: 0 is not between 0 and 1"},
		{17, "dnssec.validity: must be more than 0 and at most 366d"},
		{17, `zones: c.example: dnssec.denial: "nsec5" is not nsec or nsec3`},
		{24, "signing.budget_per_core: -1 is not between"},
		{25, "signing.cache_entries: 100000000 is not between"},
	})
}

func TestParseValidity(t *testing.T) {
	for s, want := range map[string]time.Duration{"14d": 14 * 24 * time.Hour, "336h": 336 * time.Hour, "90m": 90 * time.Minute, "0d": 0} {
		if got, err := config.ParseValidity(s); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "d", "1.5d", "-1d", "14 d", "2w", "99999d"} {
		if got, err := config.ParseValidity(s); err == nil {
			t.Errorf("%q: %v, want an error", s, got)
		}
	}
}

// writeKey writes a new key pair for zone into dir and returns its base
// path.
func writeKey(t *testing.T, dir, zone string, alg uint8, sep bool) string {
	t.Helper()
	k, err := dnssec.GenerateKey(zone, alg, sep)
	if err != nil {
		t.Fatal(err)
	}
	base, err := dnssec.WriteKey(dir, k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// TestZoneKeys checks each bad key of issue 26 ("a missing or mismatched
// key, a key for another zone, a world-readable private key, an unknown
// algorithm") is reported at the line of its entry, and that good keys
// load.
func TestZoneKeys(t *testing.T) {
	dir := t.TempDir()
	csk := filepath.Base(writeKey(t, dir, "example.com", dns.ECDSAP256SHA256, true))
	ksk := filepath.Base(writeKey(t, dir, "example.com", dns.ED25519, true))
	zsk := filepath.Base(writeKey(t, dir, "example.com", dns.ED25519, false))
	other := filepath.Base(writeKey(t, dir, "example.org", dns.ECDSAP256SHA256, true))
	zskOnly := filepath.Base(writeKey(t, dir, "example.com", dns.ECDSAP256SHA256, false))
	worldReadable := filepath.Base(writeKey(t, dir, "example.com", dns.ECDSAP256SHA256, true))
	if err := os.Chmod(filepath.Join(dir, worldReadable+".private"), 0o644); err != nil {
		t.Fatal(err)
	}
	groupReadable := filepath.Base(writeKey(t, dir, "example.com", dns.ECDSAP256SHA256, true))
	if err := os.Chmod(filepath.Join(dir, groupReadable+".private"), 0o640); err != nil {
		t.Fatal(err)
	}
	noPrivate := filepath.Base(writeKey(t, dir, "example.com", dns.ECDSAP256SHA256, true))
	if err := os.Remove(filepath.Join(dir, noPrivate+".private")); err != nil {
		t.Fatal(err)
	}
	// A mismatched pair: the .key of one key, the .private of another
	// of the same algorithm.
	mismatched := filepath.Base(writeKey(t, dir, "example.com", dns.ECDSAP256SHA256, true))
	b, err := os.ReadFile(filepath.Join(dir, csk+".private"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, mismatched+".private"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The same key under another name.
	copied := "Kexample.com.+013+00009"
	for _, ext := range []string{".key", ".private"} {
		b, err := os.ReadFile(filepath.Join(dir, csk+ext))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, copied+ext), b, 0o600))
	}
	// An algorithm steer does not sign with (RSASHA1, 5).
	oldAlg := "Kexample.com.+005+00001"
	must(t, os.WriteFile(filepath.Join(dir, oldAlg+".key"), []byte("example.com. IN DNSKEY 257 3 5 AwEAAb4N\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, oldAlg+".private"), []byte("Private-key-format: v1.3\nAlgorithm: 5 (RSASHA1)\n"), 0o600))
	// An algorithm number no one knows.
	unknownAlg := "Kexample.com.+200+00001"
	must(t, os.WriteFile(filepath.Join(dir, unknownAlg+".key"), []byte("example.com. IN DNSKEY 257 3 200 AwEAAb4N\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, unknownAlg+".private"), []byte("Private-key-format: v1.3\nAlgorithm: 200\n"), 0o600))

	write := func(body string) *config.Config {
		t.Helper()
		p := filepath.Join(dir, "steer.yaml")
		must(t, os.WriteFile(p, []byte(body), 0o644))
		c, err := config.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := write(`zones:
  - origin: example.com
    file: example.com.zone
    dnssec: { keys: [` + csk + `] }
`)
	if keys, ps := c.ZoneKeys(0); ps != nil || len(keys) != 1 || !keys[0].SEP() || keys[0].DNSKEY.Algorithm != dns.ECDSAP256SHA256 {
		t.Fatalf("csk: %v, problems %v", keys, ps)
	}
	c = write(`zones:
  - origin: Example.COM.
    file: x.zone
    dnssec: { keys: [` + ksk + `, ` + zsk + `] }
`)
	if keys, ps := c.ZoneKeys(0); ps != nil || len(keys) != 2 || !keys[0].SEP() || keys[1].SEP() || keys[0].DNSKEY.Algorithm != dns.ED25519 {
		t.Fatalf("ksk/zsk: %v, problems %v", keys, ps)
	}

	c = write(`zones:
  - origin: example.com
    file: example.com.zone
    dnssec:
      keys:
        - ` + csk + `
        - missing/Kexample.com.+013+00002
        - ` + noPrivate + `
        - ` + mismatched + `
        - ` + other + `
        - ` + worldReadable + `
        - ` + groupReadable + `
        - ` + oldAlg + `
        - ` + unknownAlg + `
        - ` + copied + `
  - origin: example.net
    file: example.net.zone
    dnssec: { keys: [` + zskOnly + `] }
`)
	_, ps := c.ZoneKeys(0)
	want := []struct {
		line   int
		phrase string
	}{
		{7, "Kexample.com.+013+00002.key: no such file or directory"},
		{8, noPrivate + ".private: no such file or directory"},
		{9, "does not hold the private key of"},
		{10, "is a key for example.org., not for example.com"},
		{11, "is readable by group and others (mode 0644): make it readable by its owner only"},
		{12, "is readable by its group (mode 0640)"},
		{13, "algorithm 5 (RSASHA1) is not supported"},
		{14, "algorithm 200 (unknown) is not supported"},
		{15, copied + " is the same key as " + filepath.Join(dir, csk) + " (line 6)"},
	}
	checkAt(t, c.File, ps, want)
	_, ps = c.ZoneKeys(1)
	checkAt(t, c.File, ps, []struct {
		line   int
		phrase string
	}{{18, "is a key for example.com., not for example.net"}})

	// ZSKs alone: a multi-signer zone (the load checks that the zone is
	// signed elsewhere and publishes them), from a file or a primary.
	for _, src := range []string{"file: example.com.zone", "primaries: [192.0.2.1]"} {
		c = write(`zones:
  - origin: example.com
    ` + src + `
    dnssec:
      keys: [` + zskOnly + `, ` + zsk + `]
`)
		if keys, ps := c.ZoneKeys(0); ps != nil || len(keys) != 2 || !config.MultiSigner(keys) {
			t.Errorf("%s, ZSKs only: %v, problems %v", src, keys, ps)
		}
	}
	// A zone transferred in has its KSK at its signer.
	c = write(`zones:
  - origin: example.com
    primaries: [192.0.2.1]
    dnssec: { keys: [` + zsk + `, ` + csk + `] }
`)
	_, ps = c.ZoneKeys(0)
	checkAt(t, c.File, ps, []struct {
		line   int
		phrase string
	}{{4, csk + " is a KSK or CSK (SEP flag), but the zone is transferred in (primaries): its signer holds the KSK; give steer a ZSK only (steer dnssec keygen example.com. --role zsk)"}})
	if len(ps) != 1 {
		t.Errorf("problems: %v", ps)
	}
	if config.MultiSigner(nil) {
		t.Error("MultiSigner(nil)")
	}
}

func checkAt(t *testing.T, file string, ps diag.Problems, want []struct {
	line   int
	phrase string
}) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, p := range ps {
			if p.File == file && p.Line == w.line && strings.Contains(p.Msg, w.phrase) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing %s:%d containing %q in:\n%v", file, w.line, w.phrase, ps)
		}
	}
	if len(ps) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(ps), len(want), ps)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
