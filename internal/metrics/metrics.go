// Package metrics holds steer's server-wide query counters and the
// registry /metrics serves.
//
// Recording is done on the query path, so every recording method is
// allocation-free and lock-free: it computes an index from small enums
// (transport, rcode, qtype, path; labels.go) and does one atomic add on a
// preallocated counter. Nothing is looked up by label. The counters are
// turned into Prometheus metrics only at scrape time, by a custom
// prometheus.Collector registered (with the Go and process collectors) in
// the registry given to New, and served by Handler.
//
// Each subsystem owns the rest of its metrics and registers its own
// collector in the same registry, as CoreDNS plugins do: health
// (steer_health_*), anycast, latency, rrl, dnsserver (steer_tcp_*),
// querylog, geo, xfr (zone transfers, NOTIFY, zone serials and expiry),
// fleetnode (steer_fleet_*) and snapshot (the pools' health). The steering counters
// (steer.go) are counted here, on the query path, but their series are
// per zone, policy and pool, and per record only for the names in
// metrics.per_record, so their number does not grow with the names.
package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/steer-dns/steer/internal/version"
)

// Transport says how a query arrived; dnsserver.Transport is this type.
type Transport uint8

// The transports a query can arrive on.
const (
	UDP Transport = iota
	TCP
	numTransports
)

var transportNames = [numTransports]string{"udp", "tcp"}

// String returns the transport's label value ("udp" or "tcp").
func (t Transport) String() string {
	if t < numTransports {
		return transportNames[t]
	}
	return "unknown"
}

const numPaths = 2 // 0 general, 1 fast

var pathNames = [numPaths]string{"general", "fast"}

// queryIndex flattens [transport][rcode][qtype][path].
func queryIndex(t Transport, rc, qt, path int) int {
	return ((int(t)*numRcodes+rc)*numQtypes+qt)*numPaths + path
}

const numQueryCounters = int(numTransports) * numRcodes * numQtypes * numPaths

// perTransport holds the per-transport scalar counters on their own cache
// line, so the two transports do not share one.
type perTransport struct {
	bytes   atomic.Uint64
	dropped atomic.Uint64
	_       [48]byte
}

// Metrics holds steer's counters. The zero value is not usable; use New.
type Metrics struct {
	queries   [numQueryCounters]atomic.Uint64
	transport [numTransports]perTransport
	truncated atomic.Uint64

	steer atomic.Pointer[steerTable] // steer.go

	reloads         [2]atomic.Uint64 // 0 ok, 1 rejected
	zonesDegraded   atomic.Int64     // zones serving a last good copy or SERVFAIL
	lastReloadNanos atomic.Int64     // Unix nanoseconds of the last successful reload; 0 if none

	ecs   [numECSKinds]atomic.Uint64
	scope [2][maxScope + 1]atomic.Uint64 // [family (0 IPv4, 1 IPv6)][prefix length]

	ab abuseCounters

	registry *prometheus.Registry
	handler  http.Handler
}

// New returns Metrics with all counters at zero, registered in reg
// together with the Go and process collectors and steer_build_info.
// Handler serves everything registered in reg, so the subsystems register
// their own collectors there (CoreDNS style: each owns its metrics).
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{registry: reg}
	m.SetRecords(nil)
	reg.MustRegister(
		&collector{m: m},
		abuseCollector{m: m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
	)
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	return m
}

// buildInfo is steer_build_info{version,commit,goversion} 1: which build
// is running, to join with other series or spot a fleet on mixed versions.
func buildInfo() prometheus.Gauge {
	bi := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "steer_build_info",
		Help:        "Always 1; the labels say which build of steer is running (version, commit, Go version).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit, "goversion": bi.GoVersion},
	})
	g.Set(1)
	return g
}

// Query counts one answered query: its transport, rcode (0..15, BADVERS (16)
// as "BADVERS", anything else as "other"), qtype (the common types by name,
// the rest as "other"), whether the fast path answered it, and the response
// size in bytes. It does not allocate or lock.
func (m *Metrics) Query(t Transport, rcode int, qtype uint16, fast bool, size int) {
	if t >= numTransports {
		return
	}
	path := 0
	if fast {
		path = 1
	}
	m.queries[queryIndex(t, rcodeIndex(rcode), qtypeIndex(qtype), path)].Add(1)
	if size > 0 {
		m.transport[t].bytes.Add(uint64(size))
	}
}

// Dropped counts one packet dropped without an answer (a malformed header,
// or a response sent to the server).
func (m *Metrics) Dropped(t Transport) {
	if t < numTransports {
		m.transport[t].dropped.Add(1)
	}
}

// Truncated counts one UDP answer sent with TC=1.
func (m *Metrics) Truncated() { m.truncated.Add(1) }

// ECSKind says what EDNS Client Subnet option a query carried.
type ECSKind uint8

// The ECS kinds of a query.
const (
	ECSAbsent  ECSKind = iota // no ECS option
	ECSPresent                // a valid ECS option
	ECSInvalid                // a malformed or unusable ECS option
	numECSKinds
)

var ecsNames = [numECSKinds]string{"absent", "present", "invalid"}

// String returns the kind's label value ("absent", "present" or "invalid").
func (k ECSKind) String() string {
	if k < numECSKinds {
		return ecsNames[k]
	}
	return "unknown"
}

// ECS counts one query by the kind of ECS option it carried
// (steer_dns_ecs_queries_total). Unknown kinds are ignored. It does not
// allocate or lock.
func (m *Metrics) ECS(k ECSKind) {
	if k < numECSKinds {
		m.ecs[k].Add(1)
	}
}

// maxScope is the longest prefix length counted (IPv6).
const maxScope = 128

// maxScopeFamily is the longest prefix length of each family.
var maxScopeFamily = [2]int{32, 128}

var familyNames = [2]string{"ipv4", "ipv6"}

// scopeBounds are the histogram bucket upper bounds of each family.
var scopeBounds = [2][]int{
	{0, 8, 16, 20, 24, 28, 32},
	{0, 16, 32, 40, 48, 56, 64, 128},
}

// Scope observes the ECS scope prefix length of one answer, for an IPv6
// (v6) or IPv4 client subnet, in the histogram
// steer_dns_ecs_scope_prefix_length. Lengths out of the family's range
// (0..32 or 0..128) are ignored. It keeps one counter per prefix length and
// builds the buckets at scrape time, so it does not allocate or lock.
func (m *Metrics) Scope(v6 bool, scope int) {
	f := 0
	if v6 {
		f = 1
	}
	if uint(scope) > uint(maxScopeFamily[f]) {
		return
	}
	m.scope[f][scope].Add(1)
}

// Reload counts one configuration reload, accepted (ok) or rejected; an
// accepted one also sets the last-success timestamp to now.
func (m *Metrics) Reload(ok bool) {
	if ok {
		m.reloads[0].Add(1)
		m.lastReloadNanos.Store(time.Now().UnixNano())
	} else {
		m.reloads[1].Add(1)
	}
}

// SetZonesDegraded sets how many zones failed to load and serve their
// last good copy or SERVFAIL (steer_zones_degraded).
func (m *Metrics) SetZonesDegraded(n int) { m.zonesDegraded.Store(int64(n)) }

// Handler returns the HTTP handler serving the metrics in the Prometheus
// exposition formats.
func (m *Metrics) Handler() http.Handler { return m.handler }

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

var (
	descQueries = prometheus.NewDesc("steer_dns_queries_total",
		"DNS queries answered, by transport, rcode, qtype and path (fast or general).",
		[]string{"transport", "rcode", "qtype", "path"}, nil)
	descBytes = prometheus.NewDesc("steer_dns_response_bytes_total",
		"Bytes of DNS responses sent, by transport.",
		[]string{"transport"}, nil)
	descDropped = prometheus.NewDesc("steer_dns_dropped_total",
		"DNS packets dropped without an answer (malformed header, responses), by transport.",
		[]string{"transport"}, nil)
	descTruncated = prometheus.NewDesc("steer_dns_truncated_total",
		"UDP answers sent truncated (TC=1).", nil, nil)
	descReloads = prometheus.NewDesc("steer_reloads_total",
		"Configuration reloads, by result (ok or rejected).",
		[]string{"result"}, nil)
	descZonesDegraded = prometheus.NewDesc("steer_zones_degraded",
		"Zones whose file failed to load, serving their last good copy or SERVFAIL.", nil, nil)
	descLastReload = prometheus.NewDesc("steer_config_last_reload_success_timestamp_seconds",
		"Unix time of the last successful configuration reload (0 if none).", nil, nil)
	descECS = prometheus.NewDesc("steer_dns_ecs_queries_total",
		"DNS queries, by EDNS Client Subnet option (absent, present, invalid).",
		[]string{"ecs"}, nil)
	descScope = prometheus.NewDesc("steer_dns_ecs_scope_prefix_length",
		"ECS scope prefix length of answers, by address family (ipv4, ipv6).",
		[]string{"family"}, nil)
)

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collector turns the counters into metrics at scrape time.
type collector struct{ m *Metrics }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueries, descBytes, descDropped, descTruncated,
		descReloads, descZonesDegraded, descLastReload, descECS, descScope} {
		ch <- d
	}
	for _, d := range steerDescs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	// Query series are many (transport × rcode × qtype × path) and mostly
	// never seen, so only the ones counted at least once are exposed.
	for t := range numTransports {
		for rc := range numRcodes {
			for qt := range numQtypes {
				for p := range numPaths {
					v := m.queries[queryIndex(t, rc, qt, p)].Load()
					if v == 0 {
						continue
					}
					ch <- prometheus.MustNewConstMetric(descQueries, prometheus.CounterValue, float64(v),
						transportNames[t], rcodeNames[rc], qtypeNames[qt], pathNames[p])
				}
			}
		}
	}
	for t := range numTransports {
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue,
			float64(m.transport[t].bytes.Load()), transportNames[t])
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue,
			float64(m.transport[t].dropped.Load()), transportNames[t])
	}
	ch <- prometheus.MustNewConstMetric(descTruncated, prometheus.CounterValue, float64(m.truncated.Load()))

	for k := range numECSKinds {
		ch <- prometheus.MustNewConstMetric(descECS, prometheus.CounterValue, float64(m.ecs[k].Load()), ecsNames[k])
	}
	for f := range 2 {
		// Load each per-length counter once, so buckets, sum and count agree.
		var count uint64
		var sum float64
		buckets := make(map[float64]uint64, len(scopeBounds[f]))
		b := 0
		for l := 0; l <= maxScopeFamily[f]; l++ {
			v := m.scope[f][l].Load()
			count += v
			sum += float64(l) * float64(v)
			if b < len(scopeBounds[f]) && l == scopeBounds[f][b] {
				buckets[float64(l)] = count
				b++
			}
		}
		ch <- prometheus.MustNewConstHistogram(descScope, count, sum, buckets, familyNames[f])
	}

	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(m.reloads[0].Load()), "ok")
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(m.reloads[1].Load()), "rejected")
	ch <- prometheus.MustNewConstMetric(descZonesDegraded, prometheus.GaugeValue, float64(m.zonesDegraded.Load()))
	last := 0.0
	if ns := m.lastReloadNanos.Load(); ns != 0 {
		last = float64(ns) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descLastReload, prometheus.GaugeValue, last)

	m.steer.Load().collect(ch)
}
