package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestLat(t *testing.T) {
	var in strings.Builder
	in.WriteString("[Status] Command line: dnsperf -v\n")
	for i := 100; i >= 1; i-- { // 1..100 µs, out of order
		fmt.Fprintf(&in, "> NOERROR binary input %.6f\n", float64(i)/1e6)
	}
	in.WriteString("> T binary input\n")
	in.WriteString("  Queries per second:   123.5\n")
	var out strings.Builder
	if err := lat(strings.NewReader(in.String()), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "> NOERROR") || !strings.Contains(got, "Queries per second") {
		t.Fatalf("per-query lines must go, the summary stay:\n%s", got)
	}
	want := "LATENCY n=100 timeouts=1 p50_us=50 p90_us=90 p99_us=99 max_us=100\n"
	if !strings.HasSuffix(got, want) {
		t.Fatalf("got %q, want suffix %q", got, want)
	}
}

func TestMedianPct(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2, math.NaN()}); m != 2.5 {
		t.Errorf("median even (NaN ignored) = %v", m)
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(pct(nil, 50)) {
		t.Error("empty input must give NaN")
	}
	xs := []float64{10, 20, 30, 40}
	if pct(xs, 50) != 20 || pct(xs, 99) != 40 || pct(xs, 100) != 40 {
		t.Errorf("pct: %v %v %v", pct(xs, 50), pct(xs, 99), pct(xs, 100))
	}
}
