//go:build !race

// Compiling the steered names against the embedded database takes 8 s
// under the race detector and 0.7 s without: this runs beside the raced
// packages.

package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestExportedSerialStableAcrossReloads: a zone transferred out whose
// steered names are a non-sticky split and a limited multivalue (both
// drawn at random per query) exports them the same way every time, so
// reloads that change nothing leave the exported serial where it was:
// no "next serial", no rebuild, no NOTIFY.
func TestExportedSerialStableAcrossReloads(t *testing.T) {
	t.Parallel()
	cfg := `api: { listen: "127.0.0.1:0" }
tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: xfr.example
    file: xfr.zone
    secondaries:
      - { address: 127.0.0.1, tsig: knot-key, notify: none }
records:
  - name: split.xfr.example
    ttl: 30
    pools:
      a: { address: 198.51.100.1 }
      b: { address: 198.51.100.2 }
      c: { address: 198.51.100.3 }
    rules:
      - default: { split: [{ pool: b, weight: 50 }, { pool: a, weight: 50 }, { pool: c, weight: 10 }] }
  - name: multi.xfr.example
    ttl: 30
    pools:
      p1: { addresses: [198.51.100.11, 198.51.100.12] }
      p2: { addresses: [198.51.100.21, 198.51.100.22] }
      p3: { address: 198.51.100.31 }
    rules:
      - default: { multivalue: 2 }
`
	zoneText := "$ORIGIN xfr.example.\n$TTL 300\n@ SOA ns1 hostmaster 1 86400 3600 1209600 60\n@ NS ns1\nns1 A 192.0.2.53\n"
	n := startNode(t, map[string]string{"steer.yaml": cfg, "xfr.zone": zoneText, "knot.key": keyFile("knot-key")}, Options{})
	exported := func() []string {
		t.Helper()
		env, err := (&dns.Transfer{TsigSecret: map[string]string{"knot-key.": xfrKeys["knot-key"]}}).In(func() *dns.Msg {
			m := new(dns.Msg)
			m.SetAxfr(xfrOrigin)
			m.SetTsig("knot-key.", dns.HmacSHA256, 300, time.Now().Unix())
			return m
		}(), n.dns.String())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for e := range env {
			if e.Error != nil {
				t.Fatal(e.Error)
			}
			for _, rr := range e.RR {
				if strings.HasPrefix(rr.Header().Name, "split.") || strings.HasPrefix(rr.Header().Name, "multi.") {
					out = append(out, rr.String())
				}
			}
		}
		return out
	}
	first := exported()
	// The heaviest pool (a and b tie at 50: a by name), and multivalue's
	// first two addresses in the record's order.
	want := []string{"split.xfr.example.\t30\tIN\tA\t198.51.100.1", "multi.xfr.example.\t30\tIN\tA\t198.51.100.11", "multi.xfr.example.\t30\tIN\tA\t198.51.100.12"}
	for _, w := range want {
		if !strings.Contains(strings.Join(first, "\n"), w) {
			t.Errorf("export lacks %q:\n%s", w, strings.Join(first, "\n"))
		}
	}
	if len(first) != len(want) {
		t.Errorf("export has %d steered records, want %d:\n%s", len(first), len(want), strings.Join(first, "\n"))
	}
	for i := range 8 {
		if _, err := n.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := n.xfr.Status(xfrOrigin); !s.Exported || s.ExportedSerial != 1 {
			t.Fatalf("reload %d: exported serial %d (exported %v), want 1", i+1, s.ExportedSerial, s.Exported)
		}
		if sr := n.xfr.Serials(); len(sr) != 0 {
			t.Fatalf("reload %d: the zone is to be given serial %v", i+1, sr)
		}
		if r := n.query(xfrOrigin, dns.TypeSOA); len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != 1 {
			t.Fatalf("reload %d: SOA %v", i+1, r.Answer)
		}
	}
	if got := exported(); strings.Join(got, "\n") != strings.Join(first, "\n") {
		t.Errorf("export after 8 reloads:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(first, "\n"))
	}
	if l := n.logs.String(); strings.Contains(l, "giving it the next one") || strings.Contains(l, "new serial") {
		t.Errorf("a reload that changed nothing moved the serial:\n%s", grepLines(l, "serial"))
	}
}
