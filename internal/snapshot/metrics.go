package snapshot

import (
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/metrics"
)

// This file describes a snapshot's steered records to the metrics: by
// zone, policy and pool by default, and record by record for the names
// the configuration lists in metrics.per_record.

// MetricRecords describes s's steered records, in the order of its
// policy table (the indexes metrics.Answered counts by), to
// metrics.SetRecords.
func (s *Snapshot) MetricRecords() []metrics.Record {
	if s.Policies == nil {
		return nil
	}
	policyOf := map[string]string{}
	var mc *config.Metrics
	if s.Config != nil {
		mc = &s.Config.Metrics
		for _, r := range s.Config.Records {
			policyOf[strings.ToLower(dns.Fqdn(r.Name))] = r.Policy
		}
	}
	out := make([]metrics.Record, len(s.Policies.Records))
	for i, r := range s.Policies.Records {
		m := metrics.Record{Name: r.Name, Policy: policyOf[strings.ToLower(r.Name)], Rules: len(r.Rules),
			Pools: make([]string, len(r.Pools))}
		if z := s.Zones.Find(strings.ToLower(r.Name)); z != nil {
			m.Zone = z.Origin
		}
		for j, p := range r.Pools {
			m.Pools[j] = p.Name
		}
		m.PerRecord = mc != nil && mc.PerRecordMatch(r.Name)
		out[i] = m
	}
	return out
}

var (
	descPools = prometheus.NewDesc("steer_health_pools",
		"Pools of steered records, counted by zone, policy (\"\" for records with rules of their own), pool name and state (up, down, drain, disabled).",
		[]string{"zone", "policy", "pool", "state"}, nil)
	descPoolUp = prometheus.NewDesc("steer_health_pool_up",
		"Whether a pool of a steered record listed in metrics.per_record is up (1) or not (0).",
		[]string{"record", "pool"}, nil)
)

// PoolCollector exposes the pools' health of the snapshot being served:
// counts by zone, policy, pool and state, and each pool of the records in
// metrics.per_record.
type PoolCollector struct {
	current func() *Snapshot

	mu    sync.Mutex
	snap  *Snapshot // the snapshot the fields below describe
	group []int32   // of each record's pools in turn: its series in labels
	// per is set for the records in metrics.per_record, nil when none is.
	per    []bool
	labels [][3]string // zone, policy, pool
}

// poolStates are the states PoolState reports, in the order counted.
var poolStates = [...]string{"up", "down", "drain", "disabled"}

// describe computes, once per snapshot, each record's description and
// the series its pools are counted in.
// It keeps an index per pool and nothing else per record (no copy of the
// records' descriptions), so what a scrape leaves behind does not grow
// with the names.
func (c *PoolCollector) describe(s *Snapshot) {
	recs := s.MetricRecords()
	c.snap, c.group, c.per, c.labels = s, c.group[:0], nil, nil
	idx := map[[3]string]int32{}
	for i, m := range recs {
		for _, p := range m.Pools {
			k := [3]string{m.Zone, m.Policy, p}
			g, ok := idx[k]
			if !ok {
				g = int32(len(c.labels))
				idx[k] = g
				c.labels = append(c.labels, k)
			}
			c.group = append(c.group, g)
		}
		if m.PerRecord {
			if c.per == nil {
				c.per = make([]bool, len(recs))
			}
			c.per[i] = true
		}
	}
	c.group = slices.Clip(c.group)
}

// NewPoolCollector returns a PoolCollector reading current at scrape time.
func NewPoolCollector(current func() *Snapshot) *PoolCollector {
	return &PoolCollector{current: current}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPools
	ch <- descPoolUp
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.current()
	if s == nil || s.Policies == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != s {
		c.describe(s)
	}
	counts := make([]int, len(c.labels)*len(poolStates))
	i := 0
	for ri, r := range s.Policies.Records {
		per := c.per != nil && c.per[ri]
		for _, p := range r.Pools {
			state := s.Live.PoolStateWord(r, p) // PoolState's word, without formatting a reason
			for k, st := range poolStates {
				if st == state {
					counts[int(c.group[i])*len(poolStates)+k]++
					break
				}
			}
			i++
			if per {
				up := 0.0
				if state == "up" {
					up = 1
				}
				ch <- prometheus.MustNewConstMetric(descPoolUp, prometheus.GaugeValue, up, r.Name, p.Name)
			}
		}
	}
	for g, l := range c.labels {
		for k, st := range poolStates {
			ch <- prometheus.MustNewConstMetric(descPools, prometheus.GaugeValue,
				float64(counts[g*len(poolStates)+k]), l[0], l[1], l[2], st)
		}
	}
}
