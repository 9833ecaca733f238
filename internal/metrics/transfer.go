package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ZoneTransferState is one zone's transfer state at scrape time.
type ZoneTransferState struct {
	Zone string
	// Serial is the serial served (and exported).
	Serial uint32
	// Secondary is set for a zone transferred in; ExpiresIn is then the
	// seconds until it expires without a primary confirming it (negative:
	// expired; only when it has a copy).
	Secondary bool
	HasCopy   bool
	ExpiresIn float64
}

var (
	descZoneSerial = prometheus.NewDesc("steer_zone_serial",
		"SOA serial of each served zone (what it answers and transfers).", []string{"zone"}, nil)
	descZoneExpires = prometheus.NewDesc("steer_zone_expires_in_seconds",
		"Seconds until a secondary zone expires unless a primary confirms it (negative: expired, answered SERVFAIL).", []string{"zone"}, nil)
)

type transfers struct {
	once     sync.Once
	xfr      *prometheus.CounterVec // zone, direction, type, result
	notifies *prometheus.CounterVec // zone, direction, result
}

func (m *Metrics) transfers() *transfers {
	t := &m.xf
	t.once.Do(func() {
		t.xfr = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "steer_zone_transfers_total",
			Help: "Zone transfers by zone, direction (in: from a primary, out: to a secondary), type (axfr, ixfr, soa: a refresh check) and result (ok, uptodate, refused, tsig, timeout, error, rejected, broken).",
		}, []string{"zone", "direction", "type", "result"})
		t.notifies = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "steer_notify_total",
			Help: "NOTIFY messages by zone, direction (sent, received) and result (ok, refused, tsig, timeout, error).",
		}, []string{"zone", "direction", "result"})
		m.registry.MustRegister(t.xfr, t.notifies)
	})
	return t
}

// Transfer counts one zone transfer (or refresh check) in direction "in"
// or "out".
func (m *Metrics) Transfer(zone, direction, kind, result string) {
	m.transfers().xfr.WithLabelValues(zone, direction, kind, result).Inc()
}

// Notify counts one NOTIFY sent or received.
func (m *Metrics) Notify(zone, direction, result string) {
	m.transfers().notifies.WithLabelValues(zone, direction, result).Inc()
}

type zoneCollector struct{ f func() []ZoneTransferState }

func (c zoneCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descZoneSerial
	ch <- descZoneExpires
}

func (c zoneCollector) Collect(ch chan<- prometheus.Metric) {
	for _, z := range c.f() {
		ch <- prometheus.MustNewConstMetric(descZoneSerial, prometheus.GaugeValue, float64(z.Serial), z.Zone)
		if z.Secondary && z.HasCopy {
			ch <- prometheus.MustNewConstMetric(descZoneExpires, prometheus.GaugeValue, z.ExpiresIn, z.Zone)
		}
	}
}

// SetZones registers the per-zone serial and expiry gauges, read from f
// at scrape time. Call it once.
func (m *Metrics) SetZones(f func() []ZoneTransferState) {
	m.registry.MustRegister(zoneCollector{f: f})
	m.transfers()
}
