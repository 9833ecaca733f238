package zone

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// chunkedForTest makes every file a chunked one, of small chunks, for
// the test's time.
func chunkedForTest(t *testing.T, every uint64) {
	oldEvery, oldMin := chunkEvery, minChunked
	chunkEvery, minChunked = every, 0
	t.Cleanup(func() { chunkEvery, minChunked = oldEvery, oldMin })
}

// zoneState renders everything a lookup and the fast path read of z.
func zoneState(z *Zone) string {
	var names []string
	for name := range z.nodes.all {
		names = append(names, name)
	}
	slices.Sort(names)
	var sb strings.Builder
	for _, name := range names {
		n := z.nodes.get(name)
		fmt.Fprintf(&sb, "%s cut=%v cname=%v dname=%v occ=%v wild=%v steer=%v plain=%v\n", name, n.cut, n.hasCNAME, n.hasDNAME, n.occluded, n.wildChild, n.steered, n.plain)
		for _, s := range n.rrsets {
			for _, rr := range s.records(name) {
				sb.WriteString("  " + rr.String() + "\n")
			}
		}
		for _, tp := range n.templates() {
			fmt.Fprintf(&sb, "  %d %x\n", tp.qtype, tp.bytes())
		}
	}
	return sb.String()
}

// TestChangedChunksMatchFreshParse edits a chunked zone at random, many
// times in a row, each reload built from the served zone by parsing the
// chunks that changed (or, where it cannot be, the whole file), and
// requires each to be the zone a fresh parse of the same text gives: the
// same names, records, flags and templates, the served zone untouched.
func TestChangedChunksMatchFreshParse(t *testing.T) {
	chunkedForTest(t, 4)
	lines := []string{
		"$ORIGIN r.test.", "$TTL 60", "@ IN SOA ns h 1 2 3 4 5", "@ IN NS ns", "ns IN A 192.0.2.1", "sub IN NS ns.sub", "ns.sub IN A 192.0.2.2",
	}
	var body []string
	for i := range 200 {
		body = append(body, fmt.Sprintf("n%d IN A 10.0.%d.%d", i, i/250, i%250))
		switch i % 7 {
		case 1:
			body = append(body, fmt.Sprintf("n%d IN TXT \"t%d\"", i, i))
		case 2:
			body = append(body, fmt.Sprintf("a.b.n%d IN AAAA 2001:db8::%d", i, i))
		case 3:
			body = append(body, fmt.Sprintf("n%d IN MX 10 n%d", i, i-1))
		case 4:
			body = append(body, fmt.Sprintf("*.n%d IN A 10.1.0.%d", i, i%250))
		case 5:
			body = append(body, fmt.Sprintf("c%d IN CNAME n%d", i, i))
		case 6:
			body = append(body, "$ORIGIN o.r.test.", fmt.Sprintf("x%d IN A 10.3.0.%d", i, i%250), "$ORIGIN r.test.")
		}
	}
	edits := []func(r int, b []string) []string{
		func(r int, b []string) []string { // change an address
			i := r % len(b)
			b[i] = strings.Replace(b[i], "10.", "10.9", 1)
			return b
		},
		func(r int, b []string) []string { // remove a line
			i := r % len(b)
			return append(b[:i:i], b[i+1:]...)
		},
		func(r int, b []string) []string { // insert a new name
			i := r % len(b)
			return slices.Insert(b, i, fmt.Sprintf("new%d.deep IN A 10.5.0.%d", r, r%250))
		},
		func(r int, b []string) []string { // remove every record of a name
			name := fmt.Sprintf("n%d ", r%200)
			return slices.DeleteFunc(b, func(l string) bool { return strings.HasPrefix(l, name) })
		},
		func(r int, b []string) []string { // remove the record below an empty non-terminal
			name := fmt.Sprintf("a.b.n%d ", (r%40)*7+2)
			return slices.DeleteFunc(b, func(l string) bool { return strings.HasPrefix(l, name) })
		},
		func(r int, b []string) []string { // a record for an empty non-terminal
			return append(b, fmt.Sprintf("b.n%d IN TXT \"ent\"", (r%40)*7+2))
		},
		func(r int, b []string) []string { // change an MX target's address
			i := (r%40)*7 + 2
			for j, l := range b {
				if strings.HasPrefix(l, fmt.Sprintf("n%d IN A ", i)) {
					b[j] = fmt.Sprintf("n%d IN A 10.7.0.%d", i, r%250)
				}
			}
			return b
		},
		func(r int, b []string) []string { // move a line to the end (records of a name apart)
			i := r % len(b)
			l := b[i]
			return append(append(b[:i:i], b[i+1:]...), l)
		},
		func(r int, b []string) []string { // a delegation above existing names
			return append(b, fmt.Sprintf("b.n%d IN NS ns.elsewhere.", (r%40)*7+2))
		},
		func(r int, b []string) []string { // a second record in an RRset, lower TTL
			return append(b, fmt.Sprintf("n%d 5 IN A 10.2.0.%d", r%200, r%250))
		},
		func(r int, b []string) []string { // a bad line: the reload fails
			return append(b[:len(b):len(b)], "bad IN A 10.0.0")
		},
		func(r int, b []string) []string { // swap two lines
			i, j := r%len(b), (r/7)%len(b)
			b[i], b[j] = b[j], b[i]
			return b
		},
	}
	zoneText := func(b []string) []byte {
		return []byte(strings.Join(append(append([]string(nil), lines...), b...), "\n") + "\n")
	}
	steered := func(z *Zone, r int) {
		for _, name := range []string{fmt.Sprintf("s%d.r.test.", r%3), fmt.Sprintf("n%d.r.test.", r%200)} {
			_ = z.MarkSteered(name, dns.TypeCNAME) // a name with data: an error, nothing changes
		}
	}
	cur := append([]string(nil), body...)
	served, errs, _ := Parse(nil, "r.test.", "r.zone", zoneText(cur))
	if len(errs) > 0 || served.chunks == nil || len(served.chunks.sums) < 50 {
		t.Fatalf("errors %v, or the zone is not in chunks (%v)", errs, served.chunks)
	}
	steered(served, 0)
	NewSet([]*Zone{served}).Precompile()
	incremental := 0
	for r := range 96 {
		next := edits[r%len(edits)](r*7919, append([]string(nil), cur...))
		data := zoneText(next)
		fresh, ferrs, _ := Parse(nil, "r.test.", "r.zone", data)
		before := zoneState(served)
		z, zerrs, _ := ParseWith(nil, "r.test.", "r.zone", data, ParseOptions{Previous: served})
		if fmt.Sprint(ferrs) != fmt.Sprint(zerrs) {
			t.Fatalf("round %d: errors differ:\n%v\n%v", r, ferrs, zerrs)
		}
		if len(ferrs) > 0 {
			continue // rejected: the served zone stays
		}
		if z.incremental {
			incremental++
		}
		steered(fresh, r)
		steered(z, r)
		NewSet([]*Zone{fresh}).Precompile()
		NewSet([]*Zone{z}).Precompile()
		if got, want := zoneState(z), zoneState(fresh); got != want {
			t.Fatalf("round %d (edit %d, incremental %v): the reload differs from a fresh parse:\n%s", r, r%len(edits), z.incremental, diffLines(got, want))
		}
		if after := zoneState(served); after != before {
			t.Fatalf("round %d: the served zone changed", r)
		}
		if z.apex != z.nodes.get("r.test.") || z.Records != fresh.Records {
			t.Fatalf("round %d: apex or record count wrong (%d records, want %d)", r, z.Records, fresh.Records)
		}
		served, cur = z, next
	}
	t.Logf("%d of 96 reloads parsed the changed chunks only", incremental)
	// Delegations and records spread over chunks are parsed whole: most
	// of the other edits are not.
	if incremental < 35 {
		t.Errorf("%d of 96 reloads parsed the changed chunks only", incremental)
	}
}

// diffLines shows the lines only got has and those only want has.
func diffLines(got, want string) string {
	count := map[string]int{}
	for _, l := range strings.Split(got, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(want, "\n") {
		count[l]--
	}
	var sb strings.Builder
	for _, l := range strings.Split(got+"\n"+want, "\n") {
		if c := count[l]; c != 0 {
			fmt.Fprintf(&sb, "%+d %s\n", c, l)
			count[l] = 0
		}
	}
	return sb.String()
}

// TestLargeZoneMemoryAndChangedReload bounds what a 50,000-record zone
// holds per record once loaded and precompiled, and requires a reload
// after one record changed to parse its changed chunk only: the new zone
// borrows all but a few of the served zone's nodes.
func TestLargeZoneMemoryAndChangedReload(t *testing.T) {
	data := bigZone(38300)
	z, held := precompiledHeap(t, "big.test.", "big.zone", data)
	held -= int64(len(z.source)) // the text is the caller's
	perRecord := float64(held) / float64(z.Records)
	t.Logf("%d records, %d names, %.0f bytes per record", z.Records, z.nodes.len(), perRecord)
	if z.Records < 50000 || z.chunks == nil {
		t.Fatalf("%d records, chunks %v: want a chunked zone of 50,000", z.Records, z.chunks != nil)
	}
	// 243 bytes a record when this test was written (names, records,
	// RRsets, nodes, index and templates), 172 once the RRsets of A,
	// AAAA, TXT and the like were kept in wire form (store.go).
	if perRecord > 215 {
		t.Errorf("%.0f bytes per record, want at most 215", perRecord)
	}

	changed := bytes.Replace(data, []byte("h1001 IN A 10.0.3.233\n"), []byte("h1001 IN A 10.9.9.9\n"), 1)
	if bytes.Equal(changed, data) {
		t.Fatal("the record to change is not in the zone")
	}
	start := time.Now()
	nz, errs, _ := ParseWith(nil, "big.test.", "big.zone", changed, ParseOptions{Workers: 1, Previous: z})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{nz}).Precompile()
	took := time.Since(start)
	own := 0
	for _, n := range nz.nodes.all {
		if z.nodes.get(n.name) != n {
			own++
		}
	}
	t.Logf("reload: %v, %d of %d nodes new", took, own, nz.nodes.len())
	if !nz.incremental || own > 1000 {
		t.Errorf("reload parsed the changed chunks only: %v; %d nodes new, want at most 1,000", nz.incremental, own)
	}
	if got := nz.nodes.get("h1001.big.test.").get(dns.TypeA)[0].(*dns.A).A.String(); got != "10.9.9.9" || nz.Records != z.Records {
		t.Errorf("h1001 A %s, %d records (was %d)", got, nz.Records, z.Records)
	}
	if took > 3*time.Second {
		t.Errorf("the reload took %v", took)
	}
}

// TestChunksDroppedForScatteredNames: a file that lists every name's
// records in several places keeps no chunk index (it would hold a list
// of chunks per name) and is parsed whole on reload, rightly.
func TestChunksDroppedForScatteredNames(t *testing.T) {
	chunkedForTest(t, 4)
	var b strings.Builder
	b.WriteString("$ORIGIN s.test.\n$TTL 60\n@ IN SOA ns h 1 2 3 4 5\n@ IN NS ns\nns IN A 192.0.2.1\n")
	n := maxSpread + 100
	for i := range n {
		fmt.Fprintf(&b, "h%d IN A 10.0.%d.%d\n", i, i>>8&255, i&255)
	}
	for i := range n {
		fmt.Fprintf(&b, "h%d IN TXT \"t\"\n", i)
	}
	data := []byte(b.String())
	z, errs, _ := Parse(nil, "s.test.", "s.zone", data)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if z.chunks != nil {
		t.Fatalf("a zone whose %d names each have records in two chunks kept a chunk index", n)
	}
	NewSet([]*Zone{z}).Precompile()
	changed := bytes.Replace(data, []byte("h7 IN A 10.0.0.7\n"), []byte("h7 IN A 10.9.9.9\n"), 1)
	nz, errs, _ := ParseWith(nil, "s.test.", "s.zone", changed, ParseOptions{Previous: z})
	if len(errs) > 0 || nz.incremental || nz.nodes.get("h7.s.test.").get(dns.TypeA)[0].(*dns.A).A.String() != "10.9.9.9" {
		t.Errorf("reload: errors %v, incremental %v", errs, nz.incremental)
	}
}

// precompiledHeap parses data with two workers and precompiles it, and
// returns the zone and the heap it added (after a collection each side).
func precompiledHeap(t *testing.T, origin, file string, data []byte) (*Zone, int64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	z, errs, _ := ParseWith(nil, origin, file, data, ParseOptions{Workers: 2})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{z}).Precompile()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return z, int64(after.HeapAlloc) - int64(before.HeapAlloc)
}
