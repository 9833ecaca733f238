package zone

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

// TestSmallZonesCompacted: Precompile copies small zones parsed anew out
// of their parse's blocks (compact.go), and each then answers, record for
// record and query for query, as its parse made it: a zone of the
// parse's own nodes, unprecompiled, is the reference. The fast path's
// templates and the negative SOA are the copies' too.
func TestSmallZonesCompacted(t *testing.T) {
	text := func(i int) []byte {
		return fmt.Appendf(nil, `$ORIGIN c%d.test.
$TTL 3600
@ IN SOA ns1.hosting.test. hostmaster.c%d.test. %d 7200 3600 1209600 300
@ 86400 IN NS ns1.hosting.test.
@ 86400 IN NS ns2
@ IN MX 10 mail
@ IN TXT "v=spf1 mx -all" "two"
@ IN A 10.0.0.%d
www IN A 10.1.0.%d
www IN AAAA 2001:db8::%x
mail IN A 10.2.0.%d
ftp IN CNAME www
ns2 IN A 192.0.2.53
_sip._tcp IN SRV 0 5 5060 www
%d IN PTR www.c%d.test.
*.wild IN A 10.9.0.%d
deep.sub.a IN TXT "below empty names"
`, i, i, i, i, i, i, i, i, i, i)
	}
	const n = 30
	var zones, refs []*Zone
	parsed := map[*node]bool{}
	for i := range n {
		origin := fmt.Sprintf("c%d.test.", i)
		z, errs, _ := Parse(nil, origin, origin+"zone", text(i))
		ref, errs2, _ := Parse(nil, origin, origin+"zone", text(i))
		if len(errs)+len(errs2) > 0 {
			t.Fatal(errs, errs2)
		}
		for _, x := range []*Zone{z, ref} {
			if err := x.MarkSteered("steer."+origin, dns.TypeA); err != nil {
				t.Fatal(err)
			}
		}
		for _, nd := range z.nodes.all {
			parsed[nd] = true
		}
		zones, refs = append(zones, z), append(refs, ref)
	}
	NewSet(zones).Precompile()
	set, refSet := NewSet(zones), NewSet(refs)
	for i, z := range zones {
		for name, nd := range z.nodes.all {
			if parsed[nd] {
				t.Fatalf("%s: node is still the parse's", name)
			}
			if z.nodes.get(name) != nd {
				t.Fatalf("%s: the copied table does not find the node", name)
			}
		}
		if z.apex != z.nodes.get(z.Origin) || z.SOA != z.apex.get(dns.TypeSOA)[0] {
			t.Errorf("%s: apex or SOA is not the copied node's", z.Origin)
		}
		if neg := z.Negative(); !neg.OK || neg.Mname != "ns1.hosting.test." || neg.Rname != "hostmaster."+z.Origin || neg.TTL != 300 {
			t.Errorf("%s: negative SOA %+v", z.Origin, neg)
		}
		got, want := recordsText(z), recordsText(refs[i])
		if len(got) != len(want) {
			t.Fatalf("%s: %d names, want %d", z.Origin, len(got), len(want))
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s reads back as\n%s\nwant\n%s", name, got[name], w)
			}
		}
		for _, q := range []struct {
			name  string
			qtype uint16
		}{
			{"", dns.TypeSOA}, {"", dns.TypeNS}, {"", dns.TypeMX}, {"", dns.TypeTXT}, {"", dns.TypeA},
			{"www.", dns.TypeAAAA}, {"ftp.", dns.TypeA}, {"_sip._tcp.", dns.TypeSRV},
			{fmt.Sprintf("%d.", i), dns.TypePTR}, {"x.wild.", dns.TypeA}, {"a.", dns.TypeTXT},
			{"nope.", dns.TypeA}, {"www.", dns.TypeMX},
		} {
			qname := q.name + z.Origin
			a, b := set.Lookup(qname, q.qtype), refSet.Lookup(qname, q.qtype)
			if fmt.Sprint(a.Rcode, a.Answer, a.Ns, a.Extra) != fmt.Sprint(b.Rcode, b.Answer, b.Ns, b.Extra) {
				t.Errorf("%s %s: %v %v %v %v, want %v %v %v %v", qname, dns.TypeToString[q.qtype],
					a.Rcode, a.Answer, a.Ns, a.Extra, b.Rcode, b.Answer, b.Ns, b.Extra)
			}
		}
		kind, _, nd := set.Classify("www." + z.Origin)
		if kind != FastNode || nd != z.nodes.get("www."+z.Origin) || len(nd.Template(dns.TypeA)) == 0 {
			t.Errorf("www.%s: the fast path finds %v %p, not the copied node with its template", z.Origin, kind, nd)
		}
		// The answers every zone has byte for byte are kept once: the
		// TXT, and the NS where the origin is as long as the first
		// zone's (ns2 under the owner's name, the owner a pointer, and
		// the glue naming ns2 by a pointer past the question), not the
		// addresses of one zone.
		first := zones[0].apex
		for _, q := range []uint16{dns.TypeTXT, dns.TypeNS, dns.TypeA} {
			w, w0 := z.apex.Template(q), first.Template(q)
			want := i == 0 || q == dns.TypeTXT || q == dns.TypeNS && len(z.Origin) == len(first.name)
			if shared := &w[0] == &w0[0]; shared != want {
				t.Errorf("%s %s: template shared with the first zone's: %v", z.Origin, dns.TypeToString[q], shared)
			}
		}
	}
}
