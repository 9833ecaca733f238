package anycast

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the anycast metrics (steer_anycast_*), read at scrape
// time from the controller's State and the speaker's sessions.

var (
	descAnnounced = prometheus.NewDesc("steer_anycast_announced",
		"Whether the anycast prefixes are announced (1) or withdrawn (0).", nil, nil)
	descPrefixes = prometheus.NewDesc("steer_anycast_prefixes_announced",
		"Number of anycast prefixes announced.", nil, nil)
	descPrepend = prometheus.NewDesc("steer_anycast_as_path_prepend",
		"Extra copies of the local AS originated (overload prepending; 0 when none).", nil, nil)
	descTransitions = prometheus.NewDesc("steer_anycast_transitions_total",
		"Changes of what is announced, by reason (healthy, self_check_failed, health_failed, overload, operator_withdraw, shutdown, ...).",
		[]string{"reason"}, nil)
	descLast = prometheus.NewDesc("steer_anycast_last_transition",
		"Always 1; the reason label is the current state's reason.", []string{"reason"}, nil)
	descLastTime = prometheus.NewDesc("steer_anycast_last_transition_timestamp_seconds",
		"Unix time of the last change of what is announced.", nil, nil)
	descHealthScore = prometheus.NewDesc("steer_anycast_health_score",
		"Share of this node's checked health targets that are up (withdrawn below withdraw_below).", nil, nil)
	descQPS = prometheus.NewDesc("steer_anycast_qps",
		"Query rate the overload detector last measured, in queries per second.", nil, nil)
	descPeerUp = prometheus.NewDesc("steer_anycast_peer_up",
		"Whether the BGP session with a peer is established (1) or not (0).", []string{"peer"}, nil)
	descPeerState = prometheus.NewDesc("steer_anycast_peer_session_state",
		"BGP session state of a peer: 1 for the current state.", []string{"peer", "state"}, nil)
	descPeerUptime = prometheus.NewDesc("steer_anycast_peer_uptime_seconds",
		"Seconds the BGP session with a peer has been established (0 when not).", []string{"peer"}, nil)
)

var bgpStates = []string{"idle", "connect", "active", "opensent", "openconfirm", "established"}

// MetricsSource is what the anycast metrics read at scrape time.
type MetricsSource struct {
	// State is the controller's (Controller.State).
	State func() State
	// Peers are the BGP sessions (Speaker.Peers).
	Peers func() []PeerStatus
	// Prefixes is the number of prefixes announced while announced.
	Prefixes int
	// HealthScore is the share of checked targets up, compared with
	// withdraw_below.
	HealthScore func() float64
}

// Collector exposes the anycast metrics.
type Collector struct{ src MetricsSource }

// NewCollector returns a Collector reading src at scrape time.
func NewCollector(src MetricsSource) *Collector { return &Collector{src: src} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAnnounced, descPrefixes, descPrepend, descTransitions, descLast,
		descLastTime, descHealthScore, descQPS, descPeerUp, descPeerState, descPeerUptime} {
		ch <- d
	}
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.State()
	prefixes := 0
	if s.Announced {
		prefixes = c.src.Prefixes
	}
	ch <- prometheus.MustNewConstMetric(descAnnounced, prometheus.GaugeValue, gauge(s.Announced))
	ch <- prometheus.MustNewConstMetric(descPrefixes, prometheus.GaugeValue, float64(prefixes))
	ch <- prometheus.MustNewConstMetric(descPrepend, prometheus.GaugeValue, float64(s.Prepend))
	for r, n := range s.Transitions {
		ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue, float64(n), r)
	}
	if s.Reason != "" {
		ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, 1, s.Reason)
	}
	if !s.Since.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLastTime, prometheus.GaugeValue, float64(s.Since.UnixNano())/1e9)
	}
	score := 1.0
	if c.src.HealthScore != nil {
		score = c.src.HealthScore()
	}
	ch <- prometheus.MustNewConstMetric(descHealthScore, prometheus.GaugeValue, score)
	ch <- prometheus.MustNewConstMetric(descQPS, prometheus.GaugeValue, s.QPS)
	if c.src.Peers == nil {
		return
	}
	now := time.Now()
	seen := map[string]bool{}
	for _, p := range c.src.Peers() {
		if seen[p.Address] {
			continue
		}
		seen[p.Address] = true
		up := p.Established()
		ch <- prometheus.MustNewConstMetric(descPeerUp, prometheus.GaugeValue, gauge(up), p.Address)
		for _, st := range bgpStates {
			ch <- prometheus.MustNewConstMetric(descPeerState, prometheus.GaugeValue, gauge(st == p.State), p.Address, st)
		}
		uptime := 0.0
		if up && !p.Since.IsZero() {
			uptime = now.Sub(p.Since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descPeerUptime, prometheus.GaugeValue, uptime, p.Address)
	}
}
