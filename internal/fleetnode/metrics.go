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
	descDB = prometheus.NewDesc("steer_fleet_store_db_bytes",
		"Size of the store's (etcd's) largest member database, as last read (every minute).", nil, nil)
	descDBInUse = prometheus.NewDesc("steer_fleet_store_db_in_use_bytes",
		"Part of the store's database in use (the rest a defragmentation returns).", nil, nil)
	descQuota = prometheus.NewDesc("steer_fleet_store_quota_bytes",
		"The store's backend quota as configured (fleet.etcd.quota_backend_bytes): etcd refuses writes past it.", nil, nil)
	descStoreWarn = prometheus.NewDesc("steer_fleet_store_warning",
		"1 while the store's database passes half its quota or a member has an alarm.", nil, nil)
	descConflicts = prometheus.NewDesc("steer_fleet_override_conflicts_total",
		"Override writes checked against a safety rule that etcd refused because the fleet's overrides changed after the view they were checked against (each is read and checked again).", nil, nil)
	descLoadsPending = prometheus.NewDesc("steer_fleet_loads_pending",
		"Pools' loads put on this node that the store has not taken yet (written when it answers).", nil, nil)
	descLoadsDropped = prometheus.NewDesc("steer_fleet_loads_dropped_total",
		"Pending loads dropped because they turned stale (older than load.stale_after) before the store took them.", nil, nil)
	descOwn = prometheus.NewDesc("steer_fleet_health_own_view",
		"1 while this node decides health by its own checks (no view of the store for view_grace), 0 by the fleet's quorum.", nil, nil)
)

// RegisterMetrics registers the Member's metrics in reg, read at scrape
// time: the view's age (steer_fleet_view_age_seconds), the served serial
// (steer_fleet_config_serial), whether the newest bundle fails to apply
// (steer_fleet_config_apply_failing), whether health goes by the
// node's own checks (steer_fleet_health_own_view), and the store's
// database size against its quota (steer_fleet_store_db_bytes,
// steer_fleet_store_db_in_use_bytes, steer_fleet_store_quota_bytes,
// steer_fleet_store_warning), and the conditional override writes that
// met a concurrent change (steer_fleet_override_conflicts_total), and
// the loads pending for the store (steer_fleet_loads_pending) or dropped
// as stale before it took them (steer_fleet_loads_dropped_total). Call it once, after ShareHealth.
func (m *Member) RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(collector{m}) }

type collector struct{ m *Member }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descViewAge, descSerial, descFailing, descOwn, descDB, descDBInUse, descQuota, descStoreWarn, descConflicts, descLoadsPending, descLoadsDropped} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	serial, failing, at := m.served.Meta.Serial, m.applyErr != "", m.viewAt
	db, warn := m.db, m.storeWarning != ""
	loads := len(m.pendingLoads)
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
	ch <- prometheus.MustNewConstMetric(descDB, prometheus.GaugeValue, float64(db.Bytes))
	ch <- prometheus.MustNewConstMetric(descDBInUse, prometheus.GaugeValue, float64(db.InUse))
	ch <- prometheus.MustNewConstMetric(descQuota, prometheus.GaugeValue, float64(m.local.Fleet.Etcd.QuotaBackendBytes))
	ch <- prometheus.MustNewConstMetric(descStoreWarn, prometheus.GaugeValue, b2f(warn))
	ch <- prometheus.MustNewConstMetric(descConflicts, prometheus.CounterValue, float64(m.conflicts.Load()))
	ch <- prometheus.MustNewConstMetric(descLoadsPending, prometheus.GaugeValue, float64(loads))
	ch <- prometheus.MustNewConstMetric(descLoadsDropped, prometheus.CounterValue, float64(m.loadsDropped.Load()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
