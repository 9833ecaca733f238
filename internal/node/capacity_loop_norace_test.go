//go:build !race

package node

// The closed loop runs 23 rounds of real queries on a clock; under the
// race detector on a shared 2-core machine a round takes several times
// its 100 ms, so it runs without it (the other capacity tests run with).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/simulate"
)

var answersRE = regexp.MustCompile(`steer_steered_answers_total\{fail_open="false",pool="(\w+)",record="c.example.com."\} (\d+)`)

// poolAnswers reads the node's own answer counters for c.example.com.
func poolAnswers(t *testing.T, n *testNode) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	n.met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]float64{}
	for _, m := range answersRE.FindAllStringSubmatch(rec.Body.String(), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] = v
	}
	return out
}

// TestCapacityClosedLoop is issue 30's acceptance test: pool a's load is
// modelled from the node's own answer counters (load = a's share of the
// answers × the offered load, 150 % of a's target when a answers all),
// fed back through PUT /v1/load every 100 ms. Within three intervals a's
// share falls to its target share (2/3) and over the next 20 it moves by
// no more than 10 % of that; every answer's ECS scope stays exact; once
// the feed stops, the load turns stale after load.stale_after and a gets
// its networks back.
func TestCapacityClosedLoop(t *testing.T) {
	t.Parallel()
	n := startNode(t, map[string]string{
		"steer.yaml":       capacityConfig("load: { max_shift: 0.5, low_water: 0.85, stale_after: 1500ms }"),
		"example.com.zone": dashZone,
	}, Options{})
	rnd := rand.New(rand.NewPCG(30, 1))
	const (
		interval = 100 * time.Millisecond
		offered  = 150.0 // a's load when it answers every query of 10/11
		target   = 100.0
	)
	// Networks differ in traffic: 2 to 9 queries a round (about 180).
	weight := func(k int) int { return 2 + k*5%8 }
	targetShare := target / offered
	var lastAt time.Time // the last load's timestamp
	put := func(load float64) {
		t.Helper()
		lastAt = time.Now()
		body := fmt.Sprintf(`{"loads": [{"record": "c.example.com", "pool": "a", "current-load": %.2f, "timestamp": %q}]}`,
			load, lastAt.UTC().Format(time.RFC3339Nano))
		if code, resp := n.call("PUT", "/v1/load", "", body); code != 200 {
			t.Fatalf("PUT /v1/load: %d %s", code, resp)
		}
	}
	prev := poolAnswers(t, n)
	share := func() float64 {
		cur := poolAnswers(t, n)
		da, db := cur["a"]-prev["a"], cur["b"]-prev["b"]
		prev = cur
		if da+db == 0 {
			t.Fatal("no answers counted for a or b")
		}
		return da / (da + db)
	}
	var shares []float64
	began := time.Now()
	for round := range 23 {
		start := time.Now()
		counts := capacityRound(t, n.dns, rnd, weight, true)
		s := share()
		if client := float64(counts["192.0.2.1"]) / float64(counts["192.0.2.1"]+counts["192.0.2.2"]); math.Abs(client-s) > 0.02 {
			t.Errorf("round %d: the node counted a's share as %.3f, the clients saw %.3f", round, s, client)
		}
		shares = append(shares, s)
		put(offered * s)
		time.Sleep(interval - time.Since(start))
	}
	t.Logf("a's share per interval: %.3f (loop took %s)", shares, time.Since(began).Round(time.Millisecond))
	// The simulator's prediction of the same loop beside it: the same
	// compiled table, the same traffic per network, the same load model.
	predicted := predictLoop(t, n, weight, offered, interval, len(shares), true)
	t.Logf("predicted by steer simulate:   %.3f", predicted)
	settled := func(s []float64) int {
		for i, x := range s {
			if x <= targetShare+1.0/32 {
				return i
			}
		}
		return -1
	}
	if m, p := settled(shares), settled(predicted); m != p {
		t.Errorf("a's share settled at or below its target share in interval %d, the simulator predicted interval %d", m, p)
	}
	for i := range shares {
		if d := math.Abs(shares[i] - predicted[i]); i > 0 && d > 0.05 {
			t.Errorf("interval %d: a's share %.3f, the simulator predicted %.3f (%.1f points apart, want at most 5)", i, shares[i], predicted[i], 100*d)
		}
	}
	if shares[0] != 1 {
		t.Errorf("before any feedback a's share is %.3f, want 1", shares[0])
	}
	// Within three intervals: at most the target share (one network's
	// worth of slack: 1/32 of the traffic).
	if s := shares[3]; s > targetShare+1.0/32 {
		t.Errorf("after three intervals a's share is %.3f, want at most %.3f", s, targetShare)
	}
	lo, hi := 1.0, 0.0
	for _, s := range shares[3:] {
		lo, hi = min(lo, s), max(hi, s)
	}
	if hi-lo > 0.1*targetShare {
		t.Errorf("over 20 intervals a's share moved between %.3f and %.3f: more than 10 %% of its target share %.3f", lo, hi, targetShare)
	}
	if hi > targetShare+1.0/32+0.03 {
		t.Errorf("a's share rose to %.3f after converging, target %.3f", hi, targetShare)
	}
	// Status says why. (The last share's load once more, so that a
	// loaded machine's pause since the loop cannot have made it stale:
	// below the target and above the low-water mark, it moves nothing.)
	put(offered * shares[len(shares)-1])
	code, body := n.call("GET", "/v1/load", "", "")
	var st api.LoadStatus
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Pools) != 1 {
		t.Fatalf("GET /v1/load: %d %s", code, body)
	}
	if p := st.Pools[0]; !strings.HasPrefix(p.Reason, "shed: load") || !strings.Contains(p.Reason, "% of target") || p.Shed == 0 {
		t.Errorf("load status %+v", p)
	}
	// The feed stops: after stale_after the load is ignored and a gets
	// its networks back (the node's stale timer steps the loop).
	stopped := lastAt
	dnstest.WaitFor(t, 5*time.Second, "a's stale load to be ignored", func() bool {
		capacityRound(t, n.dns, rnd, func(int) int { return 2 }, false) // the state flips during some round
		return share() == 1
	})
	if d := time.Since(stopped); d < 1200*time.Millisecond {
		t.Errorf("a got its networks back %s after the last load, before stale_after (1.5s)", d)
	}

	// A load that does not follow the answers (a fixed 150, every
	// interval) sheds step after step, each by the damping and the
	// ranking of the networks' counts: the simulator must pick as the
	// node does. A load below the low-water mark first (nothing shed,
	// nothing moves) starts the counters afresh.
	began = time.Now()
	put(50)
	prev = poolAnswers(t, n)
	var fixed []float64
	for range 6 {
		capacityRound(t, n.dns, rnd, weight, false)
		fixed = append(fixed, share())
		put(offered)
	}
	predictedFixed := predictLoop(t, n, weight, offered, interval, len(fixed), false)
	t.Logf("a's share under a fixed load:  %.3f (took %s)", fixed, time.Since(began).Round(time.Millisecond))
	t.Logf("predicted by steer simulate:   %.3f", predictedFixed)
	for i := range fixed {
		if d := math.Abs(fixed[i] - predictedFixed[i]); d > 0.05 {
			t.Errorf("fixed load, interval %d: a's share %.3f, the simulator predicted %.3f (%.1f points apart, want at most 5)", i, fixed[i], predictedFixed[i], 100*d)
		}
	}
}

// predictLoop is the simulator's prediction of TestCapacityClosedLoop's
// loop: per interval, a's share of c.example.com's answers, from the
// node's own compiled table and load settings, weight(k) queries an
// interval from 10.k.0.0/16 straight to steer (no resolver cache), and
// a's load following its answers (proportional: offered when it answers
// them all) or offered every interval.
func predictLoop(t *testing.T, n *testNode, weight func(int) int, offered float64, interval time.Duration, intervals int, proportional bool) []float64 {
	t.Helper()
	snap := n.srv.Handler().Snapshot()
	rec := snap.Policies.Get("c.example.com.")
	if rec == nil {
		t.Fatal("c.example.com is not in the served table")
	}
	m := &simulate.Model{Start: time.Now(), Qtype: dns.TypeA, Record: rec.Name, Seed: 1,
		Sites: []simulate.Site{{Name: "direct", ECS: true, SourceV4: 24, SourceV6: 56, HonorsScope: true}}}
	total := 0.0
	for k := range 32 {
		total += float64(weight(k))
	}
	m.Groups = []simulate.Group{{Name: "loop", Rate: total / interval.Seconds()}}
	res := simulate.Resolver{Addr: netip.MustParseAddr("192.0.2.53"), Caches: 0}
	for k := range 32 {
		m.Subnets = append(m.Subnets, simulate.Subnet{Prefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.9.0/24", k)), Weight: float64(weight(k)) / total})
		res.Subnets = append(res.Subnets, int32(k))
		res.Share = append(res.Share, 1)
	}
	m.Resolvers = []simulate.Resolver{res}
	m.Phases = []simulate.Phase{{Label: "start", Table: snap.Policies, Live: policy.NewLive(snap.Policies, policy.LiveOptions{}), Record: rec}}
	lc := snap.Config.Load
	m.Capacity = &simulate.CapacityFeed{Interval: interval, Intervals: intervals, Proportional: proportional,
		Options: policy.ShedOptions{MaxShift: lc.MaxShift, LowWater: lc.LowWater, StaleAfter: time.Duration(lc.StaleAfter)},
		Changes: []simulate.LoadChange{{Loads: map[string]*float64{"a": &offered}}}}
	r, err := simulate.PredictCapacity(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	a := slices.Index(r.Pools, "a")
	out := make([]float64, len(r.Steps))
	for i, s := range r.Steps {
		out[i] = s.Answers[a]
	}
	return out
}
