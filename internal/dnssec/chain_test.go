package dnssec

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestCanonicalCompare(t *testing.T) {
	// RFC 4034 §6.1's example, in order, plus escapes.
	want := []string{"example.", "a.example.", "yljkjljk.a.example.", "Z.a.example.", "zABC.a.EXAMPLE.",
		"z.example.", "\\001.z.example.", "*.z.example.", "\\200.z.example."}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortStableFunc(got, CanonicalCompare)
	if !slices.Equal(got, want) {
		t.Errorf("canonical order:\n got %v\nwant %v", got, want)
	}
	if CanonicalCompare("A.example.", "a.EXAMPLE.") != 0 || CanonicalCompare("a\\.b.example.", "a.b.example.") == 0 {
		t.Error("case must not count, an escaped dot must")
	}
}

func TestNSECChainCloses(t *testing.T) {
	names := []ChainName{
		{Name: "b.example.", Types: []uint16{dns.TypeA}, Signed: true},
		{Name: "example.", Types: []uint16{dns.TypeSOA, dns.TypeNS}, Signed: true},
		{Name: "a.b.example.", Types: []uint16{dns.TypeTXT}, Signed: true},
		{Name: "d.example.", Types: []uint16{dns.TypeNS}}, // insecure delegation
	}
	chain, err := NSECChain("example.", names, 60)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rr := range chain {
		got = append(got, strings.Join(strings.Fields(rr.String())[4:], " "))
	}
	want := []string{"b.example. NS SOA RRSIG NSEC", "a.b.example. A RRSIG NSEC", "d.example. TXT RRSIG NSEC", "example. NS RRSIG NSEC"}
	if !slices.Equal(got, want) {
		t.Errorf("chain:\n got %q\nwant %q", got, want)
	}
	if _, err := NSECChain("example.", names[:1], 60); err == nil {
		t.Error("a chain without its apex")
	}
	if _, err := NSECChain("example.", append(names, names[0]), 60); err == nil {
		t.Error("a name twice")
	}
}

func TestNSEC3Chain(t *testing.T) {
	// RFC 5155 Appendix A: example, salt aabbccdd, 12 iterations.
	p := NSEC3Params{Iterations: 12, Salt: "aabbccdd"}
	names := []ChainName{
		{Name: "example.", Types: []uint16{dns.TypeSOA, dns.TypeNS, dns.TypeNSEC3PARAM}, Signed: true},
		{Name: "x.y.w.example.", Types: []uint16{dns.TypeMX}, Signed: true},
		{Name: "a.example.", Types: []uint16{dns.TypeNS, dns.TypeDS}, Signed: true},
	}
	chain, err := NSEC3Chain("example.", names, 60, p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // owner → bitmap, from the RFC's zone
		"0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example.": "NS SOA RRSIG NSEC3PARAM",
		"35mthgpgcu1qg68fab165klnsnk3dpvl.example.": "NS DS RRSIG",
		"ji6neoaepv8b5o6k4ev33abha8ht9fgc.example.": "", // y.w.example: empty non-terminal
		"k8udemvp1j2f7eg6jebps17vp3n8i58h.example.": "", // w.example
		"2vptu5timamqttgl4luu9kg21e0aor3s.example.": "MX RRSIG",
	}
	if len(chain) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(chain), len(want), chain)
	}
	for i, rr := range chain {
		n := rr.(*NSEC3Record)
		f := strings.Fields(n.String())
		bm := strings.Join(f[9:], " ")
		if w, ok := want[n.Hdr.Name]; !ok || w != bm {
			t.Errorf("%s bitmap %q, want %q (known %v)", n.Hdr.Name, bm, w, ok)
		}
		next := chain[(i+1)%len(chain)].Header().Name
		if !strings.EqualFold(n.NextDomain+".example.", next) {
			t.Errorf("%s next %s, want %s", n.Hdr.Name, n.NextDomain, next)
		}
		if i > 0 && chain[i-1].Header().Name >= n.Hdr.Name {
			t.Errorf("not in hash order at %d", i)
		}
		if n.Flags != 0 || n.Hdr.Ttl != 60 {
			t.Errorf("%s: flags %d TTL %d", n.Hdr.Name, n.Flags, n.Hdr.Ttl)
		}
	}
	if _, err := NSEC3Chain("example.", names, 60, NSEC3Params{Salt: "abc"}); err == nil {
		t.Error("an odd salt")
	}
}

// NSEC3Record names the type the chain holds, for the test's reading.
type NSEC3Record = dns.NSEC3
