package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/dnstest"
)

// runSteer runs the command in-process.
func runSteer(args ...string) (int, string, string) {
	var o, e bytes.Buffer
	code := run(args, &o, &e)
	return code, o.String(), e.String()
}

// TestDNSSECCommands makes keys with steer dnssec keygen, checks a
// configuration using them, prints their DS as dnssec-dsfromkey does, and
// has steer check fail with file:line on each bad input of issue 26: a
// missing or mismatched key, a key for another zone, a world-readable
// private key, an unknown algorithm, and a signed zone with secondaries.
func TestDNSSECCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys") // made by the first keygen
	keygen := func(args ...string) []string {
		t.Helper()
		code, out, errOut := runSteer(append([]string{"dnssec", "keygen"}, args...)...)
		if code != 0 {
			t.Fatalf("keygen %v: exit %d\n%s", args, code, errOut)
		}
		return strings.Fields(out)
	}
	csk := keygen("example.com", "--dir", keys)
	if fi, err := os.Stat(keys); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("keygen made the keys directory with %v (%v), want 0700", fi.Mode(), err)
	}
	pair := keygen("--ksk-zsk", "--algorithm", "ed25519", "example.org", "--dir", keys)
	other := keygen("example.org", "--dir", keys)
	spare := keygen("example.com", "--dir", keys, "--role", "ksk")
	zsk := keygen("example.com", "--dir", keys, "--role", "zsk")
	if len(csk) != 1 || len(pair) != 2 || !strings.Contains(pair[0], "+015+") || !strings.HasPrefix(csk[0], filepath.Join(keys, "Kexample.com.+013+")) {
		t.Fatalf("keygen printed %q, %q", csk, pair)
	}
	rel := func(p string) string { r, _ := filepath.Rel(dir, p); return r }

	zone := "$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n@ NS ns1\nns1 A 192.0.2.1\n"
	// A mismatched pair: one key's .key with another's .private.
	mism := filepath.Join(keys, "Kexample.com.+013+00001")
	copyFile(t, csk[0]+".key", mism+".key", 0o644)
	copyFile(t, spare[0]+".private", mism+".private", 0o600)
	world := filepath.Join(keys, "Kexample.com.+013+00002")
	copyFile(t, csk[0]+".key", world+".key", 0o644)
	copyFile(t, csk[0]+".private", world+".private", 0o644)
	dnstest.WriteFiles(t, dir, map[string]string{
		"example.com.zone": strings.ReplaceAll(zone, "@ SOA", "example.com. SOA"),
		"example.org.zone": zone,
		"good.yaml": `zones:
  - origin: example.com
    file: example.com.zone
    dnssec:
      keys: [` + rel(csk[0]) + `]
      validity: 14d
  - origin: example.org
    file: example.org.zone
    dnssec: { keys: [` + rel(pair[0]) + `, ` + rel(pair[1]) + `] }
signing: { budget_per_core: 1000 }
`,
		"keys/Kexample.com.+200+00003.key":     "example.com. IN DNSKEY 257 3 200 AwEAAb4N\n",
		"keys/Kexample.com.+200+00003.private": "Private-key-format: v1.3\nAlgorithm: 200\n",
	})
	noErr(t, os.Chmod(filepath.Join(keys, "Kexample.com.+200+00003.private"), 0o600))
	code, out, errOut := runSteer("check", "--config", filepath.Join(dir, "good.yaml"))
	if code != 0 || !strings.Contains(out, ": ok (2 zones (2 signed), ") {
		t.Fatalf("check good: exit %d\n%s%s", code, out, errOut)
	}

	// steer dnssec ds: from the configuration, and from the key files,
	// as dnssec-dsfromkey -2 prints them.
	code, fromCfg, errOut := runSteer("dnssec", "ds", "example.org", "--config", filepath.Join(dir, "good.yaml"))
	if code != 0 || strings.Count(fromCfg, "\n") != 1 || !strings.HasPrefix(fromCfg, "example.org. IN DS ") {
		t.Fatalf("ds example.org: exit %d\n%s%s", code, fromCfg, errOut)
	}
	code, fromFiles, errOut := runSteer("dnssec", "ds", "example.org", pair[0]+".key", pair[1])
	if code != 0 || fromFiles != fromCfg {
		t.Errorf("ds from files: exit %d %q, from the configuration %q\n%s", code, fromFiles, fromCfg, errOut)
	}
	if _, err := exec.LookPath("dnssec-dsfromkey"); err == nil {
		for z, base := range map[string]string{"example.com": csk[0], "example.org": pair[0]} {
			want, err := exec.Command("dnssec-dsfromkey", "-2", base+".key").Output()
			if err != nil {
				t.Fatal(err)
			}
			_, got, _ := runSteer("dnssec", "ds", z, "--config", filepath.Join(dir, "good.yaml"))
			if got != string(want) {
				t.Errorf("ds %s: %q, dnssec-dsfromkey -2: %q", z, got, want)
			}
		}
	}
	for _, bad := range [][]string{
		{"ds", "example.net", "--config", filepath.Join(dir, "good.yaml")},
		{"ds", "example.com", pair[0]},
		{"ds", "example.org", pair[1]}, // a ZSK alone: no DS
	} {
		if code, _, _ := runSteer(append([]string{"dnssec"}, bad...)...); code != 1 {
			t.Errorf("dnssec %v: exit %d, want 1", bad, code)
		}
	}

	// Each bad input fails steer check at its line.
	for name, c := range map[string]struct {
		dnssec, extra string
		line          int
		want          string
	}{
		"missing":     {"{ keys: [keys/Kexample.com.+013+09999] }", "", 4, "Kexample.com.+013+09999.key: no such file or directory"},
		"mismatched":  {"{ keys: [" + rel(mism) + "] }", "", 4, "does not hold the private key of"},
		"other-zone":  {"{ keys: [" + rel(other[0]) + "] }", "", 4, "is a key for example.org., not for example.com."},
		"world":       {"{ keys: [" + rel(world) + "] }", "", 4, "is readable by group and others (mode 0644)"},
		"unknown-alg": {"{ keys: [keys/Kexample.com.+200+00003] }", "", 4, "algorithm 200 (unknown) is not supported"},
		"no-sep":      {"{ keys: [" + rel(zsk[0]) + "] }", "", 4, "no key has the SEP flag"},
		"denial":      {"{ keys: [" + rel(csk[0]) + "], denial: nsec5 }", "", 4, `dnssec.denial: "nsec5" is not nsec or nsec3`},
		"validity":    {"{ keys: [" + rel(csk[0]) + "], validity: 2 weeks }", "", 4, `invalid validity "2 weeks"`},
	} {
		p := filepath.Join(dir, name+".yaml")
		body := "zones:\n  - origin: example.com\n    file: example.com.zone\n    dnssec: " + c.dnssec + "\n" + c.extra
		dnstest.WriteFiles(t, dir, map[string]string{name + ".yaml": body})
		code, _, errOut := runSteer("check", "--config", p)
		if want := p + ":" + strconv.Itoa(c.line) + ": "; code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, want 1 and %q ... %q in:\n%s", name, code, want, c.want, errOut)
		}
	}

	// Usage errors.
	for _, args := range [][]string{
		{"dnssec"}, {"dnssec", "sign", "example.com"}, {"dnssec", "keygen"},
		{"dnssec", "keygen", "example.com", "--algorithm", "rsasha1"},
		{"dnssec", "keygen", "example.com", "--role", "ksk", "--ksk-zsk"},
		{"dnssec", "keygen", "example..com"},
		{"dnssec", "ds", "example.com", "--dir", "x"},
	} {
		if code, _, _ := runSteer(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// keygen cannot write where a file stands in for its directory.
	if code, _, errOut := runSteer("dnssec", "keygen", "example.com", "--dir", filepath.Join(csk[0]+".key", "x")); code != 1 || !strings.Contains(errOut, "not a directory") {
		t.Errorf("keygen into a file: exit %d, %q", code, errOut)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	noErr(t, err)
	noErr(t, os.WriteFile(to, b, mode))
	noErr(t, os.Chmod(to, mode))
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
