package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/snapshot"
)

// hostedZone is a hosting provider's small zone i (as bench/zonegen many
// writes them), with serial and www's address last octet given.
func hostedZone(origin string, serial, www int) string {
	return fmt.Sprintf(`$ORIGIN %s
$TTL 3600
@ IN SOA ns1.hosting.test. hostmaster.hosting.test. %d 7200 3600 1209600 300
@ IN NS ns1.hosting.test.
@ IN NS ns2.hosting.test.
@ IN MX 10 mail
@ IN A 192.0.2.1
www IN A 192.0.2.%d
mail IN A 192.0.2.3
ftp IN CNAME www
`, origin, serial, www)
}

// hosted writes n small zones and a configuration naming them all; body,
// when set, gives zone i's file instead of hostedZone.
func hosted(t *testing.T, n int, body func(i int, origin string) string) (dir string, files []string) {
	t.Helper()
	var cfg strings.Builder
	cfg.WriteString("zones:\n")
	m := map[string]string{}
	for i := range n {
		o := fmt.Sprintf("h%04d.test.", i)
		b := hostedZone(o, 1, 10)
		if body != nil {
			b = body(i, o)
		}
		if b != "" {
			m[o+"zone"] = b
		}
		fmt.Fprintf(&cfg, "  - { origin: %s, file: %szone }\n", o, o)
		files = append(files, o+"zone")
	}
	m["steer.yaml"] = cfg.String()
	_, dir = write(t, m)
	return dir, files
}

// A reload of N zones with one file changed parses that zone only, at N
// and at ten times N: the parses (the cost of a zone's load) do not grow
// with the zones that did not change. Each of the others is served as it
// was, the same object; the changed one answers its new data.
func TestReloadOneOfManyZonesParsesOne(t *testing.T) {
	t.Parallel()
	for _, n := range []int{40, 400} {
		dir, files := hosted(t, n, nil)
		first, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if first.ZonesParsed != n || first.ZoneFilesRead != n {
			t.Fatalf("%d zones: the start parsed %d and read %d", n, first.ZonesParsed, first.ZoneFilesRead)
		}
		ch := n / 2
		origin := strings.TrimSuffix(files[ch], "zone")
		if err := os.WriteFile(filepath.Join(dir, files[ch]), []byte(hostedZone(origin, 2, 77)), 0o644); err != nil {
			t.Fatal(err)
		}
		next, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: first})
		if err != nil {
			t.Fatal(err)
		}
		if next.ZonesParsed != 1 || next.ZonesReused != n-1 {
			t.Errorf("%d zones, one changed: the reload parsed %d zones and kept %d, want 1 and %d", n, next.ZonesParsed, next.ZonesReused, n-1)
		}
		for i, z := range next.Zones.Zones() {
			if was := first.Zones.Zones()[i]; (z == was) != (i != ch) || z.Origin != was.Origin {
				t.Errorf("%d zones: zone %d (%s) kept %v", n, i, z.Origin, z == was)
			}
		}
		expectAnswer(t, next, "www."+origin, dns.TypeA, "NOERROR", "A 192.0.2.77")
		expectAnswer(t, next, "www.h0000.test.", dns.TypeA, "NOERROR", "A 192.0.2.10")
		expectAnswer(t, first, "www."+origin, dns.TypeA, "NOERROR", "A 192.0.2.10")
	}
}

// A start loads the zones' files on several workers (preparse): what it
// serves and every problem it reports, at file:line, is as a load one
// after another gives them, in configuration order.
func TestStartLoadsZonesInOrder(t *testing.T) {
	t.Parallel()
	const n = 60
	broken := map[int]bool{11: true, 47: true}
	dir, files := hosted(t, n, func(i int, o string) string {
		switch {
		case broken[i]:
			return strings.Replace(hostedZone(o, 1, 10), "www IN A 192.0.2.10", "www IN A 192.0.2.300", 1) // line 8
		case i == 30:
			return "" // no file
		}
		return hostedZone(o, 1, i)
	})
	cfgFile := filepath.Join(dir, "steer.yaml")
	snap, warns, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.ZonesParsed != n-1 || snap.ZoneFilesRead != n {
		t.Errorf("parsed %d zones and read %d files, want %d and %d", snap.ZonesParsed, snap.ZoneFilesRead, n-1, n)
	}
	var got []string
	for _, d := range snap.Degraded {
		got = append(got, d.Origin+" "+d.Serving)
	}
	want := []string{"h0011.test. SERVFAIL", "h0030.test. SERVFAIL", "h0047.test. SERVFAIL"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("degraded = %q, want %q", got, want)
	}
	for _, i := range []int{11, 47} {
		if f := filepath.Join(dir, files[i]); !has(warns, f, 8, "bad A") {
			t.Errorf("warnings %v: want %s:8 bad A", warns, f)
		}
	}
	if !has(warns, cfgFile, 32, "h0030.test.", "no such file") {
		t.Errorf("warnings %v: want %s:32 naming h0030.test.'s missing file", warns, cfgFile)
	}
	for i, z := range snap.Zones.Zones() {
		if o := strings.TrimSuffix(files[i], "zone"); z.Origin != o {
			t.Fatalf("zone %d is %s, want %s (configuration order)", i, z.Origin, o)
		}
	}
	expectAnswer(t, snap, "www.h0059.test.", dns.TypeA, "NOERROR", "A 192.0.2.59")
	expectAnswer(t, snap, "www.h0011.test.", dns.TypeA, "SERVFAIL")

	// Build, strict, rejects the configuration with the same problems.
	_, _, err = snapshot.Build(reload(t, dir))
	if err == nil {
		t.Fatal("Build accepted broken zones")
	}
	ps := problems(t, err)
	if !has(ps, filepath.Join(dir, files[11]), 8, "bad A") || !has(ps, filepath.Join(dir, files[47]), 8, "bad A") || !has(ps, cfgFile, 32, "h0030.test.") {
		t.Errorf("Build problems = %v", ps)
	}
}
