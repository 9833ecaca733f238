package difftest

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/dnstest"
)

// peerZone is one zone of the peer-zones folder.
type peerZone struct {
	Origin string // as the peer's own configuration names it, with the final dot
	File   string // the unchanged file
	Source string // repository:path it came from
}

// peerDir finds the peer-zones folder: $STEER_PEER_ZONES, or
// ../shared/testdata/peer-zones beside the repository (where CI lays
// shared/). Without it the test skips, or fails under STEER_REQUIRE_TOOLS.
func peerDir(t *testing.T) string {
	t.Helper()
	dirs := []string{os.Getenv("STEER_PEER_ZONES"), dnstest.RepoFile("../shared/testdata/peer-zones")}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "zones.tsv")); err == nil {
			return d
		}
	}
	if os.Getenv("STEER_REQUIRE_TOOLS") == "1" {
		t.Fatalf("peer zones not found (looked in %q): set STEER_PEER_ZONES", dirs)
	}
	t.Skipf("peer zones not found (looked in %q)", dirs)
	return ""
}

// readTSV reads the tab-separated rows of dir/name, skipping blank lines
// and # comments; a row with fewer than len(fields) fields fails the test,
// naming them.
func readTSV(t *testing.T, dir, name string, fields ...string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		row := strings.Split(line, "\t")
		if len(row) < len(fields) {
			t.Fatalf("%s: %q: want %s", name, line, strings.Join(fields, ", "))
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no rows", name)
	}
	return rows
}

// readZones reads zones.tsv: origin, file, source.
func readZones(t *testing.T, dir string) []peerZone {
	t.Helper()
	var zones []peerZone
	for _, f := range readTSV(t, dir, "zones.tsv", "origin", "file", "source") {
		zones = append(zones, peerZone{Origin: strings.TrimSuffix(f[0], ".") + ".", File: filepath.Join(dir, f[1]), Source: f[2]})
	}
	return zones
}

// stripped is a line one of the servers refuses. The common zone set
// every server is compared on has these lines commented out; each is
// tested on its own by TestRefusedLines.
type stripped struct {
	zone string // origin
	line int
	// text is the start of the line, checked so that a changed file
	// fails loudly instead of stripping the wrong line.
	text string
	// refusedBy names the servers that refuse the line (or the zone
	// because of it), why, and what steer does with it.
	refusedBy string
	// steer is true when steer loads the line.
	steer bool
}

// strip lists every line of the peer zones that Knot 3.2 or NSD 4.6
// refuses. Knot refuses the zone for an error, NSD refuses it for an
// error; both serve the rest.
var strip = []stripped{
	{"example.com.", 86, "*.mixed-wc", "NSD: CNAME and other data (the A of *.mixed-wc); steer: the same (RFC 1034 §3.6.2); Knot and PowerDNS load it", false},
	{"example.com.", 20197, "google-alias", "Knot, NSD, steer: ALIAS is PowerDNS's own type, not a DNS type", false},
	{"example.com.", 20201, "phil.mb", "Knot 3.2: MB is not supported (obsolete, RFC 1035 §3.3.3)", true},
	{"example.com.", 20202, "sheila.mb", "Knot 3.2: MB is not supported", true},
	{"example.com.", 20203, "hostmaster.mb", "Knot 3.2: MG is not supported", true},
	{"example.com.", 20204, "                   IN      MG", "Knot 3.2: MG is not supported", true},
	{"example.com.", 20205, "philip.mb", "Knot 3.2: MR is not supported", true},
	{"example.com.", 20226, "bar.svcb IN SVCB 5", "Knot 3.2, NSD 4.6, steer (miekg/dns 1.1): the ohttp and tls-supported-groups keys are newer than them", false},
	{"example.com.", 20234, "test.wallet", "Knot 3.2, NSD 4.6, steer (miekg/dns 1.1): WALLET (type 262, 2024) is newer than them; steer names the type and says to write it as TYPE262", false},
	{"test.com.", 36, "very-long-txt", "NSD: a character-string over 255 octets (RFC 1035 §3.3); steer and Knot split it", true},
	{"test.com.", 42, "hightxt", "Knot: raw 8-bit characters in a string (RFC 1035 §5.1 allows them); NSD and steer load it", true},
	{"test.com.", 43, "hightxt", "Knot: raw 8-bit characters in a string; NSD and steer load it", true},
	{"nztest.com.", 15, "testnonzone.com.", "NSD and steer: out-of-zone data refuses the zone (most often a missing final dot); Knot and BIND ignore the record, with a warning", false},
	{"nztest.com.", 16, "NZTEST.COM.NET.", "NSD and steer: out-of-zone data refuses the zone (most often a missing final dot); Knot and BIND ignore the record, with a warning", false},
	{"rt.example.", 10, "www X25", "Knot 3.2: X25 is not supported", true},
	{"nid.example.", 6, "ns1 NID", "Knot 3.2: NID/L64 groups of fewer than four digits; NSD, BIND and steer read them", true},
	{"nid.example.", 7, "ns1 L64", "Knot 3.2: NID/L64 groups of fewer than four digits; NSD, BIND and steer read them", true},
	{"nid.example.", 9, "nid2 NID", "Knot 3.2: NID/L64 groups of fewer than four digits; NSD, BIND and steer read them", true},
}

// prepare writes each zone with its stripped lines commented out into dir
// and returns the copies (Origin, File in dir).
func prepare(t *testing.T, zones []peerZone, dir string) []peerZone {
	t.Helper()
	var out []peerZone
	for _, z := range zones {
		data, err := os.ReadFile(z.File)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for _, s := range strip {
			if s.zone != z.Origin {
				continue
			}
			if s.line > len(lines) || !strings.HasPrefix(lines[s.line-1], s.text) {
				t.Fatalf("%s:%d: expected a line starting %q to strip; the file changed", z.File, s.line, s.text)
			}
			lines[s.line-1] = "; stripped: " + lines[s.line-1]
		}
		c := z
		c.File = filepath.Join(dir, strconv.Itoa(len(out))+"-"+strings.TrimSuffix(z.Origin, "."))
		if err := os.WriteFile(c.File, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}
