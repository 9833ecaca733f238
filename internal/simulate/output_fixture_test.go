package simulate

import (
	"math/rand/v2"
	"time"
)

// canaryResult is a hand-made result shaped like the canary scenario's
// (the engine's output is not needed to test the files and the text):
// shop.example.com with a 95/5 us-east/us-east-canary split, 24 h in
// 1,440 one-minute bins, 200 runs; the canary's per-minute band is
// 3.5–13.5 % around a 4 % median with spikes of its p95 to 24 % at
// 05:05, 05:06 and 11:40; one resolver site (bigpublic-us) holds 20 %
// of the users; us-east-canary is drained at 12:00 and safe at +61 s.
// Like the engine's, the notable excursions are above the configured
// share, the largest first.
func canaryResult() *Result {
	rng := rand.New(rand.NewPCG(7, 27))
	r := &Result{
		Record:  "shop.example.com.",
		Pools:   []string{"us-east", "us-east-canary"},
		Sites:   []string{"bigpublic-us", "isp-small"},
		Bin:     time.Minute,
		Runs:    200,
		Seed:    1,
		Elapsed: 3200 * time.Millisecond,
		Phases: []PhaseInfo{
			{At: 0, Label: "start"},
			{At: 12 * time.Hour, Label: "drain us-east-canary"},
		},
	}
	drainBin := 720
	for i := range 1440 {
		var canary Band
		conf := 0.05
		switch {
		case i < drainBin:
			noise := (rng.Float64() - 0.5) * 0.004
			canary = Band{P5: 0.035 + noise, P50: 0.04 + noise, P95: 0.135 + noise, Mean: 0.05 + noise}
			if i == 305 || i == 306 || i == 700 {
				canary.P95 = 0.24
			}
		case i == drainBin:
			canary, conf = Band{P5: 0.02, P50: 0.03, P95: 0.09, Mean: 0.035}, 0
		case i == drainBin+1:
			canary, conf = Band{P5: 0, P50: 0.001, P95: 0.004, Mean: 0.002}, 0
		default:
			conf = 0
		}
		east := Band{P5: 1 - canary.P95, P50: 1 - canary.P50, P95: 1 - canary.P5, Mean: 1 - canary.Mean}
		big := []float64{1 - canary.Mean, canary.Mean}
		small := []float64{1 - canary.Mean, canary.Mean}
		r.Bins = append(r.Bins, Bin{
			Start:       time.Duration(i) * time.Minute,
			Share:       []Band{east, canary},
			Configured:  []float64{1 - conf, conf},
			SiteShare:   [][]float64{big, small},
			Queries:     1000,
			AuthQPS:     6.67,
			AuthQPSBand: Band{P5: 6.4, P50: 6.67, P95: 6.9, Mean: 6.67},
			Entries:     401,
		})
	}
	r.Deviation = []Deviation{
		{Pool: "us-east", ConfiguredMean: 0.975,
			Median: Band{P5: 0.4, P50: 0.5, P95: 0.6, Mean: 0.5},
			P95:    Band{P5: 7.5, P50: 8.1, P95: 8.9, Mean: 8.2},
			Max:    Band{P5: 17.1, P50: 19.8, P95: 21.0, Mean: 19.5}},
		{Pool: "us-east-canary", ConfiguredMean: 0.025,
			Median: Band{P5: 0.4, P50: 0.5, P95: 0.6, Mean: 0.5},
			P95:    Band{P5: 7.5, P50: 8.1, P95: 8.9, Mean: 8.2},
			Max:    Band{P5: 17.1, P50: 19.8, P95: 21.0, Mean: 19.5}},
	}
	r.Drains = []DrainResult{{
		Pool: "us-east-canary", At: 12 * time.Hour, Label: "drain us-east-canary",
		SafeAt:    Band{P5: 60, P50: 61, P95: 62, Mean: 61},
		LastQuery: Band{P5: 58, P50: 60, P95: 62, Mean: 60},
	}}
	for _, ph := range []string{"start", "drain us-east-canary"} {
		r.Cost = append(r.Cost,
			Cost{Phase: ph, Site: "bigpublic-us", AuthQPS: 1.0 / 60, Entries: 1, UserQPS: 200},
			Cost{Phase: ph, Site: "isp-small", AuthQPS: 6.65, Entries: 399, UserQPS: 800},
		)
	}
	r.Notable = []Excursion{
		{Bin: 305 * time.Minute, Pool: "us-east-canary", Share: 0.248, Configured: 0.05, Site: "bigpublic-us", SiteShare: 0.20, Runs: 0.97},
		{Bin: 400 * time.Minute, Pool: "us-east", Share: 0.99, Configured: 0.95, Site: "isp-small", SiteShare: 0.80, Runs: 0.5},
	}
	return r
}

// onePoolResult has one pool that gets every query, no drains, no
// deviation and no notable excursion.
func onePoolResult() *Result {
	r := &Result{
		Record: "www.example.com.",
		Pools:  []string{"only"},
		Sites:  []string{"resolvers"},
		Bin:    10 * time.Second,
		Runs:   1,
		Seed:   42,
		Phases: []PhaseInfo{{At: 0, Label: "start"}},
	}
	for i := range 30 {
		r.Bins = append(r.Bins, Bin{
			Start: time.Duration(i) * 10 * time.Second, Share: []Band{{P5: 1, P50: 1, P95: 1, Mean: 1}},
			Configured: []float64{1}, SiteShare: [][]float64{{1}}, Queries: 50, AuthQPS: 0.1, Entries: 3,
		})
	}
	r.Cost = []Cost{{Phase: "start", Site: "resolvers", AuthQPS: 0.1, Entries: 3, UserQPS: 50}}
	return r
}
