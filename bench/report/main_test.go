package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
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

// TestSummaryPairsRounds: the ratios to gdnsd by round divide each
// round's passes, not the medians of all rounds. Rounds where the
// machine's phase moves both servers' CPU alike (1, 3, 2 µs for gdnsd),
// steer at 0.9× gdnsd in each, and a fourth round steer ran alone.
func TestSummaryPairsRounds(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "raw"), 0o755); err != nil {
		t.Fatal(err)
	}
	pass := func(name string, completed, qps float64) string {
		body := fmt.Sprintf("Statistics:\n\n  Queries sent:         %.0f\n  Queries completed:    %.0f (100.00%%)\n  Queries lost:         0 (0.00%%)\n\n  Run time (s):         1.000000\n  Queries per second:   %f\n",
			completed, completed, qps)
		if err := os.WriteFile(filepath.Join(dir, "raw", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return "raw/" + name
	}
	// CPU µs a query = ticks/hz*1e6/completed; 1e6 queries, hz 100.
	var rows []string
	for _, p := range []struct {
		round, server string
		ticks         int
	}{{"1", "steer", 90}, {"1", "gdnsd", 100}, {"2", "gdnsd", 300}, {"2", "steer", 270}, {"3", "steer", 180}, {"3", "gdnsd", 200}} {
		raw := pass(p.round+p.server, 1e6, 1e6)
		rows = append(rows, fmt.Sprintf("pinned\t%s\t%s\tsteered\ttput\t%s\t%d\t100", p.round, p.server, raw, p.ticks))
	}
	// Round 4 has steer alone: it moves steer's median, not the pairs.
	raw := pass("4steer", 1e6, 1e6)
	rows = append(rows, fmt.Sprintf("pinned\t4\tsteer\tsteered\ttput\t%s\t%d\t100", raw, 400))
	if err := os.WriteFile(filepath.Join(dir, "passes.tsv"), []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := summary(dir, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| pinned | steered | steer | 0.90 | 0.90, 0.90, 0.90 | 1.00 |") {
		t.Errorf("no per-round ratios of 0.90 in:\n%s", out.String())
	}
	// The medians' ratio: steer's median of 0.9, 2.7, 1.8, 4.0 is 2.25,
	// gdnsd's of 1, 3, 2 is 2: 1.125×.
	tsv, err := os.ReadFile(filepath.Join(dir, "summary.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tsv), "\t1.125\t4\t1.000\t0.900\n") {
		t.Errorf("summary.tsv lacks the medians' ratio 1.125 and the per-round 0.900:\n%s", tsv)
	}
}
