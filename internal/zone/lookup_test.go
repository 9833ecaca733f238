package zone_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/zone"
)

const (
	dsData = "12345 13 2 E2D3C916F6DEEAC73294E8268FB5885044A833FC5459588F4A9184CFC41A5766"

	// SOA TTL 3600 > MINIMUM 300: negative answers carry TTL 300.
	exampleCom = `; test zone
$ORIGIN example.com.
$TTL 3600
@        IN SOA  ns1.example.com. hostmaster.example.com. 2024010101 7200 3600 1209600 300
         IN NS   ns1
         IN NS   ns2.example.net.
         IN MX   10 mail
         IN MX   20 mx.example.org.
ns1      IN A    192.0.2.53
         IN AAAA 2001:db8::53
mail     IN A    192.0.2.25
www      IN A    192.0.2.80
         IN AAAA 2001:db8::80
         IN TXT  "hello"
a.b.c    IN A    192.0.2.99
alias    IN CNAME www
chain1   IN CNAME chain2
chain2   IN CNAME www
ext      IN CNAME www.example.org.
dangling IN CNAME nowhere
dangling2 IN CNAME nowhere.example.net.
mxalias  IN CNAME twomx
other    IN CNAME www.example.net.
loop1    IN CNAME loop2
loop2    IN CNAME loop1
self     IN CNAME self
_sip._tcp IN SRV 10 5 5060 sip
sip      IN A    192.0.2.60
_ext._tcp IN SRV 10 5 5060 sip.example.org.
twomx    IN MX   10 mail
         IN MX   20 mail
         IN MX   30 www
sub      IN NS   ns.sub
         IN NS   ns.example.org.
         IN DS   ` + dsData + `
ns.sub   IN A    192.0.2.200
         IN AAAA 2001:db8::200
nods     IN NS   ns.example.org.
dn  1800 IN DNAME example.net.
dn       IN A    192.0.2.7
dnout    IN DNAME example.org.
*.wc     IN CNAME www
*.wcn    IN TXT  "wild"
`

	// SOA TTL 60 < MINIMUM 600: negative answers carry TTL 60.
	exampleNet = `$ORIGIN example.net.
$TTL 600
@    60 IN SOA ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 600
        IN NS ns1.example.com.
        IN NS ns2
ns2     IN A  198.51.100.53
www     IN A  198.51.100.80
foo     IN A  198.51.100.1
back    IN CNAME www.example.com.
`
)

const (
	comSOA    = "example.com. 3600 IN SOA ns1.example.com. hostmaster.example.com. 2024010101 7200 3600 1209600 300"
	comNegSOA = "example.com. 300 IN SOA ns1.example.com. hostmaster.example.com. 2024010101 7200 3600 1209600 300"
	netNegSOA = "example.net. 60 IN SOA ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 600"
)

func testSet(t testing.TB) *zone.Set {
	t.Helper()
	return mustSet(t, "example.com.", exampleCom, "example.net.", exampleNet)
}

func TestPositiveAnswers(t *testing.T) {
	s := testSet(t)
	wwwA := expect{aa: true, zone: "example.com.", answer: []string{"www.example.com. 3600 IN A 192.0.2.80"}}
	runLookups(t, s, []lookupCase{
		{qname: "www.example.com.", qtype: dns.TypeA, want: wwwA},
		{name: "mixed case", qname: "WwW.ExAmple.COM.", qtype: dns.TypeA, want: wwwA},
		{name: "not fully qualified", qname: "www.example.com", qtype: dns.TypeA, want: wwwA},
		{qname: "www.example.com.", qtype: dns.TypeAAAA, want: expect{aa: true, zone: "example.com.",
			answer: []string{"www.example.com. 3600 IN AAAA 2001:db8::80"}}},
		{qname: "www.example.com.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.com.",
			answer: []string{`www.example.com. 3600 IN TXT "hello"`}}},
		{name: "apex SOA keeps its own TTL", qname: "EXAMPLE.COM.", qtype: dns.TypeSOA, want: expect{aa: true, zone: "example.com.",
			answer: []string{comSOA}}},
		{name: "second zone", qname: "www.example.net.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.net.",
			answer: []string{"www.example.net. 600 IN A 198.51.100.80"}}},
		{name: "DNAME owner A", qname: "dn.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.",
			answer: []string{"dn.example.com. 3600 IN A 192.0.2.7"}}},
	})
}

func TestNegativeAnswers(t *testing.T) {
	s := testSet(t)
	nx := func(soa string) expect {
		z := soa[:strings.IndexByte(soa, ' ')]
		return expect{rcode: dns.RcodeNameError, aa: true, zone: z, ns: []string{soa}}
	}
	nodata := func(soa string) expect {
		z := soa[:strings.IndexByte(soa, ' ')]
		return expect{aa: true, zone: z, ns: []string{soa}}
	}
	runLookups(t, s, []lookupCase{
		{name: "NXDOMAIN, SOA TTL > MINIMUM", qname: "nope.example.com.", qtype: dns.TypeA, want: nx(comNegSOA)},
		{name: "NXDOMAIN deep", qname: "x.y.z.example.com.", qtype: dns.TypeA, want: nx(comNegSOA)},
		{name: "NODATA, SOA TTL > MINIMUM", qname: "www.example.com.", qtype: dns.TypeMX, want: nodata(comNegSOA)},
		{name: "NODATA at apex", qname: "example.com.", qtype: dns.TypeA, want: nodata(comNegSOA)},
		{name: "NXDOMAIN, SOA TTL < MINIMUM", qname: "nope.example.net.", qtype: dns.TypeA, want: nx(netNegSOA)},
		{name: "NODATA, SOA TTL < MINIMUM", qname: "www.example.net.", qtype: dns.TypeMX, want: nodata(netNegSOA)},
		{name: "empty non-terminal b.c", qname: "b.c.example.com.", qtype: dns.TypeA, want: nodata(comNegSOA)},
		{name: "empty non-terminal c", qname: "C.example.com.", qtype: dns.TypeTXT, want: nodata(comNegSOA)},
		{name: "below the terminal", qname: "x.a.b.c.example.com.", qtype: dns.TypeA, want: nx(comNegSOA)},
		{name: "sibling of an empty non-terminal", qname: "z.c.example.com.", qtype: dns.TypeA, want: nx(comNegSOA)},
		{name: "below an empty non-terminal", qname: "x.b.c.example.com.", qtype: dns.TypeA, want: nx(comNegSOA)},
	})
}

func TestNegSOAField(t *testing.T) {
	for _, tc := range []struct {
		origin, data string
		soaTTL, neg  uint32
	}{
		{"example.com.", exampleCom, 3600, 300},
		{"example.net.", exampleNet, 60, 60},
	} {
		z, _ := mustParse(t, tc.origin, tc.data)
		if z.SOA.Hdr.Ttl != tc.soaTTL || z.NegSOA.Hdr.Ttl != tc.neg {
			t.Errorf("%s: SOA TTL %d, NegSOA TTL %d; want %d, %d", tc.origin, z.SOA.Hdr.Ttl, z.NegSOA.Hdr.Ttl, tc.soaTTL, tc.neg)
		}
		if z.NegSOA == z.SOA {
			t.Errorf("%s: NegSOA is the SOA record itself", tc.origin)
		}
	}
}

func TestCNAME(t *testing.T) {
	s := testSet(t)
	runLookups(t, s, []lookupCase{
		{name: "one step", qname: "alias.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"alias.example.com. 3600 IN CNAME www.example.com.",
				"www.example.com. 3600 IN A 192.0.2.80",
			}}},
		{name: "chain in one zone", qname: "chain1.example.com.", qtype: dns.TypeAAAA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"chain1.example.com. 3600 IN CNAME chain2.example.com.",
				"chain2.example.com. 3600 IN CNAME www.example.com.",
				"www.example.com. 3600 IN AAAA 2001:db8::80",
			}}},
		{name: "across zones com to net", qname: "other.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"other.example.com. 3600 IN CNAME www.example.net.",
				"www.example.net. 600 IN A 198.51.100.80",
			}}},
		{name: "across zones net to com", qname: "back.example.net.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.net.", ordered: true,
			answer: []string{
				"back.example.net. 600 IN CNAME www.example.com.",
				"www.example.com. 3600 IN A 192.0.2.80",
			}}},
		{name: "target outside served zones", qname: "ext.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.",
			answer: []string{"ext.example.com. 3600 IN CNAME www.example.org."}}},
		{name: "target does not exist (RFC 6604)", qname: "dangling.example.com.", qtype: dns.TypeA, want: expect{
			rcode: dns.RcodeNameError, aa: true, zone: "example.com.",
			answer: []string{"dangling.example.com. 3600 IN CNAME nowhere.example.com."},
			ns:     []string{comNegSOA}}},
		{name: "target has no data of the type", qname: "alias.example.com.", qtype: dns.TypeMX, want: expect{
			aa: true, zone: "example.com.",
			answer: []string{"alias.example.com. 3600 IN CNAME www.example.com."},
			ns:     []string{comNegSOA}}},
		{name: "target NXDOMAIN in the other zone", qname: "dangling2.example.com.", qtype: dns.TypeA, want: expect{
			rcode: dns.RcodeNameError, aa: true, zone: "example.com.",
			answer: []string{"dangling2.example.com. 3600 IN CNAME nowhere.example.net."},
			ns:     []string{netNegSOA}}},
		{name: "qtype CNAME is not followed", qname: "alias.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.",
			answer: []string{"alias.example.com. 3600 IN CNAME www.example.com."}}},
		{name: "qtype CNAME in mixed case", qname: "ALIAS.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.",
			answer: []string{"alias.example.com. 3600 IN CNAME www.example.com."}}},
		{name: "loop", qname: "loop1.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"loop1.example.com. 3600 IN CNAME loop2.example.com.",
				"loop2.example.com. 3600 IN CNAME loop1.example.com.",
			}}},
		{name: "self loop", qname: "self.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.",
			answer: []string{"self.example.com. 3600 IN CNAME self.example.com."}}},
		{name: "CNAME then TXT", qname: "alias.example.com.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"alias.example.com. 3600 IN CNAME www.example.com.",
				`www.example.com. 3600 IN TXT "hello"`,
			}}},
		{name: "MX through a CNAME gets additional", qname: "mxalias.example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			answer: []string{
				"mxalias.example.com. 3600 IN CNAME twomx.example.com.",
				"twomx.example.com. 3600 IN MX 10 mail.example.com.",
				"twomx.example.com. 3600 IN MX 20 mail.example.com.",
				"twomx.example.com. 3600 IN MX 30 www.example.com.",
			},
			extra: []string{
				"mail.example.com. 3600 IN A 192.0.2.25",
				"www.example.com. 3600 IN A 192.0.2.80",
				"www.example.com. 3600 IN AAAA 2001:db8::80",
			}}},
	})
}

func TestCNAMELongChain(t *testing.T) {
	var b strings.Builder
	b.WriteString("$ORIGIN example.org.\n$TTL 300\n@ IN SOA ns h 1 2 3 4 5\n@ IN NS ns\nns IN A 192.0.2.1\n")
	const n = 40
	for i := 0; i < n; i++ {
		b.WriteString("c" + itoa(i) + " IN CNAME c" + itoa(i+1) + "\n")
	}
	b.WriteString("c" + itoa(n) + " IN A 192.0.2.2\n")
	s := mustSet(t, "example.org.", b.String())
	a := s.Lookup("c0.example.org.", dns.TypeA)
	if a.Rcode != dns.RcodeSuccess || !a.Authoritative {
		t.Errorf("rcode %s, AA %v", dns.RcodeToString[a.Rcode], a.Authoritative)
	}
	if len(a.Answer) == 0 || len(a.Answer) > 20 {
		t.Fatalf("answer has %d records, want a bounded, non-empty chain", len(a.Answer))
	}
	for i, rr := range a.Answer {
		want := "c" + itoa(i) + ".example.org."
		if rr.Header().Name != want || rr.Header().Rrtype != dns.TypeCNAME {
			t.Errorf("answer[%d] = %s, want the CNAME of %s", i, rr, want)
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestDNAME(t *testing.T) {
	s := testSet(t)
	dname := "dn.example.com. 1800 IN DNAME example.net."
	runLookups(t, s, []lookupCase{
		{name: "owner answers normally", qname: "dn.example.com.", qtype: dns.TypeDNAME, want: expect{aa: true, zone: "example.com.",
			answer: []string{dname}}},
		{name: "owner NODATA", qname: "dn.example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			ns: []string{comNegSOA}}},
		{name: "below, target served", qname: "foo.dn.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				dname,
				"foo.dn.example.com. 1800 IN CNAME foo.example.net.",
				"foo.example.net. 600 IN A 198.51.100.1",
			}}},
		{name: "below, mixed case", qname: "FOO.Dn.Example.Com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				dname,
				"foo.dn.example.com. 1800 IN CNAME foo.example.net.",
				"foo.example.net. 600 IN A 198.51.100.1",
			}}},
		{name: "below, target follows a CNAME back", qname: "back.dn.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				dname,
				"back.dn.example.com. 1800 IN CNAME back.example.net.",
				"back.example.net. 600 IN CNAME www.example.com.",
				"www.example.com. 3600 IN A 192.0.2.80",
			}}},
		{name: "below, target NXDOMAIN", qname: "x.y.dn.example.com.", qtype: dns.TypeA, want: expect{
			rcode: dns.RcodeNameError, aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				dname,
				"x.y.dn.example.com. 1800 IN CNAME x.y.example.net.",
			},
			ns: []string{netNegSOA}}},
		{name: "below, target outside served zones", qname: "a.dnout.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"dnout.example.com. 3600 IN DNAME example.org.",
				"a.dnout.example.com. 3600 IN CNAME a.example.org.",
			}}},
	})
}

// TestDNAMEQtypeCNAME checks that a CNAME query below a DNAME is answered
// with the DNAME and the synthesized CNAME, which is not followed (RFC 6672
// §3.4, RFC 1034 §4.3.2 step 3a), as a CNAME asked for is not.
func TestDNAMEQtypeCNAME(t *testing.T) {
	s := testSet(t)
	dname := "dn.example.com. 1800 IN DNAME example.net."
	runLookups(t, s, []lookupCase{
		{name: "target NXDOMAIN is not looked at", qname: "x.y.dn.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{dname, "x.y.dn.example.com. 1800 IN CNAME x.y.example.net."}}},
		{name: "target's CNAME is not followed", qname: "back.dn.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{dname, "back.dn.example.com. 1800 IN CNAME back.example.net."}}},
		{name: "target exists", qname: "foo.dn.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{dname, "foo.dn.example.com. 1800 IN CNAME foo.example.net."}}},
		{name: "out of served zones", qname: "a.dnout.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{"dnout.example.com. 3600 IN DNAME example.org.", "a.dnout.example.com. 3600 IN CNAME a.example.org."}}},
		{name: "a plain CNAME likewise", qname: "chain1.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.",
			answer: []string{"chain1.example.com. 3600 IN CNAME chain2.example.com."}}},
		{name: "a wildcard CNAME likewise", qname: "x.wc.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.",
			answer: []string{"x.wc.example.com. 3600 IN CNAME www.example.com."}}},
		{name: "the DNAME owner has no CNAME", qname: "dn.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.",
			ns: []string{comNegSOA}}},
	})
}

func TestDNAMELength(t *testing.T) {
	l := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	target := l('a', 63) + "." + l('b', 63) + "." + l('c', 63) + ".example.org." // 204 octets as text
	data := "$ORIGIN example.com.\n$TTL 300\n@ IN SOA ns h 1 2 3 4 5\n@ IN NS ns\nns IN A 192.0.2.1\ngrow IN DNAME " + target + "\n"
	s := mustSet(t, "example.com.", data)
	dname := "grow.example.com. 300 IN DNAME " + target

	// Text length 254 is wire length 255: the longest legal name.
	fits := l('x', 49) + ".grow.example.com."
	a := s.Lookup(fits, dns.TypeA)
	checkAnswer(t, a, expect{aa: true, zone: "example.com.", ordered: true, answer: []string{
		dname,
		fits + " 300 IN CNAME " + l('x', 49) + "." + target,
	}})
	if len(a.Answer) == 2 {
		buf := make([]byte, 512)
		if _, err := dns.PackDomainName(a.Answer[1].(*dns.CNAME).Target, buf, 0, nil, false); err != nil {
			t.Errorf("synthesized target does not pack: %v", err)
		}
	}

	// One more octet: YXDOMAIN (RFC 6672 §2.2).
	over := l('x', 50) + ".grow.example.com."
	checkAnswer(t, s.Lookup(over, dns.TypeA), expect{rcode: dns.RcodeYXDomain, aa: true, zone: "example.com.",
		answer: []string{dname}})
}

// rfc4592 is the example zone of RFC 4592 §2.2.1, with the placeholders filled in.
const rfc4592 = `$ORIGIN example.
example.                 3600 IN  SOA   ns.example.com. hostmaster.example.com. 1 7200 3600 1209600 300
example.                 3600     NS    ns.example.com.
example.                 3600     NS    ns.example.net.
*.example.               3600     TXT   "this is a wildcard"
*.example.               3600     MX    10 host1.example.
sub.*.example.           3600     TXT   "this is not a wildcard"
host1.example.           3600     A     192.0.2.1
_ssh._tcp.host1.example. 3600     SRV   0 0 22 host1.example.
_ssh._tcp.host2.example. 3600     SRV   0 0 22 host2.example.
subdel.example.          3600     NS    ns.example.com.
subdel.example.          3600     NS    ns.example.net.
`

func TestWildcardRFC4592(t *testing.T) {
	s := mustSet(t, "example.", rfc4592)
	neg := "example. 300 IN SOA ns.example.com. hostmaster.example.com. 1 7200 3600 1209600 300"
	nodata := expect{aa: true, zone: "example.", ns: []string{neg}}
	nx := expect{rcode: dns.RcodeNameError, aa: true, zone: "example.", ns: []string{neg}}
	runLookups(t, s, []lookupCase{
		// Synthesized from *.example.
		{name: "host3 MX synthesized", qname: "host3.example.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.",
			answer: []string{"host3.example. 3600 IN MX 10 host1.example."},
			extra:  []string{"host1.example. 3600 IN A 192.0.2.1"}}},
		{name: "host3 A is NODATA from the wildcard", qname: "host3.example.", qtype: dns.TypeA, want: nodata},
		{name: "foo.bar TXT synthesized", qname: "foo.bar.example.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.",
			answer: []string{`foo.bar.example. 3600 IN TXT "this is a wildcard"`}}},
		// Not synthesized.
		{name: "host1 MX: host1 exists", qname: "host1.example.", qtype: dns.TypeMX, want: nodata},
		{name: "sub.* MX: sub.* exists", qname: "sub.*.example.", qtype: dns.TypeMX, want: nodata},
		{name: "_telnet._tcp.host1 SRV: _tcp.host1 exists", qname: "_telnet._tcp.host1.example.", qtype: dns.TypeSRV, want: nx},
		{name: "host.subdel A: subdel is a cut", qname: "host.subdel.example.", qtype: dns.TypeA, want: expect{
			referral: true, zone: "example.",
			ns: []string{"subdel.example. 3600 IN NS ns.example.com.", "subdel.example. 3600 IN NS ns.example.net."}}},
		{name: "ghost.* MX: *.example exists", qname: "ghost.*.example.", qtype: dns.TypeMX, want: nx},
		// More of the same zone.
		{name: "empty non-terminal host2", qname: "host2.example.", qtype: dns.TypeTXT, want: nodata},
		{name: "empty non-terminal _tcp.host2", qname: "_tcp.host2.example.", qtype: dns.TypeTXT, want: nodata},
		{name: "sub.* TXT is its own data", qname: "sub.*.example.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.",
			answer: []string{`sub.*.example. 3600 IN TXT "this is not a wildcard"`}}},
		{name: "the wildcard owner itself", qname: "*.example.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.",
			answer: []string{`*.example. 3600 IN TXT "this is a wildcard"`}}},
		{name: "existing SRV", qname: "_ssh._tcp.host1.example.", qtype: dns.TypeSRV, want: expect{aa: true, zone: "example.",
			answer: []string{"_ssh._tcp.host1.example. 3600 IN SRV 0 0 22 host1.example."},
			extra:  []string{"host1.example. 3600 IN A 192.0.2.1"}}},
		{name: "subdel itself", qname: "subdel.example.", qtype: dns.TypeTXT, want: expect{
			referral: true, zone: "example.",
			ns: []string{"subdel.example. 3600 IN NS ns.example.com.", "subdel.example. 3600 IN NS ns.example.net."}}},
		{name: "synthesized owner is the query name in canonical case", qname: "HoSt3.Example.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.",
			answer: []string{`host3.example. 3600 IN TXT "this is a wildcard"`}}},
	})
}

func TestWildcardInZone(t *testing.T) {
	s := testSet(t)
	runLookups(t, s, []lookupCase{
		{name: "wildcard CNAME", qname: "foo.wc.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"foo.wc.example.com. 3600 IN CNAME www.example.com.",
				"www.example.com. 3600 IN A 192.0.2.80",
			}}},
		{name: "wildcard CNAME deep", qname: "a.b.wc.example.com.", qtype: dns.TypeAAAA, want: expect{aa: true, zone: "example.com.", ordered: true,
			answer: []string{
				"a.b.wc.example.com. 3600 IN CNAME www.example.com.",
				"www.example.com. 3600 IN AAAA 2001:db8::80",
			}}},
		{name: "wildcard CNAME qtype CNAME", qname: "foo.wc.example.com.", qtype: dns.TypeCNAME, want: expect{aa: true, zone: "example.com.",
			answer: []string{"foo.wc.example.com. 3600 IN CNAME www.example.com."}}},
		{name: "wildcard data", qname: "q.wcn.example.com.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.com.",
			answer: []string{`q.wcn.example.com. 3600 IN TXT "wild"`}}},
		{name: "wildcard NODATA", qname: "q.wcn.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.",
			ns: []string{comNegSOA}}},
		{name: "parent of wildcard is an empty non-terminal", qname: "wcn.example.com.", qtype: dns.TypeTXT, want: expect{aa: true, zone: "example.com.",
			ns: []string{comNegSOA}}},
	})
	// Synthesized records are copies: the zone's wildcard keeps its owner.
	s.Lookup("foo.wcn.example.com.", dns.TypeTXT)
	checkAnswer(t, s.Lookup("*.wcn.example.com.", dns.TypeTXT), expect{aa: true, zone: "example.com.",
		answer: []string{`*.wcn.example.com. 3600 IN TXT "wild"`}})
}

const subZone = `$ORIGIN sub.example.com.
$TTL 900
@   IN SOA ns.sub.example.com. hostmaster.example.com. 7 7200 3600 1209600 120
    IN NS  ns.sub.example.com.
ns  IN A   192.0.2.210
www IN A   192.0.2.211
`

func TestDelegation(t *testing.T) {
	s := testSet(t)
	subNS := []string{"sub.example.com. 3600 IN NS ns.sub.example.com.", "sub.example.com. 3600 IN NS ns.example.org."}
	glue := []string{"ns.sub.example.com. 3600 IN A 192.0.2.200", "ns.sub.example.com. 3600 IN AAAA 2001:db8::200"}
	ref := expect{referral: true, zone: "example.com.", ns: subNS, extra: glue}
	runLookups(t, s, []lookupCase{
		{name: "at the cut", qname: "sub.example.com.", qtype: dns.TypeA, want: ref},
		{name: "NS at the cut", qname: "sub.example.com.", qtype: dns.TypeNS, want: ref},
		{name: "ANY at the cut", qname: "sub.example.com.", qtype: dns.TypeANY, want: ref},
		{name: "below the cut", qname: "www.sub.example.com.", qtype: dns.TypeA, want: ref},
		{name: "deep below the cut", qname: "a.b.c.Sub.example.com.", qtype: dns.TypeMX, want: ref},
		{name: "glue name is not answered", qname: "ns.sub.example.com.", qtype: dns.TypeA, want: ref},
		{name: "DS below the cut", qname: "www.sub.example.com.", qtype: dns.TypeDS, want: ref},
		{name: "out-of-zone NS only: no glue", qname: "nods.example.com.", qtype: dns.TypeA, want: expect{
			referral: true, zone: "example.com.", ns: []string{"nods.example.com. 3600 IN NS ns.example.org."}}},
		{name: "DS at the cut", qname: "sub.example.com.", qtype: dns.TypeDS, want: expect{aa: true, zone: "example.com.",
			answer: []string{"sub.example.com. 3600 IN DS " + dsData}}},
		{name: "no DS at the cut", qname: "nods.example.com.", qtype: dns.TypeDS, want: expect{aa: true, zone: "example.com.",
			ns: []string{comNegSOA}}},
	})
}

func TestParentAndChildServed(t *testing.T) {
	s := mustSet(t, "example.com.", exampleCom, "example.net.", exampleNet, "sub.example.com.", subZone)
	childNeg := "sub.example.com. 120 IN SOA ns.sub.example.com. hostmaster.example.com. 7 7200 3600 1209600 120"
	runLookups(t, s, []lookupCase{
		{name: "DS for the child apex comes from the parent", qname: "sub.example.com.", qtype: dns.TypeDS, want: expect{
			aa: true, zone: "example.com.", answer: []string{"sub.example.com. 3600 IN DS " + dsData}}},
		{name: "DS for the child apex, mixed case", qname: "SUB.example.com.", qtype: dns.TypeDS, want: expect{
			aa: true, zone: "example.com.", answer: []string{"sub.example.com. 3600 IN DS " + dsData}}},
		{name: "NS at the child apex comes from the child", qname: "sub.example.com.", qtype: dns.TypeNS, want: expect{
			aa: true, zone: "sub.example.com.",
			answer: []string{"sub.example.com. 900 IN NS ns.sub.example.com."},
			extra:  []string{"ns.sub.example.com. 900 IN A 192.0.2.210"}}},
		{name: "SOA at the child apex", qname: "sub.example.com.", qtype: dns.TypeSOA, want: expect{
			aa: true, zone: "sub.example.com.",
			answer: []string{"sub.example.com. 900 IN SOA ns.sub.example.com. hostmaster.example.com. 7 7200 3600 1209600 120"}}},
		{name: "names below come from the child", qname: "www.sub.example.com.", qtype: dns.TypeA, want: expect{
			aa: true, zone: "sub.example.com.", answer: []string{"www.sub.example.com. 900 IN A 192.0.2.211"}}},
		{name: "child NXDOMAIN", qname: "nope.sub.example.com.", qtype: dns.TypeA, want: expect{
			rcode: dns.RcodeNameError, aa: true, zone: "sub.example.com.", ns: []string{childNeg}}},
		{name: "DS below the child apex comes from the child", qname: "www.sub.example.com.", qtype: dns.TypeDS, want: expect{
			aa: true, zone: "sub.example.com.", ns: []string{childNeg}}},
	})
}

// TestDSAfterCNAME checks that a DS query that a CNAME chain leads to a
// child zone's apex is answered there from the parent side, as the query
// name itself is (RFC 4035 §3.1.4.1).
func TestDSAfterCNAME(t *testing.T) {
	const parent = `$ORIGIN parent.example.
$TTL 3600
@       SOA ns1 h 1 2 3 4 60
        NS  ns1
ns1     A   192.0.2.1
child   NS  ns1.child
child   DS  ` + dsData + `
ns1.child A 192.0.2.2
alias   CNAME child
`
	const child = `$ORIGIN child.parent.example.
$TTL 600
@       SOA ns1 h 1 2 3 4 60
        NS  ns1
ns1     A   192.0.2.2
www     CNAME @
`
	ds := "child.parent.example. 3600 IN DS " + dsData
	childNeg := "child.parent.example. 60 IN SOA ns1.child.parent.example. h.child.parent.example. 1 2 3 4 60"
	both := mustSet(t, "parent.example.", parent, "child.parent.example.", child)
	runLookups(t, both, []lookupCase{
		{name: "CNAME in the child to its apex", qname: "www.child.parent.example.", qtype: dns.TypeDS, want: expect{aa: true, zone: "child.parent.example.", ordered: true,
			answer: []string{"www.child.parent.example. 600 IN CNAME child.parent.example.", ds}}},
		{name: "CNAME in the parent to the cut", qname: "alias.parent.example.", qtype: dns.TypeDS, want: expect{aa: true, zone: "parent.example.", ordered: true,
			answer: []string{"alias.parent.example. 3600 IN CNAME child.parent.example.", ds}}},
		{name: "the apex itself", qname: "child.parent.example.", qtype: dns.TypeDS, want: expect{aa: true, zone: "parent.example.",
			answer: []string{ds}}},
		{name: "other types after the CNAME stay in the child", qname: "www.child.parent.example.", qtype: dns.TypeNS, want: expect{aa: true, zone: "child.parent.example.", ordered: true,
			answer: []string{"www.child.parent.example. 600 IN CNAME child.parent.example.", "child.parent.example. 600 IN NS ns1.child.parent.example."},
			extra:  []string{"ns1.child.parent.example. 600 IN A 192.0.2.2"}}},
	})
	alone := mustSet(t, "child.parent.example.", child)
	runLookups(t, alone, []lookupCase{
		{name: "parent not served: the child's NODATA", qname: "www.child.parent.example.", qtype: dns.TypeDS, want: expect{aa: true, zone: "child.parent.example.", ordered: true,
			answer: []string{"www.child.parent.example. 600 IN CNAME child.parent.example."},
			ns:     []string{childNeg}}},
	})
}

func TestAny(t *testing.T) {
	s := testSet(t)
	for _, q := range []string{"www.example.com.", "example.com.", "ns1.example.com.", "twomx.example.com.", "alias.example.com.", "foo.wcn.example.com."} {
		t.Run(q, func(t *testing.T) {
			a := s.Lookup(q, dns.TypeANY)
			if a.Rcode != dns.RcodeSuccess || !a.Authoritative || a.Referral || len(a.Ns) != 0 {
				t.Fatalf("rcode %s AA %v referral %v ns %v", dns.RcodeToString[a.Rcode], a.Authoritative, a.Referral, a.Ns)
			}
			if len(a.Answer) == 0 {
				t.Fatal("empty answer")
			}
			rt := a.Answer[0].Header().Rrtype
			for _, rr := range a.Answer {
				if rr.Header().Rrtype != rt || rr.Header().Name != q {
					t.Fatalf("ANY answer holds more than one RRset: %v", a.Answer)
				}
			}
			// It is the whole RRset of that type, and nothing is followed.
			want := s.Lookup(q, rt)
			if rt == dns.TypeCNAME {
				want = s.Lookup(q, dns.TypeCNAME)
			}
			checkSection(t, "answer", a.Answer, rrStrings(want.Answer), false)
		})
	}
	runLookups(t, s, []lookupCase{
		{name: "ANY at an empty non-terminal", qname: "b.c.example.com.", qtype: dns.TypeANY, want: expect{aa: true, zone: "example.com.",
			ns: []string{comNegSOA}}},
		{name: "ANY at a missing name", qname: "nope.example.com.", qtype: dns.TypeANY, want: expect{rcode: dns.RcodeNameError, aa: true, zone: "example.com.",
			ns: []string{comNegSOA}}},
	})
}

func TestAdditional(t *testing.T) {
	s := testSet(t)
	runLookups(t, s, []lookupCase{
		// Only the answering zone's own addresses (Knot, NSD): ns2.example.net
		// is served too, but by another zone.
		{name: "NS targets: only the zone's own", qname: "example.com.", qtype: dns.TypeNS, want: expect{aa: true, zone: "example.com.",
			answer: []string{"example.com. 3600 IN NS ns1.example.com.", "example.com. 3600 IN NS ns2.example.net."},
			extra: []string{
				"ns1.example.com. 3600 IN A 192.0.2.53",
				"ns1.example.com. 3600 IN AAAA 2001:db8::53",
			}}},
		{name: "NS of the second zone", qname: "example.net.", qtype: dns.TypeNS, want: expect{aa: true, zone: "example.net.",
			answer: []string{"example.net. 600 IN NS ns1.example.com.", "example.net. 600 IN NS ns2.example.net."},
			extra: []string{
				"ns2.example.net. 600 IN A 198.51.100.53",
			}}},
		{name: "MX, one target outside", qname: "example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			answer: []string{"example.com. 3600 IN MX 10 mail.example.com.", "example.com. 3600 IN MX 20 mx.example.org."},
			extra:  []string{"mail.example.com. 3600 IN A 192.0.2.25"}}},
		{name: "MX targets not duplicated", qname: "twomx.example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			answer: []string{
				"twomx.example.com. 3600 IN MX 10 mail.example.com.",
				"twomx.example.com. 3600 IN MX 20 mail.example.com.",
				"twomx.example.com. 3600 IN MX 30 www.example.com.",
			},
			extra: []string{
				"mail.example.com. 3600 IN A 192.0.2.25",
				"www.example.com. 3600 IN A 192.0.2.80",
				"www.example.com. 3600 IN AAAA 2001:db8::80",
			}}},
		{name: "SRV target in zone", qname: "_sip._tcp.example.com.", qtype: dns.TypeSRV, want: expect{aa: true, zone: "example.com.",
			answer: []string{"_sip._tcp.example.com. 3600 IN SRV 10 5 5060 sip.example.com."},
			extra:  []string{"sip.example.com. 3600 IN A 192.0.2.60"}}},
		{name: "SRV target outside", qname: "_ext._tcp.example.com.", qtype: dns.TypeSRV, want: expect{aa: true, zone: "example.com.",
			answer: []string{"_ext._tcp.example.com. 3600 IN SRV 10 5 5060 sip.example.org."}}},
		{name: "A answers get no additional", qname: "ns1.example.com.", qtype: dns.TypeA, want: expect{aa: true, zone: "example.com.",
			answer: []string{"ns1.example.com. 3600 IN A 192.0.2.53"}}},
	})
}

// TestAdditionalOwnZoneOnly checks that additional addresses come only from
// the zone that answered the record, and never from glue: a node below a
// delegation, or the delegation point itself (PowerDNS's no-out-of-zone-data
// test; Knot and NSD answer so).
func TestAdditionalOwnZoneOnly(t *testing.T) {
	const com = `$ORIGIN example.com.
$TTL 300
@        SOA ns1 h 1 2 3 4 60
         NS  ns1
         NS  ns2
ns1      A   192.0.2.1
ns2      A   192.0.2.2
_imap._tcp SRV 0 0 143 blah.test.com.
mx       MX  10 blah.test.com.
atcut    MX  10 deleg
belowcut MX  10 ns.deleg
deleg    NS  ns.deleg
deleg    A   192.0.2.9
ns.deleg A   192.0.2.10
alias    CNAME mx.test.com.
`
	const test = `$ORIGIN test.com.
$TTL 300
@        SOA ns1.example.com. h 1 2 3 4 60
         NS  ns1.example.com.
mx       MX  10 mail
mail     A   192.0.2.25
blah     NS  ns.blah
blah     A   192.0.2.30
ns.blah  A   192.0.2.31
`
	const minimal = `$ORIGIN minimal.com.
$TTL 300
@        SOA ns1.example.com. h 1 2 3 4 60
         NS  ns1.example.com.
         NS  ns2.example.com.
`
	zs := []*zone.Zone{}
	for _, p := range [][2]string{{"example.com.", com}, {"test.com.", test}, {"minimal.com.", minimal}} {
		z, _ := mustParse(t, p[0], p[1])
		zs = append(zs, z)
	}
	s := zone.NewSet(zs)
	runLookups(t, s, []lookupCase{
		{name: "SRV target is glue in another zone", qname: "_imap._tcp.example.com.", qtype: dns.TypeSRV, want: expect{aa: true, zone: "example.com.",
			answer: []string{"_imap._tcp.example.com. 300 IN SRV 0 0 143 blah.test.com."}}},
		{name: "MX target in another zone", qname: "mx.example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			answer: []string{"mx.example.com. 300 IN MX 10 blah.test.com."}}},
		{name: "NS targets in another zone", qname: "minimal.com.", qtype: dns.TypeNS, want: expect{aa: true, zone: "minimal.com.",
			answer: []string{"minimal.com. 300 IN NS ns1.example.com.", "minimal.com. 300 IN NS ns2.example.com."}}},
		{name: "MX target at a delegation point", qname: "atcut.example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			answer: []string{"atcut.example.com. 300 IN MX 10 deleg.example.com."}}},
		{name: "MX target below a delegation point", qname: "belowcut.example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			answer: []string{"belowcut.example.com. 300 IN MX 10 ns.deleg.example.com."}}},
		{name: "NS targets in the zone itself", qname: "example.com.", qtype: dns.TypeNS, want: expect{aa: true, zone: "example.com.",
			answer: []string{"example.com. 300 IN NS ns1.example.com.", "example.com. 300 IN NS ns2.example.com."},
			extra:  []string{"ns1.example.com. 300 IN A 192.0.2.1", "ns2.example.com. 300 IN A 192.0.2.2"}}},
		{name: "after a CNAME, from the zone of the MX", qname: "alias.example.com.", qtype: dns.TypeMX, want: expect{aa: true, zone: "example.com.",
			ordered: true,
			answer:  []string{"alias.example.com. 300 IN CNAME mx.test.com.", "mx.test.com. 300 IN MX 10 mail.test.com."},
			extra:   []string{"mail.test.com. 300 IN A 192.0.2.25"}}},
		{name: "referral keeps its glue", qname: "x.deleg.example.com.", qtype: dns.TypeA, want: expect{referral: true, zone: "example.com.",
			ns:    []string{"deleg.example.com. 300 IN NS ns.deleg.example.com."},
			extra: []string{"ns.deleg.example.com. 300 IN A 192.0.2.10"}}},
	})
}

// TestAdditionalSVCB checks that SVCB and HTTPS answers carry the in-zone
// addresses of their TargetName, or of their owner for "." in ServiceMode
// (RFC 9460 §4.1), as Knot does.
func TestAdditionalSVCB(t *testing.T) {
	const z = `$ORIGIN svcb.example.
$TTL 300
@        SOA ns1 h 1 2 3 4 60
         NS  ns1
ns1      A   192.0.2.1
foo      SVCB 0 foo1
foo      A   192.0.2.10
foo1     SVCB 1 . alpn=h2,h3
foo1     A   192.0.2.11
foo1     AAAA 2001:db8::11
www      HTTPS 1 cdn port=8443
         HTTPS 2 cdn.example.org.
cdn      AAAA 2001:db8::12
gone     HTTPS 0 .
gone     A   192.0.2.13
deleg    NS  ns.deleg
ns.deleg A   192.0.2.14
glue     SVCB 1 ns.deleg
chain    SVCB 0 foo
`
	s := mustSet(t, "svcb.example.", z)
	runLookups(t, s, []lookupCase{
		{name: "AliasMode target", qname: "foo.svcb.example.", qtype: dns.TypeSVCB, want: expect{aa: true, zone: "svcb.example.",
			answer: []string{"foo.svcb.example. 300 IN SVCB 0 foo1.svcb.example."},
			extra: []string{"foo1.svcb.example. 300 IN A 192.0.2.11", "foo1.svcb.example. 300 IN AAAA 2001:db8::11",
				"foo1.svcb.example. 300 IN SVCB 1 . alpn=h2,h3"}}},
		{name: "AliasMode target's own alias is not followed", qname: "chain.svcb.example.", qtype: dns.TypeSVCB, want: expect{aa: true, zone: "svcb.example.",
			answer: []string{"chain.svcb.example. 300 IN SVCB 0 foo.svcb.example."},
			extra:  []string{"foo.svcb.example. 300 IN A 192.0.2.10", "foo.svcb.example. 300 IN SVCB 0 foo1.svcb.example."}}},
		{name: "ServiceMode . is the owner", qname: "foo1.svcb.example.", qtype: dns.TypeSVCB, want: expect{aa: true, zone: "svcb.example.",
			answer: []string{"foo1.svcb.example. 300 IN SVCB 1 . alpn=h2,h3"},
			extra:  []string{"foo1.svcb.example. 300 IN A 192.0.2.11", "foo1.svcb.example. 300 IN AAAA 2001:db8::11"}}},
		{name: "HTTPS, targets in and out of the zone", qname: "www.svcb.example.", qtype: dns.TypeHTTPS, want: expect{aa: true, zone: "svcb.example.",
			answer: []string{"www.svcb.example. 300 IN HTTPS 1 cdn.svcb.example. port=8443", "www.svcb.example. 300 IN HTTPS 2 cdn.example.org."},
			extra:  []string{"cdn.svcb.example. 300 IN AAAA 2001:db8::12"}}},
		{name: "AliasMode . says no service", qname: "gone.svcb.example.", qtype: dns.TypeHTTPS, want: expect{aa: true, zone: "svcb.example.",
			answer: []string{"gone.svcb.example. 300 IN HTTPS 0 ."}}},
		{name: "target below a cut is glue", qname: "glue.svcb.example.", qtype: dns.TypeSVCB, want: expect{aa: true, zone: "svcb.example.",
			answer: []string{"glue.svcb.example. 300 IN SVCB 1 ns.deleg.svcb.example."}}},
	})
}

func TestRefused(t *testing.T) {
	s := testSet(t)
	for _, q := range []string{"www.example.org.", "org.", "com.", ".", "example.com.au.", "xexample.com."} {
		checkAnswer(t, s.Lookup(q, dns.TypeA), expect{rcode: dns.RcodeRefused})
	}
	var empty *zone.Set
	checkAnswer(t, empty.Lookup("www.example.com.", dns.TypeA), expect{rcode: dns.RcodeRefused})
	checkAnswer(t, zone.NewSet(nil).Lookup("www.example.com.", dns.TypeA), expect{rcode: dns.RcodeRefused})
}

func TestSetFindAndZones(t *testing.T) {
	s := mustSet(t, "example.com.", exampleCom, "sub.example.com.", subZone, "example.net.", exampleNet)
	var origins []string
	for _, z := range s.Zones() {
		origins = append(origins, z.Origin)
	}
	if strings.Join(origins, " ") != "example.com. sub.example.com. example.net." {
		t.Errorf("Zones() = %v, want configuration order", origins)
	}
	for name, want := range map[string]string{
		"example.com.":           "example.com.",
		"a.b.example.com.":       "example.com.",
		"sub.example.com.":       "sub.example.com.",
		"x.sub.example.com.":     "sub.example.com.",
		"xsub.example.com.":      "example.com.",
		"example.net.":           "example.net.",
		"example.org.":           "",
		"com.":                   "",
		".":                      "",
		"a.example.com.example.": "",
	} {
		got := ""
		if z := s.Find(name); z != nil {
			got = z.Origin
		}
		if got != want {
			t.Errorf("Find(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestRootZone(t *testing.T) {
	root := `$TTL 86400
.        IN SOA a.root-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 86400
.        IN NS  a.root-servers.net.
com.     IN NS  a.gtld-servers.net.
com.     IN DS  ` + dsData + `
*.test.  IN TXT "wild root"
*.       IN TXT "wild top"
`
	com := `$ORIGIN com.
$TTL 300
@ IN SOA a.gtld-servers.net. nstld.verisign-grs.com. 1 1800 900 604800 86400
@ IN NS a.gtld-servers.net.
`
	s := mustSet(t, ".", root, "com.", com)
	runLookups(t, s, []lookupCase{
		{name: "root apex NS", qname: ".", qtype: dns.TypeNS, want: expect{aa: true, zone: ".",
			answer: []string{". 86400 IN NS a.root-servers.net."}}},
		{name: "wildcard in the root zone", qname: "x.test.", qtype: dns.TypeTXT, want: expect{aa: true, zone: ".",
			answer: []string{`x.test. 86400 IN TXT "wild root"`}}},
		{name: "wildcard at the root apex", qname: "nosuchtld.", qtype: dns.TypeTXT, want: expect{aa: true, zone: ".",
			answer: []string{`nosuchtld. 86400 IN TXT "wild top"`}}},
		{name: "DS for a TLD served as a zone comes from the root", qname: "com.", qtype: dns.TypeDS, want: expect{aa: true, zone: ".",
			answer: []string{"com. 86400 IN DS " + dsData}}},
		{name: "NS for the TLD comes from the TLD zone", qname: "com.", qtype: dns.TypeNS, want: expect{aa: true, zone: "com.",
			answer: []string{"com. 300 IN NS a.gtld-servers.net."}}},
	})
}

func TestLookupIntoReuse(t *testing.T) {
	s := testSet(t)
	var a zone.Answer
	s.LookupInto(&a, "example.com.", dns.TypeNS)
	s.LookupInto(&a, "nope.example.com.", dns.TypeA)
	checkAnswer(t, a, expect{rcode: dns.RcodeNameError, aa: true, zone: "example.com.", ns: []string{comNegSOA}})
	s.LookupInto(&a, "sub.example.com.", dns.TypeA)
	checkAnswer(t, a, expect{referral: true, zone: "example.com.",
		ns:    []string{"sub.example.com. 3600 IN NS ns.sub.example.com.", "sub.example.com. 3600 IN NS ns.example.org."},
		extra: []string{"ns.sub.example.com. 3600 IN A 192.0.2.200", "ns.sub.example.com. 3600 IN AAAA 2001:db8::200"}})
	s.LookupInto(&a, "www.example.org.", dns.TypeA)
	checkAnswer(t, a, expect{rcode: dns.RcodeRefused})
	// The zone's data is intact after all that reuse.
	checkAnswer(t, s.Lookup("example.com.", dns.TypeNS), expect{aa: true, zone: "example.com.",
		answer: []string{"example.com. 3600 IN NS ns1.example.com.", "example.com. 3600 IN NS ns2.example.net."},
		extra: []string{
			"ns1.example.com. 3600 IN A 192.0.2.53",
			"ns1.example.com. 3600 IN AAAA 2001:db8::53",
		}})
}

func TestConcurrentLookups(t *testing.T) {
	s := testSet(t)
	qs := []struct {
		name string
		t    uint16
	}{
		{"www.example.com.", dns.TypeA}, {"foo.wc.example.com.", dns.TypeA}, {"foo.dn.example.com.", dns.TypeA},
		{"sub.example.com.", dns.TypeA}, {"nope.example.com.", dns.TypeA}, {"example.com.", dns.TypeNS},
		{"q.wcn.example.com.", dns.TypeTXT},
	}
	want := make([][]string, len(qs))
	for i, q := range qs {
		want[i] = rrStrings(s.Lookup(q.name, q.t).Answer)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a zone.Answer
			for i := 0; i < 200; i++ {
				q := qs[i%len(qs)]
				s.LookupInto(&a, q.name, q.t)
				if got := rrStrings(a.Answer); strings.Join(got, "|") != strings.Join(want[i%len(qs)], "|") {
					t.Errorf("%s: concurrent answer %v, want %v", q.name, got, want[i%len(qs)])
					return
				}
			}
		}()
	}
	wg.Wait()
}
