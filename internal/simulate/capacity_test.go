package simulate

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/policy"
)

// capRecords is the node's closed-loop record (internal/node,
// capacityConfig): c.example.com sends 10.0.0.0/11 to pool a, falling
// over to b, in 32 /16 networks; a declares a capacity of 100 (max 200).
func capRecords() string {
	var even, odd []string
	for i := range 32 {
		n := fmt.Sprintf("10.%d.0.0/16", i)
		if i%2 == 0 {
			even = append(even, n)
		} else {
			odd = append(odd, n)
		}
	}
	return `  - name: c.example.com
    ttl: 1
    pools:
      a: { address: 192.0.2.1, capacity: { target: 100, max: 200 } }
      b: { address: 192.0.2.2 }
      c: { address: 192.0.2.3 }
    rules:
      - match: { cidr: [` + strings.Join(even, ", ") + `] }
        failover: [a, b]
      - match: { cidr: [` + strings.Join(odd, ", ") + `] }
        failover: [a, b]
      - default: { pool: c }
`
}

// capModel is the closed loop's traffic as a model: 10.k.0.0/16 sends
// 2 + 5k mod 8 queries an interval of 100 ms, straight to steer (no
// cache); a's load is proportional to its answers, 150 when it answers
// all of them.
func capModel(t *testing.T, model string, load map[string]*float64) *Model {
	t.Helper()
	table := testTable(t, testConfigYAML(t, capRecords(), "larkbook-country-flat.mmdb"))
	m := testModel(t, table, "c.example.com", 3*time.Second, time.Second, 1)
	var subs []netip.Prefix
	var w []float64
	total := 0.0
	for k := range 32 {
		subs = append(subs, netip.MustParsePrefix(fmt.Sprintf("10.%d.7.0/24", k)))
		x := float64(2 + k*5%8)
		w = append(w, x)
		total += x
	}
	idx := addGroup(m, "loop", total/0.1, subs)
	for i := range idx {
		m.Subnets[idx[i]].Weight = w[i] / total
	}
	addSite(m, Site{Name: "direct", ECS: true, SourceV4: 24, SourceV6: 56, HonorsScope: true}, 1, 0, 1, idx)
	m.Capacity = &CapacityFeed{Interval: 100 * time.Millisecond, Intervals: 23, Proportional: model == "proportional",
		Options: policy.ShedOptions{MaxShift: 0.5, LowWater: 0.85, StaleAfter: 1500 * time.Millisecond},
		Changes: []LoadChange{{Loads: load}}}
	return m
}

func ptr(v float64) *float64 { return &v }

// TestCapacityPredictionConverges: the closed loop's feed (a at 150 % of
// its target when it answers everything, load following its answers)
// brings a to its target share (2/3) in one step and holds it; the
// shed networks go to b and are named with the reason explain gives.
func TestCapacityPredictionConverges(t *testing.T) {
	m := capModel(t, "proportional", map[string]*float64{"a": ptr(150)})
	r, err := PredictCapacity(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	a := 0
	var shares []float64
	for _, s := range r.Steps {
		shares = append(shares, s.Answers[a])
	}
	t.Logf("a's predicted share per interval: %.3f", shares)
	if len(r.Steps) != 23 || shares[0] != 1 {
		t.Fatalf("%d steps, a's first share %.3f: want 23 and 1", len(r.Steps), shares[0])
	}
	target := 100.0 / 150
	for i, s := range shares[1:] {
		if s > target+1.0/32 || s < target-0.1*target {
			t.Errorf("interval %d: a's share %.3f, want about %.3f", i+1, s, target)
		}
	}
	st := r.Steps[0].Pools[0]
	if st.Pool != "a" || !strings.HasPrefix(st.Reason, "shed: load 150 % of target") || st.Moved <= 0 {
		t.Errorf("after the first interval: %+v", st)
	}
	s1 := r.Steps[1]
	if s1.ShedCount == 0 || s1.ShedCount != st.Shed {
		t.Fatalf("interval 1 lists %d shed networks, the step shed %d", s1.ShedCount, st.Shed)
	}
	sum := 0.0
	for _, n := range s1.Shed {
		if len(n.Dropped) != 1 || n.Dropped[0] != "a" || len(n.To) != 1 || n.To[0] != "b" || n.Prefix.Bits() != 16 {
			t.Errorf("shed network %+v: want a /16 dropping a, answered by b", n)
		}
		sum += n.Share
	}
	if math.Abs(sum-(1-s1.Share[a])) > 1e-9 {
		t.Errorf("the shed networks carry %.4f of the users, b %.4f", sum, 1-s1.Share[a])
	}
}

// capBase writes the closed loop's configuration with load settings
// (and a load file) into a directory and loads it.
func capBase(t *testing.T, load string) (Base, string) {
	t.Helper()
	dir := t.TempDir()
	yaml := testConfigYAML(t, capRecords(), "larkbook-country-flat.mmdb") + load
	p := filepath.Join(dir, "steer.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return Base{Config: cfg, Geo: openGeo(t, cfg), LoadConfig: config.Load}, dir
}

const capScenario = `duration: 4m
bin: 1m
runs: 1
record: c.example.com
clients:
  - { name: loop, prefixes: [10.0.0.0/11], subnets: 64, rate: 500 }
resolvers:
  - { name: ecs, share: 1, ecs: true }
capacity:
  interval: 10s
  load: { a: 150 }
events:
  - { at: 60s, load: { c.example.com/a: 50 } }
  - { at: 120s, load: { a: null } }
`

// TestCapacityScenarioFeed: a scenario's capacity section and load
// events, compiled against the configuration's load settings. A fixed
// load above the target sheds step after step (max_shift per step); a
// load below the low-water mark brings networks back; once the feed
// stops the load turns stale after stale_after and a gets everything
// back. Run carries the prediction, and the summary and JSON say it.
func TestCapacityScenarioFeed(t *testing.T) {
	b, dir := capBase(t, "load: { max_shift: 0.2, low_water: 0.85, stale_after: 30s }\n")
	sc := mustParse(t, filepath.Join(dir, "s.yaml"), capScenario)
	m := mustCompile(t, sc, b)
	if m.Capacity == nil || m.Capacity.Intervals != 24 || m.Capacity.Options.MaxShift != 0.2 || len(m.Capacity.Changes) != 3 || len(m.Phases) != 1 {
		t.Fatalf("compiled feed %+v, %d phases: want 24 intervals, max_shift 0.2, 3 changes, load events starting no phase", m.Capacity, len(m.Phases))
	}
	r, err := Run(context.Background(), m, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Capacity
	if c == nil || len(c.Steps) != 24 {
		t.Fatalf("capacity result %+v", c)
	}
	a := slices.Index(c.Pools, "a")
	var shares []float64
	for _, s := range c.Steps {
		shares = append(shares, s.Share[a])
	}
	t.Logf("a's share per 10 s: %.3f", shares)
	for k := 1; k <= 5; k++ { // 150 % every interval: shed, at most max_shift of a's traffic a step
		if d := shares[k-1] - shares[k]; d <= 0 || d > 0.2+0.02 {
			t.Errorf("interval %d: a's share went from %.3f to %.3f: want it to fall by at most max_shift", k, shares[k-1], shares[k])
		}
	}
	if shares[7] <= shares[6] {
		t.Errorf("load 50 (below the low-water mark) from 60 s: a's share %.3f then %.3f, want networks back", shares[6], shares[7])
	}
	// The last report is at 120 s (the interval from 110 s ends there):
	// stale after 150 s, seen by the step at 160 s.
	last := c.Steps[15].Pools[0]
	if last.State != "stale" || last.Shed != 0 || shares[16] != 1 || c.Steps[14].Pools[0].State == "stale" {
		t.Errorf("after the feed stopped: step at 160 s %+v, a's share then %.3f; want stale, nothing shed, share 1, and not stale before", last, shares[16])
	}
	if !strings.Contains(last.Reason, "stale (40s old)") {
		t.Errorf("reason %q: want the load's age on the simulated clock", last.Reason)
	}
	// The Monte-Carlo runs take the steps' shed networks as phases: each
	// minute's share is the mean of its six intervals' (TTL 1 s: no lag
	// to speak of).
	if len(r.Phases) < 10 || !strings.HasPrefix(r.Phases[1].Label, "capacity: a +") {
		t.Errorf("phases %+v: want the start and one per step that moved networks", r.Phases)
	}
	for bin := range 4 {
		want := 0.0
		for _, x := range shares[6*bin : 6*bin+6] {
			want += x / 6
		}
		if got := r.Bins[bin].Share[poolIndex(t, r, "a")].Mean; math.Abs(got-want) > 0.03 {
			t.Errorf("minute %d: the runs give a %.3f of the users, the intervals %.3f", bin, got, want)
		}
	}
	sum := Summary(r)
	if !strings.Contains(sum, "capacity feedback") || !strings.Contains(sum, "shed: load 150 % of target") || !strings.Contains(sum, "shed at 00:00:10: 10.") {
		t.Errorf("summary:\n%s", sum)
	}
	j := r.JSON()
	if j.Capacity == nil || len(j.Capacity.Steps) != 24 || j.Capacity.Steps[1].ShedCount == 0 || j.Capacity.Steps[1].Shed[0].To[0] != "b" {
		t.Errorf("JSON capacity %+v", j.Capacity)
	}
	if rows := capacityRows(r); len(rows) != 1+24*len(c.Pools) || rows[1][1] != "a" || rows[1][6] != "shed" {
		t.Errorf("capacity.csv: %d rows, first %v", len(rows), rows[1])
	}
}

// TestCapacityScenarioErrors: a feed naming a pool without a capacity,
// an unknown pool, another record's pool, a load event without a
// capacity section, a load file through the API: each refused at its
// line, naming it.
func TestCapacityScenarioErrors(t *testing.T) {
	b, dir := capBase(t, "")
	file := filepath.Join(dir, "s.yaml")
	os.WriteFile(filepath.Join(dir, "load.json"), []byte(`{"loads": [{"record": "c.example.com", "pool": "b", "current-load": 5}]}`), 0o644)
	for _, tc := range []struct{ name, from, to, want string }{
		{"no capacity", "load: { a: 150 }", "load: { b: 150 }", "s.yaml:10: capacity: load: pool b of c.example.com declares no capacity"},
		{"unknown pool", "load: { a: 150 }", "load: { x: 150 }", "s.yaml:10: capacity: load: x is not a pool of c.example.com (pools with a capacity: a)"},
		{"other record", "c.example.com/a: 50", "www.example.com/a: 50", "s.yaml:13: capacity: load: www.example.com/a: only the pools of c.example.com"},
		{"load file", "load: { a: 150 }", "load_file: load.json", "s.yaml:10: capacity: load: pool b of c.example.com declares no capacity"},
		{"bad model", "interval: 10s", "interval: 10s\n  model: linear", "s.yaml:10: capacity: model \"linear\" is not fixed or proportional"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := ParseScenario(file, []byte(strings.Replace(capScenario, tc.from, tc.to, 1)))
			if err == nil {
				_, err = Compile(sc, b)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %q", err, tc.want)
			}
		})
	}
	// No capacity section: a load event is refused at its line.
	noCap := strings.Replace(capScenario, "capacity:\n  interval: 10s\n  load: { a: 150 }\n", "", 1)
	if _, err := ParseScenario(file, []byte(noCap)); err == nil || !strings.Contains(err.Error(), "s.yaml:10: event at 1m: load needs a capacity section") {
		t.Errorf("load event without capacity: %v", err)
	}
	// Through the API (no files): the load file is refused.
	sc := mustParse(t, file, strings.Replace(capScenario, "load: { a: 150 }", "load_file: load.json", 1))
	b.LoadConfig = nil
	if _, err := Compile(sc, b); err == nil || !strings.Contains(err.Error(), "load_file load.json: not available through the API") {
		t.Errorf("load_file through the API: %v", err)
	}
}

// TestCapacityCacheLag: through a resolver's cache (TTL 60 s, 10 s
// intervals) steer answers the cache misses, not every user query, and
// a step moves the users only as their cached answers expire: the users'
// share lags the answers'.
func TestCapacityCacheLag(t *testing.T) {
	b, dir := capBase(t, "load: { max_shift: 0.5 }\n")
	sc := mustParse(t, filepath.Join(dir, "s.yaml"), strings.Replace(capScenario, "runs: 1\n", "runs: 1\nttl_override: 60s\n", 1))
	m := mustCompile(t, sc, b)
	r, err := PredictCapacity(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := r.Steps[0], r.Steps[1]
	if s0.AuthQPS >= s0.UserQPS/10 {
		t.Errorf("steer answers %.1f q/s of %.1f user q/s through a 60 s cache: want the misses only", s0.AuthQPS, s0.UserQPS)
	}
	if !(s1.Answers[0] < s1.Share[0] && s1.Share[0] < 1) {
		t.Errorf("after the first step a has %.3f of the answers and %.3f of the users: want the users behind (between the answers and 1)", s1.Answers[0], s1.Share[0])
	}
}
