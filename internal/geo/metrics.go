package geo

import "github.com/prometheus/client_golang/prometheus"

var descBuild = prometheus.NewDesc("steer_geo_database_build_timestamp_seconds",
	"Unix build time of each loaded geo database.", []string{"database"}, nil)

// Collector exposes the build time of each database of the set current
// returns at each scrape (a reload may replace it; nil: none).
type Collector struct{ current func() *Set }

// NewCollector returns a Collector reading current at scrape time.
func NewCollector(current func() *Set) *Collector { return &Collector{current: current} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- descBuild }

// Collect implements prometheus.Collector: one gauge per database name
// (the first of a repeated name), 0 for an unknown build time.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.current()
	if s == nil {
		return
	}
	seen := map[string]bool{}
	for _, d := range s.DBs {
		if seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		v := 0.0
		if !d.Built.IsZero() {
			v = float64(d.Built.Unix()) + float64(d.Built.Nanosecond())/1e9
		}
		ch <- prometheus.MustNewConstMetric(descBuild, prometheus.GaugeValue, v, d.Name)
	}
}
