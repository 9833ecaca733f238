package zone_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/zone"
)

// head is five lines of a valid zone; case bodies start at line 6.
const head = `$ORIGIN example.com.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
`

// prob is an expected problem: file (default v.zone), line and a phrase of
// the message.
type prob struct {
	file   string
	line   int
	phrase string
}

func checkProblems(t *testing.T, kind string, got diag.Problems, want []prob) {
	t.Helper()
	for _, w := range want {
		f := w.file
		if f == "" {
			f = "v.zone"
		}
		if !hasProblem(got, f, w.line, w.phrase) {
			t.Errorf("missing %s %s:%d containing %q", kind, f, w.line, w.phrase)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d %s, want %d:\n%v", len(got), kind, len(want), got)
	}
}

func TestValidationErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		errs []prob
	}{
		{"missing SOA", "$ORIGIN example.com.\n@ 300 IN NS ns1\nns1 300 IN A 192.0.2.1\n",
			[]prob{{line: 0, phrase: "no SOA record"}}},
		{"missing apex NS", "$ORIGIN example.com.\n@ 300 IN SOA ns1 h 1 2 3 4 5\nns1 300 IN A 192.0.2.1\n",
			[]prob{{line: 0, phrase: "no NS records at its apex"}}},
		{"NS only below the apex", "$ORIGIN example.com.\n@ 300 IN SOA ns1 h 1 2 3 4 5\nsub 300 IN NS ns1\n",
			[]prob{{line: 0, phrase: "no NS records at its apex"}}},
		{"empty file", "", []prob{{line: 0, phrase: "no SOA record"}, {line: 0, phrase: "no NS records"}}},
		{"only comments", "; nothing\n\n   ; here\n", []prob{{line: 0, phrase: "no SOA record"}, {line: 0, phrase: "no NS records"}}},
		{"CNAME after other data", head + "www IN A 192.0.2.2\nwww IN CNAME ns1\n",
			[]prob{{line: 7, phrase: "CNAME and other data"}}},
		{"CNAME before other data", head + "www IN CNAME ns1\nwww IN TXT \"x\"\n",
			[]prob{{line: 6, phrase: "CNAME and other data"}}},
		{"CNAME with other data far apart", head + "www IN CNAME ns1\nx IN A 192.0.2.3\ny IN A 192.0.2.4\nWWW IN MX 10 ns1\n",
			[]prob{{line: 6, phrase: "CNAME and other data (MX at line 9)"}}},
		{"CNAME at the apex", head + "@ IN CNAME www.example.org.\n",
			[]prob{{line: 6, phrase: "CNAME and other data"}}},
		{"two CNAMEs", head + "www IN CNAME a\nwww IN CNAME b\n",
			[]prob{{line: 6, phrase: "has 2 CNAME records"}}},
		{"two DNAMEs", head + "dn IN DNAME example.net.\ndn IN DNAME example.org.\n",
			[]prob{{line: 6, phrase: "has 2 DNAME records"}}},
		{"two SOAs", head + "@ IN SOA ns2 hostmaster 2 7200 3600 1209600 300\n",
			[]prob{{line: 3, phrase: "has 2 SOA records"}}},
		{"record outside the origin", head + "www.example.org. IN A 192.0.2.1\n",
			[]prob{{line: 6, phrase: "www.example.org. is outside the zone example.com."}}},
		{"$ORIGIN moves outside", head + "$ORIGIN example.net.\nwww IN A 192.0.2.1\n",
			[]prob{{line: 7, phrase: "is outside the zone"}}},
		{"parent of the origin", head + "com. IN A 192.0.2.1\n",
			[]prob{{line: 6, phrase: "is outside the zone"}}},
		{"SOA not at the apex", head + "sub IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n",
			[]prob{{line: 6, phrase: "not at the zone apex"}}},
		{"unparsable address", head + "www IN A 999.0.0.1\n",
			[]prob{{line: 6, phrase: "bad A"}}},
		{"unparsable after good lines", head + "a IN A 192.0.2.1\nb IN A 192.0.2.2\n\n; comment\nc IN MX ten mail\n",
			[]prob{{line: 10, phrase: "MX"}}},
		{"unknown type", head + "www IN BOGUS foo\n",
			[]prob{{line: 6, phrase: "BOGUS"}}},
		{"class CH", head + "www CH A 192.0.2.1\n",
			[]prob{{line: 6, phrase: "class CH"}}},
		{"DNAME and NS at one name", head + "x IN NS ns1\nx IN DNAME example.net.\n",
			[]prob{{line: 7, phrase: "both a DNAME and a delegation"}}},
		{"all problems at once", head + "www IN A 192.0.2.2\nwww IN CNAME ns1\nwww.example.org. IN A 192.0.2.1\nsub IN SOA ns1 h 1 2 3 4 5\nt IN CNAME a\nt IN CNAME b\n",
			[]prob{
				{line: 7, phrase: "CNAME and other data"},
				{line: 8, phrase: "outside the zone"},
				{line: 9, phrase: "not at the zone apex"},
				{line: 10, phrase: "has 2 CNAME records"},
			}},
		{"parentheses, comments and quotes", `$ORIGIN example.com.
$TTL 300
@ IN SOA ns1 hostmaster ( ; a comment with ( and " in it
        2024010101 ; serial "
        7200 3600
        1209600 300 )
@ IN NS ns1
ns1 IN A 192.0.2.1
txt1 IN TXT "semi;colon" "paren(" ; comment )
txt2 IN TXT ( "multi"
      "line;" ")"
    )
txt3 IN TXT a\;b\"c
   
; full comment line (
   ; indented comment "
txt4 IN TXT "quote \" inside ; still (" "x"
bad IN A 192.0.2.9
bad IN CNAME ns1
www.example.org. IN A 192.0.2.1
`, []prob{{line: 19, phrase: "CNAME and other data"}, {line: 20, phrase: "outside the zone"}}},
		{"CRLF line endings", strings.ReplaceAll(head+"txt IN TXT ( \"a\"\n \"b\" )\nbad IN A 192.0.2.9\nbad IN CNAME ns1\n", "\n", "\r\n"),
			[]prob{{line: 9, phrase: "CNAME and other data"}}},
		{"blank owner continues the last name", head + "www IN A 192.0.2.2\n    IN CNAME ns1\n",
			[]prob{{line: 7, phrase: "CNAME and other data"}}},
		{"$GENERATE counts its records", head + `$GENERATE 1-10 host$ A 192.0.2.$
$GENERATE 0-20/5 h$ TXT "x"
$GENERATE 1-4 ${0,3,d}.g A 192.0.2.$
clash IN CNAME ns1
clash IN A 192.0.2.1
www.example.org. IN A 192.0.2.1
`, []prob{{line: 9, phrase: "CNAME and other data"}, {line: 11, phrase: "outside the zone"}}},
		{"$GENERATE errors have its line", head + "$GENERATE 1-3 x$.example.org. A 192.0.2.$\nout.example.org. IN A 192.0.2.1\n",
			[]prob{
				{line: 6, phrase: "x1.example.org. is outside"},
				{line: 6, phrase: "x2.example.org. is outside"},
				{line: 6, phrase: "x3.example.org. is outside"},
				{line: 7, phrase: "out.example.org. is outside"},
			}},
		{"$INCLUDE of a missing file", head + "$INCLUDE testdata/no-such-file.inc\n",
			[]prob{{line: 6, phrase: "no-such-file.inc"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z, errs, _ := zone.Parse(nil, "example.com.", "v.zone", []byte(tc.data))
			if z != nil {
				t.Errorf("zone returned despite errors")
			}
			checkProblems(t, "errors", errs, tc.errs)
		})
	}
}

func TestValidationWarnings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		warns   []prob
		records int
		// lookup checks, after a successful load
		qname  string
		qtype  uint16
		answer []string
	}{
		{name: "clean", data: head + "www IN A 192.0.2.2\n", records: 4},
		{name: "duplicate record", data: head + "www IN A 192.0.2.2\nwww 600 IN A 192.0.2.2\n", records: 4,
			warns: []prob{{line: 7, phrase: "duplicate record"}},
			qname: "www.example.com.", qtype: dns.TypeA, answer: []string{"www.example.com. 300 IN A 192.0.2.2"}},
		{name: "duplicate in other case", data: head + "www IN A 192.0.2.2\nWWW IN A 192.0.2.2\n", records: 4,
			warns: []prob{{line: 7, phrase: "duplicate record"}}},
		{name: "differing TTLs get the minimum", data: head + "www 100 IN A 192.0.2.2\nwww 50 IN A 192.0.2.3\nwww 300 IN A 192.0.2.4\nwww 20 IN AAAA 2001:db8::1\n", records: 7,
			warns: []prob{{line: 6, phrase: "different TTLs; all get 50"}},
			qname: "www.example.com.", qtype: dns.TypeA, answer: []string{
				"www.example.com. 50 IN A 192.0.2.2",
				"www.example.com. 50 IN A 192.0.2.3",
				"www.example.com. 50 IN A 192.0.2.4",
			}},
		{name: "differing TTLs, descending", data: head + "www 300 IN A 192.0.2.2\nwww 200 IN A 192.0.2.3\nwww 100 IN A 192.0.2.4\n", records: 6,
			warns: []prob{{line: 6, phrase: "different TTLs; all get 100"}},
			qname: "www.example.com.", qtype: dns.TypeA, answer: []string{
				"www.example.com. 100 IN A 192.0.2.2",
				"www.example.com. 100 IN A 192.0.2.3",
				"www.example.com. 100 IN A 192.0.2.4",
			}},
		{name: "data below a delegation", data: head + "sub IN NS ns.sub\nsub IN NS ns.other.example.com.\nns.sub IN A 192.0.2.9\nns.sub IN AAAA 2001:db8::9\nfoo.sub IN TXT \"x\"\nx.y.sub IN MX 10 ns1\n", records: 9,
			warns: []prob{
				{line: 10, phrase: "foo.sub.example.com. TXT is below the delegation at sub.example.com."},
				{line: 11, phrase: "x.y.sub.example.com. MX is below the delegation at sub.example.com."},
			}},
		{name: "data below a DNAME", data: head + "dn IN DNAME example.net.\nx.dn IN A 192.0.2.1\ndn IN TXT \"ok\"\n", records: 6,
			warns: []prob{{line: 7, phrase: "x.dn.example.com. A is below the DNAME at dn.example.com."}}},
		{name: "data below an apex DNAME", data: head + "@ IN DNAME example.net.\nx IN TXT \"t\"\n", records: 5,
			warns: []prob{
				{line: 5, phrase: "ns1.example.com. A is below the DNAME at example.com."},
				{line: 7, phrase: "x.example.com. TXT is below the DNAME at example.com."},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z, errs, warns := zone.Parse(nil, "example.com.", "v.zone", []byte(tc.data))
			if len(errs) > 0 || z == nil {
				t.Fatalf("unexpected errors: %v", errs)
			}
			checkProblems(t, "warnings", warns, tc.warns)
			if z.Records != tc.records {
				t.Errorf("Records = %d, want %d", z.Records, tc.records)
			}
			if tc.qname != "" {
				a := zone.NewSet([]*zone.Zone{z}).Lookup(tc.qname, tc.qtype)
				checkSection(t, "answer", a.Answer, tc.answer, false)
			}
		})
	}
}

func TestOriginForms(t *testing.T) {
	for _, origin := range []string{"example.com", "EXAMPLE.COM.", "Example.Com"} {
		z, errs, _ := zone.Parse(nil, origin, "v.zone", []byte(strings.Replace(head, "$ORIGIN example.com.\n", "", 1)))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", origin, errs)
		}
		if z.Origin != "example.com." {
			t.Errorf("Parse(%q).Origin = %q", origin, z.Origin)
		}
		if z.Serial() != 1 || z.File != "v.zone" || z.Records != 3 {
			t.Errorf("serial %d file %q records %d", z.Serial(), z.File, z.Records)
		}
		if s := z.String(); !strings.Contains(s, "example.com.") || !strings.Contains(s, "serial 1") || !strings.Contains(s, "v.zone") {
			t.Errorf("String() = %q", s)
		}
	}
}

func TestIncludeErrors(t *testing.T) {
	want := func(dir string) []prob {
		j := func(p string) string {
			if dir == "testdata" {
				return filepath.Join(dir, p)
			}
			return p // fs.FS paths are slash-separated
		}
		return []prob{
			{file: j("include/hosts.inc"), line: 5, phrase: "CNAME and other data"},
			{file: j("include/sub/deeper.inc"), line: 3, phrase: "outside the zone"},
			{file: j("include/sub/nested.inc"), line: 2, phrase: "CNAME and other data"},
			{file: j("include/main.zone"), line: 9, phrase: "CNAME and other data"},
		}
	}
	t.Run("disk", func(t *testing.T) {
		z, errs, _ := zone.Load(nil, "example.com.", filepath.Join("testdata", "include", "main.zone"))
		if z != nil {
			t.Error("zone returned despite errors")
		}
		checkProblems(t, "errors", errs, want("testdata"))
	})
	t.Run("fs", func(t *testing.T) {
		z, errs, _ := zone.Load(os.DirFS("testdata"), "example.com.", "include/main.zone")
		if z != nil {
			t.Error("zone returned despite errors")
		}
		checkProblems(t, "errors", errs, want(""))
	})
	t.Run("parse error in included file", func(t *testing.T) {
		_, errs, _ := zone.Load(nil, "example.com.", filepath.Join("testdata", "badinc", "main.zone"))
		checkProblems(t, "errors", errs, []prob{{file: filepath.Join("testdata", "badinc", "bad.inc"), line: 3, phrase: "bad A"}})
		_, errs, _ = zone.Load(os.DirFS("testdata"), "example.com.", "badinc/main.zone")
		checkProblems(t, "errors", errs, []prob{{file: "badinc/bad.inc", line: 3, phrase: "bad A"}})
	})
	t.Run("missing zone file", func(t *testing.T) {
		z, errs, warns := zone.Load(nil, "example.com.", filepath.Join("testdata", "nope.zone"))
		if z != nil || len(warns) != 0 {
			t.Errorf("zone %v warns %v", z, warns)
		}
		checkProblems(t, "errors", errs, []prob{{file: filepath.Join("testdata", "nope.zone"), line: 0, phrase: "nope.zone"}})
	})
	t.Run("include in memory fs", func(t *testing.T) {
		fsys := fstest.MapFS{
			"z/main.zone": {Data: []byte(head + "$INCLUDE /z/inc/a.inc\nend IN A 192.0.2.1\nend IN CNAME ns1\n")},
			"z/inc/a.inc": {Data: []byte("; a\n\nwww IN A 192.0.2.2\nwww IN CNAME ns1\n")},
		}
		_, errs, _ := zone.Load(fsys, "example.com.", "z/main.zone")
		checkProblems(t, "errors", errs, []prob{
			{file: "z/inc/a.inc", line: 4, phrase: "CNAME and other data"},
			{file: "z/main.zone", line: 8, phrase: "CNAME and other data"},
		})
	})
}

func TestIncludeGood(t *testing.T) {
	check := func(t *testing.T, z *zone.Zone, errs, warns diag.Problems, dir string) {
		t.Helper()
		if len(errs) > 0 {
			t.Fatalf("errors: %v", errs)
		}
		checkProblems(t, "warnings", warns, []prob{
			{file: dir + "lab.inc", line: 3, phrase: "all get 60"},
			{file: dir + "main.zone", line: 8, phrase: "duplicate record"},
		})
		s := zone.NewSet([]*zone.Zone{z})
		checkAnswer(t, s.Lookup("www.lab.example.com.", dns.TypeA), expect{aa: true, zone: "example.com.", answer: []string{
			"www.lab.example.com. 60 IN A 192.0.2.50",
			"www.lab.example.com. 60 IN A 192.0.2.51",
		}})
		checkAnswer(t, s.Lookup("lab.example.com.", dns.TypeTXT), expect{aa: true, zone: "example.com.", answer: []string{
			`lab.example.com. 300 IN TXT "lab"`,
		}})
		// The origin goes back to example.com. after the $INCLUDE.
		checkAnswer(t, s.Lookup("www.example.com.", dns.TypeA), expect{aa: true, zone: "example.com.", answer: []string{
			"www.example.com. 300 IN A 192.0.2.2",
		}})
	}
	t.Run("disk", func(t *testing.T) {
		z, errs, warns := zone.Load(nil, "example.com.", filepath.Join("testdata", "good", "main.zone"))
		check(t, z, errs, warns, filepath.Join("testdata", "good")+string(filepath.Separator))
	})
	t.Run("fs", func(t *testing.T) {
		z, errs, warns := zone.Load(os.DirFS("testdata"), "example.com.", "good/main.zone")
		check(t, z, errs, warns, "good/")
	})
}
