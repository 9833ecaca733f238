package latency

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the latency map's metrics (subsystem "latency"): updates by
// source and result, and gauges of the map set as it changes.
type Metrics struct {
	updates                                *prometheus.CounterVec
	values, networks, lastUpdate, evalSecs prometheus.Gauge
}

// NewMetrics returns the latency metrics, registered in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "steer", Subsystem: "latency", Name: name, Help: help})
	}
	m := &Metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "steer", Subsystem: "latency", Name: "updates_total",
			Help: "Latency map updates by source (file, push, stale) and result (applied, rejected).",
		}, []string{"source", "result"}),
		values:     g("map_values", "Measured (key, site) values in the latency map."),
		networks:   g("networks", "Client networks evaluated at the last latency update."),
		lastUpdate: g("last_update_timestamp_seconds", "When the latency map last changed (0: never)."),
		evalSecs:   g("evaluation_seconds", "How long the last evaluation of every latency choice took."),
	}
	for _, c := range []prometheus.Collector{m.updates, m.values, m.networks, m.lastUpdate, m.evalSecs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Update counts one latency update from source ("file", "push" or
// "stale"), applied or rejected. A nil Metrics counts nothing.
func (m *Metrics) Update(source string, applied bool) {
	if m == nil {
		return
	}
	res := "applied"
	if !applied {
		res = "rejected"
	}
	m.updates.WithLabelValues(source, res).Inc()
}

// Set sets the gauges: the values in the map, the client networks the
// last evaluation covered, when the map last changed (zero: never) and
// how long the last evaluation took. A nil Metrics sets nothing.
func (m *Metrics) Set(values, networks int, last time.Time, took time.Duration) {
	if m == nil {
		return
	}
	m.values.Set(float64(values))
	m.networks.Set(float64(networks))
	if last.IsZero() {
		m.lastUpdate.Set(0)
	} else {
		m.lastUpdate.Set(float64(last.UnixNano()) / 1e9)
	}
	m.evalSecs.Set(took.Seconds())
}
