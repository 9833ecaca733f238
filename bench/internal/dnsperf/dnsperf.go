// Package dnsperf reads what a dnsperf run printed, for the bench
// programs that summarise runs (bench/report, bench/signbench).
package dnsperf

import (
	"math"
	"os"
	"strconv"
	"strings"
)

// Result is what one dnsperf run printed: its counts, run time and rate,
// and the p50/p99 latency in µs of the LATENCY line the bench scripts add
// (NaN when absent). OK says the run printed its rate.
type Result struct {
	Sent, Completed, Lost float64
	QPS, Runtime          float64
	P50, P99              float64
	OK                    bool
}

// ParseFile reads the dnsperf output saved in path.
func ParseFile(path string) (Result, error) {
	var d Result
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	d.P50, d.P99 = math.NaN(), math.NaN()
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "  Queries sent:"):
			d.Sent = Num(f[2])
		case strings.HasPrefix(line, "  Queries completed:"):
			d.Completed = Num(f[2])
		case strings.HasPrefix(line, "  Queries lost:"):
			d.Lost = Num(f[2])
		case strings.HasPrefix(line, "  Run time (s):"):
			d.Runtime = Num(f[3])
		case strings.HasPrefix(line, "  Queries per second:"):
			d.QPS = Num(f[3])
			d.OK = true
		case strings.HasPrefix(line, "LATENCY "):
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "p50_us":
					d.P50 = Num(v)
				case "p99_us":
					d.P99 = Num(v)
				}
			}
		}
	}
	return d, nil
}

// Num is s as a number, NaN when it is not one.
func Num(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
