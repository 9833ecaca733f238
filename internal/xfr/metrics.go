package xfr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collectors are the Service's metrics, one prometheus.Collector
// registered on the Registerer the server passes in (Options.Registerer):
//
//   - steer_zone_transfers_total{zone,direction,type,result}: transfers
//     in (from a primary) and out (to a secondary), and refresh checks;
//   - steer_notify_total{zone,direction,result}: NOTIFYs sent and
//     received;
//   - steer_zone_serial{zone}: each served zone's serial, at scrape time;
//   - steer_zone_expires_in_seconds{zone}: for a secondary zone with a
//     copy, the seconds until it expires unless a primary confirms it.
type collectors struct {
	s         *Service
	transfers *prometheus.CounterVec
	notifies  *prometheus.CounterVec
}

var (
	descZoneSerial = prometheus.NewDesc("steer_zone_serial",
		"SOA serial of each served zone (what it answers and transfers).", []string{"zone"}, nil)
	descZoneExpires = prometheus.NewDesc("steer_zone_expires_in_seconds",
		"Seconds until a secondary zone expires unless a primary confirms it (negative: expired, answered SERVFAIL).", []string{"zone"}, nil)
)

func newCollectors(s *Service) *collectors {
	return &collectors{
		s: s,
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "steer_zone_transfers_total",
			Help: "Zone transfers by zone, direction (in: from a primary, out: to a secondary), type (axfr, ixfr, soa: a refresh check) and result (ok, uptodate, older, refused, tsig, timeout, error, rejected, broken).",
		}, []string{"zone", "direction", "type", "result"}),
		notifies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "steer_notify_total",
			Help: "NOTIFY messages by zone, direction (sent, received) and result (ok, refused, tsig, timeout, error).",
		}, []string{"zone", "direction", "result"}),
	}
}

func (c *collectors) transfer(zone, direction, kind, result string) {
	c.transfers.WithLabelValues(zone, direction, kind, result).Inc()
}

func (c *collectors) notify(zone, direction, result string) {
	c.notifies.WithLabelValues(zone, direction, result).Inc()
}

// Describe implements prometheus.Collector.
func (c *collectors) Describe(ch chan<- *prometheus.Desc) {
	c.transfers.Describe(ch)
	c.notifies.Describe(ch)
	ch <- descZoneSerial
	ch <- descZoneExpires
}

// Collect implements prometheus.Collector: the counters, and the gauges
// of the zones the last Refresh saw with the secondary copies' expiry now.
func (c *collectors) Collect(ch chan<- prometheus.Metric) {
	c.transfers.Collect(ch)
	c.notifies.Collect(ch)
	expires := map[string]float64{}
	now := time.Now()
	for _, st := range c.s.sec.Status() {
		if st.HaveCopy {
			expires[st.Origin] = st.Expires.Sub(now).Seconds()
		}
	}
	for _, z := range *c.s.served.Load() {
		ch <- prometheus.MustNewConstMetric(descZoneSerial, prometheus.GaugeValue, float64(z.Serial), z.Origin)
		if e, ok := expires[z.Origin]; ok && z.In {
			ch <- prometheus.MustNewConstMetric(descZoneExpires, prometheus.GaugeValue, e, z.Origin)
		}
	}
}
