package querylog

import "github.com/prometheus/client_golang/prometheus"

var descEntries = prometheus.NewDesc("steer_query_log_entries_total",
	"Query log entries, by result: written, or dropped because the buffer was full.",
	[]string{"result"}, nil)

// Collector exposes the written and dropped entries of the log current
// returns at each scrape (a reload may replace it; nil: the log is off,
// both 0).
type Collector struct{ current func() *Log }

// NewCollector returns a Collector reading current at scrape time.
func NewCollector(current func() *Log) *Collector { return &Collector{current: current} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- descEntries }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	l := c.current()
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.CounterValue, float64(l.Written()), "written")
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.CounterValue, float64(l.Dropped()), "dropped")
}
