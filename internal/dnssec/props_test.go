// Property tests over random names and RRsets: CPU-bound, so not built
// with the race detector (scripts/test.sh runs them in its plain stage).

//go:build !race

package dnssec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// randomName returns a name below example.com. built from a few octets,
// with lengths up to the limits, to exercise every branch of the epsilon
// functions.
// Every other name is 253 to 255 octets long, where the successor
// cannot just add a label.
func randomName(r *rand.Rand) string {
	alphabet := []byte{0, 1, '-', '0', '@', 'A', 'Z', '[', '`', 'a', 'z', 0xfe, 0xff}
	var labels []string
	size := len("example.com.") + 1
	long := r.IntN(2) == 0
	target := maxName - r.IntN(3)
	for n := r.IntN(5) + 1; n > 0 || long && size < target-1; n-- {
		l := r.IntN(6) + 1
		if r.IntN(8) == 0 {
			l = 50 + r.IntN(14)
		}
		if long && n <= 0 {
			l = min(maxLabel, target-size-1)
		}
		if size+l+1 > maxName {
			break
		}
		size += l + 1
		var b strings.Builder
		for range l {
			c := alphabet[r.IntN(len(alphabet))]
			switch {
			case c == '.' || c == '\\' || c < '!' || c > '~':
				b.WriteString(`\` + string(rune('0'+c/100)) + string(rune('0'+c/10%10)) + string(rune('0'+c%10)))
			default:
				b.WriteByte(c)
			}
		}
		labels = append(labels, b.String())
	}
	return strings.Join(labels, ".") + ".example.com."
}

// TestEpsilonProperties: for random names N, P(N) < N < S(N) and no name
// lies strictly between either pair: neither N's neighbours (N with a
// child, with an octet more or less, with its last octet moved) nor
// the names around P and S.
func TestEpsilonProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for range 400 {
		n := randomName(r)
		p, err := Predecessor(n)
		if err != nil {
			t.Fatalf("Predecessor(%s): %v", n, err)
		}
		s, err := Successor(n)
		if err != nil {
			t.Fatalf("Successor(%s): %v", n, err)
		}
		if canonicalCompare(t, p, n) >= 0 || canonicalCompare(t, n, s) >= 0 {
			t.Fatalf("not P < N < S: %s < %s < %s", p, n, s)
		}
		if wireLen(t, p) > maxName || wireLen(t, s) > maxName {
			t.Fatalf("too long: %s %s", p, s)
		}
		for _, x := range neighbours(r, n, p, s) {
			if _, err := wireName(x); err != nil {
				continue // too long to be a name
			}
			if canonicalCompare(t, p, x) < 0 && canonicalCompare(t, x, n) < 0 {
				t.Fatalf("%s lies between P(%s) = %s and it", x, n, p)
			}
			if canonicalCompare(t, n, x) < 0 && canonicalCompare(t, x, s) < 0 {
				t.Fatalf("%s lies between %s and S = %s", x, n, s)
			}
		}
	}
}

// neighbours returns names near n, p and s in canonical order.
func neighbours(r *rand.Rand, names ...string) []string {
	var out []string
	for _, name := range names {
		out = append(out, `\000.`+name, "a."+name, `\255.`+name)
		w, err := wireName(name)
		if err != nil || len(w) < 2 {
			continue
		}
		l := int(w[0])
		label := w[1 : 1+l]
		variants := [][]byte{
			append(append([]byte(nil), label...), 0),
			append(append([]byte(nil), label...), 0xff),
			label[:l-1],
		}
		for _, d := range []int{-1, 1} {
			v := append([]byte(nil), label...)
			v[l-1] = byte(int(v[l-1]) + d)
			variants = append(variants, v)
		}
		v := append([]byte(nil), label...)
		v[r.IntN(l)] = byte(r.IntN(256))
		variants = append(variants, v)
		for _, v := range variants {
			if len(v) == 0 || len(v) > maxLabel {
				continue
			}
			wire := append([]byte{byte(len(v))}, v...)
			wire = append(wire, w[1+l:]...)
			if s, err := presentation(wire); err == nil {
				out = append(out, s)
			}
		}
	}
	return out
}

// randomRRset returns an RRset of a random type with random data, owner
// and names in mixed case, sometimes a wildcard owner, sometimes
// duplicate records.
func randomRRset(t testing.TB, r *rand.Rand) []dns.RR {
	owners := []string{"www.example.com.", "WwW.ExAmple.COM.", "*.Example.com.", "example.com.", `a\.b.example.com.`, "x.y.z.example.com."}
	owner := owners[r.IntN(len(owners))]
	word := func() string {
		const letters = "aAbBzZ09-"
		var b strings.Builder
		for range r.IntN(12) + 1 {
			b.WriteByte(letters[r.IntN(len(letters))])
		}
		return b.String()
	}
	kinds := []func() string{
		func() string { return fmt.Sprintf("A 192.0.2.%d", r.IntN(256)) },
		func() string { return fmt.Sprintf("AAAA 2001:db8::%x", r.IntN(65536)) },
		func() string { return fmt.Sprintf(`TXT "%s" "%s"`, word(), strings.Repeat("x", r.IntN(300))) },
		func() string { return fmt.Sprintf("NS ns%d.%s.Example.COM.", r.IntN(9), word()) },
		func() string { return fmt.Sprintf("MX %d Mail.%s.example.com.", r.IntN(100), word()) },
		func() string {
			return fmt.Sprintf("SRV %d %d %d Host.%s.example.", r.IntN(9), r.IntN(9), r.IntN(9), word())
		},
		func() string { return fmt.Sprintf("CAA 0 issue \"%s.example\"", word()) },
		func() string { return fmt.Sprintf("DS %d 13 2 %064x", r.IntN(65536), r.Uint64()) },
		func() string { return fmt.Sprintf("PTR %s.Example.NET.", word()) },
	}
	kind := r.IntN(len(kinds))
	ttl := r.IntN(86400)
	var rrs []dns.RR
	for range r.IntN(5) + 1 {
		rrs = append(rrs, mustRR(t, fmt.Sprintf("%s %d IN %s", owner, ttl, kinds[kind]())))
	}
	if r.IntN(4) == 0 {
		rrs = append(rrs, dns.Copy(rrs[0]))
	}
	if r.IntN(8) == 0 {
		return []dns.RR{mustRR(t, fmt.Sprintf("%s %d IN CNAME Target.%s.example.", owner, ttl, word()))}
	}
	if r.IntN(8) == 0 {
		return []dns.RR{mustRR(t, fmt.Sprintf("%s %d IN SOA NS1.Example.com. Host%s.example.com. %d 7200 3600 1209600 300", owner, ttl, word(), r.Uint32()))}
	}
	return rrs
}

// TestFastSignVerifies: for random RRsets, every algorithm, the fast
// signer's RRSIGs verify with miekg/dns's RRSIG.Verify (which rebuilds
// the signed data its own way), whatever the order of the records; a
// changed record does not verify.
func TestFastSignVerifies(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	keys := algKeys(t)
	now := time.Now()
	for alg, k := range keys {
		s, err := NewSigner("example.com.", []*Key{k}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := 150
		if alg == "rsa" {
			n = 10
		}
		for i := range n {
			rrs := randomRRset(t, r)
			sigs, err := s.Sign(rrs, now, ReasonLoad)
			if err != nil {
				t.Fatalf("%s: %v", alg, err)
			}
			sig := sigs[0].(*dns.RRSIG)
			shuffled := append([]dns.RR(nil), rrs...)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if err := sig.Verify(k.DNSKEY, shuffled); err != nil {
				t.Fatalf("%s #%d: %v\n%v\n%v", alg, i, err, rrs, sig)
			}
			// Negative control: one more record breaks it.
			if rrs[0].Header().Rrtype == dns.TypeA {
				extra := mustRR(t, rrs[0].Header().Name+" 1 IN A 198.51.100.7")
				extra.Header().Ttl = rrs[0].Header().Ttl
				if sig.Verify(k.DNSKEY, append(shuffled, extra)) == nil {
					t.Fatalf("%s: verifies over a record it does not cover", alg)
				}
			}
			// SignEntry's wire form is the one NewEntry reads off the RRSIGs.
			if i%10 == 0 {
				e, err := s.SignEntry(CacheKey{Name: "x."}, rrs, now, ReasonOnline)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, rrs); err != nil {
					t.Fatal(err)
				}
				ref := NewEntry(e.Key, rrs, e.Sigs, e.Refresh)
				if len(e.Wire) != 1 || !bytes.Equal(e.Wire[0], ref.Wire[0]) {
					t.Fatalf("%s: SignEntry wire\n%x\nNewEntry wire\n%x", alg, e.Wire[0], ref.Wire[0])
				}
			}
		}
	}
}
