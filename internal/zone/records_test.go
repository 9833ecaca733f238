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

// TestWithSerialPublished: a new serial for a published zone shares its
// nodes (only the apex is new) and answers the serial on every path:
// the SOA, a negative answer, the fast path's templates; the published
// zone keeps its own.
func TestWithSerialPublished(t *testing.T) {
	z, _ := mustParse(t, "rec.example.", recordsZone)
	old := zone.NewSet([]*zone.Zone{z})
	old.Precompile()
	nz, errs := z.WithSerial(9)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	set := zone.NewSet([]*zone.Zone{nz})
	set.Precompile()
	if nz.Base() != z || z.Base() != z || !nz.Unchanged(z.File, []byte(recordsZone)) {
		t.Errorf("base %p (want %p), unchanged from the file %v", nz.Base(), z, nz.Unchanged(z.File, []byte(recordsZone)))
	}
	for _, c := range []struct {
		set  *zone.Set
		want uint32
	}{{old, 7}, {set, 9}} {
		a := c.set.Lookup("rec.example.", dns.TypeSOA)
		if len(a.Answer) != 1 || a.Answer[0].(*dns.SOA).Serial != c.want {
			t.Errorf("SOA answer %v, want serial %d", a.Answer, c.want)
		}
		if a := c.set.Lookup("nx.rec.example.", dns.TypeA); len(a.Ns) != 1 || a.Ns[0].(*dns.SOA).Serial != c.want {
			t.Errorf("negative answer's SOA %v, want serial %d", a.Ns, c.want)
		}
		kind, fz, n := c.set.Classify("rec.example.")
		if kind != zone.FastNode {
			t.Fatalf("apex: fast kind %v", kind)
		}
		m := new(dns.Msg)
		w := n.Template(dns.TypeSOA)
		if w == nil {
			t.Fatal("no SOA template at the apex")
		}
		q := new(dns.Msg)
		q.SetQuestion("rec.example.", dns.TypeSOA)
		qw, _ := q.Pack()
		full := append(append(append([]byte{}, w[:12]...), qw[12:]...), w[12:]...)
		if err := m.Unpack(full); err != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.SOA).Serial != c.want {
			t.Errorf("SOA template: %v %v, want serial %d", m.Answer, err, c.want)
		}
		if tail := fz.Negative().Tail; uint32(tail[0])<<24|uint32(tail[1])<<16|uint32(tail[2])<<8|uint32(tail[3]) != c.want {
			t.Errorf("fast negative SOA serial %v, want %d", tail[:4], c.want)
		}
		if a := c.set.Lookup("ns1.rec.example.", dns.TypeA); len(a.Answer) != 1 {
			t.Errorf("ns1: %v", a.Answer)
		}
	}
	if got, want := len(nz.AppendRecords(nil)), len(z.AppendRecords(nil)); got != want || nz.AppendRecords(nil)[0].(*dns.SOA).Serial != 9 {
		t.Errorf("records %d, want %d, SOA first with serial 9", got, want)
	}
}
