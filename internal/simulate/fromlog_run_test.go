package simulate

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"
)

// TestFromLogRoundTrip: the population FromLog infers, run by the engine
// against steer's real policy, sends steer the misses the log showed:
// per resolver site, the simulated misses/s within ±10 % of the log's
// (the inversion λ̂ = m/(1 − mT/k) is exact in expectation, so only the
// simulation's own noise is left). A site of two resolvers and a site
// with three caches behind one address are among them.
func TestFromLogRoundTrip(t *testing.T) {
	const ttl = 60 * time.Second // the demo record's TTL
	keys := []genKey{
		{res: "10.1.0.1", lambda: 0.02, k: 1, scope: -1},
		{res: "10.1.0.2", lambda: 0.01, k: 1, scope: -1},
		{res: "10.2.0.1", lambda: 0.05, k: 3, scope: -1},
		{res: "2001:db8:5::53", lambda: 0.03, k: 1, scope: -1},
	}
	data := genLog(t, 21, keys, logT0, 24*time.Hour, ttl)
	sc, rep, err := FromLog(bytes.NewReader(data), FromLogOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	observed := map[string]float64{}
	for _, k := range rep.Keys {
		observed[k.Site] += k.MissRate
	}
	sc.Runs = 4
	m := mustCompile(t, sc, larkbook(t))
	res, err := Run(context.Background(), m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cost) != len(observed) {
		t.Fatalf("%d site costs, want %d: %+v", len(res.Cost), len(observed), res.Cost)
	}
	for _, c := range res.Cost {
		want := observed[c.Site]
		t.Logf("%-22s simulated %.5f misses/s, log %.5f (%+.1f %%); users %.4f q/s", c.Site, c.AuthQPS, want, 100*(c.AuthQPS/want-1), c.UserQPS)
		if math.Abs(c.AuthQPS-want) > 0.10*want {
			t.Errorf("site %s: simulated %.5f misses/s, the log %.5f", c.Site, c.AuthQPS, want)
		}
	}
}
