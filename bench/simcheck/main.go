// Command simcheck validates steer simulate's prediction against real
// resolvers on loopback: it starts steer (in this process, as `steer
// serve` runs it) with a 95/5 split stable/canary, a plain Unbound (the
// big site: one cache, no ECS) and an Unbound with subnetcache (the ECS
// site) in front of it, and plays users against them and against emulated
// small resolvers (a TTL cache each, asking steer directly from their own
// loopback address): a Poisson process of user queries, recorded per bin
// by the pool of the answer. It drains the canary near the end. Then it
// runs the simulator (simulate.Compile and simulate.Run) on the same
// population against the same configuration and compares, per bin, the
// observed canary share with the predicted p5–p95 band, steer's misses
// per second (from its query log) with the predicted authoritative q/s,
// and the drain's last canary query and "safe at" with the predicted
// bands. Deliberately wrong predictions (-wrong) are compared too: the
// harness must reject them.
//
//	simcheck [-duration 30m] [-rate 2000] [-ttl 10] [-runs 200] [-seed 1] [-dir DIR] [-bins] [-wrong=false]
//	simcheck -replay DIR    # compare a run kept in DIR (observed.json) again
//
// It prints the comparison and exits 1 when the honest prediction fails
// a criterion. bench/simulate.sh runs it; see bench/README.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	o := Defaults()
	c := Defaults30()
	flag.StringVar(&o.Dir, "dir", "", "working directory (default: a temporary one, removed at the end)")
	flag.DurationVar(&o.Duration, "duration", o.Duration, "length of the run")
	flag.DurationVar(&o.DrainAt, "drain-at", 0, "when the canary is drained (default: 2 minutes before the end, or at 5/6 of a shorter run)")
	flag.DurationVar(&o.Bin, "bin", o.Bin, "width of a time bin")
	flag.Float64Var(&o.Rate, "rate", o.Rate, "user queries per second")
	flag.IntVar(&o.TTL, "ttl", o.TTL, "the record's TTL (s)")
	flag.IntVar(&o.Small, "small", o.Small, "emulated small resolvers")
	flag.IntVar(&o.ECSSubnets, "subnets", o.ECSSubnets, "ECS users' /24s")
	flag.IntVar(&o.Runs, "runs", o.Runs, "Monte-Carlo runs of the prediction")
	flag.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the arrivals, the subnets and the prediction")
	bins := flag.Bool("bins", false, "print every bin")
	replay := flag.String("replay", "", "compare the run saved in this directory (observed.json) again instead of running one")
	wrong := flag.Bool("wrong", true, "also compare deliberately wrong predictions (they must fail)")
	flag.Float64Var(&c.InBand, "in-band", c.InBand, "least fraction of bins inside the band")
	flag.Float64Var(&c.MissTol, "miss-tol", c.MissTol, "largest relative miss-rate error")
	flag.Parse()
	if o.DrainAt == 0 {
		o.DrainAt = drainAt(o.Duration)
	}
	o.Log = os.Stderr
	if *replay != "" {
		ro, real, err := loadReal(*replay)
		if err != nil {
			fail(err)
		}
		ro.Runs = o.Runs
		res, err := Compare(ro, real, c, *wrong)
		if err != nil {
			fail(err)
		}
		if !report(res, *bins) {
			os.Exit(1)
		}
		return
	}
	tmp := ""
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "simcheck-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		o.Dir, tmp = d, d
	}
	res, err := Validate(o, c, *wrong)
	if err != nil {
		fail(err)
	}
	if !report(res, *bins) {
		os.RemoveAll(tmp)
		os.Exit(1)
	}
}

// report prints the result; false when the honest prediction failed.
func report(res *Result, bins bool) bool {
	fmt.Print(res.Text(bins))
	for _, w := range res.Wrong {
		if w.Passed() {
			fmt.Printf("a wrong prediction (%s) passed: the harness cannot tell it apart\n", w.Name)
		}
	}
	return res.Honest.Passed()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "simcheck:", err)
	os.Exit(2)
}

// drainAt is when a run of d drains the canary: 2 minutes before the
// end, or at 5/6 of a run shorter than 12 minutes.
func drainAt(d time.Duration) time.Duration {
	if d >= 12*time.Minute {
		return d - 2*time.Minute
	}
	return d * 5 / 6
}
