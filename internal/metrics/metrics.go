// Package metrics provides Prometheus metrics for steer.
//
// Recording is done on the query path, so every recording method is
// allocation-free and lock-free: it computes an index from small enums
// (transport, rcode, qtype, path) and does one atomic add on a preallocated
// counter. Nothing is looked up by label. The counters are turned into
// Prometheus metrics only at scrape time, by a custom prometheus.Collector
// registered in the Metrics' own prometheus.Registry (together with the Go
// and process collectors) and served by Handler.
package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Transport says how a query arrived. Its values match dnsserver.Transport.
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

// rcode indexes: 0..15 are the header rcodes, then BADVERS (16), then other.
const (
	rcodeBadVers = 16
	rcodeOther   = 17
	numRcodes    = 18
)

var rcodeNames = [numRcodes]string{
	"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
	"YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH", "NOTZONE", "DSOTYPENI",
	"RCODE12", "RCODE13", "RCODE14", "RCODE15", "BADVERS", "other",
}

// qtype indexes.
const (
	qA = iota
	qAAAA
	qCNAME
	qMX
	qNS
	qSOA
	qTXT
	qSRV
	qCAA
	qPTR
	qHTTPS
	qSVCB
	qDS
	qDNSKEY
	qANY
	qOther
	numQtypes
)

var qtypeNames = [numQtypes]string{
	"A", "AAAA", "CNAME", "MX", "NS", "SOA", "TXT", "SRV", "CAA", "PTR",
	"HTTPS", "SVCB", "DS", "DNSKEY", "ANY", "other",
}

// qtypeTable maps the qtypes below 256 to their index; CAA (257) is the only
// named type above.
var qtypeTable = func() (t [256]uint8) {
	for i := range t {
		t[i] = qOther
	}
	for qt, i := range map[uint16]uint8{
		dns.TypeA: qA, dns.TypeAAAA: qAAAA, dns.TypeCNAME: qCNAME, dns.TypeMX: qMX,
		dns.TypeNS: qNS, dns.TypeSOA: qSOA, dns.TypeTXT: qTXT, dns.TypeSRV: qSRV,
		dns.TypePTR: qPTR, dns.TypeHTTPS: qHTTPS, dns.TypeSVCB: qSVCB, dns.TypeDS: qDS,
		dns.TypeDNSKEY: qDNSKEY, dns.TypeANY: qANY,
	} {
		t[qt] = i
	}
	return t
}()

func qtypeIndex(qtype uint16) int {
	if qtype < 256 {
		return int(qtypeTable[qtype])
	}
	if qtype == dns.TypeCAA {
		return qCAA
	}
	return qOther
}

func rcodeIndex(rcode int) int {
	if uint(rcode) < 16 {
		return rcode
	}
	if rcode == dns.RcodeBadVers {
		return rcodeBadVers
	}
	return rcodeOther
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

// steerTable is the preallocated counter table for steered answers, replaced
// whole by SetRecords.
type steerTable struct {
	names  []string
	pools  [][]string
	offset []int           // offset[r] is the first counter of record r; len(names)+1 entries
	counts []atomic.Uint64 // [record][pool][failOpen], flattened
}

// Metrics holds steer's counters. The zero value is not usable; use New.
type Metrics struct {
	queries   [numQueryCounters]atomic.Uint64
	transport [numTransports]perTransport
	truncated atomic.Uint64

	steer atomic.Pointer[steerTable]

	reloads         [2]atomic.Uint64 // 0 ok, 1 rejected
	lastReloadNanos atomic.Int64     // Unix nanoseconds of the last successful reload; 0 if none
	health          atomic.Pointer[func() (up, down, unknown int)]

	registry *prometheus.Registry
	handler  http.Handler
}

// New returns Metrics with all counters at zero, registered (with the Go and
// process collectors) in a registry of their own.
func New() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry()}
	m.steer.Store(&steerTable{offset: []int{0}})
	m.registry.MustRegister(
		&collector{m: m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	return m
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

// SetRecords replaces the steered-answer counters with a new table for the
// given steered records (by name) and each record's pools (pools[i] are the
// pool names of names[i]); record and pool indexes in Steered refer to these
// slices; names, and the pool names of one record, must be unique, or a
// scrape reports duplicate series. Counts are not carried over. It is called at load and reload, may
// allocate, and is safe while Steered runs concurrently.
func (m *Metrics) SetRecords(names []string, pools [][]string) {
	t := &steerTable{
		names:  append([]string(nil), names...),
		pools:  make([][]string, len(names)),
		offset: make([]int, len(names)+1),
	}
	n := 0
	for i := range names {
		if i < len(pools) {
			t.pools[i] = append([]string(nil), pools[i]...)
		}
		t.offset[i] = n
		n += 2 * len(t.pools[i])
	}
	t.offset[len(names)] = n
	t.counts = make([]atomic.Uint64, n)
	m.steer.Store(t)
}

// Steered counts one answer of steered record number record from its pool
// number pool, and whether it failed open (every target down). Indexes out of
// range of the last SetRecords are ignored.
func (m *Metrics) Steered(record, pool int, allDown bool) {
	t := m.steer.Load()
	if uint(record) >= uint(len(t.names)) {
		return
	}
	off := t.offset[record]
	if uint(pool) >= uint((t.offset[record+1]-off)/2) {
		return
	}
	i := off + 2*pool
	if allDown {
		i++
	}
	t.counts[i].Add(1)
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

// SetHealth sets the function read at scrape time for the number of health
// check targets up, down and of unknown state (steer_health_targets). A nil f
// removes the metric.
func (m *Metrics) SetHealth(f func() (up, down, unknown int)) {
	if f == nil {
		m.health.Store(nil)
		return
	}
	m.health.Store(&f)
}

// Handler returns the HTTP handler serving the metrics in the Prometheus
// exposition formats.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry returns the Metrics' own registry, for registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

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
	descSteered = prometheus.NewDesc("steer_steered_answers_total",
		"Answers of steered records, by record, pool, and whether they failed open (all targets down).",
		[]string{"record", "pool", "fail_open"}, nil)
	descReloads = prometheus.NewDesc("steer_reloads_total",
		"Configuration reloads, by result (ok or rejected).",
		[]string{"result"}, nil)
	descLastReload = prometheus.NewDesc("steer_config_last_reload_success_timestamp_seconds",
		"Unix time of the last successful configuration reload (0 if none).", nil, nil)
	descHealth = prometheus.NewDesc("steer_health_targets",
		"Health check targets, by state (up, down, unknown).",
		[]string{"state"}, nil)
)

// collector turns the counters into metrics at scrape time.
type collector struct{ m *Metrics }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueries, descBytes, descDropped, descTruncated,
		descSteered, descReloads, descLastReload, descHealth} {
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

	st := m.steer.Load()
	for r, name := range st.names {
		for p, pool := range st.pools[r] {
			i := st.offset[r] + 2*p
			ch <- prometheus.MustNewConstMetric(descSteered, prometheus.CounterValue,
				float64(st.counts[i].Load()), name, pool, "false")
			ch <- prometheus.MustNewConstMetric(descSteered, prometheus.CounterValue,
				float64(st.counts[i+1].Load()), name, pool, "true")
		}
	}

	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(m.reloads[0].Load()), "ok")
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(m.reloads[1].Load()), "rejected")
	last := 0.0
	if ns := m.lastReloadNanos.Load(); ns != 0 {
		last = float64(ns) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(descLastReload, prometheus.GaugeValue, last)

	if f := m.health.Load(); f != nil {
		up, down, unknown := (*f)()
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(up), "up")
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(down), "down")
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(unknown), "unknown")
	}
}
