package zone

import (
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkNSEC3Hash compares the query path's NSEC3 hash with
// dns.HashName (which allocates the wire form, hex and base32 text), at
// 3 iterations and a 2-octet salt.
func BenchmarkNSEC3Hash(b *testing.B) {
	p := &presigned{salt: []byte{0xab, 0xcd}, iterations: 3}
	b.Run("zone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.nsec3Hash("nope.x.pre.test.", false)
		}
	})
	b.Run("dns.HashName", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dns.HashName("nope.x.pre.test.", dns.SHA1, 3, "ABCD")
		}
	})
}

func TestNSEC3HashAsMiekg(t *testing.T) {
	p := &presigned{salt: []byte{0xab, 0xcd}, iterations: 3}
	for _, name := range []string{"pre.test.", "NoPe.x.pre.test.", `a\.b.pre.test.`, `\000.pre.test.`, "*.wild.pre.test."} {
		h, ok := p.nsec3Hash(name, false)
		want := dns.HashName(name, dns.SHA1, 3, "ABCD")
		got := hashEncoding.EncodeToString(h[:])
		if !ok || got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if h, _ := p.nsec3Hash("wild.pre.test.", true); hashEncoding.EncodeToString(h[:]) != dns.HashName("*.wild.pre.test.", dns.SHA1, 3, "ABCD") {
		t.Errorf("star")
	}
}
