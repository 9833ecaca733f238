package zone

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// fastParse must read every file it accepts exactly as miekg/dns's
// ZoneParser does (the same records, field by field, and positions as
// recordLines gives them), and a zone parsed with it must be the zone
// parsed without it, with the same errors and warnings. The files: the
// peer projects' test zones (PowerDNS's, BIND's), this package's
// testdata, bench/zonegen's output (testdata/fastparse: `zonegen gen
// -records 1000` and one zone of `zonegen many`) and files made of
// tricky lines.

// fastAgrees checks fastParse's reading of data against the ZoneParser's
// and returns whether fastParse accepted it.
func fastAgrees(t *testing.T, what, origin string, data []byte) bool {
	t.Helper()
	rrs, at, ok := fastParse(origin, data)
	if !ok {
		return false
	}
	zp := dns.NewZoneParser(bytes.NewReader(data), origin, "f.zone")
	zp.SetIncludeAllowed(true)
	var want []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		want = append(want, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("%s: fastParse accepted what the ZoneParser refuses (%v):\n%s", what, err, data)
	}
	if len(rrs) != len(want) {
		t.Fatalf("%s: fastParse read %d records, the ZoneParser %d:\n%s", what, len(rrs), len(want), data)
	}
	for i := range want {
		g, w := rrs[i], want[i]
		if *g.Header() != *w.Header() || g.String() != w.String() || !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: record %d: fastParse %#v, the ZoneParser %#v:\n%s", what, i, g, w, data)
		}
	}
	if lines := recordLines(nil, "f.zone", data).line; !slicesEqual(at, lines) {
		t.Fatalf("%s: lines %v, recordLines %v:\n%s", what, at, lines, data)
	}
	return true
}

func slicesEqual(a, b []int32) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// parsedSame checks that ParseWith gives the same zone, errors and
// warnings with fastParse as without it.
func parsedSame(t *testing.T, what, origin string, data []byte) {
	t.Helper()
	z1, errs1, warns1 := Parse(nil, origin, "f.zone", data)
	noFastParse = true
	z2, errs2, warns2 := Parse(nil, origin, "f.zone", data)
	noFastParse = false
	if !reflect.DeepEqual(errs1, errs2) || !reflect.DeepEqual(warns1, warns2) {
		t.Fatalf("%s: with fastParse errors %v warnings %v, without %v %v", what, errs1, warns1, errs2, warns2)
	}
	if (z1 == nil) != (z2 == nil) {
		t.Fatalf("%s: zone %v with fastParse, %v without", what, z1, z2)
	}
	if z1 != nil && (z1.Records != z2.Records || !bytes.Equal(z1.flatten(), z2.flatten())) {
		t.Fatalf("%s: with fastParse\n%s\nwithout\n%s", what, z1.flatten(), z2.flatten())
	}
}

func TestFastParseFiles(t *testing.T) {
	type file struct{ name, origin string }
	var files []file
	accepted := map[string]bool{}
	filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "fuzz") {
			files = append(files, file{p, "example.com."})
		}
		return nil
	})
	for _, f := range []string{"zonegen-gen.zone", "zonegen-many.zone"} {
		accepted[filepath.Join("testdata", "fastparse", f)] = true
	}
	if dir := peerZones(); dir != "" {
		tsv, err := os.ReadFile(filepath.Join(dir, "zones.tsv"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(tsv))
		for sc.Scan() {
			f := strings.Split(sc.Text(), "\t")
			if len(f) < 2 || strings.HasPrefix(f[0], "#") {
				continue
			}
			files = append(files, file{filepath.Join(dir, f[1]), dns.Fqdn(f[0])})
		}
	} else {
		t.Log("peer zones not found (../shared/testdata/peer-zones): only this package's files")
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f.name)
		if err != nil {
			t.Fatal(err)
		}
		ok := fastAgrees(t, f.name, f.origin, data)
		if accepted[f.name] && !ok {
			t.Errorf("%s: fastParse gave it up", f.name)
		}
		if ok {
			n++
		}
		parsedSame(t, f.name, f.origin, data)
	}
	t.Logf("fastParse read %d of %d files", n, len(files))
}

// peerZones is the peer projects' test zones beside the repository, or "".
func peerZones() string {
	if d := os.Getenv("STEER_PEER_ZONES"); d != "" {
		return d
	}
	d := filepath.Join("..", "..", "..", "shared", "testdata", "peer-zones")
	if _, err := os.Stat(filepath.Join(d, "zones.tsv")); err != nil {
		return ""
	}
	return d
}

// trickyLines are lines fastParse must read as the ZoneParser does, or
// leave to it.
var trickyLines = []string{
	"$ORIGIN example.com.", "$TTL 3600", "$ttl 60", "$TTL 1h", "$TTL", "$TTL 300 extra", "$TTL 300 ; c",
	"$ORIGIN sub", "$ORIGIN a", "$ORIGIN in", "$ORIGIN .", "$origin x.example.com.", "$ORIGIN a..b",
	"$INCLUDE x", "$GENERATE 1-2 h$ A 192.0.2.$", "$foo A 192.0.2.1",
	"@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300",
	"@ 3600 IN SOA ns1.example.com. hostmaster.example.com. ( 2026120101 7200 3600 1209600 300 )",
	"@ SOA ns1 hm (\n 1 ; serial\n 2 ; refresh\n 3 4 5 )",
	"@ SOA ns1 hm (1 2 3 4 5)", "@ SOA ns1 hm (1\n2 3 4 5)", "@ SOA ns1 hm 1 2 3 4 1h",
	"@ SOA ns1 hm 4294967296 2 3 4 5", "@ SOA ns1 hm 4294967295 2 3 4 5", "@ SOA ns1 hm ( 1 2 3 4 5 ; c\n )",
	"@ SOA ns1 hm ( 1 2 3 4 ; c\n A )", "@ SOA ns1 hm ( 1 2 3 4 5 ) x", "@ SOA @ @ 1 2 3 4 5", "@ SOA ns1 hm 1 2 3 4",
	"@ SOA ns1 hm (1(;c\n2) 3 4 5 6)", "@ SOA ns1 hm ( 1 2 3 4 5)\nwww A 192.0.2.9",
	"@ IN NS ns1", "@ NS ns1.example.net.", "IN NS ns2", "  NS ns3", "\tA 192.0.2.1", " 60 A 192.0.2.1", " IN 60 A 192.0.2.1",
	"www IN A 192.0.2.1", "www 60 IN A 192.0.2.2", "www IN 60 A 192.0.2.3", "www in a 192.0.2.4", "WWW A 192.0.2.5",
	"www A 192.0.2.256", "www A 01.2.3.4", "www A ::1", "www A 192.0.2.1 extra", "www A 192.0.2.1;c", "www A 192.0.2.1 ; c",
	"www A (192.0.2.1)", "www A ( 192.0.2.1 )", "www A (\n192.0.2.1 )", "www A 192.0.2.1)", "www A (192.0.2.1",
	"www A 1.2.3.4)\n", "www A\t192.0.2.7\t", "www\tA 192.0.2.8",
	"www AAAA 2001:db8::1", "www AAAA ::ffff:192.0.2.1", "www AAAA 192.0.2.1", "www AAAA fe80::1%eth0", "www AAAA 2001:DB8::1",
	"www 4294967295 A 192.0.2.1", "www 4294967296 A 192.0.2.1", "www 1h A 192.0.2.1", "www 60 60 A 192.0.2.1",
	"www IN IN A 192.0.2.1", "www CH A 192.0.2.1", "www IN CH A 192.0.2.1", "www 0 A 192.0.2.1", "www 00000000060 A 192.0.2.1",
	"mail MX 10 mail", "@ MX 65536 mail", "@ MX 010 @", "@ MX 10", "@ MX mail 10", "@ MX 65535 mail.example.net.",
	`@ TXT "v=spf1 -all"`, `@ TXT "a" "b"`, `@ TXT ""`, `@ TXT word two`, `@ TXT "a;b(c)"`, "@ TXT ( \"a\"\n \"b\" )",
	`@ TXT "a""b"`, `@ TXT a"b"`, `@ TXT "a\"b"`, `@ TXT "a\098"`, `@ TXT "` + strings.Repeat("x", 256) + `"`,
	`@ TXT "` + strings.Repeat("y", 255) + `"`, `@ TXT "unterminated`, "@ TXT \"multi\nline\"", "@ TXT", "@ TXT ",
	"@ TXT ( \"a\" ; c\n A )", "@ TXT ( \"a\" ; c\n \"b\" )", "@ TXT ( a ; c\n IN )", `@ TXT "a";c`, `@ TXT ("a")`, `@ TXT "a" in`,
	"ftp CNAME www", "ftp CNAME @", "x CNAME www.example.net.", "d DNAME example.net.", "d DNAME @", "p PTR host.", "p PTR host",
	"_sip._tcp SRV 10 20 5060 sip", "_sip._tcp SRV 10 20 70000 sip", "_sip._tcp SRV 10 20 sip", "_s._udp SRV 0 0 0 .",
	"*.w A 192.0.2.1", "a..b A 192.0.2.1", ".a A 192.0.2.1", strings.Repeat("l", 64) + " A 192.0.2.1",
	strings.Repeat("l", 63) + " A 192.0.2.1", "www A 192.0.2.1\r", "w\\.x A 192.0.2.1", `"q" A 192.0.2.1`,
	"www HINFO a b", "www TYPE1 \\# 4 01020304", `www CAA 0 issue "x"`, "www NS ns CH", "www A TXT",
	"(www A 192.0.2.1)", "www (A 192.0.2.1)", "www ( A 192.0.2.1 )", "www A 192.0.2.1 )", "www A ( 192.0.2.1",
	"; comment only", "", "   ", "www", "www A", "www A \n", "IN A 192.0.2.1", "in A 192.0.2.1",
	"60 A 192.0.2.1", "A A 192.0.2.1", "@ A 192.0.2.1", "sub.www A 10.0.0.1", "x.example.com. A 10.0.0.2",
	"other.org. A 10.0.0.3", "ns.sub NS ns.sub", "Mixed.Case CNAME Target.Example.NET.", "www A 192.0.2.1 ;\n",
	"é A 192.0.2.1", "a\x00b A 192.0.2.1", "www\fA 192.0.2.1", "www A 192.0.2.1\f",
}

// trickyFile makes a file of a few tricky lines.
func trickyFile(rng *rand.Rand) []byte {
	var b bytes.Buffer
	switch rng.IntN(3) {
	case 0:
		b.WriteString("$TTL 300\n")
	case 1:
		b.WriteString("@ 600 IN SOA ns1 hm 1 2 3 4 5\n")
	}
	for range 1 + rng.IntN(6) {
		b.WriteString(trickyLines[rng.IntN(len(trickyLines))])
		b.WriteByte('\n')
	}
	if rng.IntN(4) == 0 {
		b.Truncate(b.Len() - 1) // no newline at the end
	}
	return b.Bytes()
}

func TestFastParseTrickyLines(t *testing.T) {
	accepted := 0
	for _, l := range trickyLines {
		for _, data := range []string{l, l + "\n", "$TTL 300\n" + l + "\n", "@ 60 NS ns\n" + l} {
			if fastAgrees(t, "line", "example.com.", []byte(data)) {
				accepted++
			}
		}
	}
	// Names far longer than the file's text (a long origin): the
	// block of names grows.
	long := strings.Repeat(strings.Repeat("o", 60)+".", 3) + "example."
	var b strings.Builder
	for i := range 200 {
		b.WriteString(string(rune('a'+i%26)) + " 60 A 192.0.2.1\n")
	}
	if !fastAgrees(t, "long origin", long, []byte(b.String())) {
		t.Error("a long origin: fastParse gave it up")
	}
	rng := rand.New(rand.NewPCG(31, 1))
	const files = 3000
	for i := range files {
		data := trickyFile(rng)
		if fastAgrees(t, "file", "example.com.", data) {
			accepted++
		}
		if i%10 == 0 {
			parsedSame(t, "file", "example.com.", data)
		}
	}
	t.Logf("fastParse accepted %d of %d", accepted, 4*len(trickyLines)+files)
	if accepted == 0 {
		t.Fatal("fastParse accepted none")
	}
}

// FuzzFastParse: whatever fastParse accepts, it reads as the ZoneParser
// does.
func FuzzFastParse(f *testing.F) {
	for _, l := range trickyLines {
		f.Add([]byte(l))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		f.Add(trickyFile(rng))
	}
	for _, name := range []string{"zonegen-many.zone"} {
		data, err := os.ReadFile(filepath.Join("testdata", "fastparse", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		fastAgrees(t, "fuzz", "example.com.", data)
	})
}

// BenchmarkParseFast parses zonegen's files with fastParse and with the
// ZoneParser alone: the whole of ParseWith, as a start runs it.
func BenchmarkParseFast(b *testing.B) {
	for _, name := range []string{"zonegen-many.zone", "zonegen-gen.zone"} {
		data, err := os.ReadFile(filepath.Join("testdata", "fastparse", name))
		if err != nil {
			b.Fatal(err)
		}
		origin := "cust000000.com."
		if name == "zonegen-gen.zone" {
			origin = "big.test."
		}
		for _, off := range []bool{false, true} {
			what := "fast"
			if off {
				what = "zoneparser"
			}
			b.Run(name+"/"+what, func(b *testing.B) {
				noFastParse = off
				defer func() { noFastParse = false }()
				b.ReportAllocs()
				for b.Loop() {
					if _, errs, _ := Parse(nil, origin, "f.zone", data); len(errs) > 0 {
						b.Fatal(errs)
					}
				}
			})
		}
	}
}
