package rrl

import "github.com/prometheus/client_golang/prometheus"

// This file holds the rate limiter's own metrics (subsystem "rrl"), read
// from Stats at scrape time.

var (
	descResponses = prometheus.NewDesc("steer_rrl_responses_total",
		"UDP responses the rate limiter decided, by response class and outcome (passed, slipped, dropped; would_limit in log-only mode).",
		[]string{"class", "outcome"}, nil)
	descAggregate = prometheus.NewDesc("steer_rrl_aggregate_limited_total",
		"Responses dropped by the per-source aggregate limit (all_per_second).", nil, nil)
	descExempt = prometheus.NewDesc("steer_rrl_exempt_total",
		"Responses to sources in rrl.exempt.", nil, nil)
	descEvictions = prometheus.NewDesc("steer_rrl_evictions_total",
		"Rate-limit buckets replaced while they still held state (the table is too small).", nil, nil)
	descTable = prometheus.NewDesc("steer_rrl_table_entries",
		"Size of the rate limiter's fixed bucket table.", nil, nil)
)

// Collector exposes the counters of the limiter current returns at each
// scrape (a reload may replace it); nothing while it returns nil (rate
// limiting off).
type Collector struct{ current func() *Limiter }

// NewCollector returns a Collector reading current at scrape time.
func NewCollector(current func() *Limiter) *Collector { return &Collector{current: current} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descResponses, descAggregate, descExempt, descEvictions, descTable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	l := c.current()
	if l == nil {
		return
	}
	s := l.Stats()
	for cl := range NumClasses {
		name := Class(cl).String()
		cs := s.Class[cl]
		for _, o := range [...]struct {
			outcome string
			n       uint64
		}{{"passed", cs.Passed}, {"slipped", cs.Slipped}, {"dropped", cs.Dropped}, {"would_limit", cs.WouldLimit}} {
			ch <- prometheus.MustNewConstMetric(descResponses, prometheus.CounterValue, float64(o.n), name, o.outcome)
		}
	}
	ch <- prometheus.MustNewConstMetric(descAggregate, prometheus.CounterValue, float64(s.AllLimited))
	ch <- prometheus.MustNewConstMetric(descExempt, prometheus.CounterValue, float64(s.Exempt))
	ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(s.Evictions))
	ch <- prometheus.MustNewConstMetric(descTable, prometheus.GaugeValue, float64(s.TableSize))
}
