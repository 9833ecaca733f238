package config_test

import (
	"testing"
	"time"
)

func TestLatencyBlock(t *testing.T) {
	c := mustParse(t, `
latency:
  files: [latency.csv, more.json]
  half_life: 5m
  max_age: 1h
  switch_margin: 0.25
  switch_rounds: 4
  estimate: { km_per_ms: 150, overhead_ms: 0 }
`)
	o := c.Latency.LatencyOptions()
	if o.HalfLife != 5*time.Minute || o.MaxAge != time.Hour || o.SwitchMargin != 0.25 || o.SwitchRounds != 4 || o.KmPerMs != 150 || o.OverheadMs != 0 {
		t.Fatalf("options %+v", o)
	}
	if len(c.Latency.Files) != 2 {
		t.Fatalf("files %v", c.Latency.Files)
	}
	// Defaults: the 20 % over 3 updates, 200 km/ms and 5 ms.
	c = mustParse(t, "listen: [\"127.0.0.1:53\"]\n")
	o = c.Latency.LatencyOptions()
	if o.HalfLife != 0 || o.MaxAge != 0 || o.SwitchMargin != 0.2 || o.SwitchRounds != 3 || o.KmPerMs != 200 || o.OverheadMs != 5 {
		t.Fatalf("defaults %+v", o)
	}
}

func TestLatencyBlockProblems(t *testing.T) {
	_, ps := parse(t, `latency:
  files: [a.csv, a.csv]
  half_life: -1m
  switch_margin: 1.5
  switch_rounds: -2
  estimate: { km_per_ms: -3, overhead_ms: -1 }
  smoothing: 5m
`)
	checkProblems(t, ps, []prob{
		{7, `unknown key "smoothing" in latency`},
	})
	_, ps = parse(t, `latency:
  files: [a.csv, a.csv]
  half_life: -1m
  switch_margin: 1.5
  switch_rounds: -2
  estimate: { km_per_ms: -3, overhead_ms: -1 }
`)
	checkProblems(t, ps, []prob{
		{2, `"a.csv" is listed twice`},
		{3, "half_life: must not be negative"},
		{4, "switch_margin: 1.5 is not in (0, 1)"},
		{5, "switch_rounds: -2"},
		{6, "km_per_ms: -3 must be positive"},
		{6, "overhead_ms: -1 must not be negative"},
	})
	_, ps = parse(t, "latency: { half_life: soon }\n")
	checkProblems(t, ps, []prob{{1, `invalid duration "soon"`}})
}
