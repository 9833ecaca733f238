package dnsserver

import "github.com/prometheus/client_golang/prometheus"

// This file holds the TCP connection limiter's metrics (steer_tcp_*),
// read at scrape time. The per-query counters are in package metrics.

var (
	descTCPConns = prometheus.NewDesc("steer_tcp_connections",
		"TCP connections open now.", nil, nil)
	descTCPAccepted = prometheus.NewDesc("steer_tcp_connections_accepted_total",
		"TCP connections accepted.", nil, nil)
	descTCPClosed = prometheus.NewDesc("steer_tcp_connections_closed_total",
		"TCP connections closed, by reason.", []string{"reason"}, nil)
)

// TCPCollector exposes the TCP counters that stats returns at each scrape
// (Server.TCPStats); refused connections count as closed with reason
// "refused".
type TCPCollector struct{ stats func() TCPStats }

// NewTCPCollector returns a TCPCollector reading stats at scrape time.
func NewTCPCollector(stats func() TCPStats) *TCPCollector { return &TCPCollector{stats: stats} }

// Describe implements prometheus.Collector.
func (c *TCPCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTCPConns
	ch <- descTCPAccepted
	ch <- descTCPClosed
}

// Collect implements prometheus.Collector.
func (c *TCPCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(descTCPConns, prometheus.GaugeValue, float64(s.Current))
	ch <- prometheus.MustNewConstMetric(descTCPAccepted, prometheus.CounterValue, float64(s.Accepted))
	for r, n := range s.Closed {
		ch <- prometheus.MustNewConstMetric(descTCPClosed, prometheus.CounterValue, float64(n), TCPCloseReason(r).String())
	}
	if s.Refused > 0 {
		ch <- prometheus.MustNewConstMetric(descTCPClosed, prometheus.CounterValue, float64(s.Refused), "refused")
	}
}
