package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/rrl"
)

// This file holds the abuse-protection metrics: DNS cookie results, the
// bytes of UDP traffic without a valid server cookie (the amplification
// an attacker could get), the rate limiter's verdicts and the TCP
// connection limits.

// cookieNames are the label values of cookie.Status, in its order.
var cookieNames = [...]string{"none", "client_only", "valid", "invalid", "malformed"}

// abuseCounters are counted on the query path.
type abuseCounters struct {
	cookies  [len(cookieNames)]atomic.Uint64
	nocookie [2]atomic.Uint64 // UDP bytes without a valid server cookie: 0 in, 1 out
	abuse    atomic.Pointer[func() AbuseState]
}

// Cookie counts one query by the result of its COOKIE option
// (steer_dns_cookies_total): none, client_only, valid, invalid,
// malformed. It does not allocate or lock.
func (m *Metrics) Cookie(s cookie.Status) {
	if int(s) < len(cookieNames) {
		m.ab.cookies[s].Add(1)
	}
}

// NoCookieUDP adds the sizes of a UDP query without a valid server cookie
// and of its answer (0 when none was sent) to
// steer_dns_nocookie_udp_bytes_total.
func (m *Metrics) NoCookieUDP(in, out int) {
	m.ab.nocookie[0].Add(uint64(in))
	m.ab.nocookie[1].Add(uint64(out))
}

// TCPState is the TCP connection limiter's state, for steer_tcp_*.
type TCPState struct {
	// Current is the number of connections open now; Accepted how many
	// were accepted in all.
	Current, Accepted uint64
	// Closed counts closed connections by reason (label value).
	Closed map[string]uint64
}

// AbuseState is what the abuse metrics read at scrape time.
type AbuseState struct {
	// RRL is the rate limiter's counters, nil when it is off.
	RRL *rrl.Stats
	TCP TCPState
}

// SetAbuse makes the rate-limiting and TCP metrics read f at scrape time.
func (m *Metrics) SetAbuse(f func() AbuseState) { m.ab.abuse.Store(&f) }

var (
	descCookies = prometheus.NewDesc("steer_dns_cookies_total",
		"DNS queries by the result of their COOKIE option (none, client_only, valid, invalid, malformed).",
		[]string{"result"}, nil)
	descNoCookie = prometheus.NewDesc("steer_dns_nocookie_udp_bytes_total",
		"Bytes of UDP queries without a valid server cookie (in) and of their answers (out).",
		[]string{"direction"}, nil)
	descRRL = prometheus.NewDesc("steer_rrl_responses_total",
		"UDP responses the rate limiter decided, by response class and outcome (passed, slipped, dropped; would_limit in log-only mode).",
		[]string{"class", "outcome"}, nil)
	descRRLAll = prometheus.NewDesc("steer_rrl_aggregate_limited_total",
		"Responses dropped by the per-source aggregate limit (all_per_second).", nil, nil)
	descRRLExempt = prometheus.NewDesc("steer_rrl_exempt_total",
		"Responses to sources in rrl.exempt.", nil, nil)
	descRRLEvictions = prometheus.NewDesc("steer_rrl_evictions_total",
		"Rate-limit buckets replaced while they still held state (the table is too small).", nil, nil)
	descRRLTable = prometheus.NewDesc("steer_rrl_table_entries",
		"Size of the rate limiter's fixed bucket table.", nil, nil)
	descTCPConns = prometheus.NewDesc("steer_tcp_connections",
		"TCP connections open now.", nil, nil)
	descTCPAccepted = prometheus.NewDesc("steer_tcp_connections_accepted_total",
		"TCP connections accepted.", nil, nil)
	descTCPClosed = prometheus.NewDesc("steer_tcp_connections_closed_total",
		"TCP connections closed, by reason.", []string{"reason"}, nil)
)

type abuseCollector struct{ m *Metrics }

func (c abuseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCookies, descNoCookie, descRRL, descRRLAll, descRRLExempt,
		descRRLEvictions, descRRLTable, descTCPConns, descTCPAccepted, descTCPClosed} {
		ch <- d
	}
}

func (c abuseCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	for i, name := range cookieNames {
		ch <- prometheus.MustNewConstMetric(descCookies, prometheus.CounterValue, float64(m.ab.cookies[i].Load()), name)
	}
	ch <- prometheus.MustNewConstMetric(descNoCookie, prometheus.CounterValue, float64(m.ab.nocookie[0].Load()), "in")
	ch <- prometheus.MustNewConstMetric(descNoCookie, prometheus.CounterValue, float64(m.ab.nocookie[1].Load()), "out")
	f := m.ab.abuse.Load()
	if f == nil {
		return
	}
	s := (*f)()
	if r := s.RRL; r != nil {
		for cl := range rrl.NumClasses {
			name := rrl.Class(cl).String()
			cs := r.Class[cl]
			for _, o := range []struct {
				outcome string
				n       uint64
			}{{"passed", cs.Passed}, {"slipped", cs.Slipped}, {"dropped", cs.Dropped}, {"would_limit", cs.WouldLimit}} {
				ch <- prometheus.MustNewConstMetric(descRRL, prometheus.CounterValue, float64(o.n), name, o.outcome)
			}
		}
		ch <- prometheus.MustNewConstMetric(descRRLAll, prometheus.CounterValue, float64(r.AllLimited))
		ch <- prometheus.MustNewConstMetric(descRRLExempt, prometheus.CounterValue, float64(r.Exempt))
		ch <- prometheus.MustNewConstMetric(descRRLEvictions, prometheus.CounterValue, float64(r.Evictions))
		ch <- prometheus.MustNewConstMetric(descRRLTable, prometheus.GaugeValue, float64(r.TableSize))
	}
	ch <- prometheus.MustNewConstMetric(descTCPConns, prometheus.GaugeValue, float64(s.TCP.Current))
	ch <- prometheus.MustNewConstMetric(descTCPAccepted, prometheus.CounterValue, float64(s.TCP.Accepted))
	for reason, n := range s.TCP.Closed {
		ch <- prometheus.MustNewConstMetric(descTCPClosed, prometheus.CounterValue, float64(n), reason)
	}
}
