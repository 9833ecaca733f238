package zone

import (
	"bytes"
	"io/fs"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/miekg/dns"
)

func TestGenerateCount(t *testing.T) {
	for r, want := range map[string]int{
		"1-10":     10,
		"0-0":      1,
		"0-20/5":   5,
		"1-10/3":   4,
		"1-10/20":  1,
		"10-1":     0,
		"1-":       0,
		"-5":       0,
		"5":        0,
		"1-10/0":   0,
		"1-10/-1":  0,
		"1-10/x":   0,
		"a-b":      0,
		"100-1099": 1000,
	} {
		if got := generateCount(r); got != want {
			t.Errorf("generateCount(%q) = %d, want %d", r, got, want)
		}
	}
}

// parsed returns how many records miekg/dns's ZoneParser yields.
func parsed(t *testing.T, fsys fs.FS, file string, data []byte) int {
	t.Helper()
	zp := dns.NewZoneParser(bytes.NewReader(data), "example.com.", file)
	zp.SetIncludeAllowed(true)
	if fsys != nil {
		zp.SetIncludeFS(fsys)
	}
	n := 0
	for _, ok := zp.Next(); ok; _, ok = zp.Next() {
		n++
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return n
}

func TestRecordPositions(t *testing.T) {
	fsys := fstest.MapFS{
		"d/inc.zone":      {Data: []byte("; included\nx IN A 192.0.2.1\n\ny IN TXT ( \"a\"\n  \"b\" )\n$INCLUDE sub/more.zone\n")},
		"d/sub/more.zone": {Data: []byte("\n\nz IN A 192.0.2.3\n")},
	}
	for _, tc := range []struct {
		name string
		data string
		want []Pos
	}{
		{"simple", "$ORIGIN example.com.\n$TTL 60\n@ IN SOA ns h 1 2 3 4 5\n@ IN NS ns\n\nns IN A 192.0.2.1\n",
			[]Pos{{"d/main.zone", 3}, {"d/main.zone", 4}, {"d/main.zone", 6}}},
		{"parentheses and comments", "$TTL 60\n@ IN SOA ns h ( ; comment (\n 1 ; \"\n 2 3\n 4 5 )\n\n; (\n  ; )\n@ IN NS ns\n",
			[]Pos{{"d/main.zone", 2}, {"d/main.zone", 9}}},
		{"quotes with specials", "$TTL 60\na IN TXT \"x;(\" \"y)\" ; c (\nb IN TXT \"q\\\";(\"\nc IN TXT a\\;b\\(c\n",
			[]Pos{{"d/main.zone", 2}, {"d/main.zone", 3}, {"d/main.zone", 4}}},
		{"blank owner and leading blank lines", "\n\n$TTL 60\na IN A 192.0.2.1\n  IN AAAA 2001:db8::1\n\t IN TXT \"t\"\n",
			[]Pos{{"d/main.zone", 4}, {"d/main.zone", 5}, {"d/main.zone", 6}}},
		{"record starting inside a parenthesis line", "$TTL 60\na IN TXT (\n\"x\" )\nb IN A 192.0.2.2\n",
			[]Pos{{"d/main.zone", 2}, {"d/main.zone", 4}}},
		{"generate", "$TTL 60\n$GENERATE 1-3 h$ A 192.0.2.$\n$GENERATE 0-8/4 t$ TXT \"x\"\nlast IN A 192.0.2.9\n",
			[]Pos{{"d/main.zone", 2}, {"d/main.zone", 2}, {"d/main.zone", 2}, {"d/main.zone", 3}, {"d/main.zone", 3}, {"d/main.zone", 3}, {"d/main.zone", 4}}},
		{"include", "$TTL 60\na IN A 192.0.2.1\n$INCLUDE inc.zone\nb IN A 192.0.2.2\n",
			[]Pos{{"d/main.zone", 2}, {"d/inc.zone", 2}, {"d/inc.zone", 4}, {"d/sub/more.zone", 3}, {"d/main.zone", 4}}},
		{"lower-case directives", "$ttl 60\n$origin example.com.\na IN A 192.0.2.1\n",
			[]Pos{{"d/main.zone", 3}}},
		{"CRLF", "$TTL 60\r\na IN TXT ( \"x\"\r\n \"y\" )\r\nb IN A 192.0.2.2\r\n",
			[]Pos{{"d/main.zone", 2}, {"d/main.zone", 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recordPositions(fsys, "d/main.zone", []byte(tc.data), 0, 1<<30)
			if !slices.Equal(got, tc.want) {
				t.Errorf("positions:\n got %v\nwant %v", got, tc.want)
			}
			if n := parsed(t, fsys, "d/main.zone", []byte(tc.data)); n != len(got) {
				t.Errorf("the parser yields %d records, the scanner found %d", n, len(got))
			}
		})
	}
}
