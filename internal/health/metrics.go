package health

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the health checker's own metrics (subsystem "health"):
// the check durations and results and the state changes are counted as
// checks finish; the number of targets by state, and with target labels
// on, each target's state, are read from the Manager at scrape time.

// checkBuckets are the upper bounds, in seconds, of the check duration
// histogram.
var checkBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// metricSet is a Manager's metrics. It exists from NewManager on, so
// checks are counted before (and without) RegisterMetrics.
type metricSet struct {
	duration     prometheus.Histogram
	checks       *prometheus.CounterVec
	transitions  *prometheus.CounterVec
	targetLabels atomic.Bool
}

func newMetricSet() *metricSet {
	s := &metricSet{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "steer", Subsystem: "health", Name: "check_duration_seconds",
			Help: "Duration of health checks.", Buckets: checkBuckets,
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "steer", Subsystem: "health", Name: "checks_total",
			Help: "Health checks, by result (ok, fail).",
		}, []string{"result"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "steer", Subsystem: "health", Name: "transitions_total",
			Help: "Health state changes of targets, by new state (up, down, unknown).",
		}, []string{"to"}),
	}
	// Present from the start, so a rate over them has a zero to start from.
	s.checks.WithLabelValues("ok")
	s.checks.WithLabelValues("fail")
	for _, st := range []Status{Up, Down, Unknown} {
		s.transitions.WithLabelValues(st.String())
	}
	return s
}

// observe counts one finished check.
func (s *metricSet) observe(took time.Duration, pass bool, from, to Status) {
	s.duration.Observe(max(took, 0).Seconds())
	if pass {
		s.checks.WithLabelValues("ok").Inc()
	} else {
		s.checks.WithLabelValues("fail").Inc()
	}
	if from != to {
		s.transitions.WithLabelValues(to.String()).Inc()
	}
}

var (
	descTargets = prometheus.NewDesc("steer_health_targets",
		"Health check targets, by state (up, down, unknown).", []string{"state"}, nil)
	descTargetUp = prometheus.NewDesc("steer_health_target_up",
		"Whether a health check target is up (1) or not (0), by address and check; only with metrics.target_labels.",
		[]string{"address", "check"}, nil)
)

// RegisterMetrics registers the Manager's metrics in reg: the check
// duration histogram (steer_health_check_duration_seconds), checks by
// result (steer_health_checks_total), state changes
// (steer_health_transitions_total) and the targets by state
// (steer_health_targets). Each target's state, labelled with its address,
// is exposed only while SetTargetLabels(true).
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.met.duration, m.met.checks, m.met.transitions, targetCollector{m}} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// SetTargetLabels says whether the metrics name each target
// (steer_health_target_up{address,check}). Target addresses are origin
// addresses, which an unauthenticated /metrics should not reveal unless
// the operator says so (metrics.target_labels).
func (m *Manager) SetTargetLabels(on bool) { m.met.targetLabels.Store(on) }

// targetCollector reads the targets' states at scrape time.
type targetCollector struct{ m *Manager }

func (c targetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTargets
	ch <- descTargetUp
}

func (c targetCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.m.Snapshot()
	var n [3]int
	labels := c.m.met.targetLabels.Load()
	for k, s := range snap {
		switch s.Status {
		case Up:
			n[0]++
		case Down:
			n[1]++
		default:
			n[2]++
		}
		if labels {
			up := 0.0
			if c.m.Usable(k) {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(descTargetUp, prometheus.GaugeValue, up, k.Addr.String(), k.Check)
		}
	}
	for i, st := range []string{"up", "down", "unknown"} {
		ch <- prometheus.MustNewConstMetric(descTargets, prometheus.GaugeValue, float64(n[i]), st)
	}
}
