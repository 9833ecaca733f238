package zone

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/miekg/dns"
)

// bigZone writes a zone of about n records of many types, with $ORIGIN
// changes (relative and absolute), blank owners, parentheses spanning
// lines and comments, big enough to be cut into parts.
func bigZone(n int) []byte {
	var b bytes.Buffer
	b.WriteString("$ORIGIN big.test.\n$TTL 3600\n@ 300 IN SOA ns1 hostmaster ( 1 7200 3600\n  1209600 300 ) ; soa\n@ IN NS ns1\n@ IN MX 10 mail\nns1 IN A 192.0.2.1\nmail IN A 192.0.2.2\n")
	b.WriteString("*.wild IN A 192.0.2.3\nsub IN NS ns.sub\nns.sub IN A 192.0.2.4\n")
	for i := range n {
		switch i % 13 {
		case 0, 1, 2, 3:
			fmt.Fprintf(&b, "h%d IN A 10.%d.%d.%d\n", i, i>>16&255, i>>8&255, i&255)
		case 4:
			fmt.Fprintf(&b, "h%d 60 IN AAAA 2001:db8::%x:%x\n  IN TXT \"blank owner\" ; comment\n", i, i>>16, i&0xffff)
		case 5:
			fmt.Fprintf(&b, "h%d IN TXT ( \"multi\" ; (\n  \"line;\" \"\" )\n", i)
		case 6:
			fmt.Fprintf(&b, "h%d IN CNAME h%d\n", i, i-1)
		case 7:
			fmt.Fprintf(&b, "h%d IN MX 10 mail\nh%d IN SRV 0 5 443 h%d\n", i, i, i-7)
		case 8:
			fmt.Fprintf(&b, "h%d IN CAA 0 issue \"ca.example\"\nh%d IN SSHFP 1 1 123456789abcdef67890123456789abcdef67890\n", i, i)
		case 9:
			fmt.Fprintf(&b, "x.y.h%d IN A 10.0.0.%d\n", i, i&255) // empty non-terminals
		case 10:
			if i%1300 == 10 {
				fmt.Fprintf(&b, "$ORIGIN o%d\n", i) // relative to the current origin
			}
			fmt.Fprintf(&b, "h%d IN HINFO \"cpu\" \"os\"\n", i)
		case 11:
			if i%1300 == 11 {
				b.WriteString("$ORIGIN big.test.\n$TTL 1h\n")
			}
			fmt.Fprintf(&b, "h%d IN A 10.1.%d.%d\nh%d IN A 10.2.%d.%d\n", i, i>>8&255, i&255, i, i>>8&255, i&255)
		case 12:
			fmt.Fprintf(&b, "H%d.Big.Test. IN PTR Target.Example.\n", i)
		}
	}
	return b.Bytes()
}

func TestParallelParseMatchesSequential(t *testing.T) {
	data := bigZone(60000)
	if len(data) < minSplit {
		t.Fatalf("test zone is %d bytes, below the split size %d", len(data), minSplit)
	}
	if parts, _, ok := split("big.test.", "big.zone", data, 4, new([]chunkSpan)); !ok || len(parts) != 4 {
		t.Fatalf("split: ok %v, %d parts, want 4", ok, len(parts))
	}
	seq, errs, warns := ParseWith(nil, "big.test.", "big.zone", data, ParseOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	par, errs2, warns2 := ParseWith(nil, "big.test.", "big.zone", data, ParseOptions{Workers: 4})
	if len(errs2) > 0 {
		t.Fatal(errs2)
	}
	if warns.Error() != warns2.Error() {
		t.Errorf("warnings differ:\n%v\n%v", warns, warns2)
	}
	if seq.Records != par.Records || seq.nodes.len() != par.nodes.len() {
		t.Fatalf("sequential: %d records %d names; parallel: %d records %d names", seq.Records, seq.nodes.len(), par.Records, par.nodes.len())
	}
	for name, n := range seq.nodes.all {
		p := par.nodes.get(name)
		if p == nil {
			t.Fatalf("%s missing from the parallel parse", name)
		}
		if got, want := nodeText(par, p), nodeText(seq, n); got != want {
			t.Fatalf("%s:\nparallel   %s\nsequential %s", name, got, want)
		}
	}
	NewSet([]*Zone{seq}).Precompile()
	NewSet([]*Zone{par}).Precompile()
	for name, n := range seq.nodes.all {
		p := par.nodes.get(name)
		if p.plain != n.plain || len(p.templates()) != len(n.templates()) {
			t.Fatalf("%s: templates differ", name)
		}
		for i := range n.templates() {
			if !bytes.Equal(p.templates()[i].bytes(), n.templates()[i].bytes()) {
				t.Fatalf("%s: template %d differs", name, i)
			}
		}
	}
}

// nodeText is a node's records with their positions.
func nodeText(z *Zone, n *node) string {
	var b strings.Builder
	for _, s := range n.rrsets {
		fmt.Fprintf(&b, "[%s:%d]", z.files[s.file], s.line)
		for _, rr := range s.records(n.name) {
			b.WriteString(rr.String())
			b.WriteByte('|')
		}
	}
	return b.String()
}

func TestParallelParseErrorsReadAsSequential(t *testing.T) {
	data := bigZone(60000)
	// A bad record in the last part: its line must be the file's line.
	bad := append(append([]byte(nil), data...), []byte("broken IN A 300.1.1.1\n")...)
	lines := bytes.Count(bad, []byte{'\n'})
	for _, workers := range []int{0, 4} {
		_, errs, _ := ParseWith(nil, "big.test.", "big.zone", bad, ParseOptions{Workers: workers})
		if len(errs) != 1 || errs[0].Line != lines || errs[0].File != "big.zone" {
			t.Errorf("workers %d: errors %v, want one at big.zone:%d", workers, errs, lines)
		}
	}
}

func TestTemplatesMatchTheGeneralPath(t *testing.T) {
	data := bigZone(3000)
	z, errs, _ := ParseWith(nil, "big.test.", "big.zone", data, ParseOptions{Workers: 2})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := z.MarkSteered("h5.big.test.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	s := NewSet([]*Zone{z})
	s.Precompile()
	checked := map[uint16]int{}
	for _, n := range z.nodes.all {
		if !n.plain && !n.cut && !n.occluded && !n.hasCNAME && !n.hasDNAME {
			t.Fatalf("%s is left to the general path", n.name)
		}
		for _, tp := range n.templates() {
			a := s.Lookup(n.name, tp.qtype)
			m := &dns.Msg{
				MsgHdr:   dns.MsgHdr{Response: true, Authoritative: a.Authoritative, Rcode: a.Rcode},
				Compress: true,
				Question: []dns.Question{{Name: n.name, Qtype: tp.qtype, Qclass: dns.ClassINET}},
				Answer:   a.Answer, Ns: a.Ns, Extra: a.Extra,
			}
			packed, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			end := questionEnd(packed)
			want := append(packed[:12:12], packed[end:]...)
			if !bytes.Equal(tp.bytes(), want) {
				t.Fatalf("%s %s: template\n%x\nwant\n%x", n.name, dns.TypeToString[tp.qtype], tp.bytes(), want)
			}
			checked[tp.qtype]++
		}
	}
	for _, typ := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX, dns.TypeSRV, dns.TypeCAA, dns.TypeSSHFP, dns.TypeHINFO, dns.TypePTR} {
		if checked[typ] == 0 {
			t.Errorf("no %s template checked", dns.TypeToString[typ])
		}
	}
	if n := z.nodes.get("h5.big.test."); n.Template(dns.TypeA) != nil || n.Template(dns.TypeTXT) == nil {
		t.Error("the steered name has an A template or lacks its TXT one")
	}
}

func TestReloadSharesUnchangedRecords(t *testing.T) {
	data := bigZone(3000)
	old, errs, _ := Parse(nil, "big.test.", "big.zone", data)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{old}).Precompile()
	changed := bytes.Replace(data, []byte("h0 IN A 10.0.0.0\n"), []byte("h0 IN A 10.9.9.9\n"), 1)
	changed = bytes.Replace(changed, []byte("h1 IN A 10.0.0.1\n"), []byte("h1 IN A 10.0.0.1\nh1 IN A 10.0.0.111\n"), 1)
	z, errs, _ := ParseWith(nil, "big.test.", "big.zone", changed, ParseOptions{Previous: old})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{z}).Precompile()
	if z.prev != nil {
		t.Error("the zone still refers to the previous one after Precompile")
	}
	shared, own := sharedRRsets(z, old)
	// Only the two RRsets that changed (h0's and h1's A) are new.
	if own != 2 || shared < 3000 {
		t.Errorf("%d RRsets shared, %d new; want 2 new", shared, own)
	}
	if got := z.nodes.get("h0.big.test.").get(dns.TypeA)[0].(*dns.A).A.String(); got != "10.9.9.9" {
		t.Errorf("h0 A = %s after the reload", got)
	}
	if got := len(z.nodes.get("h1.big.test.").get(dns.TypeA)); got != 2 {
		t.Errorf("h1 has %d A records after the reload, want 2", got)
	}
	if got := old.nodes.get("h0.big.test.").get(dns.TypeA)[0].(*dns.A).A.String(); got != "10.0.0.0" {
		t.Errorf("the previous zone changed: h0 A = %s", got)
	}
	// Templates of shared RRsets are the previous zone's bytes; changed
	// ones are new and right.
	a, b := z.nodes.get("h2.big.test.").Template(dns.TypeA), old.nodes.get("h2.big.test.").Template(dns.TypeA)
	if len(a) == 0 || &a[0] != &b[0] {
		t.Error("h2's A template was packed again instead of shared")
	}
	if bytes.Equal(z.nodes.get("h0.big.test.").Template(dns.TypeA), old.nodes.get("h0.big.test.").Template(dns.TypeA)) {
		t.Error("h0's A template did not change")
	}
	// An RRset whose TTLs are unified must not change the previous
	// zone's records.
	ttl := bytes.Replace(changed, []byte("h2 IN A 10.0.0.2\n"), []byte("h2 IN A 10.0.0.2\nh2 5 IN A 10.0.0.222\n"), 1)
	z2, errs, _ := ParseWith(nil, "big.test.", "big.zone", ttl, ParseOptions{Previous: z})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := z.nodes.get("h2.big.test.").get(dns.TypeA)[0].Header().Ttl; got != 3600 {
		t.Errorf("the previous zone's h2 TTL became %d", got)
	}
	if got := z2.nodes.get("h2.big.test.").get(dns.TypeA)[0].Header().Ttl; got != 5 {
		t.Errorf("h2 TTL = %d, want 5", got)
	}
}

func TestLargeZoneKeepsDigestNotText(t *testing.T) {
	// Every zone lets its text go once precompiled (dropSource); this
	// one was 4.8 MB, over the 4 MiB only above which a zone used to, and
	// 20,000 names show the same in a tenth of the time.
	data := bigZone(20000)
	z, errs, _ := Parse(nil, "big.test.", "big.zone", data)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{z}).Precompile()
	if z.source != nil {
		t.Fatal("a large zone kept its text after Precompile")
	}
	if !z.Unchanged("big.zone", data) {
		t.Error("the same bytes are not recognised")
	}
	other := bytes.Replace(data, []byte("h0 IN A 10.0.0.0"), []byte("h0 IN A 10.0.0.9"), 1)
	if z.Unchanged("big.zone", other) || z.Unchanged("big.zone", data[:len(data)-1]) {
		t.Error("different bytes are taken for the same")
	}
	// Its text is written out from its records, and reads back the same.
	back, errs, _ := Parse(nil, "big.test.", "copy.zone", z.Source())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if back.Records != z.Records || back.nodes.len() != z.nodes.len() {
		t.Fatalf("the written-out text has %d records, %d names; the zone %d, %d", back.Records, back.nodes.len(), z.Records, z.nodes.len())
	}
	for name, n := range z.nodes.all {
		bn := back.nodes.get(name)
		for i, s := range n.rrsets {
			if bn == nil || len(bn.rrsets) != len(n.rrsets) || !sameText(bn.rrsets[i].records(name), s.records(name)) {
				t.Fatalf("%s reads back differently", name)
			}
		}
	}
	// A small zone's Source is its very bytes until it is precompiled
	// (the last good copy is taken then), its records written out after.
	small := bigZone(100)
	sz, _, _ := Parse(nil, "big.test.", "small.zone", small)
	if !bytes.Equal(sz.Source(), small) {
		t.Error("a small zone's Source is not its file")
	}
	NewSet([]*Zone{sz}).Precompile()
	if sz.source != nil || !sz.Unchanged("small.zone", small) {
		t.Error("a small zone kept its text after Precompile, or does not know its bytes again")
	}
	if back, errs, _ := Parse(nil, "big.test.", "copy.zone", sz.Source()); len(errs) > 0 || back.Records != sz.Records {
		t.Errorf("a small zone's written-out text does not read back: %v", errs)
	}
}

// sameText reports whether a and b are the same records in the same order
// as their text shows them: what fmt.Sprint of each compares, without
// fmt's reflection over 120,000 names (a third of
// TestLargeZoneKeepsDigestNotText's CPU).
func sameText(a, b []dns.RR) bool {
	return slices.EqualFunc(a, b, func(x, y dns.RR) bool { return x.String() == y.String() })
}

func TestReloadBorrowsUnchangedNodes(t *testing.T) {
	base := "$ORIGIN b.test.\n$TTL 60\n@ IN SOA ns h 1 2 3 4 5\n@ IN NS ns\nns IN A 192.0.2.1\n" +
		"mail IN A 192.0.2.25\nmx IN MX 10 mail\nplain IN A 192.0.2.7\nw IN TXT \"parent\"\nsteer IN TXT \"t\"\n"
	old, errs, _ := Parse(nil, "b.test.", "b.zone", []byte(base))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{old}).Precompile()
	snapshot := func(z *Zone) map[string]string {
		m := map[string]string{}
		for name, n := range z.nodes.all {
			m[name] = fmt.Sprintf("%v %v %v %x", n.steered, n.wildChild, n.plain, n.templates())
		}
		return m
	}
	before := snapshot(old)

	// mail's address changes, a wildcard appears below w, steer becomes
	// steered; plain and ns stay.
	next := strings.Replace(base, "192.0.2.25", "192.0.2.26", 1) + "*.w IN A 192.0.2.9\n"
	z, errs, _ := ParseWith(nil, "b.test.", "b.zone", []byte(next), ParseOptions{Previous: old})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := z.MarkSteered("steer.b.test.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	NewSet([]*Zone{z}).Precompile()
	for _, name := range []string{"plain.b.test.", "ns.b.test."} {
		if z.nodes.get(name) != old.nodes.get(name) {
			t.Errorf("%s was not borrowed", name)
		}
	}
	for _, name := range []string{"mail.b.test.", "mx.b.test.", "w.b.test.", "steer.b.test.", "b.test."} {
		if z.nodes.get(name) == old.nodes.get(name) {
			t.Errorf("%s is the served zone's node although it differs here", name)
		}
	}
	if z.apex != z.nodes.get("b.test.") {
		t.Error("the apex is not the zone's node for its origin")
	}
	if !z.nodes.get("w.b.test.").wildChild || !z.nodes.get("steer.b.test.").steered {
		t.Error("flags of the copied nodes are not this zone's")
	}
	if !bytes.Contains(z.nodes.get("mx.b.test.").Template(dns.TypeMX), []byte{192, 0, 2, 26}) {
		t.Error("mx's template does not hold mail's new address")
	}
	// The served zone is as it was.
	if after := snapshot(old); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the served zone changed:\n%v\n%v", before, after)
	}
	// A node steered before and not now is this zone's own, unsteered.
	again, errs, _ := ParseWith(nil, "b.test.", "b.zone", []byte(next), ParseOptions{Previous: z})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	NewSet([]*Zone{again}).Precompile()
	if n := again.nodes.get("steer.b.test."); n == z.nodes.get("steer.b.test.") || n.steered || n.Template(dns.TypeTXT) == nil {
		t.Error("a name no longer steered kept the served zone's steered node")
	}
}

// TestReloadWithPreviousMatchesFreshParse edits a zone at random, many
// times over, and checks that a parse sharing with the served zone gives
// exactly what a parse on its own gives, and leaves the served zone as it
// was: names whose records come back apart, empty non-terminals that get
// records, delegations and DNAMEs appearing above unchanged names,
// records removed, steered names.
func TestReloadWithPreviousMatchesFreshParse(t *testing.T) {
	lines := []string{
		"$ORIGIN r.test.", "$TTL 60", "@ IN SOA ns h 1 2 3 4 5", "@ IN NS ns", "ns IN A 192.0.2.1",
	}
	var body []string
	for i := range 60 {
		body = append(body, fmt.Sprintf("n%d IN A 10.0.0.%d", i, i))
		switch i % 6 {
		case 1:
			body = append(body, fmt.Sprintf("n%d IN TXT \"t%d\"", i, i))
		case 2:
			body = append(body, fmt.Sprintf("a.b.n%d IN AAAA 2001:db8::%d", i, i))
		case 3:
			body = append(body, fmt.Sprintf("n%d IN MX 10 n%d", i, i-1))
		case 4:
			body = append(body, fmt.Sprintf("*.n%d IN A 10.1.0.%d", i, i))
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
		func(r int, b []string) []string { // move a line to the end (records of a name apart)
			i := r % len(b)
			l := b[i]
			return append(append(b[:i:i], b[i+1:]...), l)
		},
		func(r int, b []string) []string { // a record for an empty non-terminal
			return append(b, fmt.Sprintf("b.n%d IN TXT \"ent\"", (r%10)*6+2))
		},
		func(r int, b []string) []string { // a delegation above existing names
			return append(b, fmt.Sprintf("b.n%d IN NS ns.elsewhere.", (r%10)*6+2))
		},
		func(r int, b []string) []string { // a DNAME above existing names
			return append(b, fmt.Sprintf("n%d IN DNAME target.example.", (r%10)*6+4))
		},
		func(r int, b []string) []string { // a second record in an RRset, lower TTL
			return append(b, fmt.Sprintf("n%d 5 IN A 10.2.0.%d", r%60, r%250))
		},
	}
	zoneText := func(b []string) []byte {
		return []byte(strings.Join(append(append([]string(nil), lines...), b...), "\n") + "\n")
	}
	steered := func(z *Zone, r int) {
		for _, name := range []string{fmt.Sprintf("s%d.r.test.", r%3), "n5.r.test."} {
			_ = z.MarkSteered(name, dns.TypeCNAME) // n5 has data: an error, nothing changes
		}
	}
	state := func(z *Zone) string {
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
	cur := append([]string(nil), body...)
	served, errs, _ := Parse(nil, "r.test.", "r.zone", zoneText(cur))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	steered(served, 0)
	NewSet([]*Zone{served}).Precompile()
	for r := range 300 {
		next := edits[r%len(edits)](r*7919, append([]string(nil), cur...))
		data := zoneText(next)
		fresh, ferrs, fwarns := Parse(nil, "r.test.", "r.zone", data)
		before := state(served)
		z, zerrs, zwarns := ParseWith(nil, "r.test.", "r.zone", data, ParseOptions{Previous: served})
		if fmt.Sprint(ferrs) != fmt.Sprint(zerrs) || len(fwarns) != len(zwarns) {
			t.Fatalf("round %d: errors/warnings differ:\n%v %v\n%v %v", r, ferrs, fwarns, zerrs, zwarns)
		}
		if len(ferrs) > 0 {
			continue // rejected: the served zone stays
		}
		steered(fresh, r)
		steered(z, r)
		NewSet([]*Zone{fresh}).Precompile()
		NewSet([]*Zone{z}).Precompile()
		if got, want := state(z), state(fresh); got != want {
			t.Logf("served before:\n%s\ndata:\n%s", before, data)
			t.Fatalf("round %d: sharing parse differs from a fresh one:\n%s\nwant\n%s", r, got, want)
		}
		if after := state(served); after != before {
			t.Fatalf("round %d: the served zone changed", r)
		}
		if z.apex != z.nodes.get("r.test.") || z.Records != fresh.Records {
			t.Fatalf("round %d: apex or record count wrong", r)
		}
		served, cur = z, next
	}
}

// The scanner's fast path (lines with nothing special) finds the same
// entries as its general path, which a comment at the end of every line
// forces.
func TestScanFastPathMatchesGeneral(t *testing.T) {
	data := bigZone(3000)
	data = append(data, []byte("\n  \t\r\nlast\tIN\tA 192.0.2.1\r\n   \n$TTL 5\nx IN A 192.0.2.2")...)
	var commented []byte
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		body, nl := bytes.CutSuffix(l, []byte("\n"))
		commented = append(commented, body...)
		commented = append(commented, " ;c"...)
		if nl {
			commented = append(commented, '\n')
		}
	}
	collect := func(d []byte) []string {
		var out []string
		scanEntries(d, func(e entry) bool {
			out = append(out, fmt.Sprintf("%d %v %q %q", e.line, e.owner, e.tok1, e.tok2))
			return true
		})
		return out
	}
	fast, general := collect(data), collect(commented)
	if len(fast) != len(general) {
		t.Fatalf("%d entries on the fast path, %d on the general one", len(fast), len(general))
	}
	for i := range fast {
		if fast[i] != general[i] {
			t.Fatalf("entry %d: fast %s, general %s", i, fast[i], general[i])
		}
	}
}

// TestZoneStructSize: the Zone struct fits a 416-byte block (472 bytes,
// a 480-byte block, with its small fields padded one by one): each of a
// hosting provider's 100,000 zones has one.
func TestZoneStructSize(t *testing.T) {
	if n := unsafe.Sizeof(Zone{}); n > 416 {
		t.Errorf("Zone is %d bytes, want at most 416", n)
	}
}

// sharedRRsets counts z's RRsets that are old's (the same set, shared by
// a reload) and those z has of its own.
func sharedRRsets(z, old *Zone) (shared, own int) {
	for name, n := range z.nodes.all {
		on := old.nodes.get(name)
		for _, s := range n.rrsets {
			if on != nil && sameSet(on.set(s.rtype), &s) {
				shared++
			} else {
				own++
			}
		}
	}
	return shared, own
}
