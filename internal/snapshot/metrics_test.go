// Compute-bound (it builds 10,000 steered names over 5 policies), so it is
// not built with the race detector: scripts/test.sh runs the tests of a
// raced package's !race files in its plain stage.

//go:build !race

package snapshot_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/snapshot"
)

// metricSeries registers the steering metrics of snap (as a node does) in
// a fresh registry and returns its steer_ families by name and their
// number of series.
func metricSeries(t *testing.T, snap *snapshot.Snapshot, count func(m *metrics.Metrics)) (map[string]*dto.MetricFamily, int) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.SetRecords(snap.MetricRecords())
	reg.MustRegister(snapshot.NewPoolCollector(func() *snapshot.Snapshot { return snap }))
	if count != nil {
		count(m)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out, n := map[string]*dto.MetricFamily{}, 0
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "steer_") {
			out[f.GetName()] = f
			n += len(f.GetMetric())
		}
	}
	return out, n
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestMetricSeriesBounded: 10,000 steered names over 5 policies expose
// series per zone, policy and pool, not per name (fewer than 2,000 in
// all), and metrics.per_record gives the names it lists, and only those,
// series of their own.
func TestMetricSeriesBounded(t *testing.T) {
	const names = 10000
	cfg, _ := write(t, map[string]string{"steer.yaml": benchRecords(names, -1) +
		"metrics: { per_record: [s7.example.com, 'S12?.Example.com'] }\n", "com.zone": comZone})
	listed, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The same snapshot with nothing in per_record.
	plainCfg := *listed.Config
	plainCfg.Metrics = config.Metrics{}
	plain := *listed
	plain.Config = &plainCfg
	for _, c := range []struct {
		snap    *snapshot.Snapshot
		records map[string]bool // the names with series of their own
	}{
		{&plain, nil},
		{listed, map[string]bool{
			"s7.example.com.": true, "s120.example.com.": true, "s121.example.com.": true, "s122.example.com.": true,
			"s123.example.com.": true, "s124.example.com.": true, "s125.example.com.": true, "s126.example.com.": true,
			"s127.example.com.": true, "s128.example.com.": true, "s129.example.com.": true}},
	} {
		snap := c.snap
		recs := snap.MetricRecords()
		rec7 := recs[7]
		if rec7.Name != "s7.example.com." || rec7.Policy != "p2" || rec7.Zone != "example.com." {
			t.Fatalf("record 7 described as %+v", rec7)
		}
		fams, n := metricSeries(t, snap, func(m *metrics.Metrics) {
			m.Answered(7, 1<<0, 2, false)
			m.Answered(7, 1<<0, -1, false)
		})
		if n >= 2000 {
			t.Errorf("%d names, per_record %v: %d series, want fewer than 2000", names, snap.Config.Metrics.PerRecord, n)
		}
		// The answers are counted in their policy's series either way.
		found := false
		for _, m := range fams["steer_policy_answers_total"].GetMetric() {
			l := labelsOf(m)
			if l["policy"] == "p2" && l["pool"] == rec7.Pools[0] && l["zone"] == "example.com." && l["fail_open"] == "false" {
				found = true
				if v := m.GetCounter().GetValue(); v != 2 {
					t.Errorf("p2/%s answers %v, want 2", rec7.Pools[0], v)
				}
			}
		}
		if !found {
			t.Errorf("no steer_policy_answers_total series for p2/%s", rec7.Pools[0])
		}
		// Pool health is counted per zone, policy and pool: every pool of
		// the 2,000 names of p2 is up (nothing checks them).
		states := 0
		for _, m := range fams["steer_health_pools"].GetMetric() {
			l := labelsOf(m)
			if l["policy"] != "p2" || l["pool"] != rec7.Pools[0] {
				continue
			}
			states++
			want := 0.0
			if l["state"] == "up" {
				want = names / 5
			}
			if v := m.GetGauge().GetValue(); v != want {
				t.Errorf("steer_health_pools%v = %v, want %v", l, v, want)
			}
		}
		if states != 4 {
			t.Errorf("%d steer_health_pools series for p2/%s, want one per state (4)", states, rec7.Pools[0])
		}
		// Each listed name has its own answers (3 pools x 2), decisions (3
		// rules) and pool health (3 pools); no other name has any.
		for _, fam := range []string{"steer_steered_answers_total", "steer_steering_decisions_total", "steer_health_pool_up"} {
			per := map[string]int{}
			for _, m := range fams[fam].GetMetric() {
				per[labelsOf(m)["record"]]++
			}
			for r := range per {
				if !c.records[r] {
					t.Errorf("%s has series for %s, not in per_record", fam, r)
				}
			}
			for r := range c.records {
				if per[r] == 0 {
					t.Errorf("%s has no series for %s", fam, r)
				}
			}
		}
		if c.records != nil {
			ok := false
			for _, m := range fams["steer_steered_answers_total"].GetMetric() {
				l := labelsOf(m)
				if l["record"] == "s7.example.com." && l["pool"] == rec7.Pools[0] && l["fail_open"] == "false" {
					ok = m.GetCounter().GetValue() == 2
				}
			}
			if !ok {
				t.Error("s7's own answer series does not count its 2 answers")
			}
		}
		t.Logf("%d names, per_record %v: %d series", names, snap.Config.Metrics.PerRecord, n)
	}
}

// BenchmarkScrape gathers the steering and pool-health metrics of 10,000
// names over 5 policies, as a /metrics scrape does.
func BenchmarkScrape(b *testing.B) {
	dir := b.TempDir()
	for name, body := range map[string]string{"steer.yaml": benchRecords(10000, -1), "com.zone": comZone} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	snap, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.SetRecords(snap.MetricRecords())
	reg.MustRegister(snapshot.NewPoolCollector(func() *snapshot.Snapshot { return snap }))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
