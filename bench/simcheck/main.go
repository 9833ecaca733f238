package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	o := Defaults()
	flag.StringVar(&o.Dir, "dir", "", "working directory")
	flag.DurationVar(&o.Duration, "duration", o.Duration, "")
	flag.DurationVar(&o.DrainAt, "drain-at", o.DrainAt, "")
	flag.Float64Var(&o.Rate, "rate", o.Rate, "")
	flag.Parse()
	o.Log = os.Stderr
	r, err := runReal(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	share, n := r.Obs.canaryShare()
	for i := range share {
		fmt.Printf("%3d %6d %.4f %v\n", i, n[i], share[i], r.Misses.PerBin[i])
	}
	fmt.Printf("sent %v lost %v drain %v..%v last canary %v\n", r.Obs.Sent, r.Obs.Lost, r.Obs.DrainSent, r.Obs.DrainDone, r.Obs.LastCanary)
	fmt.Printf("misses %v total %d (%.2f/s) gap %v over %d unknown %d steer last canary %v\n", r.Misses.Count, r.Misses.Total,
		float64(r.Misses.Total)/o.Duration.Seconds(), r.Misses.Gap, r.Misses.Gaps, r.Misses.Unknown, r.Misses.Canary)
	_ = time.Second
}
