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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/steer-dns/steer/internal/version"
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

	ruleOffset []int           // ruleOffset[r] is the first decision counter of record r; len(names)+1 entries
	decisions  []atomic.Uint64 // [record][rule], flattened
}

// Metrics holds steer's counters. The zero value is not usable; use New.
type Metrics struct {
	xf        transfers // zone transfer and NOTIFY counters (transfer.go)
	queries   [numQueryCounters]atomic.Uint64
	transport [numTransports]perTransport
	truncated atomic.Uint64

	steer atomic.Pointer[steerTable]

	reloads         [2]atomic.Uint64 // 0 ok, 1 rejected
	zonesDegraded   atomic.Int64     // zones serving a last good copy or SERVFAIL
	lastReloadNanos atomic.Int64     // Unix nanoseconds of the last successful reload; 0 if none
	health          atomic.Pointer[func() (up, down, unknown int)]
	healthDetail    atomic.Pointer[func() ([]TargetState, []PoolState)]
	geo             atomic.Pointer[func() map[string]time.Time]
	queryLog        atomic.Pointer[func() (written, dropped uint64)]

	ecs   [numECSKinds]atomic.Uint64
	scope [2][maxScope + 1]atomic.Uint64 // [family (0 IPv4, 1 IPv6)][prefix length]

	checkBuckets [len(checkBounds) + 1]atomic.Uint64 // per-bucket (not cumulative) counts; the last is +Inf
	checkNanos   atomic.Uint64                       // sum of check durations in nanoseconds
	checks       [2]atomic.Uint64                    // 0 ok, 1 fail
	transitions  [numTransitions]atomic.Uint64

	// latencyUpdates is registered on first use (see latency.go).
	latencyOnce    sync.Once
	latencyUpdates *prometheus.CounterVec

	ab abuseCounters

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

// SetRecords replaces the steered-answer and steering-decision counters with
// a new table for the given steered records (by name), each record's pools
// (pools[i] are the pool names of names[i]) and each record's number of
// steering rules (rules[i] is the rule count of names[i]; missing or negative
// entries count as 0). Record, pool and rule indexes in Steered and Decision
// refer to these slices; names, and the pool names of one record, must be
// unique, or a scrape reports duplicate series. Counts are not carried over.
// It is called at load and reload, may allocate, and is safe while Steered
// and Decision run concurrently.
func (m *Metrics) SetRecords(names []string, pools [][]string, rules []int) {
	t := &steerTable{
		names:      append([]string(nil), names...),
		pools:      make([][]string, len(names)),
		offset:     make([]int, len(names)+1),
		ruleOffset: make([]int, len(names)+1),
	}
	n, nr := 0, 0
	for i := range names {
		if i < len(pools) {
			t.pools[i] = append([]string(nil), pools[i]...)
		}
		t.offset[i] = n
		n += 2 * len(t.pools[i])
		t.ruleOffset[i] = nr
		if i < len(rules) && rules[i] > 0 {
			nr += rules[i]
		}
	}
	t.offset[len(names)] = n
	t.ruleOffset[len(names)] = nr
	t.counts = make([]atomic.Uint64, n)
	t.decisions = make([]atomic.Uint64, nr)
	m.steer.Store(t)
}

// Decision counts one steering decision of steered record number record made
// by its rule number rule (0-based here, exposed 1-based as the rule label of
// steer_steering_decisions_total). Indexes out of range of the last
// SetRecords are ignored. It does not allocate or lock.
func (m *Metrics) Decision(record, rule int) {
	t := m.steer.Load()
	if uint(record) >= uint(len(t.names)) {
		return
	}
	off := t.ruleOffset[record]
	if uint(rule) >= uint(t.ruleOffset[record+1]-off) {
		return
	}
	t.decisions[off+rule].Add(1)
}

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

// TargetState is the health of one health-check target, for
// steer_health_target_up.
type TargetState struct {
	Record, Pool, Address, Check string
	Up                           bool
}

// PoolState is the health of one pool of a steered record, for
// steer_health_pool_up.
type PoolState struct {
	Record, Pool string
	Up           bool
}

// SetHealthDetail sets the function read at scrape time for the state of
// every health-check target (steer_health_target_up) and pool
// (steer_health_pool_up). Repeated label sets are reported once (the first
// wins). A nil f removes the metrics.
func (m *Metrics) SetHealthDetail(f func() ([]TargetState, []PoolState)) {
	if f == nil {
		m.healthDetail.Store(nil)
		return
	}
	m.healthDetail.Store(&f)
}

// checkBounds are the upper bounds of the health-check duration buckets.
var checkBounds = [...]time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second,
}

// CheckDone counts one finished health check that took d and succeeded (ok)
// or failed: it observes d in steer_health_check_duration_seconds (negative
// durations as 0) and counts steer_health_checks_total{result="ok|fail"}. It
// does not allocate or lock.
func (m *Metrics) CheckDone(d time.Duration, ok bool) {
	if d < 0 {
		d = 0
	}
	i := 0
	for i < len(checkBounds) && d > checkBounds[i] {
		i++
	}
	m.checkBuckets[i].Add(1)
	m.checkNanos.Add(uint64(d))
	if ok {
		m.checks[0].Add(1)
	} else {
		m.checks[1].Add(1)
	}
}

const numTransitions = 3

var transitionNames = [numTransitions]string{"up", "down", "unknown"}

// Transition counts one health state change of a target to the state to
// ("up", "down" or "unknown"; anything else is ignored) in
// steer_health_transitions_total. It does not allocate or lock.
func (m *Metrics) Transition(to string) {
	switch to {
	case "up":
		m.transitions[0].Add(1)
	case "down":
		m.transitions[1].Add(1)
	case "unknown":
		m.transitions[2].Add(1)
	}
}

// SetGeo sets the function read at scrape time for the build time of each
// loaded geo database, by database name
// (steer_geo_database_build_timestamp_seconds); a zero time is reported as
// 0. A nil f removes the metric.
func (m *Metrics) SetGeo(f func() map[string]time.Time) {
	if f == nil {
		m.geo.Store(nil)
		return
	}
	m.geo.Store(&f)
}

// SetQueryLog sets the function read at scrape time for the query log's
// written and dropped entries (steer_query_log_entries_total); nil removes
// the metric.
func (m *Metrics) SetQueryLog(f func() (written, dropped uint64)) {
	if f == nil {
		m.queryLog.Store(nil)
		return
	}
	m.queryLog.Store(&f)
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

// SetZonesDegraded sets how many zones failed to load and serve their
// last good copy or SERVFAIL (steer_zones_degraded).
func (m *Metrics) SetZonesDegraded(n int) { m.zonesDegraded.Store(int64(n)) }

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
	descZonesDegraded = prometheus.NewDesc("steer_zones_degraded",
		"Zones whose file failed to load, serving their last good copy or SERVFAIL.", nil, nil)
	descLastReload = prometheus.NewDesc("steer_config_last_reload_success_timestamp_seconds",
		"Unix time of the last successful configuration reload (0 if none).", nil, nil)
	descHealth = prometheus.NewDesc("steer_health_targets",
		"Health check targets, by state (up, down, unknown).",
		[]string{"state"}, nil)
	descDecisions = prometheus.NewDesc("steer_steering_decisions_total",
		"Steering decisions, by record and the (1-based) rule that made them.",
		[]string{"record", "rule"}, nil)
	descECS = prometheus.NewDesc("steer_dns_ecs_queries_total",
		"DNS queries, by EDNS Client Subnet option (absent, present, invalid).",
		[]string{"ecs"}, nil)
	descScope = prometheus.NewDesc("steer_dns_ecs_scope_prefix_length",
		"ECS scope prefix length of answers, by address family (ipv4, ipv6).",
		[]string{"family"}, nil)
	descTargetUp = prometheus.NewDesc("steer_health_target_up",
		"Whether a health check target is up (1) or not (0).",
		[]string{"record", "pool", "address", "check"}, nil)
	descPoolUp = prometheus.NewDesc("steer_health_pool_up",
		"Whether a pool of a steered record is up (1) or not (0).",
		[]string{"record", "pool"}, nil)
	descCheckDuration = prometheus.NewDesc("steer_health_check_duration_seconds",
		"Duration of health checks.", nil, nil)
	descChecks = prometheus.NewDesc("steer_health_checks_total",
		"Health checks, by result (ok, fail).",
		[]string{"result"}, nil)
	descTransitions = prometheus.NewDesc("steer_health_transitions_total",
		"Health state changes of targets, by new state (up, down, unknown).",
		[]string{"to"}, nil)
	descGeoBuild = prometheus.NewDesc("steer_geo_database_build_timestamp_seconds",
		"Unix build time of each loaded geo database.",
		[]string{"database"}, nil)
	descQueryLog = prometheus.NewDesc("steer_query_log_entries_total",
		"Query log entries, by result: written, or dropped because the buffer was full.",
		[]string{"result"}, nil)
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
		descSteered, descReloads, descZonesDegraded, descLastReload, descHealth, descDecisions, descECS, descScope,
		descTargetUp, descPoolUp, descCheckDuration, descChecks, descTransitions, descGeoBuild, descQueryLog} {
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
		for k := range st.ruleOffset[r+1] - st.ruleOffset[r] {
			ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue,
				float64(st.decisions[st.ruleOffset[r]+k].Load()), name, strconv.Itoa(k+1))
		}
	}

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

	if f := m.health.Load(); f != nil {
		up, down, unknown := (*f)()
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(up), "up")
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(down), "down")
		ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(unknown), "unknown")
	}
	if f := m.healthDetail.Load(); f != nil {
		targets, pools := (*f)()
		seenT := make(map[[4]string]bool, len(targets))
		for _, s := range targets {
			k := [4]string{s.Record, s.Pool, s.Address, s.Check}
			if seenT[k] {
				continue
			}
			seenT[k] = true
			ch <- prometheus.MustNewConstMetric(descTargetUp, prometheus.GaugeValue, boolValue(s.Up),
				s.Record, s.Pool, s.Address, s.Check)
		}
		seenP := make(map[[2]string]bool, len(pools))
		for _, s := range pools {
			k := [2]string{s.Record, s.Pool}
			if seenP[k] {
				continue
			}
			seenP[k] = true
			ch <- prometheus.MustNewConstMetric(descPoolUp, prometheus.GaugeValue, boolValue(s.Up), s.Record, s.Pool)
		}
	}

	{
		var count uint64
		buckets := make(map[float64]uint64, len(checkBounds))
		for i, le := range checkBounds {
			count += m.checkBuckets[i].Load()
			buckets[le.Seconds()] = count
		}
		count += m.checkBuckets[len(checkBounds)].Load()
		ch <- prometheus.MustNewConstHistogram(descCheckDuration, count,
			float64(m.checkNanos.Load())/1e9, buckets)
	}
	ch <- prometheus.MustNewConstMetric(descChecks, prometheus.CounterValue, float64(m.checks[0].Load()), "ok")
	ch <- prometheus.MustNewConstMetric(descChecks, prometheus.CounterValue, float64(m.checks[1].Load()), "fail")
	for i, to := range transitionNames {
		ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue, float64(m.transitions[i].Load()), to)
	}

	if f := m.geo.Load(); f != nil {
		for name, t := range (*f)() {
			v := 0.0
			if !t.IsZero() {
				v = float64(t.Unix()) + float64(t.Nanosecond())/1e9
			}
			ch <- prometheus.MustNewConstMetric(descGeoBuild, prometheus.GaugeValue, v, name)
		}
	}
	if f := m.queryLog.Load(); f != nil {
		w, d := (*f)()
		ch <- prometheus.MustNewConstMetric(descQueryLog, prometheus.CounterValue, float64(w), "written")
		ch <- prometheus.MustNewConstMetric(descQueryLog, prometheus.CounterValue, float64(d), "dropped")
	}
}
