package zone_test

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/zone"
)

// FuzzParse checks that Parse never panics, that it returns a zone exactly
// when it reports no errors, and that lookups in whatever it loads never
// panic either.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		head,
		exampleCom,
		exampleNet,
		rfc4592,
		subZone,
		head + "$INCLUDE inc.zone\n$INCLUDE inc.zone lab.example.com.\n",
		head + "$GENERATE 1-4 h$ A 192.0.2.$\n$GENERATE 0-8/4 ${0,3,x}.t TXT \"x\"\n",
		head + "txt IN TXT ( \"a;b\" ; c\n \"d(\" )\nx IN CNAME x\nd IN DNAME .\n*.w IN CNAME a.w\n",
		"",
		"(\n",
		"\"",
		"$INCLUDE\n",
	} {
		f.Add([]byte(seed))
	}
	fsys := fstest.MapFS{
		"inc.zone": {Data: []byte("; included\nwww IN A 192.0.2.2\nsub IN NS ns.sub\nns.sub IN A 192.0.2.3\n")},
	}
	qnames := []string{
		"example.com.", "www.example.com.", "x.www.example.com.", "a.b.c.example.com.",
		"h1.example.com.", "host.sub.example.com.", "q.w.example.com.", "x.d.example.com.",
		"*.example.com.", "nope.example.com.", "www.lab.example.com.",
	}
	qtypes := []uint16{dns.TypeA, dns.TypeNS, dns.TypeDS, dns.TypeCNAME, dns.TypeANY, dns.TypeMX, dns.TypeTXT}
	f.Fuzz(func(t *testing.T, data []byte) {
		if costly(data) {
			t.Skip("bounded: large $GENERATE ranges and repeated $INCLUDE cost seconds per input, not new code paths")
		}
		z, errs, _ := zone.Parse(fsys, "example.com.", "f.zone", data)
		if (z == nil) != (len(errs) > 0) {
			t.Fatalf("zone %v with errors %v", z != nil, errs)
		}
		if z == nil {
			return
		}
		if z.SOA == nil || z.NegSOA == nil || z.NegSOA.Hdr.Ttl > z.SOA.Hdr.Ttl || z.NegSOA.Hdr.Ttl > z.SOA.Minttl {
			t.Fatalf("bad SOA/NegSOA: %v / %v", z.SOA, z.NegSOA)
		}
		s := zone.NewSet([]*zone.Zone{z})
		s.Precompile()
		for _, q := range qnames {
			s.Classify(q)
		}
		var a zone.Answer
		for _, q := range qnames {
			for _, qt := range qtypes {
				s.LookupInto(&a, q, qt)
				if a.Zone != z {
					t.Fatalf("%s: answered from %v", q, a.Zone)
				}
			}
		}
	})
}

var generateRange = regexp.MustCompile(`(?i)\$GENERATE\s+(\d+)-(\d+)`)

// costly reports inputs whose parse alone takes seconds: $GENERATE over
// thousands of records, or many $INCLUDEs (each may include again).
func costly(data []byte) bool {
	if bytes.Count(bytes.ToUpper(data), []byte("$INCLUDE")) > 3 {
		return true
	}
	for _, m := range generateRange.FindAllSubmatch(data, -1) {
		a, _ := strconv.Atoi(string(m[1]))
		b, _ := strconv.Atoi(string(m[2]))
		if b-a > 1000 || len(m[2]) > 6 {
			return true
		}
	}
	return false
}
