package policy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
)

// reuseBase has records of every kind that matter to reuse: records of a
// named policy whose rules warn (once for the policy), inline rules with a
// split, a TTL that warns, disabled pools that warn, health-checked pools,
// a CNAME record. Markers (# name) let edits and tests find lines.
const reuseBase = `
health_checks:
  web: { type: tcp, port: 80 }
  alt: { type: tcp, port: 81 }
policies:
  geo:
    rules:
      - match: { country: [IN, LK] }
        pool: in
      - match: { country: IN }   # shadowed
        pool: eu
      - default: { by: geoproximity }
records:
  - name: a.example.com
    ttl: 30
    policy: geo
    pools:
      in: { address: 203.0.113.1, location: { lat: 19.08, lon: 72.88 }, health_check: web }
      eu: { address: 198.51.100.1, location: { lat: 50.11, lon: 8.68 } }   # a.eu
      us: { address: 192.0.2.1, location: { lat: 38.95, lon: -77.45 } }
  - name: b.example.com
    policy: geo
    pools:
      in: { address: 203.0.113.2, location: { lat: 19.08, lon: 72.88 } }   # b.in
      eu: { address: 198.51.100.2, location: { lat: 50.11, lon: 8.68 } }   # b.eu
      us: { address: 192.0.2.2, location: { lat: 38.95, lon: -77.45 } }
  - name: c.example.com
    ttl: 600
    pools:
      eu: { address: 198.51.100.3, health_check: alt }
      us: { address: 192.0.2.3 }
    rules:
      - match: { continent: EU }
        split: [{ pool: eu, weight: 3 }, { pool: us, weight: 1 }]
        sticky: client_subnet
      - default: { pool: us }
  - name: d.example.com
    when_all_down: servfail
    pools:
      only: { address: 192.0.2.4, enabled: false }
    rules:
      - default: { pool: only }
  - name: e.example.com
    type: CNAME
    pools:
      x: { target: x.example.net }
      y: { target: y.example.net }
    rules:
      - match: { continent: EU }
        pool: x
      - default: { pool: y }
  - name: f.example.com
    pools:
      p: { address: 192.0.2.6 }
      q: { address: 192.0.2.7 }
    rules:
      - default: { by: latency }
`

// reuseYAML is reuseBase with the testdata city database.
func reuseYAML(t testing.TB, text string) string {
	return "geo:\n  databases: [" + testdataGeo(t, cityDB) + "]\n" + text
}

// dumpTable writes out everything a table's records answer and explain
// with: names, TTLs, pools (addresses, answer records, lines, checks),
// rules (lines, matches, actions) and decisions for a few clients.
func dumpTable(tab *policy.Table) string {
	if tab == nil {
		return "<nil>"
	}
	var b strings.Builder
	for i, r := range tab.Records {
		fmt.Fprintf(&b, "%d %s index=%d line=%d ttl=%d degraded=%d next=%t alldown=%s fallback=%d enabled=%x latency=%t stats=%+v\n",
			i, r, r.Index, r.Line, r.TTL, r.DegradedTTL, r.NextRule, r.WhenAllDown, r.FallbackPool, r.Enabled, r.HasLatency(), r.Stats)
		for _, p := range r.Pools {
			fmt.Fprintf(&b, "  pool %s index=%d line=%d v4=%v v6=%v target=%q loc=%t %v,%v bias=%d site=%s check=%q min_up=%d\n",
				p.Name, p.Index, p.Line, p.V4, p.V6, p.Target, p.HasLoc, p.Lat, p.Lon, p.Bias, p.Site, p.Check, p.MinUp)
			for _, rr := range r.PoolRecords(p) {
				fmt.Fprintf(&b, "    %s\n", rr)
			}
		}
		for _, rule := range r.Rules {
			fmt.Fprintf(&b, "  rule %d line=%d default=%t action=%+v (%s) match=%s\n",
				rule.Index, rule.Line, rule.Default, rule.Action, r.DescribeAction(&rule.Action), dumpMatch(rule.Match))
		}
		for _, c := range []string{"49.36.0.0", "91.64.0.0", "8.8.8.0", "203.0.113.0", "2001:db8::"} {
			fmt.Fprintf(&b, "  %s: %+v\n", c, r.Decide(query(r, c, 24, "")))
		}
	}
	return b.String()
}

func dumpMatch(m *policy.Match) string {
	if m == nil {
		return "-"
	}
	return m.String()
}

func sortedProblems(ps diag.Problems) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

// A rebuild with the previous table gives exactly what a build from
// scratch gives, for every kind of edit: the same records (to their
// lines, answer records and decisions), the same warnings and errors. It
// builds only the records whose inputs changed and takes the others,
// copied, from the previous table, which is left as it was.
func TestRebuildTakesEveryChange(t *testing.T) {
	base := reuseYAML(t, reuseBase)
	replace := func(old, new string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				panic("no " + old)
			}
			return strings.Replace(s, old, new, 1)
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(string) string
		built int // records built again; -1: the build fails
	}{
		{"nothing", func(s string) string { return s }, 0},
		{"a comment at the end", func(s string) string { return s + "# the end\n" }, 0},
		{"record address", replace("203.0.113.2,", "203.0.113.99,"), 1},
		{"record ttl", replace("ttl: 600", "ttl: 120"), 1},
		{"record ttl added", replace("  - name: b.example.com\n", "  - name: b.example.com\n    ttl: 45\n"), 1},
		{"split weight", replace("weight: 3", "weight: 5"), 1},
		{"pool enabled", replace("enabled: false", "enabled: true"), 1},
		{"pool disabled", replace("address: 192.0.2.3 }", "address: 192.0.2.3, enabled: false }"), 1},
		{"pool location", replace("lat: 50.11, lon: 8.68 } }   # b.eu", "lat: 48.85, lon: 2.35 } }   # b.eu"), 1},
		{"when_all_down", replace("when_all_down: servfail", "when_all_down: nodata"), 1},
		{"cname target", replace("target: x.example.net", "target: z.example.net"), 1},
		{"policy rule", replace("country: IN }   # shadowed", "country: DE }   # shadowed"), 2},
		{"policy on_unhealthy", replace("  geo:\n    rules:", "  geo:\n    on_unhealthy: when_all_down\n    rules:"), 2},
		{"health check a pool uses", replace("port: 80", "port: 8080"), 1},
		{"health check nobody uses", replace("health_checks:\n", "health_checks:\n  spare: { type: tcp, port: 82 }\n"), 0},
		{"health check removed", replace("  alt: { type: tcp, port: 81 }\n", ""), -1},
		{"latency files", replace("health_checks:\n", "latency:\n  files: [lat.csv]\nhealth_checks:\n"), 1},
		{"record inserted above", replace("records:\n", "records:\n  - name: new.example.com\n    pools:\n      p: { address: 192.0.2.9 }\n    rules:\n      - default: { pool: p }\n"), 1},
		{"policy moved down", replace("policies:\n", "\n\n# two lines more above the policy\npolicies:\n"), 0},
		{"comment inside a record", replace("   # b.in\n", "   # b.in\n      # a comment between two pools\n"), 0},
		{"pools reordered", func(s string) string {
			in := "      in: { address: 203.0.113.2, location: { lat: 19.08, lon: 72.88 } }   # b.in\n"
			eu := "      eu: { address: 198.51.100.2, location: { lat: 50.11, lon: 8.68 } }   # b.eu\n"
			return replace(in+eu, eu+in)(s)
		}, 1},
		{"record renamed", replace("name: b.example.com", "name: b2.example.com"), 1},
		{"record removed", func(s string) string {
			start := strings.Index(s, "  - name: a.example.com")
			end := strings.Index(s, "  - name: b.example.com")
			return s[:start] + s[end:]
		}, 0},
		{"record moved to the end", func(s string) string {
			start := strings.Index(s, "  - name: a.example.com")
			end := strings.Index(s, "  - name: b.example.com")
			return s[:start] + s[end:] + s[start:end]
		}, 0},
		{"duplicate name", replace("name: c.example.com", "name: A.example.com"), -1},
		{"record broken", replace("address: 192.0.2.3 }", "address: 192.0.2.300 }"), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := geoSetFor(t, cityDB)
			prev, prevWarns, err := policy.BuildWith(parseConfig(t, base), g, nil)
			if err != nil {
				t.Fatal(err)
			}
			before := dumpTable(prev)
			edited := tc.edit(base)
			if tc.name != "nothing" && edited == base {
				t.Fatal("the edit changes nothing")
			}
			cfg := parseConfig(t, edited)
			got, gotWarns, gotErr := policy.BuildWith(cfg, g, prev)
			fresh, freshWarns, freshErr := policy.BuildWith(parseConfig(t, edited), g, nil)
			if fmt.Sprint(gotErr) != fmt.Sprint(freshErr) {
				t.Fatalf("errors with the previous table:\n%v\nfrom scratch:\n%v", gotErr, freshErr)
			}
			if a, b := sortedProblems(gotWarns), sortedProblems(freshWarns); !slices.Equal(a, b) {
				t.Fatalf("warnings with the previous table:\n%s\nfrom scratch:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
			}
			if tc.name == "nothing" && !slices.Equal(sortedProblems(gotWarns), sortedProblems(prevWarns)) {
				t.Fatalf("a rebuild of the same text warns otherwise:\n%v\nthen:\n%v", gotWarns, prevWarns)
			}
			if a, b := dumpTable(got), dumpTable(fresh); a != b {
				t.Fatalf("with the previous table:\n%s\nfrom scratch:\n%s\n%s", a, b, numbered(edited))
			}
			if after := dumpTable(prev); after != before {
				t.Fatalf("the previous table changed:\n%s\nwas:\n%s", after, before)
			}
			if tc.built < 0 {
				if gotErr == nil {
					t.Fatal("the edit was expected to fail the build")
				}
				return
			}
			if got.RecordsBuilt != tc.built || got.RecordsReused != len(got.Records)-tc.built {
				t.Fatalf("built %d records, reused %d; want %d built of %d", got.RecordsBuilt, got.RecordsReused, tc.built, len(got.Records))
			}
			for _, r := range got.Records {
				if old := prev.Get(r.Name); old == r {
					t.Fatalf("%s is the previous table's record itself, not a copy", r.Name)
				}
			}
			if edited != base && !strings.HasPrefix(tc.name, "health check") && !strings.Contains(tc.name, "comment at the end") && dumpTable(got) == before {
				t.Fatal("the edit made no difference to the table: the test does not test it")
			}
		})
	}
}

// The lines a reused record carries are those of the new file: moved by a
// record inserted above, its own, its pools' and its rules' lines (which
// explain shows) are where the record now is; a policy's rules are
// where the policy is.
func TestRebuildMovesLines(t *testing.T) {
	base := reuseYAML(t, reuseBase)
	g := geoSetFor(t, cityDB)
	prev, _, err := policy.BuildWith(parseConfig(t, base), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(base, "policies:\n", "# moved\npolicies:\n", 1)
	edited = strings.Replace(edited, "records:\n", "records:\n  - name: new.example.com  # new\n    pools:\n      p: { address: 192.0.2.9 }\n    rules:\n      - default: { pool: p }\n", 1)
	edited = strings.Replace(edited, "   # b.in\n", "   # b.in\n\n", 1)
	got, _, err := policy.BuildWith(parseConfig(t, edited), g, prev)
	if err != nil {
		t.Fatal(err)
	}
	if got.RecordsReused != 6 || got.RecordsBuilt != 1 {
		t.Fatalf("reused %d, built %d; want 6 and 1", got.RecordsReused, got.RecordsBuilt)
	}
	b := got.Get("b.example.com.")
	if want := lineOf(t, edited, "name: b.example.com"); b.Line != want || b.Index != 2 {
		t.Fatalf("b is at line %d index %d, want %d and 2", b.Line, b.Index, want)
	}
	if want := lineOf(t, edited, "# b.in"); b.Pools[0].Line != want {
		t.Fatalf("b's pool in is at line %d, want %d", b.Pools[0].Line, want)
	}
	if want := lineOf(t, edited, "# b.eu"); b.Pools[1].Line != want {
		t.Fatalf("b's pool eu is at line %d, want %d", b.Pools[1].Line, want)
	}
	traces := b.ExplainRules(&geo.Info{}, netip.MustParsePrefix("192.0.2.0/24"), nil, netip.Prefix{})
	if want := lineOf(t, edited, "# shadowed"); traces[1].Line != want || b.Rules[1].Line != want {
		t.Fatalf("explain shows b's rule 2 at line %d (rule line %d), want %d", traces[1].Line, b.Rules[1].Line, want)
	}
	c := got.Get("c.example.com.")
	if want := lineOf(t, edited, "split: [") - 1; c.Rules[0].Line != want {
		t.Fatalf("c's rule 1 is at line %d, want %d", c.Rules[0].Line, want)
	}
	// The previous table's records keep their own lines.
	if old := prev.Get("b.example.com."); old.Line != lineOf(t, base, "name: b.example.com") || old.Index != 1 ||
		old.Rules[1].Line != lineOf(t, base, "# shadowed") {
		t.Fatalf("the previous table's b moved: line %d index %d", old.Line, old.Index)
	}
}

// Warnings of reused records are given again, once per policy: when the
// record that gave a policy's warning first is gone, the next record
// using the policy gives it.
func TestRebuildGivesWarningsAgain(t *testing.T) {
	base := reuseYAML(t, reuseBase)
	g := geoSetFor(t, cityDB)
	prev, warns, err := policy.BuildWith(parseConfig(t, base), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	count := func(ws diag.Problems, phrase string) int {
		n := 0
		for _, w := range ws {
			if strings.Contains(w.Msg, phrase) {
				n++
			}
		}
		return n
	}
	for _, phrase := range []string{"policy geo: record a.example.com.: rule 2 can never match first", "ttl 600 is over", "every pool is disabled", "by: latency has no latency files"} {
		if count(warns, phrase) != 1 {
			t.Fatalf("%q: %d warnings, want 1:\n%v", phrase, count(warns, phrase), warns)
		}
	}
	start, end := strings.Index(base, "  - name: a.example.com"), strings.Index(base, "  - name: b.example.com")
	edited := base[:start] + base[end:]
	got, gotWarns, err := policy.BuildWith(parseConfig(t, edited), g, prev)
	if err != nil {
		t.Fatal(err)
	}
	if got.RecordsBuilt != 0 {
		t.Fatalf("built %d records, want every one reused", got.RecordsBuilt)
	}
	for _, phrase := range []string{"policy geo: record b.example.com.: rule 2 can never match first", "ttl 600 is over", "every pool is disabled", "by: latency has no latency files"} {
		if count(gotWarns, phrase) != 1 {
			t.Fatalf("%q: %d warnings, want 1:\n%v", phrase, count(gotWarns, phrase), gotWarns)
		}
	}
	for _, w := range gotWarns {
		if strings.Contains(w.Msg, "never match first") && w.Line != lineOf(t, edited, "# shadowed") {
			t.Fatalf("the policy's warning is at line %d, want the policy's rule", w.Line)
		}
		if strings.Contains(w.Msg, "ttl 600") && w.Line != lineOf(t, edited, "ttl: 600") {
			t.Fatalf("the ttl warning is at line %d, want %d (the record moved up)", w.Line, lineOf(t, edited, "ttl: 600"))
		}
	}
}

// manyRecords is n records of five named policies, each with its own
// addresses; edit changes record 'edit's address (-1: none).
func manyRecords(n, edit int) string {
	var b strings.Builder
	b.WriteString("policies:\n")
	for k := range 5 {
		fmt.Fprintf(&b, "  p%d:\n    rules:\n      - match: { country: [IN, US] }\n        pool: mumbai\n      - match: { continent: EU }\n        pool: frankfurt\n      - default: { pool: virginia }\n", k)
	}
	b.WriteString("records:\n")
	for i := range n {
		last := i%250 + 1
		if i == edit {
			last = 251
		}
		fmt.Fprintf(&b, "  - { name: s%d.example.com, ttl: 60, policy: p%d, pools: { mumbai: { address: 203.0.113.%d }, frankfurt: { address: 198.51.100.%d }, virginia: { address: 192.0.2.%d } } }\n",
			i, i%5, i%250+1, i%250+1, last)
	}
	return b.String()
}

// Editing one record of 1,000 builds that one and reuses the other 999,
// which answer as before; the edited one answers with its new address.
func TestRebuildOneOfThousand(t *testing.T) {
	g := geoSetFor(t, cityDB)
	prev, _, err := policy.BuildWith(parseConfig(t, reuseYAML(t, manyRecords(1000, -1))), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, reuseYAML(t, manyRecords(1000, 500)))
	got, _, err := policy.BuildWith(cfg, g, prev)
	if err != nil {
		t.Fatal(err)
	}
	if got.RecordsReused != 999 || got.RecordsBuilt != 1 || got.Compiled != 0 {
		t.Fatalf("reused %d records, built %d, compiled %d partitions; want 999, 1, 0", got.RecordsReused, got.RecordsBuilt, got.Compiled)
	}
	if a := got.Get("s500.example.com.").Pools[2].V4[0].String(); a != "192.0.2.251" {
		t.Fatalf("the edited record answers %s", a)
	}
	if old := prev.Get("s500.example.com.").Pools[2].V4[0].String(); old != "192.0.2.1" {
		t.Fatalf("the previous table's record changed: %s", old)
	}
	fresh, _, err := policy.BuildWith(parseConfig(t, reuseYAML(t, manyRecords(1000, 500))), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := dumpTable(got), dumpTable(fresh); a != b {
		t.Fatal("the rebuild differs from a build from scratch")
	}
	// Against other databases nothing is reused.
	other, _, err := policy.BuildWith(cfg, geoSetFor(t, cityDB), got)
	if err != nil {
		t.Fatal(err)
	}
	if other.RecordsReused != 0 || other.Reused != 0 {
		t.Fatalf("against another geo set: %d records reused", other.RecordsReused)
	}
}
