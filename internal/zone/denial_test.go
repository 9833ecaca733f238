package zone_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/zone"
)

const signedZone = `$ORIGIN example.com.
$TTL 3600
@        SOA   ns1 hostmaster 1 7200 3600 1209600 300
@        NS    ns1
ns1      A     192.0.2.53
www      A     192.0.2.1
a.b      A     192.0.2.2
*.w      TXT   "wild"
sub      NS    ns.sub
ns.sub   A     192.0.2.9
sec      NS    ns1.example.net.
sec      DS    12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
alias    CNAME nowhere
walias   CNAME x.w
`

// allow is a zone.Signing that allows every signature and counts them.
type allow struct{ n atomic.Int64 }

func (s *allow) Allow() bool { s.n.Add(1); return true }
func (s *allow) Steered(*zone.Zone, string, uint16, []dns.RR) []dns.RR {
	return nil
}

// steerA answers A for every steered name, and no other type.
type steerA struct{}

func (steerA) Steer(a *zone.Answer, name string, qtype uint16) (string, bool) {
	if qtype != dns.TypeA {
		return "", false
	}
	a.Answer = append(a.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A: net.IPv4(192, 0, 2, 7).To4()})
	return "", true
}

type signedFixture struct {
	set    *zone.Set
	z      *zone.Zone
	key    *dnssec.Key
	signer *dnssec.Signer
}

func newSignedFixture(t testing.TB) *signedFixture {
	t.Helper()
	z, _ := mustParse(t, "example.com.", signedZone)
	if err := z.MarkSteered("steer.example.com.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	// steer4 has pools with IPv4 addresses only.
	if err := z.MarkSteered("steer4.example.com.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	z.SteeredFamilies("steer4.example.com.", true, false)
	key := memKey(t, "example.com.", dns.ECDSAP256SHA256, true)
	s, err := dnssec.NewSigner("example.com.", []*dnssec.Key{key}, dnssec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Cache = dnssec.NewCache(1024)
	if err := z.Sign(s, time.Now(), 1); err != nil {
		t.Fatal(err)
	}
	set := zone.NewSet([]*zone.Zone{z})
	set.Precompile()
	return &signedFixture{set: set, z: z, key: key, signer: s}
}

// verifySigned checks that every RRSIG in rrs verifies with key over the
// RRset it covers, and that every other RRset but NS at a delegation and
// the exceptions has one.
func verifySigned(t testing.TB, key *dnssec.Key, rrs []dns.RR, unsigned ...string) {
	t.Helper()
	type setKey struct {
		name string
		t    uint16
	}
	sets := map[setKey][]dns.RR{}
	signed := map[setKey]bool{}
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeRRSIG {
			k := setKey{strings.ToLower(rr.Header().Name), rr.Header().Rrtype}
			sets[k] = append(sets[k], rr)
		}
	}
	for _, rr := range rrs {
		sig, ok := rr.(*dns.RRSIG)
		if !ok {
			continue
		}
		k := setKey{strings.ToLower(sig.Hdr.Name), sig.TypeCovered}
		if err := sig.Verify(key.DNSKEY, sets[k]); err != nil {
			t.Errorf("RRSIG over %s %s: %v", k.name, dns.TypeToString[k.t], err)
		}
		if !sig.ValidityPeriod(time.Now()) {
			t.Errorf("RRSIG over %s %s not valid now", k.name, dns.TypeToString[k.t])
		}
		if sig.Hdr.Ttl != sets[k][0].Header().Ttl {
			t.Errorf("RRSIG over %s %s has TTL %d, the RRset %d", k.name, dns.TypeToString[k.t], sig.Hdr.Ttl, sets[k][0].Header().Ttl)
		}
		signed[k] = true
	}
	for k := range sets {
		if !signed[k] && !slices.Contains(unsigned, dns.TypeToString[k.t]+" "+k.name) {
			t.Errorf("%s %s has no RRSIG", k.name, dns.TypeToString[k.t])
		}
	}
}

// nsecs returns the NSEC records of rrs.
func nsecs(rrs []dns.RR) []*dns.NSEC {
	var out []*dns.NSEC
	for _, rr := range rrs {
		if n, ok := rr.(*dns.NSEC); ok {
			out = append(out, n)
		}
	}
	return out
}

func typeList(types ...uint16) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = dns.Type(t).String()
	}
	return strings.Join(s, " ")
}

func TestCompactDenialShapes(t *testing.T) {
	f := newSignedFixture(t)
	const nx = "RRSIG NSEC NXNAME"
	for _, tc := range []struct {
		name        string
		qname       string
		qtype       uint16
		co          bool
		rcode       int
		answers     int
		owner, next string // the NSEC; next "" means \000.owner
		types       string
		unsigned    []string // RRsets other parts sign (positive data)
	}{
		{name: "nxdomain", qname: "nope.example.com.", qtype: dns.TypeA, rcode: dns.RcodeSuccess,
			owner: "nope.example.com.", types: nx},
		{name: "nxdomain-co", qname: "Nope.Example.com.", qtype: dns.TypeA, co: true, rcode: dns.RcodeNameError,
			owner: "nope.example.com.", types: nx},
		{name: "nxdomain-deep", qname: "x.y.nope.example.com.", qtype: dns.TypeAAAA, rcode: dns.RcodeSuccess,
			owner: "x.y.nope.example.com.", types: nx},
		{name: "nodata", qname: "www.example.com.", qtype: dns.TypeMX, rcode: dns.RcodeSuccess,
			owner: "www.example.com.", types: "A RRSIG NSEC"},
		{name: "nodata-apex", qname: "example.com.", qtype: dns.TypeTXT, rcode: dns.RcodeSuccess,
			owner: "example.com.", types: "NS SOA RRSIG NSEC DNSKEY CDS CDNSKEY"},
		{name: "empty-non-terminal", qname: "b.example.com.", qtype: dns.TypeA, rcode: dns.RcodeSuccess,
			owner: "b.example.com.", types: "RRSIG NSEC"},
		{name: "wildcard-nodata", qname: "x.w.example.com.", qtype: dns.TypeA, rcode: dns.RcodeSuccess,
			owner: "x.w.example.com.", types: "TXT RRSIG NSEC"},
		{name: "wildcard-positive", qname: "x.w.example.com.", qtype: dns.TypeTXT, rcode: dns.RcodeSuccess, answers: 1,
			owner: pred(t, "x.w.example.com."), next: "x\\000.w.example.com.", types: "RRSIG NSEC"},
		{name: "wildcard-positive-deep", qname: "y.x.w.example.com.", qtype: dns.TypeTXT, rcode: dns.RcodeSuccess, answers: 1,
			owner: pred(t, "x.w.example.com."), next: "x\\000.w.example.com.", types: "RRSIG NSEC"},
		{name: "unsigned-delegation-ds", qname: "sub.example.com.", qtype: dns.TypeDS, rcode: dns.RcodeSuccess,
			owner: "sub.example.com.", types: "NS RRSIG NSEC"},
		{name: "unsigned-delegation-referral", qname: "host.sub.example.com.", qtype: dns.TypeA, rcode: dns.RcodeSuccess,
			owner: "sub.example.com.", types: "NS RRSIG NSEC", unsigned: []string{"NS sub.example.com.", "A ns.sub.example.com."}},
		{name: "steered-nodata-aaaa", qname: "steer.example.com.", qtype: dns.TypeAAAA, rcode: dns.RcodeSuccess,
			owner: "steer.example.com.", types: "A RRSIG NSEC"},
		{name: "steered-nodata-mx", qname: "steer.example.com.", qtype: dns.TypeMX, rcode: dns.RcodeSuccess,
			owner: "steer.example.com.", types: "A AAAA RRSIG NSEC"},
		{name: "steered-v4-only-nodata-mx", qname: "steer4.example.com.", qtype: dns.TypeMX, rcode: dns.RcodeSuccess,
			owner: "steer4.example.com.", types: "A RRSIG NSEC"},
		{name: "cname-to-nxdomain", qname: "alias.example.com.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, answers: 1,
			owner: "nowhere.example.com.", types: nx},
		{name: "cname-to-wildcard", qname: "walias.example.com.", qtype: dns.TypeTXT, rcode: dns.RcodeSuccess, answers: 2,
			owner: pred(t, "x.w.example.com."), next: "x\\000.w.example.com.", types: "RRSIG NSEC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a zone.Answer
			sg := &allow{}
			f.set.LookupWith(&a, tc.qname, tc.qtype, steerA{}, &zone.LookupOptions{DO: true, CO: tc.co, Signing: sg})
			answers := len(a.Answer) - countType(a.Answer, dns.TypeRRSIG)
			if a.Rcode != tc.rcode || answers != tc.answers || a.NeedSignature {
				t.Fatalf("rcode %s, %d answers, NeedSignature %v; want %s, %d answers\n%v",
					dns.RcodeToString[a.Rcode], answers, a.NeedSignature, dns.RcodeToString[tc.rcode], tc.answers, a.Ns)
			}
			ns := nsecs(a.Ns)
			if len(ns) != 1 {
				t.Fatalf("%d NSECs, want 1: %v", len(ns), a.Ns)
			}
			next := tc.next
			if next == "" {
				next = "\\000." + tc.owner
			}
			if ns[0].Hdr.Name != tc.owner || ns[0].NextDomain != next || typeList(ns[0].TypeBitMap...) != tc.types {
				t.Errorf("NSEC %s, want owner %s next %s types %s", ns[0], tc.owner, next, tc.types)
			}
			if ns[0].Hdr.Ttl != 300 {
				t.Errorf("NSEC TTL %d, want the negative TTL 300", ns[0].Hdr.Ttl)
			}
			verifySigned(t, f.key, append(slices.Clone(a.Answer), a.Ns...), tc.unsigned...)
			negative := !strings.Contains(tc.name, "referral") && !strings.Contains(tc.name, "wildcard-positive") && tc.name != "cname-to-wildcard"
			hasSOA := slices.ContainsFunc(a.Ns, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeSOA })
			if negative != hasSOA {
				t.Errorf("SOA in authority: %v, want %v", hasSOA, negative)
			}
		})
	}
}

func TestDenialSignedDelegation(t *testing.T) {
	f := newSignedFixture(t)
	var a zone.Answer
	f.set.LookupWith(&a, "host.sec.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true, Signing: &allow{}})
	if !a.Referral || len(nsecs(a.Ns)) != 0 {
		t.Fatalf("want a referral without NSEC: %v", a.Ns)
	}
	var ds, sigs int
	for _, rr := range a.Ns {
		switch rr := rr.(type) {
		case *dns.DS:
			ds++
		case *dns.RRSIG:
			if rr.TypeCovered == dns.TypeDS {
				sigs++
			}
		}
	}
	if ds != 1 || sigs != 1 {
		t.Fatalf("%d DS and %d RRSIG(DS) in %v, want 1 and 1", ds, sigs, a.Ns)
	}
	verifySigned(t, f.key, a.Ns, "NS sec.example.com.")
}

func TestDenialWithoutDO(t *testing.T) {
	f := newSignedFixture(t)
	var a zone.Answer
	f.set.LookupWith(&a, "nope.example.com.", dns.TypeA, nil, &zone.LookupOptions{Signing: &allow{}})
	checkAnswer(t, a, expect{rcode: dns.RcodeNameError, aa: true, zone: "example.com.",
		ns: []string{"example.com. 300 IN SOA ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 300"}})
	f.set.LookupWith(&a, "host.sub.example.com.", dns.TypeA, nil, nil)
	if len(nsecs(a.Ns)) != 0 || len(a.Ns) != 1 {
		t.Fatalf("referral without DO: %v", a.Ns)
	}
	// An unsigned zone with DO answers as it always did.
	s := mustSet(t, "example.org.", "@ 60 SOA ns1 h 1 2 3 4 5\n@ 60 NS ns1\nns1 60 A 192.0.2.1\n")
	s.LookupWith(&a, "nope.example.org.", dns.TypeA, nil, &zone.LookupOptions{DO: true, Signing: &allow{}})
	if a.Rcode != dns.RcodeNameError || len(a.Ns) != 1 {
		t.Fatalf("unsigned zone with DO: %s %v", dns.RcodeToString[a.Rcode], a.Ns)
	}
}

// TestDenialBudget: a denial that needs a signature the budget refuses is
// marked NeedSignature (the server answers TC=1 over UDP); once one query
// had it made, the cache answers the next without asking.
func TestDenialBudget(t *testing.T) {
	f := newSignedFixture(t)
	var a zone.Answer
	f.set.LookupWith(&a, "budget.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true})
	if !a.NeedSignature || len(nsecs(a.Ns)) != 0 {
		t.Fatalf("refused: NeedSignature %v, NSECs %v", a.NeedSignature, nsecs(a.Ns))
	}
	sg := &allow{}
	before := f.signer.Made(dnssec.ReasonDenial)
	f.set.LookupWith(&a, "budget.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true, Signing: sg})
	if a.NeedSignature || len(nsecs(a.Ns)) != 1 || sg.n.Load() != 1 || f.signer.Made(dnssec.ReasonDenial) != before+1 {
		t.Fatalf("allowed: NeedSignature %v, NSECs %d, asked %d, made %d", a.NeedSignature, len(nsecs(a.Ns)), sg.n.Load(), f.signer.Made(dnssec.ReasonDenial)-before)
	}
	f.set.LookupWith(&a, "budget.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true})
	if a.NeedSignature || len(nsecs(a.Ns)) != 1 || f.signer.Made(dnssec.ReasonDenial) != before+1 {
		t.Fatalf("cached: NeedSignature %v, NSECs %d", a.NeedSignature, len(nsecs(a.Ns)))
	}
	// Another type at the same name has another bitmap only for NODATA;
	// a nonexistent name's NSEC serves every type.
	f.set.LookupWith(&a, "budget.example.com.", dns.TypeMX, nil, &zone.LookupOptions{DO: true})
	if a.NeedSignature {
		t.Fatal("MX at the same nonexistent name needed a new signature")
	}
}

// TestDenialCacheNoAlloc: a denial answered from the cache allocates no
// more than the same lookup without DO.
func TestDenialCacheNoAlloc(t *testing.T) {
	f := newSignedFixture(t)
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"nope.example.com.", dns.TypeA}, {"www.example.com.", dns.TypeMX}, {"b.example.com.", dns.TypeA},
		{"x.w.example.com.", dns.TypeTXT}, {"host.sub.example.com.", dns.TypeA}} {
		var a zone.Answer
		do := &zone.LookupOptions{DO: true, Signing: &allow{}}
		f.set.LookupWith(&a, q.name, q.qtype, nil, do) // fills the cache
		f.set.LookupWith(&a, q.name, q.qtype, nil, nil)
		plain := testing.AllocsPerRun(50, func() { f.set.LookupWith(&a, q.name, q.qtype, nil, nil) })
		f.set.LookupWith(&a, q.name, q.qtype, nil, do)
		signed := testing.AllocsPerRun(50, func() { f.set.LookupWith(&a, q.name, q.qtype, nil, do) })
		if q.qtype == dns.TypeTXT {
			plain++ // the wildcard's RRSIGs renamed to the query name (sigsFor)
		}
		if signed > plain {
			t.Errorf("%s %s: %v allocations with DO from the cache, %v without DO", q.name, dns.TypeToString[q.qtype], signed, plain)
		}
		if a.NeedSignature || len(nsecs(a.Ns)) != 1 {
			t.Errorf("%s: %v", q.name, a.Ns)
		}
	}
}

// pred is dnssec.Predecessor.
func pred(t testing.TB, name string) string {
	p, err := dnssec.Predecessor(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func packLen(name string) (int, error) {
	buf := make([]byte, 512)
	n, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", name, err)
	}
	return n, nil
}

// BenchmarkDenialDO: a compact NXDOMAIN answered from the denial cache,
// beside the same lookup without DO.
func BenchmarkDenialDO(b *testing.B) {
	f := newSignedFixture(b)
	do := &zone.LookupOptions{DO: true, Signing: &allow{}}
	var a zone.Answer
	f.set.LookupWith(&a, "nope.example.com.", dns.TypeA, nil, do)
	for _, bc := range []struct {
		name string
		o    *zone.LookupOptions
	}{{"plain", nil}, {"do-cached", do}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f.set.LookupWith(&a, "nope.example.com.", dns.TypeA, nil, bc.o)
			}
		})
	}
}

// TestDenialLongName: a nonexistent name of 255 octets has no room for
// \000.name; its NSEC ends at the next name of the same length.
func TestDenialLongName(t *testing.T) {
	f := newSignedFixture(t)
	name := "example.com."
	for size := 13; size < 255; {
		l := min(63, 255-size-1)
		name = strings.Repeat("x", l) + "." + name
		size += 1 + l
	}
	if n, err := packLen(name); err != nil || n != 255 {
		t.Fatalf("%d octets, %v", n, err)
	}
	var a zone.Answer
	f.set.LookupWith(&a, name, dns.TypeA, nil, &zone.LookupOptions{DO: true, Signing: &allow{}})
	ns := nsecs(a.Ns)
	if a.Rcode != dns.RcodeSuccess || a.NeedSignature || len(ns) != 1 || ns[0].Hdr.Name != name {
		t.Fatalf("rcode %s NeedSignature %v NSECs %v", dns.RcodeToString[a.Rcode], a.NeedSignature, ns)
	}
	if next := ns[0].NextDomain; !strings.HasPrefix(next, "xx") || strings.HasPrefix(next, `\000`) {
		t.Errorf("next %s", next)
	}
	verifySigned(t, f.key, a.Ns)
}

// TestDenialNSECQuery: a query of type NSEC gets the NSEC as its answer,
// not a NODATA that the NSEC's own bitmap (which lists NSEC) contradicts.
func TestDenialNSECQuery(t *testing.T) {
	f := newSignedFixture(t)
	for _, q := range []struct{ name, types string }{
		{"www.example.com.", "A RRSIG NSEC"},
		{"nope.example.com.", "RRSIG NSEC NXNAME"},
	} {
		var a zone.Answer
		f.set.LookupWith(&a, q.name, dns.TypeNSEC, nil, &zone.LookupOptions{DO: true, Signing: &allow{}})
		ns := nsecs(a.Answer)
		if a.Rcode != dns.RcodeSuccess || len(a.Ns) != 0 || len(ns) != 1 || typeList(ns[0].TypeBitMap...) != q.types {
			t.Fatalf("%s NSEC: rcode %s answer %v authority %v", q.name, dns.RcodeToString[a.Rcode], a.Answer, a.Ns)
		}
		verifySigned(t, f.key, a.Answer)
	}
}

// cacher is a Signing that names the node's denial cache.
type cacher struct {
	allow
	c *dnssec.Cache
}

func (c *cacher) DenialCache() *dnssec.Cache { return c.c }

// TestDenialCacheChoice: denials are kept in the cache the query's Signing
// names (the node's), else the signer's, else one of the process; an
// entry another key signed is never served.
func TestDenialCacheChoice(t *testing.T) {
	f := newSignedFixture(t)
	node := dnssec.NewCache(64)
	sg := &cacher{c: node}
	var a zone.Answer
	f.set.LookupWith(&a, "choice.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true, Signing: sg})
	_, _, nodeInserts := node.Stats()
	_, _, signerInserts := f.signer.Cache.Stats()
	if nodeInserts != 1 || signerInserts != 0 {
		t.Fatalf("inserts: node cache %d, signer's %d; want 1 and 0", nodeInserts, signerInserts)
	}

	// The same zone signed with another key, sharing the node's cache:
	// the first key's NSEC is not served.
	z, _ := mustParse(t, "example.com.", signedZone)
	key2 := memKey(t, "example.com.", dns.ECDSAP256SHA256, true)
	s2, err := dnssec.NewSigner("example.com.", []*dnssec.Key{key2}, dnssec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := z.Sign(s2, time.Now(), 1); err != nil {
		t.Fatal(err)
	}
	set := zone.NewSet([]*zone.Zone{z})
	set.Precompile()
	set.LookupWith(&a, "choice.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true, Signing: sg})
	if s2.Made(dnssec.ReasonDenial) != 1 || len(nsecs(a.Ns)) != 1 {
		t.Fatalf("new key: %d denial signatures, NSECs %v", s2.Made(dnssec.ReasonDenial), nsecs(a.Ns))
	}
	verifySigned(t, &dnssec.Key{DNSKEY: key2.DNSKEY}, a.Ns)

	// No cache named anywhere: the process's keeps the denial.
	s2.Cache = nil
	set.LookupWith(&a, "nocache.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true, Signing: &allow{}})
	set.LookupWith(&a, "nocache.example.com.", dns.TypeA, nil, &zone.LookupOptions{DO: true})
	if a.NeedSignature || s2.Made(dnssec.ReasonDenial) != 2 {
		t.Fatalf("no cache: NeedSignature %v, %d signatures", a.NeedSignature, s2.Made(dnssec.ReasonDenial))
	}
}
