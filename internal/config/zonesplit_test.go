package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/diag"
)

// longZones writes a configuration of n zones in the shapes a file mixes
// (flow and block mappings, a flow mapping over two lines, comments and
// blank lines between items, secondaries transferred in), with edit
// replacing the text of the items it returns a text for. It returns the
// file and the line each item starts on.
func longZones(n int, edit func(i int) string) (string, []int) {
	var b strings.Builder
	line := 0
	w := func(s string) {
		b.WriteString(s)
		line += strings.Count(s, "\n")
	}
	w("# many zones\nlisten: [\"127.0.0.1:5300\"]\nzones:\n")
	starts := make([]int, n)
	for i := range n {
		if i%97 == 5 {
			w("\n  # a comment between items\n")
		}
		starts[i] = line + 1
		if s := edit(i); s != "" {
			w(s)
			continue
		}
		switch i % 5 {
		case 0:
			w(fmt.Sprintf("  - { origin: z%d.example, file: zones/z%d.zone }\n", i, i))
		case 1:
			w(fmt.Sprintf("  - origin: \"z%d.example.\"\n    file: zones/z%d.zone\n    ixfr_journal: 30\n", i, i))
		case 2:
			w(fmt.Sprintf("  - { origin: z%d.example,\n      file: 'zones/z%d.zone' }\n", i, i))
		case 3:
			w(fmt.Sprintf("  - origin: z%d.example\n    primaries:\n      - 192.0.2.%d\n      - \"[2001:db8::1]:5300\"\n", i, i%250+1))
		case 4:
			w(fmt.Sprintf("  -   origin: z%d.example   # a comment\n      file: zones/z%d.zone\n", i, i))
		}
	}
	w("identity: ns1\n")
	return b.String(), starts
}

// oneParse is Parse of text in one piece: a tab (in a comment at the end,
// which moves no line) is what splitSeq never splits.
func oneParse(text string) (*Config, error) {
	return Parse(nil, "steer.yaml", []byte(text+"#\t\n"))
}

// TestLongZonesListDecodedApart checks a long zones list decoded apart
// against the same file parsed in one piece and against the lines the items
// were written on: the zones decoded, every key's line, and each problem's
// file:line, whether the problem is found in the tree (unknown key, type
// error, bad or duplicate origin) or by the parser (which the parts leave
// to the parse in one piece).
func TestLongZonesListDecodedApart(t *testing.T) {
	const n = 2 * apartZones
	text, starts := longZones(n, func(int) string { return "" })
	if decodeZonesApart(text) == nil {
		t.Fatal("a long zones list was not decoded apart")
	}
	if decodeZonesApart(text+"#\t\n") != nil {
		t.Fatal("a file with a tab was decoded apart")
	}
	c, err := Parse(nil, "steer.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	one, err := oneParse(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Zones) != n || !reflect.DeepEqual(c.Zones, one.Zones) {
		t.Fatalf("zones parsed in parts (%d) differ from those parsed in one piece (%d)", len(c.Zones), len(one.Zones))
	}
	for i, z := range c.Zones {
		if z.Line != starts[i] {
			t.Fatalf("zones[%d] at line %d, written on line %d", i, z.Line, starts[i])
		}
		for _, k := range []string{"", ".origin", ".file", ".primaries", ".primaries[1]", ".ixfr_journal"} {
			p := fmt.Sprintf("zones[%d]%s", i, k)
			if c.Line(p) != one.Line(p) {
				t.Fatalf("%s at line %d in parts, %d in one piece", p, c.Line(p), one.Line(p))
			}
		}
	}
	if c.Line("identity") != strings.Count(text, "\n") || c.Identity != "ns1" {
		t.Errorf("identity after the list: line %d, %q", c.Line("identity"), c.Identity)
	}

	bad := map[int]string{
		300: "  - { origin: z300.example, file: zones/z300.zone, fiel: x }\n",
		350: "  - origin: \"exa mple..com\"\n    file: zones/z350.zone\n",
		400: "  - { origin: Z17.example., primaries: [192.0.2.1] }\n",
		450: "  - { origin: z450.example, file: zones/z450.zone, ixfr_journal: many }\n",
	}
	text, starts = longZones(n, func(i int) string { return bad[i] })
	want := []prob{
		{starts[300], `unknown key "fiel" in zones[300]`},
		{starts[450], "cannot unmarshal"},
	}
	checkSame(t, text, want, false) // an item's problem is the whole file's parse's to report
	// Without the decoder's problems, the checks' are reported.
	delete(bad, 300)
	delete(bad, 450)
	text, starts = longZones(n, func(i int) string { return bad[i] })
	want = []prob{
		{starts[350], "is not a domain name"},
		{starts[400], fmt.Sprintf("origin z17.example. is already served (line %d)", starts[17])},
	}
	checkSame(t, text, want, true)

	// A syntax error anywhere leaves the file to the parse in one piece.
	for _, i := range []int{0, 250, n - 1} {
		text, starts = longZones(n, func(j int) string {
			if j == i {
				return fmt.Sprintf("  - { origin: z%d.example, file: zones/z%d.zone\n", i, i)
			}
			return ""
		})
		if decodeZonesApart(text) != nil {
			t.Errorf("item %d: a file with a syntax error was decoded apart", i)
		}
		_, err := Parse(nil, "steer.yaml", []byte(text))
		_, oneErr := oneParse(text)
		var ps diag.Problems
		if !errors.As(err, &ps) || len(ps) == 0 || ps[0].Line < starts[i]-1 || ps[0].Line > starts[i]+1 || oneErr == nil || err.Error() != oneErr.Error() {
			t.Errorf("item %d (line %d): unclosed flow mapping reported as %v (in one piece: %v)", i, starts[i], err, oneErr)
		}
	}
}

type prob struct {
	line   int
	phrase string
}

// checkSame requires Parse of text to report the problems want (in order,
// each at its line) and exactly what the parse in one piece reports, the
// zones decoded apart or not as apart says.
func checkSame(t *testing.T, text string, want []prob, apart bool) {
	t.Helper()
	if (decodeZonesApart(text) != nil) != apart {
		t.Fatalf("decoded apart: %v, want %v", !apart, apart)
	}
	_, err := Parse(nil, "steer.yaml", []byte(text))
	_, oneErr := oneParse(text)
	var ps diag.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse: %v", err)
	}
	if oneErr == nil || err.Error() != oneErr.Error() {
		t.Errorf("parsed in parts:\n%v\nin one piece:\n%v", err, oneErr)
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), err)
	}
	for i, w := range want {
		if ps[i].File != "steer.yaml" || ps[i].Line != w.line || !strings.Contains(ps[i].Msg, w.phrase) {
			t.Errorf("problem %d: %s:%d: %s; want line %d with %q", i, ps[i].File, ps[i].Line, ps[i].Msg, w.line, w.phrase)
		}
	}
}

// TestZoneItemShapesDecodeAsInOnePiece puts items of shapes near the plain
// ones (or in them) among a long list of plain items, and requires Parse
// to give what the parse in one piece gives: the same zones and key lines,
// or the same problems.
func TestZoneItemShapesDecodeAsInOnePiece(t *testing.T) {
	for _, item := range []string{
		"  - { origin: a.example, file: a.zone }\n",
		"  - {origin: a.example,file: a.zone}\n",
		"  -   {   origin:   a.example  ,  file: a.zone   }   # c\n",
		"  - { origin: a.example, file: a.zone }# c\n",
		"  - { origin: a.example, file: a.zone, }\n",
		"  - { file: a.zone, origin: a.example }\n",
		"  - { origin: a.example }\n",
		"  - { file: a.zone }\n",
		"  - { origin: a.example, origin: b.example, file: a.zone }\n",
		"  - { origin: a.example, file: a.zone } x\n",
		"  - { origin: 'a.example', file: \"dir/a b.zone\" }\n",
		"  - { origin: 'it''s', file: a.zone }\n",
		"  - { origin: \"a\\x41\", file: a.zone }\n",
		"  - { origin: a.example, file: null }\n",
		"  - { origin: a.example, file: ~ }\n",
		"  - { origin: a.example, file: - }\n",
		"  - { origin: a.example, file: -x }\n",
		"  - { origin: a.example, file: 0x1F }\n",
		"  - { origin: a.example, file: a#b }\n",
		"  - { origin: a.example, file: a b }\n",
		"  - { origin: a.example, file: a:b }\n",
		"  - { origin: a.example, file: \"é\" }\n",
		"  - { origin: a.example,\n      file: a.zone }\n",
		"  - origin: a.example\n    file: a.zone\n",
		"  - origin: a.example # c\n\n    # between\n    file: a.zone#x\n",
		"  - origin: a.example\n    file: a\n      b\n",
		"  - origin: a.example\n    file: -\n",
		"  - origin: a.example\n    file:\n",
		"  - origin: a.example\n     file: a.zone\n",
		"  - origin: a.example\n  file: a.zone\n",
		"  -\n    origin: a.example\n    file: a.zone\n",
		"  - origin: a.example\n    file: a.zone\n    primaries: [192.0.2.1]\n",
		"  - origin: a.example\n    fiel: a.zone\n",
		"  - origin: a.example\n    dnssec: { keys: [k/Ka] }\n",
		"  - origin: a.example\n    file: &f a.zone\n",
		"  - { origin: a.example, file: 'a.zone }\n",
		"  - \"origin\": a.example\n",
		"  - null\n",
		"  - [a, b]\n",
	} {
		text, _ := longZones(apartZones+10, func(i int) string {
			if i == apartZones/2 {
				return item
			}
			return ""
		})
		c, err := Parse(nil, "steer.yaml", []byte(text))
		one, oneErr := oneParse(text)
		if (err == nil) != (oneErr == nil) || err != nil && err.Error() != oneErr.Error() {
			t.Errorf("%q: Parse gives\n%v\nin one piece\n%v", item, err, oneErr)
			continue
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(c.Zones, one.Zones) {
			i := apartZones / 2
			t.Errorf("%q: zone %+v, in one piece %+v", item, c.Zones[i], one.Zones[i])
		}
		if !reflect.DeepEqual(c.zoneLines, one.zoneLines) {
			t.Errorf("%q: key lines differ from the parse in one piece", item)
		}
	}
}
