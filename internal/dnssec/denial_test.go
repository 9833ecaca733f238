package dnssec

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// canonicalCompare orders two names as RFC 4034 §6.1 does: label by label
// from the right, each label as lower-cased octets, a prefix first.
func canonicalCompare(t *testing.T, a, b string) int {
	t.Helper()
	la, lb := wireLabels(t, a), wireLabels(t, b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 || j >= 0; i, j = i-1, j-1 {
		switch {
		case i < 0:
			return -1
		case j < 0:
			return 1
		}
		if c := bytes.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	return 0
}

func wireLabels(t *testing.T, name string) [][]byte {
	t.Helper()
	w, err := wireName(name)
	if err != nil {
		t.Fatalf("%q: %v", name, err)
	}
	var out [][]byte
	for off := 0; w[off] != 0; off += 1 + int(w[off]) {
		out = append(out, w[off+1:off+1+int(w[off])])
	}
	return out
}

func wireLen(t *testing.T, name string) int {
	w, err := wireName(name)
	if err != nil {
		t.Fatalf("%q: %v", name, err)
	}
	return len(w)
}

func TestCompactNSEC(t *testing.T) {
	nx := CompactNSEC("nope.example.com.", 300, TypeNXNAME)
	if nx.NextDomain != `\000.nope.example.com.` {
		t.Errorf("next %q", nx.NextDomain)
	}
	if got := nx.TypeBitMap; len(got) != 3 || got[0] != dns.TypeRRSIG || got[1] != dns.TypeNSEC || got[2] != TypeNXNAME {
		t.Errorf("bitmap %v, want RRSIG NSEC NXNAME", got)
	}
	// It packs (the bitmap is in the order miekg/dns needs) and reads back.
	buf := make([]byte, 512)
	n, err := dns.PackRR(nx, buf, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := dns.UnpackRR(buf[:n], 0)
	if err != nil || !strings.Contains(back.String(), `\000.nope.example.com. RRSIG NSEC NXNAME`) {
		t.Fatalf("round trip %v %v", back, err)
	}
	nodata := CompactNSEC("www.example.com.", 60, dns.TypeAAAA, dns.TypeA, dns.TypeNSEC, dns.TypeCAA)
	want := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeCAA}
	if !slices.Equal(nodata.TypeBitMap, want) {
		t.Errorf("bitmap %v, want %v", nodata.TypeBitMap, want)
	}
	if _, err := dns.PackRR(nodata, buf, 0, nil, false); err != nil {
		t.Fatal(err)
	}
	if ent := CompactNSEC("a.example.com.", 60); !slices.Equal(ent.TypeBitMap, []uint16{dns.TypeRRSIG, dns.TypeNSEC}) {
		t.Errorf("empty non-terminal bitmap %v", ent.TypeBitMap)
	}
	if CompactNSEC(".", 1).NextDomain != `\000.` {
		t.Error("root's zero child")
	}
}

func TestTypesSum(t *testing.T) {
	a := TypesSum([]uint16{dns.TypeA, dns.TypeAAAA})
	if a != TypesSum([]uint16{dns.TypeAAAA, dns.TypeA, dns.TypeA, dns.TypeRRSIG}) {
		t.Error("TypesSum depends on order or duplicates")
	}
	if a == TypesSum([]uint16{dns.TypeA}) || TypesSum(nil) == TypesSum([]uint16{TypeNXNAME}) {
		t.Error("TypesSum does not tell bitmaps apart")
	}
	if TypesSum(nil) != TypesSum([]uint16{dns.TypeNSEC, dns.TypeRRSIG}) {
		t.Error("RRSIG and NSEC are always in the bitmap")
	}
	types := []uint16{dns.TypeMX, dns.TypeA, dns.TypeAAAA, dns.TypeTXT}
	if n := testing.AllocsPerRun(100, func() { TypesSum(types) }); n != 0 {
		t.Errorf("TypesSum allocates %v", n)
	}
	many := make([]uint16, 40)
	for i := range many {
		many[i] = uint16(40 - i)
	}
	if TypesSum(many) != TypesSum(NSECTypes(many...)) {
		t.Error("TypesSum of a long list")
	}
	k1, k2 := DenialKey("x.", 60, nil), DenialKey("x.", 300, nil)
	if k1 == k2 || k1.Type != dns.TypeNSEC {
		t.Error("DenialKey must tell TTLs apart")
	}
}

func TestCacheFoldsCase(t *testing.T) {
	c := NewCache(64)
	k := DenialKey("www.example.com.", 60, []uint16{TypeNXNAME})
	c.Put(&Entry{Key: k, Refresh: 100})
	mixed := k
	mixed.Name = "WwW.eXample.COM."
	if c.Get(mixed, 1) == nil {
		t.Fatal("no hit for the name in another case")
	}
	long := strings.Repeat("Abcdefghij.", 20) + "example.com."
	kl := DenialKey(strings.ToLower(long), 60, nil)
	c.Put(&Entry{Key: kl, Refresh: 100})
	kl.Name = long
	if c.Get(kl, 1) == nil {
		t.Fatal("no hit for a long name in another case")
	}
	if n := testing.AllocsPerRun(100, func() { c.Get(kl, 1) }); n != 0 {
		t.Errorf("Get of a mixed-case name allocates %v", n)
	}
	other := mixed
	other.Name = "WwX.eXample.COM."
	if c.Get(other, 1) != nil {
		t.Fatal("hit for another name")
	}
}

func TestEpsilonExamples(t *testing.T) {
	ff := func(n int) string { return strings.Repeat(`\255`, n) }
	for _, tc := range []struct{ name, pred, succ string }{
		{"b.example.com.", "", `\000.b.example.com.`},
		{`\000.example.com.`, "example.com.", `\000.\000.example.com.`},
		{"B.Example.COM.", "", `\000.b.example.com.`},
	} {
		p, err := Predecessor(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if tc.pred != "" && p != tc.pred {
			t.Errorf("Predecessor(%s) = %s, want %s", tc.name, p, tc.pred)
		}
		s, err := Successor(tc.name)
		if err != nil || s != tc.succ {
			t.Errorf("Successor(%s) = %s %v, want %s", tc.name, s, err, tc.succ)
		}
	}
	// b → a\255…\255 (63 octets) under labels of \255 to 255 octets.
	p, _ := Predecessor("b.example.com.")
	if !strings.HasSuffix(p, ".a"+ff(62)+".example.com.") || wireLen(t, p) != maxName {
		t.Errorf("Predecessor(b.example.com.) = %s (%d octets)", p, wireLen(t, p))
	}
	// '[' - 1 is 'Z', which sorts as 'z': skip to '@'.
	p, _ = Predecessor("x[.example.com.")
	if !strings.HasSuffix(p, `.x\@`+ff(61)+".example.com.") {
		t.Errorf("Predecessor(x[.example.com.) = %s", p)
	}
	p, _ = Predecessor(`ab\000.example.com.`)
	if !strings.HasSuffix(p, "."+ff(63)+".ab.example.com.") || wireLen(t, p) != maxName {
		t.Errorf(`Predecessor(ab\000.example.com.) = %s`, p)
	}
}

func TestCoveringNSECVerifies(t *testing.T) {
	k := testKey(t, "example.com.", dns.ECDSAP256SHA256, true)
	s, err := NewSigner("example.com.", []*Key{k}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	nsec, err := CoveringNSEC("nope.example.com.", 60)
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := s.Sign([]dns.RR{nsec}, time.Now(), ReasonDenial)
	if err != nil {
		t.Fatal(err)
	}
	if err := sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, []dns.RR{nsec}); err != nil {
		t.Fatal(err)
	}
	// The record survives a message round trip (names of 255 octets).
	m := new(dns.Msg)
	m.SetQuestion("nope.example.com.", dns.TypeA)
	m.Ns = append([]dns.RR{nsec}, sigs...)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var back dns.Msg
	if err := back.Unpack(b); err != nil {
		t.Fatal(err)
	}
	if got := back.Ns[0].(*dns.NSEC); !strings.EqualFold(got.Hdr.Name, nsec.Hdr.Name) || got.NextDomain != `nope\000.example.com.` {
		t.Fatalf("round trip: %v", got)
	}
}

// BenchmarkCacheGet is the negative answer's cost of a cache hit, for a
// name in lower case and one in 0x20 mixed case.
func BenchmarkCacheGet(b *testing.B) {
	c := NewCache(0)
	types := []uint16{TypeNXNAME}
	k := DenialKey("nope-1234.shop.example.com.", 300, types)
	c.Put(&Entry{Key: k, Refresh: 1 << 31})
	for _, name := range []string{"nope-1234.shop.example.com.", "NoPe-1234.sHoP.exAMple.CoM."} {
		b.Run(map[bool]string{true: "lower", false: "mixed"}[name == k.Name], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.Get(DenialKey(name, 300, types), 1) == nil {
					b.Fatal("miss")
				}
			}
		})
	}
}

func TestSubtreeSuccessor(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"b.example.", "b\\000.example."},
		{"\\000.example.", "\\000\\000.example."},
		{"a" + strings.Repeat("b", 62) + ".example.", "a" + strings.Repeat("b", 61) + "c.example."},
		{"a" + strings.Repeat("@", 62) + ".example.", "a" + strings.Repeat("\\@", 61) + "[.example."}, // upper case skipped
		{"a" + strings.Repeat("\\255", 62) + ".example.", "b.example."},
	} {
		if s, err := SubtreeSuccessor(tc.in); err != nil || s != tc.want {
			t.Errorf("SubtreeSuccessor(%s) = %s, want %s", tc.in, s, tc.want)
		}
	}
}

// FuzzEpsilon: for any name, Predecessor and Successor either refuse it
// or return names on either side of it in canonical order.
func FuzzEpsilon(f *testing.F) {
	for _, s := range []string{"b.example.com.", `\000.example.com.`, `ab\000.x.`, `a\255.b.`, "*.x.", `\@.y.`, "A.", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if _, err := wireName(name); err != nil {
			return
		}
		p, perr := Predecessor(name)
		s, serr := Successor(name)
		if perr == nil && canonicalCompare(t, p, name) >= 0 {
			t.Fatalf("Predecessor(%q) = %q, not before it", name, p)
		}
		if serr == nil && canonicalCompare(t, name, s) >= 0 {
			t.Fatalf("Successor(%q) = %q, not after it", name, s)
		}
	})
}
