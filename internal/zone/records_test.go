package zone_test

import (
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/zone"
)

const recordsZone = `$TTL 300
@ IN SOA ns1 hostmaster 7 3600 600 86400 60
@ NS ns1
@ NS ns.other.example.
ns1 A 192.0.2.1
www CNAME ns1
sub NS ns.sub
ns.sub A 192.0.2.9 ; glue
*.wild TXT "w"
`

func TestAppendRecords(t *testing.T) {
	z, _ := mustParse(t, "rec.example.", recordsZone)
	rrs := z.AppendRecords(nil)
	if len(rrs) != z.Records {
		t.Fatalf("%d records, zone has %d:\n%v", len(rrs), z.Records, rrs)
	}
	if rrs[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("first record %v", rrs[0])
	}
	soas, glue := 0, false
	for _, rr := range rrs {
		soas += map[bool]int{true: 1}[rr.Header().Rrtype == dns.TypeSOA]
		glue = glue || rr.Header().Name == "ns.sub.rec.example."
	}
	if soas != 1 || !glue {
		t.Errorf("SOAs %d, glue %v", soas, glue)
	}
	again := z.AppendRecords(nil)
	for i := range rrs {
		if rrs[i].String() != again[i].String() {
			t.Fatalf("order differs at %d: %v vs %v", i, rrs[i], again[i])
		}
	}
	if got := zone.NewFailed("x.example.", "x", "no").AppendRecords(nil); len(got) != 0 {
		t.Errorf("failed zone gave %v", got)
	}
}

func TestWithSerial(t *testing.T) {
	z, _ := mustParse(t, "rec.example.", recordsZone)
	nz, errs := z.WithSerial(9)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if nz.Serial() != 9 || nz.FileSerial() != 7 || z.Serial() != 7 || nz.Records != z.Records {
		t.Errorf("serial %d file serial %d (old %d), records %d vs %d", nz.Serial(), nz.FileSerial(), z.Serial(), nz.Records, z.Records)
	}
	set := zone.NewSet([]*zone.Zone{nz})
	set.Precompile()
	a := set.Lookup("rec.example.", dns.TypeSOA)
	if len(a.Answer) != 1 || a.Answer[0].(*dns.SOA).Serial != 9 {
		t.Errorf("SOA answer %v", a.Answer)
	}
	if a := set.Lookup("nx.rec.example.", dns.TypeA); len(a.Ns) != 1 || a.Ns[0].(*dns.SOA).Serial != 9 {
		t.Errorf("negative answer's SOA %v", a.Ns)
	}
	n2, _ := nz.WithSerial(10)
	if n2.FileSerial() != 7 {
		t.Errorf("file serial after two changes: %d", n2.FileSerial())
	}
}
