package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// FleetState is what a fleet node reports at scrape time.
type FleetState struct {
	// ViewAge is how long ago the node last had a current view of the
	// store, in seconds (its answers and health come from that view).
	ViewAge float64
	// Serial is the published configuration the node serves (0: none).
	Serial int64
	// Failing is true while the newest configuration cannot be applied.
	Failing bool
	// OwnHealth is true while the node decides health by its own checks
	// (no view of the store for view_grace).
	OwnHealth bool
}

var (
	descFleetViewAge = prometheus.NewDesc("steer_fleet_view_age_seconds",
		"Seconds since this node last had a current view of the fleet's store.", nil, nil)
	descFleetSerial = prometheus.NewDesc("steer_fleet_config_serial",
		"Serial of the fleet configuration this node serves (0: none).", nil, nil)
	descFleetFailing = prometheus.NewDesc("steer_fleet_config_apply_failing",
		"1 while the newest fleet configuration cannot be applied (the node serves the one before).", nil, nil)
	descFleetOwn = prometheus.NewDesc("steer_fleet_health_own_view",
		"1 while this node decides health by its own checks (no view of the store for view_grace), 0 by the fleet's quorum.", nil, nil)
)

type fleetCollector struct{ f func() FleetState }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFleetViewAge, descFleetSerial, descFleetFailing, descFleetOwn} {
		ch <- d
	}
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.f()
	ch <- prometheus.MustNewConstMetric(descFleetViewAge, prometheus.GaugeValue, s.ViewAge)
	ch <- prometheus.MustNewConstMetric(descFleetSerial, prometheus.GaugeValue, float64(s.Serial))
	ch <- prometheus.MustNewConstMetric(descFleetFailing, prometheus.GaugeValue, boolValue(s.Failing))
	ch <- prometheus.MustNewConstMetric(descFleetOwn, prometheus.GaugeValue, boolValue(s.OwnHealth))
}

// SetFleet registers the fleet metrics, read from f at scrape time. Call
// it once, on a node in a fleet.
func (m *Metrics) SetFleet(f func() FleetState) { m.registry.MustRegister(fleetCollector{f: f}) }
