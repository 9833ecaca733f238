package simulate

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

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
