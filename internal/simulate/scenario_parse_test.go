package simulate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"go.yaml.in/yaml/v3"
)

func TestParseDefaults(t *testing.T) {
	sc := mustParse(t, "d.yaml", `duration: 1d
record: shop.example.com
clients:
  - name: all
    prefixes: [198.51.100.0/24]
    rate: 10
  - name: geo
    from_geodb: { countries: [US] }
    rate: 5
resolvers:
  - name: isp
  - name: pub
    groups: [geo]
    ecs: true
    share: 0
`)
	if time.Duration(sc.Duration) != 24*time.Hour || time.Duration(sc.Bin) != time.Minute || sc.Runs != 20 || *sc.Seed != 1 ||
		sc.Type != "A" || sc.Start != "2026-01-01T00:00:00Z" || sc.File != "d.yaml" || sc.Line != 1 {
		t.Errorf("defaults: duration %s bin %s runs %d seed %d type %s start %s file %s line %d",
			sc.Duration, sc.Bin, sc.Runs, *sc.Seed, sc.Type, sc.Start, sc.File, sc.Line)
	}
	g := sc.Clients[1]
	if g.Line != 7 || g.FromGeoDB.Line != 8 || g.FromGeoDB.Subnets != 1000 || *g.FromGeoDB.Zipf != 1 {
		t.Errorf("from_geodb group %+v %+v", g, *g.FromGeoDB)
	}
	// isp, without a share, carries what pub leaves of geo.
	if sh := siteShares(sc); sh[0][0] != 1 || sh[0][1] != 1 || sh[1][1] != 0 || len(sh[1]) != 1 {
		t.Errorf("shares %v", sh)
	}
	isp, pub := sc.Resolvers[0], sc.Resolvers[1]
	if isp.Count != 1 || isp.Caches != 1 || isp.ECS != nil || isp.Line != 11 {
		t.Errorf("site defaults %+v", isp)
	}
	if e := pub.ECS; e == nil || !e.Enabled || e.V4 != 24 || e.V6 != 56 || e.HonorsScope == nil || !*e.HonorsScope || e.Line != 14 {
		t.Errorf("ecs: true is %+v", e)
	}
}

func TestParseECSForms(t *testing.T) {
	for _, c := range []struct {
		in         string
		on         bool
		v4, v6     int
		honorScope bool
	}{
		{"false", false, 0, 0, false},
		{"true", true, 24, 56, true},
		{"{ v4: 20 }", true, 20, 56, true},
		{"{ v6: 48, honors_scope: false }", true, 24, 48, false},
		{"{ enabled: false }", false, 0, 0, false},
	} {
		sc := mustParse(t, "e.yaml", "duration: 1h\nrecord: x.example\nclients: [{name: a, prefixes: [192.0.2.0/24], rate: 1}]\nresolvers:\n  - name: r\n    ecs: "+c.in+"\n")
		e := sc.Resolvers[0].ECS
		if e.Enabled != c.on || (c.on && (e.V4 != c.v4 || e.V6 != c.v6 || *e.HonorsScope != c.honorScope)) {
			t.Errorf("ecs: %s gave %+v", c.in, *e)
		}
		// JSON and YAML give it back.
		j, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back ECSSpec
		if err := json.Unmarshal(j, &back); err != nil || back.Enabled != e.Enabled || back.V4 != e.V4 {
			t.Errorf("ecs %s through JSON %s: %+v %v", c.in, j, back, err)
		}
		y, err := yaml.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var yb ECSSpec
		if err := yaml.Unmarshal(y, &yb); err != nil || yb.Enabled != e.Enabled || yb.V4 != e.V4 {
			t.Errorf("ecs %s through YAML %s: %+v %v", c.in, y, yb, err)
		}
	}
	var e ECSSpec
	if err := json.Unmarshal([]byte("true"), &e); err != nil || !e.Enabled {
		t.Errorf("JSON true: %+v %v", e, err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90s": 90 * time.Second, "1d": 24 * time.Hour, "2d12h": 60 * time.Hour, "1.5d": 36 * time.Hour,
		"1h30m": 90 * time.Minute, "500ms": 500 * time.Millisecond, "-1d": -24 * time.Hour,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "1x", "1d-2h", "1e3d", "xd"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		}
	}
	for d, want := range map[time.Duration]string{0: "0s", 25 * time.Hour: "25h", 90 * time.Second: "1m30s", 1500 * time.Millisecond: "1.5s", -time.Hour: "-1h"} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
	// JSON: a string, or seconds.
	var d Duration
	if err := json.Unmarshal([]byte(`"2d"`), &d); err != nil || time.Duration(d) != 48*time.Hour {
		t.Errorf("JSON \"2d\": %v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`90`), &d); err != nil || time.Duration(d) != 90*time.Second {
		t.Errorf("JSON 90: %v %v", d, err)
	}
	if b, _ := json.Marshal(Duration(36 * time.Hour)); string(b) != `"36h"` {
		t.Errorf("JSON of 36h: %s", b)
	}
}

// A scenario and its round trip through JSON parse the same.
func TestParseJSON(t *testing.T) {
	sc := mustParse(t, "us.yaml", usScenario+"events: [{at: 1h, drain: us-east}]\n")
	j, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	back := mustParse(t, "us.json", string(j))
	if back.Record != sc.Record || back.Duration != sc.Duration || len(back.Resolvers) != 2 || *back.Resolvers[1].Share != 0.75 ||
		back.Events[0].Drain != "us-east" || back.Events[0].At != Duration(time.Hour) {
		t.Errorf("through JSON %s:\n%+v", j, back)
	}
}

// valid is a scenario the error cases below change one thing of; its
// lines are numbered in the comments.
const valid = `duration: 24h
bin: 1m
record: shop.example.com
clients:
  - name: americas
    prefixes: [8.8.0.0/22]
    rate: 1000
  - name: europe
    from_geodb: { countries: [DE] }
    rate: 100
resolvers:
  - name: big
    share: 0.2
  - name: isp
    share: 0.8
    count: 10
    ecs: { v4: 24 }
    ttl: { min: 30s, max: 1h }
events:
  - at: 12h
    drain: us-east-canary
`

func TestParseValid(t *testing.T) {
	sc := mustParse(t, "v.yaml", valid)
	if sc.Events[0].Line != 20 || sc.Resolvers[1].TTL.Line != 18 || sc.Resolvers[1].ECS.Line != 17 || sc.Clients[1].FromGeoDB.Line != 9 {
		t.Errorf("lines: event %d ttl %d ecs %d from_geodb %d", sc.Events[0].Line, sc.Resolvers[1].TTL.Line, sc.Resolvers[1].ECS.Line, sc.Clients[1].FromGeoDB.Line)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		old, new string // replace old by new in valid
		want     []string
	}{
		{"missing duration", "duration: 24h\n", "", []string{"s.yaml:1: duration is missing"}},
		{"missing record", "record: shop.example.com\n", "", []string{"s.yaml:1: record is missing"}},
		{"missing clients and resolvers", valid[strings.Index(valid, "clients:"):], "", []string{
			"s.yaml:1: clients is missing", "s.yaml:1: resolvers is missing"}},
		{"unknown key", "    rate: 1000\n", "    rate: 1000\n    rates: 5\n", []string{
			`s.yaml:8: unknown key "rates" in clients[0] (known keys: diurnal, from_geodb, name, prefixes, rate, subnets, zipf)`}},
		{"unknown top-level key", "bin: 1m\n", "bins: 1m\n", []string{`s.yaml:2: unknown key "bins" at the top level`}},
		{"unknown ecs key", "{ v4: 24 }", "{ v4: 24, v5: 1 }", []string{`s.yaml:17: unknown key "v5" in ecs`}},
		{"bad ecs", "{ v4: 24 }", "maybe", []string{"s.yaml:17: ecs must be false, true or a mapping"}},
		{"bad duration", "bin: 1m", "bin: 1 minute", []string{`s.yaml:2: invalid duration "1 minute"`}},
		{"unitless duration", "bin: 1m", "bin: 60", []string{"s.yaml:2: duration 60 has no unit"}},
		{"bin not dividing", "bin: 1m", "bin: 7m", []string{"s.yaml:2: bin 7m does not divide the duration 24h"}},
		{"bin too long", "bin: 1m", "bin: 2d", []string{"s.yaml:2: bin 48h is longer than the duration 24h"}},
		{"zero rate", "rate: 1000", "rate: 0", []string{"s.yaml:5: client group americas: rate 0 must be positive"}},
		{"negative rate", "rate: 100\n", "rate: -3\n", []string{"s.yaml:8: client group europe: rate -3 must be positive"}},
		{"negative share", "share: 0.2", "share: -0.2", []string{"s.yaml:12: resolver site big: share -0.2 is negative"}},
		{"shares not summing", "share: 0.8", "share: 0.7", []string{
			"s.yaml:5: client group americas: the shares of the sites serving it sum to 0.9, not 1 (big 0.2, isp 0.7)",
			"s.yaml:8: client group europe: the shares of the sites serving it sum to 0.9, not 1 (big 0.2, isp 0.7)"}},
		{"neither prefixes nor from_geodb", "    prefixes: [8.8.0.0/22]\n", "", []string{"s.yaml:5: client group americas has neither prefixes nor from_geodb"}},
		{"both", "    prefixes: [8.8.0.0/22]\n", "    prefixes: [8.8.0.0/22]\n    from_geodb: { countries: [US] }\n", []string{
			"s.yaml:5: client group americas has both prefixes and from_geodb"}},
		{"invalid prefix", "8.8.0.0/22", "8.8.0.0/33", []string{`s.yaml:5: client group americas: "8.8.0.0/33" is not a prefix`}},
		{"ecs length", "{ v4: 24 }", "{ v4: 33, v6: 129 }", []string{
			"s.yaml:17: resolver site isp: ecs v4 source length 33 is not between 1 and 32",
			"s.yaml:17: resolver site isp: ecs v6 source length 129 is not between 1 and 128"}},
		{"ttl min > max", "min: 30s, max: 1h", "min: 2h, max: 1h", []string{"s.yaml:18: resolver site isp: ttl min 2h is more than max 1h"}},
		{"violators", "events:", "ttl_violators: { fraction: 1.5, extend_to: 1h }\nevents:", []string{
			"s.yaml:19: ttl_violators: fraction 1.5 is not between 0 and 1"}},
		{"site violators", "    count: 10\n", "    count: 10\n    ttl_violators: { fraction: -0.1, extend_to: 1h }\n", []string{
			"s.yaml:17: resolver site isp: ttl_violators: fraction -0.1 is not between 0 and 1"}},
		{"event after the end", "at: 12h", "at: 25h", []string{"s.yaml:20: event at 25h is after the end (duration 24h)"}},
		{"event at the end", "at: 12h", "at: 1d", []string{"s.yaml:20: event at 24h is after the end (duration 24h)"}},
		{"event before the start", "at: 12h", "at: -1h", []string{"s.yaml:20: event at -1h is before the start"}},
		{"event without action", "    drain: us-east-canary\n", "", []string{"s.yaml:20: event at 12h has no action"}},
		{"event with two actions", "drain: us-east-canary", "drain: us-east-canary\n    fail: us-east", []string{
			"s.yaml:20: event at 12h has 2 actions (drain, fail): give one per event"}},
		{"empty set_weights", "drain: us-east-canary", "set_weights: {}", []string{"s.yaml:20: event at 12h: set_weights names no pool"}},
		{"negative weight", "drain: us-east-canary", "set_weights: { us-east: -1 }", []string{"s.yaml:20: event at 12h: weight -1 for us-east is negative"}},
		{"unknown event key", "drain: us-east-canary", "drian: us-east-canary", []string{`s.yaml:21: unknown key "drian" in events[0] (known keys: at, config, drain, fail, load, recover, set_weights, undrain)`}},
		{"duplicate key", "    rate: 1000\n", "    rate: 1000\n    rate: 5\n", []string{`s.yaml:8: mapping key "rate" already defined at line 7`}},
		{"unknown group", "    share: 0.2\n", "    share: 0.2\n    groups: [asia]\n", []string{
			"s.yaml:12: resolver site big: groups names asia, which is not a client group (groups: americas, europe)"}},
		{"unknown shares group", "    share: 0.2\n", "    share: 0.2\n    shares: { asia: 0.5 }\n", []string{
			"s.yaml:12: resolver site big: shares names asia, which is not a client group (groups: americas, europe)"}},
		{"duplicate group", "name: europe", "name: americas", []string{"s.yaml:8: client group americas is already defined at line 5"}},
		{"duplicate site", "name: isp", "name: big", []string{"s.yaml:14: resolver site big is already defined at line 12"}},
		{"bad type", "bin: 1m\n", "bin: 1m\ntype: MX\n", []string{`s.yaml:3: type "MX" is not A or AAAA`}},
		{"bad start", "bin: 1m\n", "bin: 1m\nstart: yesterday\n", []string{`s.yaml:3: start "yesterday" is not an RFC 3339 time`}},
		{"bad address", "    count: 10\n", "    count: 10\n    address: 192.0.2.0/30\n", []string{
			"s.yaml:14: resolver site isp: address prefix 192.0.2.0/30 holds fewer than the 10 resolvers of the site"}},
		{"no share, several sites", "    share: 0.2\n  - name: isp\n    share: 0.8\n", "  - name: isp\n", []string{
			"s.yaml:5: client group americas: several of the sites serving it have no share (one may leave it out and carry the rest): big (no share), isp (no share)"}},
		{"no share, the others over 1", "    share: 0.2\n  - name: isp\n    share: 0.8\n", "  - name: isp\n    share: 1.2\n", []string{
			"s.yaml:5: client group americas: the shares of the sites serving it sum to 1.2, more than 1, before the one without a share (big (no share), isp 1.2)"}},
		{"several at once", "rate: 1000", "rate: 0", []string{"s.yaml:5:", "s.yaml:20:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(valid, c.old, c.new, 1)
			if text == valid && c.old != c.new {
				t.Fatalf("%q is not in the scenario", c.old)
			}
			if c.name == "several at once" {
				text = strings.Replace(text, "at: 12h", "at: 30h", 1)
			}
			_, err := ParseScenario("s.yaml", []byte(text))
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			var ps diag.Problems
			if !errors.As(err, &ps) {
				t.Errorf("error %T, want diag.Problems", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant %q", err, w)
				}
			}
		})
	}
}

// Anchors and merge keys: the merged keys are checked too, and lines are
// the merging element's.
func TestParseMergeKeys(t *testing.T) {
	text := `duration: 1h
record: shop.example.com
clients: [{name: a, prefixes: [192.0.2.0/24], rate: 1}]
small: &small
  count: 10
  caches: 1
resolvers:
  - <<: *small
    name: isp
`
	if _, err := ParseScenario("m.yaml", []byte(text)); err == nil || !strings.Contains(err.Error(), `m.yaml:4: unknown key "small"`) {
		t.Fatalf("error %v, want the unknown key small", err)
	}
	text = strings.Replace(strings.Replace(text, "small: &small\n  count: 10\n  caches: 1\n", "", 1), "  - <<: *small\n", "  - <<: &small { count: 10, cache: 1 }\n", 1)
	if _, err := ParseScenario("m.yaml", []byte(text)); err == nil || !strings.Contains(err.Error(), `m.yaml:5: unknown key "cache" in resolvers[0]`) {
		t.Fatalf("error %v, want the unknown key cache", err)
	}
	sc := mustParse(t, "m.yaml", strings.Replace(text, "cache:", "caches:", 1))
	if r := sc.Resolvers[0]; r.Count != 10 || r.Name != "isp" || r.Line != 5 {
		t.Errorf("merged site %+v", r)
	}
}

func TestLoadScenarioMissing(t *testing.T) {
	_, err := LoadScenario("/nonexistent/s.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "/nonexistent/s.yaml: ") {
		t.Errorf("error %v", err)
	}
	if _, err := ParseScenario("e.yaml", nil); err == nil || err.Error() != "e.yaml: the file is empty" {
		t.Errorf("empty file: %v", err)
	}
	if _, err := ParseScenario("l.yaml", []byte("- a\n")); err == nil || !strings.Contains(err.Error(), "l.yaml:1: the top level must be a mapping") {
		t.Errorf("a list: %v", err)
	}
}
