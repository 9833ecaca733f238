package policy_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/policy"
)

// expectProblem fails unless ps has a problem at steer.yaml:line whose
// message contains want.
func expectProblem(t *testing.T, kind string, ps diag.Problems, line int, want string) {
	t.Helper()
	for _, p := range ps {
		if p.File == "steer.yaml" && p.Line == line && strings.Contains(p.Msg, want) {
			return
		}
	}
	t.Errorf("no %s at steer.yaml:%d containing %q; got:\n%v", kind, line, want, ps)
}

// TestBuildErrors: every configuration mistake is an error at the line
// that makes it. Each YAML marks that line with a "# <-" comment.
func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		dbs     []string
		records string
		want    string
	}{
		{"no default rule", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules: # <-
      - match: { country: IN }
        pool: x
`, "has no default rule"},
		{"unknown pool", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match: { country: IN }
        pool: y # <-
      - default: { pool: x }
`, `unknown pool "y"`},
		{"unknown pool in a split", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match: { country: IN }
        split: # <-
          - { pool: x, weight: 1 }
          - { pool: z, weight: 1 }
      - default: { pool: x }
`, `unknown pool "z"`},
		{"unknown pool in a failover", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match: { country: IN }
        failover: [x, nope] # <-
      - default: { pool: x }
`, `unknown pool "nope"`},
		{"unknown pool in a fallback", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1, location: { lat: 1, lon: 2 } }
    rules:
      - default:
          by: geoproximity
          fallback: [x, gone] # <-
`, `unknown pool "gone"`},
		{"unknown pool in fallback_pool", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default: { pool: x }
    when_all_down: fallback_pool missing # <-
`, `unknown pool "missing"`},
		{"unknown country", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          country: [IN, QQ] # <-
        pool: x
      - default: { pool: x }
`, `unknown country code "QQ"`},
		{"unknown continent", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          continent: EUROPE # <-
        pool: x
      - default: { pool: x }
`, `unknown continent code "EUROPE"`},
		{"bad subdivision", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          subdivision: Maharashtra # <-
        pool: x
      - default: { pool: x }
`, `subdivision "MAHARASHTRA" is not an ISO 3166-2 code`},
		{"subdivision of an unknown country", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          subdivision: QQ-MH # <-
        pool: x
      - default: { pool: x }
`, `unknown country "QQ"`},
		{"all split weights zero", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
      y: { address: 192.0.2.2 }
    rules:
      - match: { continent: NA }
        split: # <-
          - { pool: x, weight: 0 }
          - { pool: y, weight: 0 }
      - default: { pool: x }
`, "every split weight is zero"},
		{"duplicate record", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default: { pool: x }
  - name: A.example.com. # <-
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default: { pool: x }
`, "record a.example.com. is already defined at line"},
		{"default not last", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default: { pool: x } # <-
      - match: { country: IN }
        pool: x
`, "the default rule must be the last rule"},
		{"asn without an ASN database", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          asn: [AS64496] # <-
        pool: x
      - default: { pool: x }
`, "asn matches need an ASN database"},
		{"unknown match key", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          country: IN
          contry: DE # <-
        pool: x
      - default: { pool: x }
`, `unknown match key "contry" (keys: country, continent, `},
		{"not an AS number", []string{cityDB, asnDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          asn: [AS64496, ASx] # <-
        pool: x
      - default: { pool: x }
`, `"ASx" is not an AS number`},
		{"match without keys", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match: { source: resolver } # <-
        pool: x
      - default: { pool: x }
`, "the match has no keys (country, continent, "},
		{"cidr with host bits", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match:
          cidr: [10.20.0.0/16, 192.0.2.5/24] # <-
        pool: x
      - default: { pool: x }
`, "192.0.2.5/24 has host bits set (did you mean 192.0.2.0/24?)"},
		{"geoproximity without locations", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default:
          by: geoproximity # <-
`, "geoproximity needs pools with a location"},
		{"two actions", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match: { country: IN } # <-
        pool: x
        failover: [x]
      - default: { pool: x }
`, "a rule takes one action"},
		{"bias out of range", []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1, location: { lat: 1, lon: 2 }, bias: 100 } # <-
    rules:
      - default: { by: geoproximity }
`, "bias 100 is not between -99 and 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := configYAML(t, tt.dbs, tt.records)
			line := lineOf(t, yaml, "# <-")
			table, _, err := build(t, yaml)
			if err == nil {
				t.Fatalf("Build succeeded (%d records), want an error at line %d", len(table.Records), line)
			}
			expectProblem(t, "error", problems(t, err), line, tt.want)
		})
	}
}

// TestBuildErrorsTogether: every problem of a file is reported at once,
// and a record with errors is left out.
func TestBuildErrorsTogether(t *testing.T) {
	yaml := configYAML(t, []string{cityDB}, `
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match: { country: XX } # country
        pool: x
      - match: { continent: ZZ } # continent
        pool: y # pool
      - default: { pool: x }
  - name: b.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default: { pool: x }
`)
	table, _, err := build(t, yaml)
	ps := problems(t, err)
	expectProblem(t, "error", ps, lineOf(t, yaml, "# country"), `unknown country code "XX"`)
	expectProblem(t, "error", ps, lineOf(t, yaml, "# continent"), `unknown continent code "ZZ"`)
	expectProblem(t, "error", ps, lineOf(t, yaml, "# pool"), `unknown pool "y"`)
	if table.Get("a.example.com.") != nil || table.Get("b.example.com.") == nil {
		t.Errorf("records built: %v", table.Records)
	}
}

// TestBuildWarnings: problems that do not stop the build.
func TestBuildWarnings(t *testing.T) {
	yaml := configYAML(t, []string{cityDB, asnDB}, `
  - name: w.example.com
    ttl: 600 # ttl
    pools:
      x: { address: 192.0.2.1, location: { lat: 19.08, lon: 72.88 } }
      y: { address: 192.0.2.2 }
    rules:
      - match: { continent: AS } # asia
        pool: x
      - match: { country: [IN] } # shadowed
        pool: y
      - match: { country: [FJ] } # nothing
        pool: y
      - match: { subdivision: [IN-AS], asn: 64497 } # guwahati
        pool: y
      - default:
          by: geoproximity # default
`)
	table, warns, err := build(t, yaml)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if table.Get("w.example.com.") == nil {
		t.Fatal("record not built")
	}
	expectProblem(t, "warning", warns, lineOf(t, yaml, "# ttl"), "ttl 600 is over 300")
	expectProblem(t, "warning", warns, lineOf(t, yaml, "# shadowed"), "rule 2 can never match first")
	expectProblem(t, "warning", warns, lineOf(t, yaml, "# nothing"), "rule 3 matches no address in the loaded geo databases")
	expectProblem(t, "warning", warns, lineOf(t, yaml, "# guwahati"), "rule 4 can never match first")
	expectProblem(t, "warning", warns, lineOf(t, yaml, "# default"), "pool y has no location")
	for _, w := range warns {
		if w.Line == lineOf(t, yaml, "# asia") {
			t.Errorf("warning about rule 1: %v", w)
		}
	}
	if len(warns) != 5 {
		t.Errorf("%d warnings, want 5:\n%v", len(warns), warns)
	}

	// The Larkbook record compiles without a warning.
	_, warns, err = build(t, configYAML(t, []string{cityDB, asnDB}, larkbookRecord))
	if err != nil || len(warns) != 0 {
		t.Errorf("Larkbook: warnings %v, error %v", warns, err)
	}
	// Disabled pools that leave a rule, or the record, with nothing.
	yaml = configYAML(t, []string{cityDB}, `
  - name: d.example.com
    pools:
      x: { address: 192.0.2.1, enabled: false }
      y: { address: 192.0.2.2 }
    rules:
      - match: { country: IN } # rule1
        pool: x
      - default: { pool: y }
  - name: e.example.com # record
    pools:
      x: { address: 192.0.2.1, enabled: false }
    rules:
      - default: { pool: x }
    when_all_down: nodata
`)
	_, warns, err = build(t, yaml)
	if err != nil {
		t.Fatal(err)
	}
	expectProblem(t, "warning", warns, lineOf(t, yaml, "# rule1"), "every pool of rule 1 is disabled: its clients fall through")
	expectProblem(t, "warning", warns, lineOf(t, yaml, "# record"), "every pool is disabled (enabled: false): when_all_down nodata")
	if len(warns) != 2 {
		t.Errorf("%d warnings, want 2:\n%v", len(warns), warns)
	}

	// A TTL of exactly 300 is fine.
	_, warns, err = build(t, configYAML(t, []string{cityDB}, `
  - name: t.example.com
    ttl: 300
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - default: { pool: x }
`))
	if err != nil || len(warns) != 0 {
		t.Errorf("ttl 300: warnings %v, error %v", warns, err)
	}
}

// TestBuildRecordShape checks what Build makes of a record.
func TestBuildRecordShape(t *testing.T) {
	r := larkbook(t)
	for i, want := range []string{"ap-south", "eu-central", "us-east", "us-east-canary"} {
		if r.Pools[i].Name != want || r.Pools[i].Index != i {
			t.Errorf("pool %d = %s", i, r.Pools[i].Name)
		}
	}
	if r.Enabled != apSouth|euCentral|usEast|usCanary || !r.NextRule || r.WhenAllDown.String() != "answer_all" {
		t.Errorf("record %+v", r)
	}
	wantActions := []string{
		"pool ap-south",
		"pool eu-central",
		"split us-east 95, us-east-canary 5",
		"geoproximity over ap-south, eu-central, us-east (fallback ap-south, eu-central, us-east)",
	}
	for i, rule := range r.Rules {
		if got := r.DescribeAction(&rule.Action); got != wantActions[i] {
			t.Errorf("rule %d action %q, want %q", i+1, got, wantActions[i])
		}
		if rule.Default != (i == 3) || rule.Index != i {
			t.Errorf("rule %d: %+v", i, rule)
		}
	}
	if r.Stats.Outcomes < 4 || r.Stats.Nodes4 == 0 || r.Stats.Nodes6 == 0 || r.Stats.Bytes == 0 {
		t.Errorf("stats %+v", r.Stats)
	}
	if s := r.String(); s != "shop.example.com. A (4 pools, 4 rules)" {
		t.Errorf("String() = %q", s)
	}
}

// Issue 12: a reload never compiles on more than half the cores (one of
// two), so the readers keep theirs; start-up, with nothing answering, uses
// every core.
func TestWorkers(t *testing.T) {
	n := runtime.NumCPU()
	if got := policy.Workers(false); got != n {
		t.Errorf("start-up workers = %d, want %d (every core)", got, n)
	}
	got := policy.Workers(true)
	if got < 1 || got > max(1, n/2) {
		t.Errorf("reload workers = %d with %d cores, want 1..%d", got, n, max(1, n/2))
	}
	if n == 2 && got != 1 {
		t.Errorf("reload workers = %d on two cores, want 1", got)
	}
}
