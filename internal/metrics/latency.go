package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LatencyInfo is the latency map's state read at scrape time.
type LatencyInfo struct {
	Values     int           // (key, site) values in the map
	Networks   int           // client networks evaluated at the last update
	LastUpdate time.Time     // zero before the first
	EvalTook   time.Duration // how long the last evaluation took
}

// latency returns the latency update counter, registering it once.
func (m *Metrics) latency() *prometheus.CounterVec {
	m.latencyOnce.Do(func() {
		m.latencyUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "steer_latency_updates_total",
			Help: "Latency map updates by source (file, push, stale) and result (applied, rejected).",
		}, []string{"source", "result"})
		m.registry.MustRegister(m.latencyUpdates)
	})
	return m.latencyUpdates
}

// LatencyUpdate counts one latency update from source ("file", "push" or
// "stale"), applied or rejected.
func (m *Metrics) LatencyUpdate(source string, applied bool) {
	res := "applied"
	if !applied {
		res = "rejected"
	}
	m.latency().WithLabelValues(source, res).Inc()
}

// SetLatency sets the function read at scrape time for the latency map's
// gauges.
func (m *Metrics) SetLatency(f func() LatencyInfo) {
	m.latency()
	gauge := func(name, help string, v func(LatencyInfo) float64) {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(f()) }))
	}
	gauge("steer_latency_map_values", "Measured (key, site) values in the latency map.", func(i LatencyInfo) float64 { return float64(i.Values) })
	gauge("steer_latency_networks", "Client networks evaluated at the last latency update.", func(i LatencyInfo) float64 { return float64(i.Networks) })
	gauge("steer_latency_last_update_timestamp_seconds", "When the latency map last changed (0: never).", func(i LatencyInfo) float64 {
		if i.LastUpdate.IsZero() {
			return 0
		}
		return float64(i.LastUpdate.UnixNano()) / 1e9
	})
	gauge("steer_latency_evaluation_seconds", "How long the last evaluation of every latency choice took.", func(i LatencyInfo) float64 { return i.EvalTook.Seconds() })
}
