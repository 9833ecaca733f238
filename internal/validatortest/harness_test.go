//go:build !race

package validatortest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
)

// signedByBIND signs text (zone origin) with a CSK made by dnssec-keygen,
// using dnssec-signzone (NSEC), then changes bogus.example.com's address
// after signing, so its signature no longer verifies. It returns the
// signed file and the anchor.
func signedByBIND(t *testing.T, origin, text string) (string, Anchor) {
	t.Helper()
	dnstest.NeedTool(t, "dnssec-keygen")
	dnstest.NeedTool(t, "dnssec-signzone")
	dir := t.TempDir()
	zf := writeFile(t, dir, "zone", text)
	out, err := runTool(30*time.Second, "dnssec-keygen", "-q", "-K", dir, "-a", "ECDSAP256SHA256", "-f", "KSK", "-n", "ZONE", origin)
	if err != nil {
		t.Fatalf("dnssec-keygen: %v\n%s", err, out)
	}
	base := strings.TrimSpace(out)
	signed := filepath.Join(dir, "zone.signed")
	if out, err := runTool(30*time.Second, "dnssec-signzone", "-q", "-S", "-z", "-K", dir, "-d", dir, "-o", origin, "-f", signed, zf); err != nil {
		t.Fatalf("dnssec-signzone: %v\n%s", err, out)
	}
	b, err := os.ReadFile(signed)
	if err != nil {
		t.Fatal(err)
	}
	const good, bad = "bogus.example.com.\t3600\tIN A\t192.0.2.66\n", "bogus.example.com.\t3600\tIN A\t192.0.2.67\n"
	if !strings.Contains(string(b), good) {
		t.Fatalf("no %q in the signed zone:\n%s", good, b)
	}
	writeFile(t, dir, "zone.signed", strings.Replace(string(b), good, bad, 1))
	return signed, AnchorFromKeyFiles(t, origin, filepath.Join(dir, base+".key"))
}

// TestHarnessAgainstKnot proves the validators and how the tests read
// them on a zone signed by BIND and served by Knot DNS, before steer signs
// anything: every RRset of the Larkbook zone, a static shop.example.com,
// 20 random nonexistent names, NODATA, the empty non-terminal and a
// wildcard-expanded name validate in delv, Unbound, PowerDNS Recursor and
// Knot Resolver, and dnsviz reports nothing; a record whose signature was
// broken after signing fails in every one of them, so the checks can fail.
func TestHarnessAgainstKnot(t *testing.T) {
	t.Parallel()
	const origin = "example.com."
	text := LarkbookZone() + "shop 60 IN A 203.0.113.10\nbogus IN A 192.0.2.66\n"
	signed, anchor := signedByBIND(t, origin, text)
	knot := peertest.StartKnot(t, []peertest.Zone{{Origin: origin, File: signed}}, peertest.Options{})
	if !knot.Loaded(origin) {
		t.Fatalf("knot did not load the signed zone:\n%s", knot.Log.String())
	}
	server := knot.Addr

	bogus := DelvQuery{"bogus.example.com.", dns.TypeA}
	var positive []DelvQuery
	for _, q := range RRsets(t, origin, text) {
		if q != bogus {
			positive = append(positive, q)
		}
	}
	positive = append(positive, DelvQuery{origin, dns.TypeDNSKEY})
	var negative []DelvQuery
	for i := range 20 {
		negative = append(negative, DelvQuery{fmt.Sprintf("nx%d-%08x.example.com.", i, rand.Uint32()), dns.TypeA})
	}
	negative = append(negative,
		DelvQuery{"shop.example.com.", dns.TypeAAAA}, // NODATA
		DelvQuery{"_tcp.example.com.", dns.TypeA},    // empty non-terminal
		DelvQuery{"x.shop.example.com.", dns.TypeTXT},
	)

	t.Run("delv", func(t *testing.T) {
		t.Parallel()
		d := NewDelv(t, server, anchor)
		all := append(append(append([]DelvQuery{}, positive...), negative...), bogus)
		res := d.All(all)
		for i, r := range res {
			switch q := all[i]; {
			case q == bogus:
				if r.Validated || r.Negative || !strings.Contains(r.Out, "resolution failed") {
					t.Errorf("the broken signature passed: %s", r)
				}
			case i < len(positive):
				if !r.Validated || len(r.Answer) == 0 {
					t.Errorf("want fully validated: %s", r)
				}
			default:
				if !r.Negative {
					t.Errorf("want negative response, fully validated: %s", r)
				}
			}
		}
		// The wildcard-expanded answer is the wildcard's data.
		for i, q := range positive {
			if strings.HasPrefix(q.Name, "wildcard-expanded.") {
				if a := res[i].Answer; len(a) != 1 || a[0].(*dns.A).A.String() != "192.0.2.99" {
					t.Errorf("wildcard: %s", res[i])
				}
			}
		}
	})

	for _, start := range []func(testing.TB, netip.AddrPort, Anchor) *Resolver{StartUnbound, StartPDNSRecursor, StartKresd} {
		r := start(t, server, anchor)
		t.Run(r.Name, func(t *testing.T) {
			ecs := netip.Prefix{}
			if r.ECS {
				ecs = netip.MustParsePrefix("192.0.2.48/28")
			}
			for _, q := range positive {
				resp := r.Query(t, q.Name, q.Qtype, ecs)
				Validated(t, r.Name+" "+q.Name+" "+dns.TypeToString[q.Qtype], resp)
				if len(resp.Answer) == 0 {
					t.Errorf("%s %s %s: no answer\n%v", r.Name, q.Name, dns.TypeToString[q.Qtype], resp)
				}
			}
			for _, q := range negative {
				resp := r.Query(t, q.Name, q.Qtype, ecs)
				Validated(t, r.Name+" "+q.Name+" "+dns.TypeToString[q.Qtype], resp)
				wantRcode := dns.RcodeNameError
				if q.Qtype == dns.TypeAAAA || strings.HasPrefix(q.Name, "_tcp.") {
					wantRcode = dns.RcodeSuccess
				}
				if resp.Rcode != wantRcode || len(resp.Answer) != 0 {
					t.Errorf("%s %s %s: want %s without answer\n%v", r.Name, q.Name, dns.TypeToString[q.Qtype], dns.RcodeToString[wantRcode], resp)
				}
			}
			if resp := r.Query(t, bogus.Name, bogus.Qtype, ecs); resp.Rcode != dns.RcodeServerFailure || resp.AuthenticatedData {
				t.Errorf("%s: the broken signature passed:\n%v", r.Name, resp)
			}
		})
	}

	t.Run("dnsviz", func(t *testing.T) {
		rep := Dnsviz(t, server, anchor, []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT},
			"example.com", "shop.example.com", "nope.example.com", "x.wild.example.com", "_tcp.example.com", "bogus.example.com")
		for name, p := range rep.Problems {
			if name != bogus.Name {
				t.Errorf("dnsviz: %s: %s", name, strings.Join(p, "\n\t"))
			}
		}
		var printed, grokked bool
		for _, p := range rep.Problems[bogus.Name] {
			grokked = grokked || strings.HasPrefix(p, "grok: ") && strings.Contains(p, "SIGNATURE_INVALID")
			printed = printed || !strings.HasPrefix(p, "grok: ")
		}
		if !printed || !grokked {
			t.Errorf("dnsviz print (%v) or grok (%v) found nothing wrong with the broken signature:\n%s\n%q", printed, grokked, rep.Text, rep.Problems[bogus.Name])
		}
		if !strings.Contains(rep.Text, "x.wild.example.com") || !strings.Contains(rep.Text, "NXDOMAIN") {
			t.Errorf("dnsviz report lacks the names probed:\n%s", rep.Text)
		}
	})
}
