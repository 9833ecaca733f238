package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// QueriesTotal returns the number of DNS queries answered so far, over
// every transport, rcode, qtype and path: the anycast overload detector
// turns it into a rate. It reads the counters without locking and is
// meant to be called about once a second, not per query.
func (m *Metrics) QueriesTotal() uint64 {
	var n uint64
	for i := range m.queries {
		n += m.queries[i].Load()
	}
	return n
}

// AnycastPeer is one BGP neighbour's session, read at scrape time.
type AnycastPeer struct {
	Address string
	State   string    // BGP FSM state, e.g. "established"
	Since   time.Time // when established; zero otherwise
}

// AnycastState is the anycast announcement, read at scrape time.
type AnycastState struct {
	Announced   bool
	Prefixes    int // number of prefixes announced (0 while withdrawn)
	Prepend     int // extra copies of the local AS originated
	Reason      string
	Since       time.Time
	Transitions map[string]uint64 // by reason
	Peers       []AnycastPeer
	HealthScore float64 // share of checked targets up, compared with withdraw_below
	QPS         float64 // the last query-rate sample of the overload detector
}

var (
	descAnycastAnnounced = prometheus.NewDesc("steer_anycast_announced",
		"Whether the anycast prefixes are announced (1) or withdrawn (0).", nil, nil)
	descAnycastPrefixes = prometheus.NewDesc("steer_anycast_prefixes_announced",
		"Number of anycast prefixes announced.", nil, nil)
	descAnycastPrepend = prometheus.NewDesc("steer_anycast_as_path_prepend",
		"Extra copies of the local AS originated (overload prepending; 0 when none).", nil, nil)
	descAnycastTransitions = prometheus.NewDesc("steer_anycast_transitions_total",
		"Changes of what is announced, by reason (healthy, self_check_failed, health_failed, overload, operator_withdraw, shutdown, ...).",
		[]string{"reason"}, nil)
	descAnycastLast = prometheus.NewDesc("steer_anycast_last_transition",
		"Always 1; the reason label is the current state's reason.", []string{"reason"}, nil)
	descAnycastLastTime = prometheus.NewDesc("steer_anycast_last_transition_timestamp_seconds",
		"Unix time of the last change of what is announced.", nil, nil)
	descAnycastHealthScore = prometheus.NewDesc("steer_anycast_health_score",
		"Share of this node's checked health targets that are up (withdrawn below withdraw_below).", nil, nil)
	descAnycastQPS = prometheus.NewDesc("steer_anycast_qps",
		"Query rate the overload detector last measured, in queries per second.", nil, nil)
	descAnycastPeerUp = prometheus.NewDesc("steer_anycast_peer_up",
		"Whether the BGP session with a peer is established (1) or not (0).", []string{"peer"}, nil)
	descAnycastPeerState = prometheus.NewDesc("steer_anycast_peer_session_state",
		"BGP session state of a peer: 1 for the current state.", []string{"peer", "state"}, nil)
	descAnycastPeerUptime = prometheus.NewDesc("steer_anycast_peer_uptime_seconds",
		"Seconds the BGP session with a peer has been established (0 when not).", []string{"peer"}, nil)
)

var bgpStates = []string{"idle", "connect", "active", "opensent", "openconfirm", "established"}

type anycastCollector struct{ f func() AnycastState }

// Describe implements prometheus.Collector.
func (c anycastCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAnycastAnnounced, descAnycastPrefixes, descAnycastPrepend,
		descAnycastTransitions, descAnycastLast, descAnycastLastTime, descAnycastHealthScore, descAnycastQPS, descAnycastPeerUp, descAnycastPeerState, descAnycastPeerUptime} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c anycastCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.f()
	ch <- prometheus.MustNewConstMetric(descAnycastAnnounced, prometheus.GaugeValue, boolValue(s.Announced))
	ch <- prometheus.MustNewConstMetric(descAnycastPrefixes, prometheus.GaugeValue, float64(s.Prefixes))
	ch <- prometheus.MustNewConstMetric(descAnycastPrepend, prometheus.GaugeValue, float64(s.Prepend))
	for r, n := range s.Transitions {
		ch <- prometheus.MustNewConstMetric(descAnycastTransitions, prometheus.CounterValue, float64(n), r)
	}
	if s.Reason != "" {
		ch <- prometheus.MustNewConstMetric(descAnycastLast, prometheus.GaugeValue, 1, s.Reason)
	}
	if !s.Since.IsZero() {
		ch <- prometheus.MustNewConstMetric(descAnycastLastTime, prometheus.GaugeValue, float64(s.Since.UnixNano())/1e9)
	}
	ch <- prometheus.MustNewConstMetric(descAnycastHealthScore, prometheus.GaugeValue, s.HealthScore)
	ch <- prometheus.MustNewConstMetric(descAnycastQPS, prometheus.GaugeValue, s.QPS)
	now := time.Now()
	seen := map[string]bool{}
	for _, p := range s.Peers {
		if seen[p.Address] {
			continue
		}
		seen[p.Address] = true
		up := p.State == "established"
		ch <- prometheus.MustNewConstMetric(descAnycastPeerUp, prometheus.GaugeValue, boolValue(up), p.Address)
		for _, st := range bgpStates {
			ch <- prometheus.MustNewConstMetric(descAnycastPeerState, prometheus.GaugeValue, boolValue(st == p.State), p.Address, st)
		}
		uptime := 0.0
		if up && !p.Since.IsZero() {
			uptime = now.Sub(p.Since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descAnycastPeerUptime, prometheus.GaugeValue, uptime, p.Address)
	}
}

// SetAnycast registers the anycast metrics, read from f at scrape time.
// Call it once.
func (m *Metrics) SetAnycast(f func() AnycastState) {
	m.registry.MustRegister(anycastCollector{f: f})
}
