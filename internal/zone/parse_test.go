package zone

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

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
			fmt.Fprintf(&b, "h%d IN TXT ( \"multi\" ; (\n  \"line;\" )\n", i)
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
	if parts, _, ok := split("big.test.", "big.zone", data, 4); !ok || len(parts) != 4 {
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
	if seq.Records != par.Records || len(seq.nodes) != len(par.nodes) {
		t.Fatalf("sequential: %d records %d names; parallel: %d records %d names", seq.Records, len(seq.nodes), par.Records, len(par.nodes))
	}
	for name, n := range seq.nodes {
		p := par.nodes[name]
		if p == nil {
			t.Fatalf("%s missing from the parallel parse", name)
		}
		if got, want := nodeText(par, p), nodeText(seq, n); got != want {
			t.Fatalf("%s:\nparallel   %s\nsequential %s", name, got, want)
		}
	}
	NewSet([]*Zone{seq}).Precompile()
	NewSet([]*Zone{par}).Precompile()
	for name, n := range seq.nodes {
		p := par.nodes[name]
		if p.plain != n.plain || len(p.templates) != len(n.templates) {
			t.Fatalf("%s: templates differ", name)
		}
		for i := range n.templates {
			if !bytes.Equal(p.templates[i].wire, n.templates[i].wire) {
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
		for _, rr := range s.rrs {
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
	for _, n := range z.nodes {
		if !n.plain && !n.cut && !n.occluded && !n.hasCNAME && !n.hasDNAME {
			t.Fatalf("%s is left to the general path", n.name)
		}
		for _, tp := range n.templates {
			a := s.Lookup(n.name, tp.qtype)
			m := &dns.Msg{
				MsgHdr:   dns.MsgHdr{Response: true, Authoritative: a.Authoritative, Rcode: a.Rcode},
				Compress: true,
				Question: []dns.Question{{Name: n.name, Qtype: tp.qtype, Qclass: dns.ClassINET}},
				Answer:   a.Answer, Ns: a.Ns, Extra: a.Extra,
			}
			want, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tp.wire, want) {
				t.Fatalf("%s %s: template\n%x\nwant\n%x", n.name, dns.TypeToString[tp.qtype], tp.wire, want)
			}
			checked[tp.qtype]++
		}
	}
	for _, typ := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX, dns.TypeSRV, dns.TypeCAA, dns.TypeSSHFP, dns.TypeHINFO, dns.TypePTR} {
		if checked[typ] == 0 {
			t.Errorf("no %s template checked", dns.TypeToString[typ])
		}
	}
	if n := z.nodes["h5.big.test."]; n.Template(dns.TypeA) != nil || n.Template(dns.TypeTXT) == nil {
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
	shared, own := 0, 0
	for name, n := range z.nodes {
		on := old.nodes[name]
		for _, s := range n.rrsets {
			if on != nil && sameSlice(on.get(s.rtype), s.rrs) {
				shared++
			} else {
				own++
			}
		}
	}
	// Only the two RRsets that changed (h0's and h1's A) are new.
	if own != 2 || shared < 3000 {
		t.Errorf("%d RRsets shared, %d new; want 2 new", shared, own)
	}
	if got := z.nodes["h0.big.test."].get(dns.TypeA)[0].(*dns.A).A.String(); got != "10.9.9.9" {
		t.Errorf("h0 A = %s after the reload", got)
	}
	if got := len(z.nodes["h1.big.test."].get(dns.TypeA)); got != 2 {
		t.Errorf("h1 has %d A records after the reload, want 2", got)
	}
	if got := old.nodes["h0.big.test."].get(dns.TypeA)[0].(*dns.A).A.String(); got != "10.0.0.0" {
		t.Errorf("the previous zone changed: h0 A = %s", got)
	}
	// Templates of shared RRsets are the previous zone's bytes; changed
	// ones are new and right.
	a, b := z.nodes["h2.big.test."].Template(dns.TypeA), old.nodes["h2.big.test."].Template(dns.TypeA)
	if len(a) == 0 || &a[0] != &b[0] {
		t.Error("h2's A template was packed again instead of shared")
	}
	if bytes.Equal(z.nodes["h0.big.test."].Template(dns.TypeA), old.nodes["h0.big.test."].Template(dns.TypeA)) {
		t.Error("h0's A template did not change")
	}
	// An RRset whose TTLs are unified must not change the previous
	// zone's records.
	ttl := bytes.Replace(changed, []byte("h2 IN A 10.0.0.2\n"), []byte("h2 IN A 10.0.0.2\nh2 5 IN A 10.0.0.222\n"), 1)
	z2, errs, _ := ParseWith(nil, "big.test.", "big.zone", ttl, ParseOptions{Previous: z})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := z.nodes["h2.big.test."].get(dns.TypeA)[0].Header().Ttl; got != 3600 {
		t.Errorf("the previous zone's h2 TTL became %d", got)
	}
	if got := z2.nodes["h2.big.test."].get(dns.TypeA)[0].Header().Ttl; got != 5 {
		t.Errorf("h2 TTL = %d, want 5", got)
	}
}
