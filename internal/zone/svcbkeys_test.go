package zone

import (
	"bytes"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// svcbZone has SVCB and HTTPS records with generic keys written with
// leading zeros (PowerDNS's test data has key00997= and key0998=), which
// Knot, NSD and PowerDNS load and miekg/dns alone refuses.
const svcbZone = `$ORIGIN svcb.test.
$TTL 300
@        SOA ns1 h 1 2 3 4 60
         NS  ns1
ns1      A   192.0.2.1
bar      SVCB 6 . key00997="quoted" key0998=foo key999=bar
empty    IN 60 SVCB 1 . key00997= key0998
web      HTTPS ( 1 . key01="\002h2\002h3" ; registered keys in generic form
                 key2 key0003="\032\251"
                 key4=\192\000\002\001 )
txt      TXT key0998=foo "key0997=bar"
key0998  TXT "an owner that looks like a key"
`

func TestSVCBKeysWithLeadingZeros(t *testing.T) {
	z, errs, _ := Parse(nil, "svcb.test.", "svcb.zone", []byte(svcbZone))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]string{
		"bar.svcb.test.":     `bar.svcb.test.	300	IN	SVCB	6 . key997="quoted" key998="foo" key999="bar"`,
		"empty.svcb.test.":   `empty.svcb.test.	60	IN	SVCB	1 . key997="" key998=""`,
		"web.svcb.test.":     `web.svcb.test.	300	IN	HTTPS	1 . alpn="h2,h3" no-default-alpn="" port="8443" ipv4hint="192.0.2.1"`,
		"txt.svcb.test.":     `txt.svcb.test.	300	IN	TXT	"key0998=foo" "key0997=bar"`,
		"key0998.svcb.test.": `key0998.svcb.test.	300	IN	TXT	"an owner that looks like a key"`,
	}
	for name, w := range want {
		n := z.nodes.get(name)
		if n == nil || len(n.rrsets) != 1 || n.rrsets[0].count() != 1 {
			t.Errorf("%s: %v", name, n)
			continue
		}
		if got := n.rrsets[0].records(name)[0].String(); got != w {
			t.Errorf("%s:\n got %s\nwant %s", name, got, w)
		}
	}
	// Lines are the file's, after the rewritten records too.
	if s := z.nodes.get("txt.svcb.test.").set(dns.TypeTXT); s.line != 11 {
		t.Errorf("TXT after the SVCB records is at line %d, want 11", s.line)
	}
	// The zone keeps the file's own text, which parses back the same.
	if !bytes.Equal(z.Source(), []byte(svcbZone)) || !z.Unchanged("svcb.zone", []byte(svcbZone)) {
		t.Error("the zone does not keep its file's text")
	}
}

func TestSVCBKeysErrorsKeepTheirLine(t *testing.T) {
	end := strings.Count(svcbZone, "\n")
	for _, tc := range []struct {
		rec, key string
		line     int
	}{
		{"worse SVCB 1 . key65535=\"x\"\n", "key65535", end + 1},
		{"worse SVCB 1 . bogus=1\n", "bogus", end + 1},
		{"worse SVCB ( 1 .\n alpn=h2\n key1=h3 )\n", "key1", end + 3},
	} {
		bad := svcbZone + tc.rec
		_, errs, _ := Parse(nil, "svcb.test.", "svcb.zone", []byte(bad))
		if len(errs) != 1 || errs[0].Line != tc.line || !strings.Contains(errs[0].Msg, `bad SVCB key "`+tc.key+`"`) {
			t.Errorf("%q: errors %v, want bad SVCB key %q at line %d", tc.rec, errs, tc.key, tc.line)
		}
	}
}

func TestSVCBKeysInParts(t *testing.T) {
	data := append(bigZone(60000), "late SVCB 1 . key00997=x\n"...)
	for _, workers := range []int{0, 4} {
		z, errs, _ := ParseWith(nil, "big.test.", "big.zone", data, ParseOptions{Workers: workers})
		if len(errs) > 0 {
			t.Fatalf("workers %d: %v", workers, errs)
		}
		n := z.nodes.get("late.big.test.")
		if n == nil || n.get(dns.TypeSVCB) == nil {
			t.Fatalf("workers %d: no SVCB at late.big.test.", workers)
		}
		if got := n.get(dns.TypeSVCB)[0].String(); !strings.HasSuffix(got, `key997="x"`) {
			t.Errorf("workers %d: %s", workers, got)
		}
		if s := n.set(dns.TypeSVCB); int(s.line) != bytes.Count(data, []byte{'\n'}) {
			t.Errorf("workers %d: SVCB at line %d", workers, s.line)
		}
	}
}

// TestNIDShortGroups reads NID and L64 values written with groups of
// fewer than four hex digits (BIND's own test zone has "0:0:0:0"), which
// NSD and BIND load and miekg/dns alone refuses, as RFC 6742 §2.3 values.
func TestNIDShortGroups(t *testing.T) {
	const zoneText = `$ORIGIN nid.test.
$TTL 300
@        SOA ns1 h 1 2 3 4 60
         NS  ns1
ns1      A   192.0.2.1
ns1      NID 2 0:0:0:0
ns1      L64 ( 2
               10:b:c:ffff )
nid2     nid 3 0014:4fff:ff20:ee64
nid3     TXT "NID 2 0:0:0:1"
nid4     NID 10 0:0:0:12345
`
	_, errs, _ := Parse(nil, "nid.test.", "nid.zone", []byte(zoneText))
	if len(errs) != 1 || errs[0].Line != 11 {
		t.Fatalf("want one error, for the five-digit group at line 11: %v", errs)
	}
	z, errs, _ := Parse(nil, "nid.test.", "nid.zone", []byte(strings.Replace(zoneText, "12345", "1234", 1)))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[uint16]string{
		dns.TypeNID: "ns1.nid.test.	300	IN	NID	2 0000:0000:0000:0000",
		dns.TypeL64: "ns1.nid.test.	300	IN	L64	2 0010:000B:000C:FFFF",
	}
	for rtype, w := range want {
		rrs := z.nodes.get("ns1.nid.test.").get(rtype)
		if len(rrs) != 1 || rrs[0].String() != w {
			t.Errorf("%s: got %v, want %s", dns.TypeToString[rtype], rrs, w)
		}
	}
	if got := z.nodes.get("nid3.nid.test.").get(dns.TypeTXT)[0].String(); got != `nid3.nid.test.	300	IN	TXT	"NID 2 0:0:0:1"` {
		t.Errorf("a TXT that reads like a NID changed: %s", got)
	}
	if s := z.nodes.get("nid2.nid.test.").set(dns.TypeNID); s == nil || s.line != 9 {
		t.Errorf("the NID after the rewritten ones is not at line 9: %v", s)
	}
}

// TestUnknownTypeNamed names a type mnemonic miekg/dns does not know
// (PowerDNS's ALIAS, the newer WALLET) rather than calling it a bad TTL.
func TestUnknownTypeNamed(t *testing.T) {
	for _, line := range []string{"a ALIAS b.example.", "w IN WALLET \"c\" \"w\"", "x 300 IN alias y"} {
		_, errs, _ := Parse(nil, "t.test.", "t.zone", []byte("$TTL 300\n@ SOA ns h 1 2 3 4 60\n@ NS ns\nns A 192.0.2.1\n"+line+"\n"))
		if len(errs) != 1 || errs[0].Line != 5 || !strings.Contains(errs[0].Msg, "unknown record type") || !strings.Contains(errs[0].Msg, "TYPEnnn") {
			t.Errorf("%q: %v", line, errs)
		}
	}
	_, errs, _ := Parse(nil, "t.test.", "t.zone", []byte("$TTL 300\n@ SOA ns h 1 2 3 4 60\n@ NS ns\nns 1x A 192.0.2.1\n"))
	if len(errs) != 1 || strings.Contains(errs[0].Msg, "unknown record type") {
		t.Errorf("a bad TTL: %v", errs)
	}
}
