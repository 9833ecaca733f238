package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/simulate"
)

// Criteria are what a comparison must meet.
type Criteria struct {
	// InBand is the least fraction of the bins before the drain whose
	// observed canary share lies inside the predicted p5–p95 band.
	InBand float64
	// MissTol is the largest relative difference between steer's
	// observed misses per second and the predicted authoritative q/s.
	MissTol float64
	// LastTol widens the predicted band of the drain's last query on
	// both sides: Unbound's whole-second clock lets an entry live up to
	// 1 s longer than the mean the scenario's clamp gives, and the drain
	// takes effect some milliseconds after it is asked for.
	LastTol time.Duration
}

// BinCmp is one bin compared.
type BinCmp struct {
	Start            time.Duration
	Users            int64
	Observed         float64
	P5, P50, P95     float64
	In, BeforeDrain  bool
	Misses           int64
	PredictedAuthQPS float64
}

// SiteCmp is one site's misses per second before the drain, observed and
// predicted.
type SiteCmp struct {
	Site                string
	Observed, Predicted float64
	// Canary is the share of the site's users answered with the canary
	// before the drain, and AfterDrain in the bin that starts at the
	// drain (when the drain is on a bin boundary): observed, predicted
	// (the mean over runs).
	Canary, PredCanary         float64
	AfterDrain, PredAfterDrain float64
}

// Verdict is a comparison of the real run with a prediction.
type Verdict struct {
	Name string
	Bins []BinCmp
	// Compared is the number of bins before the drain, InBand those
	// inside the band; Coverage their ratio.
	Compared, InBandN int
	Coverage          float64
	// Misses per second over the run: observed (steer's query log) and
	// predicted (the mean of the bins' AuthQPS); MissErr their relative
	// difference.
	ObservedMiss, PredictedMiss, MissErr float64
	Sites                                []SiteCmp
	// The drain: when it was asked for (offset), the last user query
	// answered with the canary after it (-1: none), and the same
	// computed from the observed bins as the simulator computes "safe
	// at"; the predicted bands.
	Drain, Last, SafeAt time.Duration
	PredLast, PredSafe  simulate.Band
	// Never: the observed share was still above 1 % in the last bin;
	// PredNever the fraction of runs where the prediction says so.
	Never     bool
	PredNever float64
	// Failures lists the criteria not met (empty: passed).
	Failures []string
}

// Passed reports whether every criterion was met.
func (v *Verdict) Passed() bool { return len(v.Failures) == 0 }

// compare checks the real run against a prediction.
func compare(name string, o Options, real *Real, pred *simulate.Result, c Criteria) *Verdict {
	v := &Verdict{Name: name, Drain: -1, Last: -1, SafeAt: -1}
	canary := slices.Index(pred.Pools, "canary")
	share, users := real.Obs.canaryShare()
	var authSum float64
	for i, b := range pred.Bins {
		if i >= len(share) {
			break
		}
		bc := BinCmp{Start: b.Start, Users: users[i], Observed: share[i], Misses: real.Misses.PerBin[i], PredictedAuthQPS: b.AuthQPS}
		if canary >= 0 {
			bc.P5, bc.P50, bc.P95 = b.Share[canary].P5, b.Share[canary].P50, b.Share[canary].P95
		}
		// A band is read with a tolerance of half a user query: a bin's
		// share is a count over users[i], and the band's ends are
		// interpolated between runs.
		eps := 0.5 / math.Max(float64(users[i]), 1)
		bc.In = bc.Observed >= bc.P5-eps && bc.Observed <= bc.P95+eps
		bc.BeforeDrain = o.DrainAt <= 0 || b.Start+o.Bin <= o.DrainAt
		if bc.BeforeDrain {
			v.Compared++
			if bc.In {
				v.InBandN++
			}
		}
		authSum += b.AuthQPS
		v.Bins = append(v.Bins, bc)
	}
	if v.Compared > 0 {
		v.Coverage = float64(v.InBandN) / float64(v.Compared)
	}
	if len(v.Bins) > 0 {
		v.PredictedMiss = authSum / float64(len(v.Bins))
	}
	v.ObservedMiss = float64(real.Misses.Total) / o.Duration.Seconds()
	if v.PredictedMiss > 0 {
		v.MissErr = v.ObservedMiss/v.PredictedMiss - 1
	}
	// Per site: the prediction of the phase before the drain (the drain
	// changes the answers, not how often caches miss).
	phase := ""
	for _, ph := range pred.Phases {
		if o.DrainAt <= 0 || ph.At < o.DrainAt {
			phase = ph.Label
		}
	}
	for s := range numSites {
		sc := SiteCmp{Site: siteNames[s], Observed: float64(real.Misses.Count[s]) / o.Duration.Seconds()}
		for _, cst := range pred.Cost {
			if cst.Site == siteNames[s] && cst.Phase == phase {
				sc.Predicted = cst.AuthQPS
			}
		}
		if ps := slices.Index(pred.Sites, siteNames[s]); ps >= 0 && canary >= 0 {
			var c, all int64
			var p float64
			var np int
			for i, b := range pred.Bins {
				if i >= len(real.Obs.Counts) {
					break
				}
				cnt := real.Obs.Counts[i][s]
				if o.DrainAt <= 0 || b.Start+o.Bin <= o.DrainAt {
					c += cnt[poolCanary]
					all += cnt[poolStable] + cnt[poolCanary] + cnt[poolOther]
					p += b.SiteShare[ps][canary]
					np++
				} else if b.Start == o.DrainAt {
					n := cnt[poolStable] + cnt[poolCanary] + cnt[poolOther]
					sc.AfterDrain = float64(cnt[poolCanary]) / math.Max(float64(n), 1)
					sc.PredAfterDrain = b.SiteShare[ps][canary]
				}
			}
			sc.Canary = float64(c) / math.Max(float64(all), 1)
			sc.PredCanary = p / math.Max(float64(np), 1)
		}
		v.Sites = append(v.Sites, sc)
	}
	if o.DrainAt > 0 {
		v.Drain = real.Obs.DrainSent
		for s := range numSites {
			if l := real.Obs.LastCanary[s]; l >= v.Drain && l-v.Drain > v.Last {
				v.Last = l - v.Drain
			}
		}
		if v.Last < 0 {
			v.Last = 0
		}
		// Safe from the first bin after which every bin has ≤ 1 % canary
		// (the simulator's rule, on the observed bins); never when the
		// last bin still had more.
		first := int(o.DrainAt / o.Bin)
		safeFrom := first
		for i := first; i < len(share); i++ {
			if users[i] > 0 && share[i] > 0.01 {
				safeFrom = i + 1
			}
		}
		if safeFrom >= len(share) && safeFrom > first {
			v.Never = true
		} else {
			v.SafeAt = max(time.Duration(safeFrom)*o.Bin, o.DrainAt) - o.DrainAt
		}
		for _, d := range pred.Drains {
			if d.Pool == "canary" {
				v.PredLast, v.PredSafe = d.LastQuery, d.SafeAt
				v.PredNever = float64(d.Never) / float64(max(pred.Runs, 1))
			}
		}
	}
	// The criteria.
	if v.Coverage < c.InBand {
		v.Failures = append(v.Failures, fmt.Sprintf("%d of %d bins (%.1f %%) inside the predicted p5–p95 band, want ≥ %.0f %%",
			v.InBandN, v.Compared, 100*v.Coverage, 100*c.InBand))
	}
	if math.Abs(v.MissErr) > c.MissTol || v.PredictedMiss == 0 {
		v.Failures = append(v.Failures, fmt.Sprintf("steer's misses %.2f/s vs predicted %.2f/s (%+.1f %%), want within ±%.0f %%",
			v.ObservedMiss, v.PredictedMiss, 100*v.MissErr, 100*c.MissTol))
	}
	if o.DrainAt > 0 {
		lo := secs(v.PredLast.P5) - c.LastTol
		hi := secs(v.PredLast.P95) + c.LastTol
		if v.Last < lo || v.Last > hi {
			v.Failures = append(v.Failures, fmt.Sprintf("last canary query %.2f s after the drain, predicted %.2f–%.2f s (p5–p95, ±%s)",
				v.Last.Seconds(), v.PredLast.P5, v.PredLast.P95, c.LastTol))
		}
		// Observed never safe within the run: the prediction must say so in
		// at least 5 % of its runs; observed safe at a time: inside the
		// band of the runs that were safe, which must be at least 5 %.
		if v.Never && v.PredNever < 0.05 {
			v.Failures = append(v.Failures, fmt.Sprintf("never safe before the end, predicted safe (never in %.0f %% of runs)", 100*v.PredNever))
		}
		if !v.Never && (v.PredNever > 0.95 || secs(v.PredSafe.P5) > v.SafeAt || v.SafeAt > secs(v.PredSafe.P95)) {
			v.Failures = append(v.Failures, fmt.Sprintf("safe %s after the drain, predicted %.0f–%.0f s (p5–p95; never in %.0f %% of runs)",
				v.SafeAt, v.PredSafe.P5, v.PredSafe.P95, 100*v.PredNever))
		}
	}
	return v
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Text is the comparison as a report.
func (v *Verdict) Text(bins bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "== %s\n", v.Name)
	if bins {
		fmt.Fprintf(&b, "%8s %7s %8s %8s %8s %8s %3s %7s %7s\n", "bin", "users", "observed", "p5", "p50", "p95", "in", "misses/s", "pred")
		for _, bc := range v.Bins {
			in := "yes"
			if !bc.In {
				in = "NO"
			}
			if !bc.BeforeDrain {
				in = "(" + in + ")"
			}
			fmt.Fprintf(&b, "%8s %7d %7.2f%% %7.2f%% %7.2f%% %7.2f%% %3s %7.1f %7.1f\n", bc.Start, bc.Users, 100*bc.Observed,
				100*bc.P5, 100*bc.P50, 100*bc.P95, in, float64(bc.Misses)/secsOf(v, bc), bc.PredictedAuthQPS)
		}
	}
	fmt.Fprintf(&b, "canary share inside the predicted p5–p95 band: %d of %d bins before the drain (%.1f %%)\n", v.InBandN, v.Compared, 100*v.Coverage)
	fmt.Fprintf(&b, "steer's misses: %.2f/s observed, %.2f/s predicted (%+.1f %%)\n", v.ObservedMiss, v.PredictedMiss, 100*v.MissErr)
	for _, s := range v.Sites {
		fmt.Fprintf(&b, "  %-12s %7.2f/s observed, %7.2f/s predicted; canary %.2f %% of its users (predicted %.2f %%), in the bin after the drain %.2f %% (%.2f %%)\n",
			s.Site, s.Observed, s.Predicted, 100*s.Canary, 100*s.PredCanary, 100*s.AfterDrain, 100*s.PredAfterDrain)
	}
	if v.Drain >= 0 {
		fmt.Fprintf(&b, "drain of the canary at %s: last user query answered canary %.2f s after it (predicted p5–p95 %.2f–%.2f s, median %.2f s);\n",
			v.Drain.Round(time.Millisecond), v.Last.Seconds(), v.PredLast.P5, v.PredLast.P95, v.PredLast.P50)
		safe := v.SafeAt.String() + " after it"
		if v.Never {
			safe = "never before the end"
		}
		fmt.Fprintf(&b, "  safe (every later bin ≤ 1 %% canary) %s (predicted p5–p95 %.0f–%.0f s; never in %.0f %% of runs)\n",
			safe, v.PredSafe.P5, v.PredSafe.P95, 100*v.PredNever)
	}
	if v.Passed() {
		fmt.Fprintf(&b, "every criterion met\n")
	} else {
		for _, f := range v.Failures {
			fmt.Fprintf(&b, "not met: %s\n", f)
		}
	}
	return b.String()
}

func secsOf(v *Verdict, bc BinCmp) float64 {
	if len(v.Bins) > 1 {
		return (v.Bins[1].Start - v.Bins[0].Start).Seconds()
	}
	return 1
}
