//go:build !race

package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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
