package policy_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/policy"
)

// An update's work follows the policies, not the names: the networks
// evaluated do not grow with the records sharing a partition (a count,
// not a timing).
func TestLatencyUpdateWorkIsShared(t *testing.T) {
	evaluate := func(names, policies int) policy.LatencyStats {
		table := latencyNamesTable(t, names, policies)
		live := policy.NewLive(table, policy.LiveOptions{})
		store := latency.NewStore(latency.Options{})
		store.Update(bigUpdate(300, t0), t0)
		return live.SetLatency(store.Map(), policy.NewLatencyMemory(latency.Options{}), store.Updates(), t0)
	}
	one := evaluate(1, 1)
	if one.Networks == 0 || one.Evaluated != one.Networks || one.Groups != 1 || one.Records != 1 {
		t.Fatalf("one record: %+v", one)
	}
	for _, c := range []struct{ names, policies int }{{40, 1}, {400, 1}, {5, 5}, {400, 5}} {
		st := evaluate(c.names, c.policies)
		if st.Evaluated != c.policies*one.Networks || st.Groups != c.policies || st.Records != c.names {
			t.Errorf("%d names over %d policies: %d networks in %d groups for %d records; want %d networks in %d groups (one record: %d)",
				c.names, c.policies, st.Evaluated, st.Groups, st.Records, c.policies*one.Networks, c.policies, one.Networks)
		}
	}
}

// groupNames is a configuration of the named records (name -> policy) over
// two policies that steer by latency with different partitions and
// candidates.
func groupNames(t testing.TB, recs [][2]string) string {
	var b strings.Builder
	b.WriteString("\npolicies:\n" +
		"  p0:\n    rules:\n      - match: { cidr: [10.0.0.0/16] }\n        pool: mumbai\n" +
		"      - default: { by: latency, fallback: [virginia, frankfurt, mumbai] }\n" +
		"  p1:\n    rules:\n      - match: { continent: EU }\n        by: latency\n        fallback: [frankfurt, virginia]\n" +
		"      - default: { by: latency, fallback: [virginia, frankfurt, mumbai] }\n" +
		"records:\n")
	for i, r := range recs {
		fmt.Fprintf(&b, "  - { name: %s, ttl: 60, policy: %s, pools: {"+
			" mumbai: { address: 203.0.113.%d, location: { lat: 19.08, lon: 72.88 } },"+
			" frankfurt: { address: 198.51.100.%d, location: { lat: 50.11, lon: 8.68 } },"+
			" virginia: { address: 192.0.2.%d, location: { lat: 38.95, lon: -77.45 } } } }\n", r[0], r[1], i+1, i+1, i+1)
	}
	return strings.TrimSuffix(configYAML(t, []string{cityDB, asnDB}, ""), "records:") + b.String()
}

// latSide is a table served with its own memory: the records together, or
// one record alone.
type latSide struct {
	yaml  string
	table *policy.Table
	live  *policy.Live
	mem   *policy.LatencyMemory
}

func (s *latSide) rebuild(t *testing.T, yaml string) {
	t.Helper()
	s.yaml = yaml
	s.table = mustBuild(t, yaml)
	s.live = policy.NewLive(s.table, policy.LiveOptions{})
}

// Records evaluated together as latency groups answer, and explain, as
// each would alone: with the same map and the same health, a record of a
// group and the same record in a table of its own decide every client
// alike at every update, while pools go down for some records and not
// others (groups fork), come back (groups join again when their anti-flap
// states agree) and a reload moves a record to another policy.
func TestLatencyGroupsAnswerAsRecordsAlone(t *testing.T) {
	rnd := rand.New(rand.NewPCG(25, 1))
	recs := [][2]string{{"a.example.com", "p0"}, {"b.example.com", "p0"}, {"c.example.com", "p0"},
		{"d.example.com", "p1"}, {"e.example.com", "p1"}, {"f.example.com", "p1"}}
	pools := []string{"mumbai", "frankfurt", "virginia"}
	together := &latSide{mem: policy.NewLatencyMemory(latency.Options{})}
	together.rebuild(t, groupNames(t, recs))
	alone := make([]*latSide, len(recs))
	for i := range recs {
		alone[i] = &latSide{mem: policy.NewLatencyMemory(latency.Options{})}
		alone[i].rebuild(t, groupNames(t, recs[i:i+1]))
	}
	store := latency.NewStore(latency.Options{MaxAge: time.Hour})
	keys := []string{"192.0.2.0/26", "192.0.2.64/26", "198.51.100.0/24", "203.0.113.0/25", "49.36.0.0/16", "91.64.0.0/16",
		"IN", "DE", "US", "AS64496", "continent:EU", "continent:AS"}
	clients := []string{"192.0.2.1", "192.0.2.70", "192.0.2.200", "198.51.100.9", "203.0.113.5", "203.0.113.200",
		"49.36.1.1", "91.64.1.1", "10.0.1.1", "8.8.8.8", "2001:db8::1"}
	down := map[string]map[string]bool{} // record -> pools down
	now := t0
	maxGroups, forked, joined := 0, false, false
	for round := range 40 {
		switch round {
		case 20: // a reload that moves a.example.com to p1 on both sides
			recs[0][1] = "p1"
			together.rebuild(t, groupNames(t, recs))
			alone[0].rebuild(t, groupNames(t, recs[0:1]))
		case 30: // everything back up: groups that agree join again
			clear(down)
			for _, c := range []string{"AF", "AN", "NA", "OC", "SA"} {
				keys = append(keys, "continent:"+c) // every network measured
			}
		}
		if round > 0 && round < 30 && rnd.IntN(3) == 0 {
			r := recs[rnd.IntN(len(recs))][0]
			p := pools[rnd.IntN(len(pools))]
			if down[r] == nil {
				down[r] = map[string]bool{}
			}
			down[r][p] = !down[r][p]
		}
		health := func(record, pool string) policy.PoolOverride {
			if down[strings.TrimSuffix(record, ".")][pool] {
				return policy.PoolDown
			}
			return policy.PoolAuto
		}
		var ms []latency.Measurement
		for ki, k := range keys {
			for si, s := range pools {
				switch {
				case round >= 30:
					// Steady and clear (no two sites within the switch
					// margin): every group settles on the same choices.
					rtt := 100 * float64(si+1)
					if si == ki%len(pools) {
						rtt = 40
					}
					ms = append(ms, latency.Measurement{Key: k, Site: s, RTTms: rtt, Samples: 1, MeasuredAt: now})
				case rnd.IntN(3) > 0:
					ms = append(ms, latency.Measurement{Key: k, Site: s, RTTms: float64(20 + rnd.IntN(60)), Samples: 1, MeasuredAt: now})
				}
			}
		}
		store.Update(ms, now)
		for _, s := range append([]*latSide{together}, alone...) {
			s.live.SetHealth(allUsable, health)
		}
		st := together.live.SetLatency(store.Map(), together.mem, store.Updates(), now)
		maxGroups = max(maxGroups, st.Groups)
		if st.Groups > 2 {
			forked = true
		}
		if forked && round >= 30 && st.Groups == 2 {
			joined = true
		}
		if round == 0 && st.Groups != 2 {
			t.Fatalf("first update: %d groups, want 2 (one per policy)", st.Groups)
		}
		for i, s := range alone {
			s.live.SetLatency(store.Map(), s.mem, store.Updates(), now)
			name := recs[i][0] + "."
			rt, ra := together.table.Get(name), s.table.Get(name)
			for _, c := range clients {
				a := addr(c)
				qt := dns.TypeA
				if a.Is6() {
					qt = dns.TypeAAAA
				}
				dt, da := decideNow(together.live, rt, qt, a), decideNow(s.live, ra, qt, a)
				if dt.Pools != da.Pools || dt.Scope != da.Scope {
					t.Fatalf("round %d, %s, client %s (down %v): together %s /%d, alone %s /%d",
						round, name, c, down[recs[i][0]], poolNames(rt, dt.Pools), dt.Scope, poolNames(ra, da.Pools), da.Scope)
				}
				for k, rule := range rt.Rules {
					if rule.Action.Kind != policy.ActLatency {
						continue
					}
					info := lookupInfo(t, c)
					et := together.live.ExplainLatency(rt, k, a, info, together.live.Up(rt, qt), "", now)
					ea := s.live.ExplainLatency(ra, k, a, info, s.live.Up(ra, qt), "", now)
					if fmt.Sprint(et.State) != fmt.Sprint(ea.State) || et.Network != ea.Network {
						t.Fatalf("round %d, %s, client %s, rule %d: explain together %s %+v, alone %s %+v",
							round, name, c, k+1, et.Network, et.State, ea.Network, ea.State)
					}
				}
			}
		}
		now = now.Add(time.Minute)
	}
	if !forked || !joined {
		t.Errorf("the run never forked a group (%t) or never joined them again (%t): at most %d groups", forked, joined, maxGroups)
	}
}

// A reload costs in proportion to the change: a table rebuilt from the
// same configuration keeps every group's rankings at the same update (no
// network evaluated again), and one record moved to another policy costs
// one group's evaluation; the next update evaluates every group again.
func TestLatencyReloadEvaluatesTheChange(t *testing.T) {
	var recs [][2]string
	for i := range 40 {
		recs = append(recs, [2]string{fmt.Sprintf("r%d.example.com", i), fmt.Sprintf("p%d", i%2)})
	}
	g := geoSetFor(t, cityDB, asnDB)
	mem := policy.NewLatencyMemory(latency.Options{})
	store := latency.NewStore(latency.Options{})
	store.Update(bigUpdate(300, t0), t0)
	var prev *policy.Table
	load := func() (*policy.Live, policy.LatencyStats) {
		table, _, err := policy.BuildWith(parseConfig(t, groupNames(t, recs)), g, prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = table
		live := policy.NewLive(table, policy.LiveOptions{})
		return live, live.SetLatency(store.Map(), mem, store.Updates(), t0)
	}
	live, first := load()
	if first.Groups != 2 || first.Reused != 0 || first.Networks == 0 {
		t.Fatalf("first evaluation: %+v", first)
	}
	want := decideNow(live, prev.Get("r0.example.com."), dns.TypeA, addr("192.0.2.1"))
	live, same := load()
	if same.Groups != 2 || same.Reused != 2 || same.Evaluated != 0 || same.Networks != first.Networks {
		t.Fatalf("reload of the same configuration: %+v, want both groups kept and no network evaluated", same)
	}
	if got := decideNow(live, prev.Get("r0.example.com."), dns.TypeA, addr("192.0.2.1")); got.Pools != want.Pools || got.Scope != want.Scope {
		t.Fatalf("after the reload r0 answers %v, before %v", got, want)
	}
	recs[0][1] = "p1"
	_, moved := load()
	if moved.Groups != 3 || moved.Reused != 2 || moved.Evaluated == 0 || moved.Evaluated >= first.Networks {
		t.Fatalf("one record moved: %+v, want its own group evaluated (fewer networks than the first %d) and the two others kept", moved, first.Networks)
	}
	store.Update(bigUpdate(300, t0.Add(time.Minute)), t0.Add(time.Minute))
	if _, next := load(); next.Reused != 0 || next.Evaluated != next.Networks {
		t.Fatalf("a new update: %+v, want every group evaluated", next)
	}
}

// Explain reads a group's anti-flap state while updates change it (run
// with -race): it takes the memory's lock, never a torn state.
func TestLatencyExplainConcurrent(t *testing.T) {
	recs := [][2]string{{"a.example.com", "p0"}, {"b.example.com", "p0"}}
	table := mustBuild(t, groupNames(t, recs))
	live := policy.NewLive(table, policy.LiveOptions{})
	mem := policy.NewLatencyMemory(latency.Options{SwitchRounds: 1})
	store := latency.NewStore(latency.Options{})
	r := table.Get("a.example.com.")
	info := lookupInfo(t, "192.0.2.1")
	update := func(i int) {
		fast := []string{"mumbai", "frankfurt", "virginia"}[i%3]
		var ms []latency.Measurement
		for _, s := range []string{"mumbai", "frankfurt", "virginia"} {
			rtt := 100.0
			if s == fast {
				rtt = 10
			}
			ms = append(ms, latency.Measurement{Key: "192.0.2.0/24", Site: s, RTTms: rtt, Samples: 1, MeasuredAt: t0})
		}
		store.Update(ms, t0)
		live.SetLatency(store.Map(), mem, store.Updates(), t0)
	}
	update(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 50; i++ {
			update(i)
		}
	}()
	for n := 0; ; n++ {
		select {
		case <-done:
			tr := live.ExplainLatency(r, 1, addr("192.0.2.1"), info, r.Enabled, "", t0)
			if tr.State == nil || tr.State.Current != "virginia" { // update 50: 50 % 3 = 2
				t.Fatalf("after the updates: %+v", tr.State)
			}
			return
		default:
		}
		if tr := live.ExplainLatency(r, 1, addr("192.0.2.1"), info, r.Enabled, "", t0); tr.State == nil {
			t.Fatalf("explain %d: no state", n)
		}
	}
}
