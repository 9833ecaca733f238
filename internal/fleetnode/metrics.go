package fleetnode

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descViewAge = prometheus.NewDesc("steer_fleet_view_age_seconds",
		"Seconds since this node last had a current view of the fleet's store.", nil, nil)
	descSerial = prometheus.NewDesc("steer_fleet_config_serial",
		"Serial of the fleet configuration this node serves (0: none).", nil, nil)
	descFailing = prometheus.NewDesc("steer_fleet_config_apply_failing",
		"1 while the newest fleet configuration cannot be applied (the node serves the one before).", nil, nil)
	descOwn = prometheus.NewDesc("steer_fleet_health_own_view",
		"1 while this node decides health by its own checks (no view of the store for view_grace), 0 by the fleet's quorum.", nil, nil)
)

// RegisterMetrics registers the Member's metrics in reg, read at scrape
// time: the view's age (steer_fleet_view_age_seconds), the served serial
// (steer_fleet_config_serial), whether the newest bundle fails to apply
// (steer_fleet_config_apply_failing) and whether health goes by the
// node's own checks (steer_fleet_health_own_view). Call it once, after
// ShareHealth.
func (m *Member) RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(collector{m}) }

type collector struct{ m *Member }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descViewAge, descSerial, descFailing, descOwn} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	serial, failing, at := m.served.Meta.Serial, m.applyErr != "", m.viewAt
	m.mu.Unlock()
	own := false
	if fh := m.health; fh != nil {
		fh.mu.Lock()
		if fh.viewAt.After(at) {
			at = fh.viewAt
		}
		own = !fh.fresh
		fh.mu.Unlock()
	}
	age := 0.0
	if !at.IsZero() {
		age = time.Since(at).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descViewAge, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(descSerial, prometheus.GaugeValue, float64(serial))
	ch <- prometheus.MustNewConstMetric(descFailing, prometheus.GaugeValue, b2f(failing))
	ch <- prometheus.MustNewConstMetric(descOwn, prometheus.GaugeValue, b2f(own))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
