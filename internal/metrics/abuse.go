package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the abuse-protection counters of the query path: DNS
// cookie results and the bytes of UDP traffic without a valid server
// cookie (the amplification an attacker could get). The rate limiter's
// and the TCP limits' metrics are their packages' own (rrl.Collector,
// dnsserver.TCPCollector).

// cookieNames are the label values of cookie.Status, in its order
// (dnsserver's tests check the two agree).
var cookieNames = [...]string{"none", "client_only", "valid", "invalid", "malformed"}

// abuseCounters are counted on the query path.
type abuseCounters struct {
	cookies  [len(cookieNames)]atomic.Uint64
	nocookie [2]atomic.Uint64 // UDP bytes without a valid server cookie: 0 in, 1 out
}

// Cookie counts one query by the result of its COOKIE option
// (steer_dns_cookies_total): none, client_only, valid, invalid,
// malformed, the values of cookie.Status in its order. It does not
// allocate or lock.
func (m *Metrics) Cookie(s uint8) {
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

var (
	descCookies = prometheus.NewDesc("steer_dns_cookies_total",
		"DNS queries by the result of their COOKIE option (none, client_only, valid, invalid, malformed).",
		[]string{"result"}, nil)
	descNoCookie = prometheus.NewDesc("steer_dns_nocookie_udp_bytes_total",
		"Bytes of UDP queries without a valid server cookie (in) and of their answers (out).",
		[]string{"direction"}, nil)
)

type abuseCollector struct{ m *Metrics }

func (c abuseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCookies
	ch <- descNoCookie
}

func (c abuseCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	for i, name := range cookieNames {
		ch <- prometheus.MustNewConstMetric(descCookies, prometheus.CounterValue, float64(m.ab.cookies[i].Load()), name)
	}
	ch <- prometheus.MustNewConstMetric(descNoCookie, prometheus.CounterValue, float64(m.ab.nocookie[0].Load()), "in")
	ch <- prometheus.MustNewConstMetric(descNoCookie, prometheus.CounterValue, float64(m.ab.nocookie[1].Load()), "out")
}
