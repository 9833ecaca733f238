package zone

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

// hostsZone is a zone of n plain hosts as most of a large zone is: one
// A, A and AAAA, AAAA alone, A and TXT, two A, in turn.
func hostsZone(n int) []byte {
	var b bytes.Buffer
	b.WriteString("$ORIGIN w.test.\n$TTL 3600\n@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ IN NS ns1\nns1 IN A 192.0.2.1\n")
	for i := range n {
		switch i % 10 {
		case 0, 1, 2, 3, 4:
			fmt.Fprintf(&b, "web-%d.dc%d IN A 10.%d.%d.%d\n", i, i%40, i>>16&255, i>>8&255, i&255)
		case 5, 6:
			fmt.Fprintf(&b, "api-%d.dc%d IN A 10.%d.%d.%d\n  IN AAAA 2001:db8:%x::%x\n", i, i%40, i>>16&255, i>>8&255, i&255, i>>16, i&0xffff)
		case 7:
			fmt.Fprintf(&b, "v6-%d.dc%d 300 IN AAAA 2001:db8:1:%x::1\n", i, i%40, i&0xffff)
		case 8:
			fmt.Fprintf(&b, "mon-%d.dc%d IN A 100.64.%d.%d\n  IN TXT \"v=host1; id=%d\" \"owner\\\"s \\\\ note\"\n", i, i%40, i>>8&255, i&255, i)
		case 9:
			fmt.Fprintf(&b, "edge-%d.dc%d IN A 10.3.%d.%d\n  IN A 100.67.%d.%d\n", i, i%40, i>>8&255, i&255, i>>8&255, i&255)
		}
	}
	return b.Bytes()
}

// recordsText is every record of z, name by name, as text.
func recordsText(z *Zone) map[string]string {
	out := map[string]string{}
	for name, n := range z.nodes.all {
		var b bytes.Buffer
		for _, s := range n.rrsets {
			for _, rr := range s.records(name) {
				b.WriteString(rr.String())
				b.WriteByte('\n')
			}
		}
		out[name] = b.String()
	}
	return out
}

// TestWireStoreHeapPerRecord bounds what a zone of plain hosts holds per
// record once precompiled, and requires its A, AAAA and TXT RRsets to be
// kept in wire form (store.go) and to read back as the parse made them.
// With each record a miekg/dns structure beside its answer (the store
// before) this zone held 256 bytes a record; in wire form 165.
func TestWireStoreHeapPerRecord(t *testing.T) {
	data := hostsZone(20000)
	z, held := precompiledHeap(t, "w.test.", "w.zone", data)
	perRecord := float64(held) / float64(z.Records)
	t.Logf("%d records, %d names, %.0f bytes per record", z.Records, z.nodes.len(), perRecord)
	if perRecord > 215 {
		t.Errorf("%.0f bytes per record, want at most 215", perRecord)
	}

	sets, wire := 0, 0
	for _, n := range z.nodes.all {
		for _, s := range n.rrsets {
			sets++
			if s.inWire() {
				wire++
			}
		}
	}
	// All but the apex's SOA and NS.
	if wire != sets-2 {
		t.Errorf("%d of %d RRsets in wire form, want all but 2", wire, sets)
	}

	fresh, errs, _ := ParseWith(nil, "w.test.", "w.zone", data, ParseOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got, want := recordsText(z), recordsText(fresh)
	if len(got) != len(want) {
		t.Fatalf("%d names, want %d", len(got), len(want))
	}
	for name, w := range want {
		if got[name] != w {
			t.Fatalf("%s reads back as\n%s\nwant\n%s", name, got[name], w)
		}
	}
	// A record made from the wire compares equal to the parsed one.
	n, fn := z.nodes.get("mon-8.dc8.w.test."), fresh.nodes.get("mon-8.dc8.w.test.")
	for _, typ := range []uint16{dns.TypeA, dns.TypeTXT} {
		a, b := n.get(typ), fn.get(typ)
		if len(a) != 1 || len(b) != 1 || !dns.IsDuplicate(a[0], b[0]) || a[0].Header().Ttl != b[0].Header().Ttl {
			t.Errorf("%s: %v, want %v", dns.TypeToString[typ], a, b)
		}
	}
}

// TestWireStoreReload: a whole parse with the served zone (its RRsets in
// wire form) as Previous shares every unchanged RRset's wire and
// template, reads the changed ones anew, and leaves the served zone as
// it was.
func TestWireStoreReload(t *testing.T) {
	data := hostsZone(2000)
	old, errs, _ := Parse(nil, "w.test.", "w.zone", data)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{old}).Precompile()
	before := zoneState(old)
	changed := bytes.Replace(data, []byte("web-0.dc0 IN A 10.0.0.0\n"), []byte("web-0.dc0 IN A 10.9.9.9\n"), 1)
	changed = bytes.Replace(changed, []byte("  IN AAAA 2001:db8:0::5\n"), []byte("  IN AAAA 2001:db8:0::5\n  IN AAAA 2001:db8::55\n"), 1)
	if len(changed) == len(data) {
		t.Fatal("the records to change are not in the zone")
	}
	z, errs, _ := ParseWith(nil, "w.test.", "w.zone", changed, ParseOptions{Previous: old})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{z}).Precompile()
	shared, own := sharedRRsets(z, old)
	if own != 2 || shared < 2500 {
		t.Errorf("%d RRsets shared, %d new; want 2 new", shared, own)
	}
	fresh, errs, _ := Parse(nil, "w.test.", "w.zone", changed)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{fresh}).Precompile()
	if got, want := zoneState(z), zoneState(fresh); got != want {
		t.Fatalf("the reload differs from a fresh parse:\n%s", diffLines(got, want))
	}
	if zoneState(old) != before {
		t.Fatal("the served zone changed")
	}
	if got := z.nodes.get("api-5.dc5.w.test.").get(dns.TypeAAAA); len(got) != 2 {
		t.Errorf("api-5 AAAA: %v", got)
	}
}
