//go:build !race

package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/simulate"
)

// The simulations themselves are compute-bound: these run without the
// race detector (scripts/test.sh runs them plain).

// shareMean is a pool's mean share over a response's bins.
func shareMean(t *testing.T, r SimulateResponse, pool string) float64 {
	t.Helper()
	pi := -1
	for i, p := range r.Result.Pools {
		if p == pool {
			pi = i
		}
	}
	if pi < 0 {
		t.Fatalf("no pool %s in %v", pool, r.Result.Pools)
	}
	sum := 0.0
	for _, b := range r.Result.Bins {
		sum += b.Share[pi].Mean
	}
	return sum / float64(len(r.Result.Bins))
}

// canaryJSON is canaryScenario in JSON.
const canaryJSON = `{"duration": "1h", "bin": "1m", "runs": 3, "record": "shop.example.com",
 "clients": [{"name": "americas", "prefixes": ["24.0.0.0/16"], "rate": 1000}],
 "resolvers": [{"name": "bigpublic", "share": 0.2}, {"name": "isp", "share": 0.8, "count": 100}]}`

func TestSimulateRuns(t *testing.T) {
	h := NewHandler(&simFake{t: t}, Options{Token: "s3cret"})
	auth := []string{"Authorization", "Bearer s3cret"}
	for _, c := range []struct{ ctype, body string }{
		{"application/yaml", canaryScenario},
		{"text/yaml; charset=utf-8", canaryScenario},
		{"", canaryScenario},
		{"application/json", canaryJSON},
	} {
		w := do(t, h, "POST", "/v1/simulate", c.body, append([]string{"Content-Type", c.ctype}, auth...)...)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.ctype, w.Code, w.Body)
		}
		var r SimulateResponse
		if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", c.ctype, err)
		}
		if r.Summary == "" || r.Result.Runs != 3 || len(r.Result.Bins) != 60 {
			t.Fatalf("%s: %d runs, %d bins, summary %q", c.ctype, r.Result.Runs, len(r.Result.Bins), r.Summary)
		}
		if m := shareMean(t, r, "canary"); m < 0.03 || m > 0.07 {
			t.Errorf("%s: canary's mean share %.3f, want 0.05 ± 0.02", c.ctype, m)
		}
	}
}

// A simulation past its time: 422 saying so and how to shrink it; the
// slot is free afterwards.
func TestSimulateTimeout(t *testing.T) {
	h := NewHandler(&simFake{t: t}, Options{})
	h.s.sim.timeout = time.Millisecond
	big := strings.Replace(strings.Replace(canaryScenario, "duration: 1h", "duration: 7d", 1), "runs: 3", "runs: 50", 1)
	start := time.Now()
	msg := jsonError(t, do(t, h, "POST", "/v1/simulate", big), http.StatusUnprocessableEntity)
	if !strings.Contains(msg, "longer than 1ms") || !strings.Contains(msg, "fewer runs") {
		t.Errorf("422: %q", msg)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the simulation stopped %s after its deadline of 1ms", d)
	}
	h.s.sim.timeout = DefaultSimulateTimeout
	if w := do(t, h, "POST", "/v1/simulate", canaryScenario); w.Code != http.StatusOK {
		t.Fatalf("after a timeout: %d %s", w.Code, w.Body)
	}
}

// capFake simulates against a configuration whose pool a declares a
// capacity (two /16s each falling over to b).
type capFake struct {
	fake
	base simulate.Base
}

func (f *capFake) SimulateBase() (simulate.Base, error) { return f.base, nil }

// TestSimulateCapacity: a posted scenario with a capacity section gets
// the capacity prediction in the result (every interval, the shed
// networks and the reason) and in the summary; a load file, which
// would read a file of the node's, is refused at its line.
func TestSimulateCapacity(t *testing.T) {
	cfg, err := config.Parse(nil, "steer.yaml", []byte(`geo:
  databases: [../../testdata/geo/larkbook-city.mmdb]
records:
  - name: c.example.com
    ttl: 5
    pools:
      a: { address: 192.0.2.1, capacity: { target: 100 } }
      b: { address: 192.0.2.2 }
    rules:
      - match: { cidr: [10.0.0.0/16] }
        failover: [a, b]
      - match: { cidr: [10.1.0.0/16] }
        failover: [a, b]
      - default: { pool: b }
`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := geo.Open(cfg.Resolve(cfg.Geo.Databases[0]))
	if err != nil {
		t.Fatal(err)
	}
	set := &geo.Set{DBs: []*geo.Database{d}}
	h := NewHandler(&capFake{base: simulate.Base{Config: cfg, Geo: set}}, Options{})
	scenario := `duration: 1m
runs: 1
record: c.example.com
clients:
  - { name: all, prefixes: [10.0.0.0/15], subnets: 32, rate: 100 }
resolvers:
  - { name: ecs, share: 1, ecs: true }
capacity:
  interval: 10s
  load: { a: 150 }
`
	w := do(t, h, "POST", "/v1/simulate", scenario, "Content-Type", "application/yaml")
	var resp SimulateResponse
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	c := resp.Result.Capacity
	if c == nil || len(c.Steps) != 6 || len(c.Steps[1].Shed) != 1 || c.Steps[1].Shed[0].To[0] != "b" ||
		!strings.HasPrefix(c.Steps[0].Pools[0].Reason, "shed: load 150 % of target") {
		t.Fatalf("capacity %+v", c)
	}
	if !strings.Contains(resp.Summary, "capacity feedback") {
		t.Errorf("summary without the capacity prediction:\n%s", resp.Summary)
	}
	w = do(t, h, "POST", "/v1/simulate", strings.Replace(scenario, "load: { a: 150 }", "load_file: /etc/steer/load.json", 1), "Content-Type", "application/yaml")
	if msg := jsonError(t, w, http.StatusBadRequest); !strings.Contains(msg, "request:9: capacity: load_file /etc/steer/load.json: not available through the API") {
		t.Errorf("load_file: %s", msg)
	}
}
