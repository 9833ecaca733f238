package zone_test

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/zone"
)

// A failed zone answers SERVFAIL for every name in it and type, never
// REFUSED and never its parent zone's answer; chains into it stop there.
func TestFailedZone(t *testing.T) {
	parent, _ := mustParse(t, "example.com.", `$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.2
to-lab IN CNAME www.lab
lab IN NS ns1.lab
ns1.lab IN A 192.0.2.3
mx IN MX 10 mail.lab
`)
	other, _ := mustParse(t, "example.org.", `$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
into-lab IN CNAME lab.example.com.
`)
	failed := zone.NewFailed("Lab.Example.COM", "lab.zone", "lab.zone:3: bad A")
	if failed.Origin != "lab.example.com." || failed.Serial() != 0 || !strings.Contains(failed.String(), "SERVFAIL") {
		t.Errorf("NewFailed: origin %q serial %d string %q", failed.Origin, failed.Serial(), failed)
	}
	if err := failed.MarkSteered("www.lab.example.com.", dns.TypeA); err == nil {
		t.Error("MarkSteered in a failed zone succeeded")
	}
	s := zone.NewSet([]*zone.Zone{parent, failed, other})
	s.Precompile()
	if s.Zone("lab.example.com.") != failed || s.Zone("example.net.") != nil {
		t.Error("Set.Zone does not find zones by exact origin")
	}
	servfail := expect{rcode: dns.RcodeServerFailure, zone: "lab.example.com."}
	runLookups(t, s, []lookupCase{
		{qname: "lab.example.com.", qtype: dns.TypeSOA, want: servfail},
		{qname: "lab.example.com.", qtype: dns.TypeNS, want: servfail},
		{qname: "WWW.lab.example.com.", qtype: dns.TypeA, want: servfail},
		{qname: "deep.name.lab.example.com.", qtype: dns.TypeTXT, want: servfail},
		{qname: "ns1.lab.example.com.", qtype: dns.TypeA, want: servfail},
		// DS lives in the parent, which loaded.
		{qname: "lab.example.com.", qtype: dns.TypeDS, want: expect{rcode: dns.RcodeSuccess, aa: true, zone: "example.com.",
			ns: []string{"example.com. 300 IN SOA ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 300"}}},
		{qname: "www.example.com.", qtype: dns.TypeA, want: expect{rcode: dns.RcodeSuccess, aa: true, zone: "example.com.",
			answer: []string{"www.example.com. 300 IN A 192.0.2.2"}}},
		{name: "CNAME into the failed zone", qname: "to-lab.example.com.", qtype: dns.TypeA, want: expect{rcode: dns.RcodeSuccess, aa: true, zone: "example.com.",
			answer: []string{"to-lab.example.com. 300 IN CNAME www.lab.example.com."}}},
		{name: "CNAME from another zone", qname: "into-lab.example.org.", qtype: dns.TypeA, want: expect{rcode: dns.RcodeSuccess, aa: true, zone: "example.org.",
			answer: []string{"into-lab.example.org. 300 IN CNAME lab.example.com."}}},
		{name: "no additional from the failed zone", qname: "mx.example.com.", qtype: dns.TypeMX, want: expect{rcode: dns.RcodeSuccess, aa: true, zone: "example.com.",
			answer: []string{"mx.example.com. 300 IN MX 10 mail.lab.example.com."}}},
	})
	for _, name := range []string{"lab.example.com.", "www.lab.example.com.", "a.b.lab.example.com."} {
		if k, _, n := s.Classify(name); k != zone.FastNone || n != nil {
			t.Errorf("Classify(%s) = %v, %v; want FastNone so the general path answers SERVFAIL", name, k, n)
		}
	}
	if k, _, _ := s.Classify("www.example.com."); k != zone.FastNode {
		t.Errorf("Classify(www.example.com.) = %v, want FastNode", k)
	}
}

// A zone that uses $INCLUDE keeps its records, not its text, as its
// source: the text would read the included files again.
func TestSourceSelfContained(t *testing.T) {
	head := "$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ IN NS ns1\n"
	plain := head + "; a comment\nns1 IN A 192.0.2.1\n"
	z, _ := mustParse(t, "example.com.", plain)
	if !bytes.Equal(z.Source(), []byte(plain)) {
		t.Errorf("Source of a zone without $INCLUDE = %q, want the text as read", z.Source())
	}
	fsys := fstest.MapFS{
		"z/main.zone": {Data: []byte(head + "$INCLUDE inc.zone\n$GENERATE 1-3 h$ A 192.0.2.$\n")},
		"z/inc.zone":  {Data: []byte("ns1 IN A 192.0.2.1\ntxt IN TXT \"a b\" \"c;d\"\nsrv IN SRV 1 2 53 ns1\n*.w IN AAAA 2001:db8::1\n")},
	}
	inc, errs, _ := zone.Load(fsys, "example.com.", "z/main.zone")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	src := inc.Source()
	if bytes.Contains(bytes.ToUpper(src), []byte("$INCLUDE")) {
		t.Fatalf("source still includes:\n%s", src)
	}
	// The included file breaks: the source still parses into the same zone.
	delete(fsys, "z/inc.zone")
	again, errs, _ := zone.Parse(nil, "example.com.", "copy.zone", src)
	if len(errs) > 0 {
		t.Fatalf("source does not parse: %v\n%s", errs, src)
	}
	if again.Records != inc.Records || inc.Records != 9 {
		t.Errorf("records: source has %d, zone had %d, want 9", again.Records, inc.Records)
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"txt.example.com.", dns.TypeTXT}, {"srv.example.com.", dns.TypeSRV}, {"h2.example.com.", dns.TypeA}, {"x.w.example.com.", dns.TypeAAAA}, {"example.com.", dns.TypeSOA}} {
		want := rrStrings(zone.NewSet([]*zone.Zone{inc}).Lookup(q.name, q.qtype).Answer)
		got := rrStrings(zone.NewSet([]*zone.Zone{again}).Lookup(q.name, q.qtype).Answer)
		if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s %s: from source %v, from the files %v", q.name, dns.TypeToString[q.qtype], got, want)
		}
	}
}
