package dnssec

import (
	"bytes"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Keys made once for the package's tests and benchmarks (RSA takes long).
var (
	keysOnce sync.Once
	keyByAlg map[string]*Key
)

func algKeys(t testing.TB) map[string]*Key {
	keysOnce.Do(func() {
		keyByAlg = map[string]*Key{
			"ecdsa":   testKey(t, "example.com.", dns.ECDSAP256SHA256, true),
			"ed25519": testKey(t, "example.com.", dns.ED25519, true),
			"rsa":     testKey(t, "example.com.", dns.RSASHA256, true),
		}
	})
	return keyByAlg
}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return rr
}

// FuzzSignVerifies signs TXT RRsets built from arbitrary bytes under an
// arbitrary owner; the seeds run with the tests.
func FuzzSignVerifies(f *testing.F) {
	f.Add("www", []byte("hello"), []byte("world"))
	f.Add("*", []byte{}, []byte{0xff, 0})
	f.Add("A.b-C", bytes.Repeat([]byte{'x'}, 255), []byte("x"))
	k := testKey(f, "example.com.", dns.ED25519, true)
	s, err := NewSigner("example.com.", []*Key{k}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, label string, a, b []byte) {
		owner := label + ".example.com."
		if _, ok := dns.IsDomainName(owner); !ok || len(a) > 255 || len(b) > 255 {
			return
		}
		// The oracle's canonical form maps runes, so it mangles octets that
		// are not UTF-8 (testdata: "\xb2"); validators work on the wire.
		// Give it the name as miekg/dns writes it, \DDD escapes and all.
		buf := make([]byte, 256)
		n, err := dns.PackDomainName(owner, buf, 0, nil, false)
		if err != nil {
			return
		}
		if owner, _, err = dns.UnpackDomainName(buf[:n], 0); err != nil {
			return
		}
		rrs := []dns.RR{
			&dns.TXT{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{string(a)}},
			&dns.TXT{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{string(b)}},
		}
		if _, err := dns.PackRR(rrs[0], make([]byte, 1024), 0, nil, false); err != nil {
			return
		}
		sigs, err := s.Sign(rrs, time.Now(), ReasonLoad)
		if err != nil {
			return // a name miekg cannot pack either
		}
		if err := sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, rrs); err != nil {
			t.Fatalf("%q %q %q: %v", label, a, b, err)
		}
	})
}

func TestECDSARaw(t *testing.T) {
	// r = 0x00ff (a leading zero for the sign), s = 0x01.
	got, err := ecdsaRaw([]byte{0x30, 0x07, 0x02, 0x02, 0x00, 0xff, 0x02, 0x01, 0x01}, 4)
	if err != nil || !bytes.Equal(got, []byte{0, 0, 0, 0xff, 0, 0, 0, 1}) {
		t.Fatalf("%x %v", got, err)
	}
	for _, bad := range [][]byte{
		{0x30, 0x07, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01}, // length
		{0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01}, // not a sequence
		{0x30, 0x08, 0x02, 0x05, 1, 2, 3, 4, 5, 0x02, 0x01, 0x01},
		{0x30, 0x03, 0x02, 0x01, 0x01},
	} {
		if _, err := ecdsaRaw(bad, 4); err == nil {
			t.Errorf("%x: no error", bad)
		}
	}
}

// benchRRset is what the query path signs most: a steered answer of two
// addresses.
func benchRRset(b *testing.B) []dns.RR {
	return []dns.RR{mustRR(b, "www.example.com. 300 IN A 192.0.2.1"), mustRR(b, "www.example.com. 300 IN A 192.0.2.2")}
}

// BenchmarkSign compares the signer with miekg/dns's RRSIG.Sign over the
// same RRset and key: ECDSA P-256 and Ed25519 over two A records, and an
// RSASHA256 KSK over the DNSKEY RRset.
func BenchmarkSign(b *testing.B) {
	keys := algKeys(b)
	for _, alg := range []string{"ecdsa", "ed25519", "rsa"} {
		k := keys[alg]
		s, err := NewSigner("example.com.", []*Key{k}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		rrs := benchRRset(b)
		if alg == "rsa" {
			rrs, _, _ = s.Apex(3600)
			zsk := testKey(b, "example.com.", dns.ECDSAP256SHA256, false)
			d := *zsk.DNSKEY
			rrs = append(rrs, &d)
		}
		now := time.Now()
		b.Run(alg+"/steer", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if _, err := s.Sign(rrs, now, ReasonOnline); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg+"/miekg", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				sig := &dns.RRSIG{Algorithm: k.DNSKEY.Algorithm, KeyTag: k.Tag, SignerName: s.Zone,
					Inception: uint32(now.Unix()), Expiration: uint32(now.Unix()) + 86400}
				if err := sig.Sign(k.Signer, rrs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSignEntry is the online path's whole cost of a cache miss for
// a compact NXDOMAIN answer: the NSEC, its signature and the entry.
func BenchmarkSignEntry(b *testing.B) {
	k := algKeys(b)["ecdsa"]
	s, err := NewSigner("example.com.", []*Key{k}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		nsec := CompactNSEC("nope.example.com.", 300, TypeNXNAME)
		if _, err := s.SignEntry(DenialKey(nsec.Hdr.Name, 300, nsec.TypeBitMap), []dns.RR{nsec}, now, ReasonDenial); err != nil {
			b.Fatal(err)
		}
	}
}

// TestJitterStable: the jitter is FNV-1a of the name and type, as it was
// when made with hash/fnv, so signatures made before keep their spread.
func TestJitterStable(t *testing.T) {
	s, err := NewSigner("example.com.", []*Key{algKeys(t)["ed25519"]}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := fnv.New64a()
	f.Write([]byte("www.example.com."))
	f.Write([]byte{0, 1})
	span := uint64(float64(DefaultValidity) * DefaultJitter)
	if got, want := s.jitter("www.example.com.", dns.TypeA), time.Duration(f.Sum64()%span); got != want {
		t.Fatalf("jitter %v, want %v", got, want)
	}
}

// reportCPU reports the process CPU time per operation (cpu-ns/op) from
// its call to the call of the function it returns: on a shared machine
// the comparison that holds.
func reportCPU(b *testing.B) func() {
	c0 := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
		}
	}
}

// TestECDSADeterministic: an ECDSA key of crypto/ecdsa signs as RFC 6979
// says: the same data, the same signature, and it verifies.
func TestECDSADeterministic(t *testing.T) {
	k := algKeys(t)["ecdsa"]
	s, err := NewSigner("example.com.", []*Key{k}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rrs := []dns.RR{mustRR(t, "www.example.com. 300 IN A 192.0.2.1")}
	a, err := s.Sign(rrs, now, ReasonLoad)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Sign(rrs, now, ReasonLoad)
	if a[0].(*dns.RRSIG).Signature != b[0].(*dns.RRSIG).Signature {
		t.Error("two signatures of the same data differ")
	}
	if err := a[0].(*dns.RRSIG).Verify(k.DNSKEY, rrs); err != nil {
		t.Fatal(err)
	}
}

// TestSignConcurrent: signers share pooled buffers; signatures made at
// once on several goroutines each verify over their own RRset.
func TestSignConcurrent(t *testing.T) {
	k := algKeys(t)["ed25519"]
	s, err := NewSigner("example.com.", []*Key{k}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				rrs := []dns.RR{
					mustRR(t, "www.example.com. 300 IN TXT \""+strings.Repeat("x", g*40+i)+"\""),
					mustRR(t, "www.example.com. 300 IN TXT \"y\""),
				}
				e, err := s.SignEntry(CacheKey{}, rrs, now, ReasonOnline)
				if err == nil {
					err = e.Sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, rrs)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
