package node

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
)

// simConfig is a node steering shop.example.com 95/5 for everyone,
// against the small Larkbook test database (%s: its absolute path).
const simConfig = `api: { listen: "127.0.0.1:0" }
geo: { databases: [%q] }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    ttl: 60
    pools:
      stable: { address: 192.0.2.30 }
      canary: { address: 192.0.2.31 }
    rules:
      - default:
          split:
            - { pool: stable, weight: 95 }
            - { pool: canary, weight: 5 }
`

// A scenario posted to a serving node runs against the node's own
// compiled table, and what it changes (weights, drains) stays in the
// simulation: the node answers on with its own table and weights, also
// while the simulation compiles and runs beside its queries.
func TestSimulateAgainstServed(t *testing.T) {
	db, err := filepath.Abs("../../testdata/geo/larkbook-city.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tn := startNode(t, map[string]string{"steer.yaml": fmt.Sprintf(simConfig, db), "example.com.zone": zone("example.com", 1, "x")}, Options{})
	t.Logf("started in %s", time.Since(start))
	served := tn.srv.Handler().Snapshot()
	scenario := `duration: 20m
bin: 1m
runs: 2
record: shop.example.com
clients:
  - { name: users, prefixes: [198.51.100.0/24, 203.0.113.0/24], rate: 100 }
resolvers:
  - { name: isp, share: 1, count: 10 }
events:
  - { at: 5m, set_weights: { stable: 0, canary: 100 } }
  - { at: 15m, drain: canary }
`
	// Queries all along: every one answered, with the served split.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var canary, total atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			a := tn.a("shop.example.com")
			if a != "192.0.2.30" && a != "192.0.2.31" {
				t.Errorf("answer during the simulation: %s", a)
				return
			}
			total.Add(1)
			if a == "192.0.2.31" {
				canary.Add(1)
			}
		}
	}()
	start = time.Now()
	code, body := tn.call("POST", "/v1/simulate", "", scenario)
	stop.Store(true)
	t.Logf("simulated in %s", time.Since(start))
	wg.Wait()
	if code != 200 {
		t.Fatalf("POST /v1/simulate: %d %s", code, body)
	}
	var resp api.SimulateResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	r := resp.Result
	if len(r.Phases) != 3 || len(r.Bins) != 20 || !strings.Contains(resp.Summary, "canary") {
		t.Fatalf("result: %d phases, %d bins; summary %q", len(r.Phases), len(r.Bins), resp.Summary)
	}
	ci := -1
	for i, p := range r.Pools {
		if p == "canary" {
			ci = i
		}
	}
	// From a TTL after the new weights to the drain, the simulation's
	// users are all on the canary; its served config says 5 %.
	if got := r.Bins[10].Share[ci].Mean; got < 0.99 {
		t.Errorf("canary's share at 10m, after set_weights 0/100: %.3f, want 1", got)
	}
	if got := r.Bins[0].Configured[ci]; got < 0.04 || got > 0.06 {
		t.Errorf("canary's configured share at the start %.3f, want the served 0.05", got)
	}

	// The node serves what it served: the same snapshot, table and
	// weights.
	if now := tn.srv.Handler().Snapshot(); now != served || now.Policies != served.Policies {
		t.Fatal("the simulation changed the served snapshot")
	}
	if w := served.Config.Records[0].Rules[0].Default.Split[1].Weight; w != 5 {
		t.Fatalf("the served configuration's canary weight is now %d", w)
	}
	for range 200 {
		if tn.a("shop.example.com") == "192.0.2.31" {
			canary.Add(1)
		}
		total.Add(1)
	}
	if c, n := canary.Load(), total.Load(); c*4 > n { // 5 % expected; 25 % is far beyond chance
		t.Errorf("after the simulation %d of %d answers are the canary's: the simulation's weights leaked", c, n)
	}
	if st := tn.Status(); st.Records[0].Pools[1].State != "up" {
		t.Errorf("canary after simulating its drain: %+v", st.Records[0].Pools[1])
	}
}
