package dnssec

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the signing metrics (subsystem "dnssec"), read at
// scrape time from the signers, caches and budgets of the zones being
// served. A reload may replace any of them; the collector keeps counting
// across: it remembers what it last read of each and adds only what each
// made since, reading a replaced one a last time at the next scrape.

var (
	descSignatures = prometheus.NewDesc("steer_dnssec_signatures_total",
		"RRSIGs made, by zone and reason (load: a zone's RRset at load or reload; renew: past its refresh point; steered: a steered answer set pre-signed; online: on a query's behalf; denial: a denial-of-existence NSEC).",
		[]string{"zone", "reason"}, nil)
	descCacheLookups = prometheus.NewDesc("steer_dnssec_cache_lookups_total",
		"Lookups in the cache of signatures made on demand, by result (hit, miss).",
		[]string{"result"}, nil)
	descCacheInserts = prometheus.NewDesc("steer_dnssec_cache_inserts_total",
		"Signed RRsets put in the cache of signatures made on demand.", nil, nil)
	descRefused = prometheus.NewDesc("steer_dnssec_budget_refused_total",
		"Signatures the signing budget refused to make on a query's behalf (the query was answered TC=1 over UDP).", nil, nil)
	descExpiry = prometheus.NewDesc("steer_dnssec_signature_expires_in_seconds",
		"Seconds until the earliest expiration among the signatures each signed zone serves (renewal keeps it above a quarter of the validity; below 48 h the node logs an error).",
		[]string{"zone"}, nil)
	descNextKeyEvent = prometheus.NewDesc("steer_dnssec_next_key_event_timestamp_seconds",
		"When the next key event of each signed zone with a key plan is due (Unix time): a ZSK rollover's publish, activate, retire or remove, a KSK's. No series for a zone with none scheduled.",
		[]string{"zone"}, nil)
)

// ZoneState is what the collector reads of one signed zone at a scrape.
type ZoneState struct {
	Signer *Signer
	// Expiry is the earliest expiration (Unix seconds) among the
	// signatures the zone serves; 0: not known (no series).
	Expiry uint32
	// NextKeyEvent is when the zone's next key event is due (its key
	// plan's); zero: none scheduled (no series).
	NextKeyEvent time.Time
}

// Source is what is being served at a scrape: the signed zones, and any
// cache or budget not reachable through their signers (those are read
// too; each is counted once however many signers share it).
type Source struct {
	Zones   []ZoneState
	Caches  []*Cache
	Budgets []*Budget
}

// Collector exposes the signing metrics of what its source returns.
type Collector struct {
	source func() Source
	now    func() time.Time

	mu      sync.Mutex
	signers map[*Signer]*[numReasons]uint64 // last read
	made    map[string]*[numReasons]uint64  // totals by zone
	caches  map[*Cache][3]uint64            // last hits, misses, inserts
	cache   [3]uint64
	budgets map[*Budget]uint64 // last refused
	refused uint64
}

// NewCollector returns a Collector reading source at each scrape.
func NewCollector(source func() Source) *Collector {
	return &Collector{source: source, now: time.Now,
		signers: map[*Signer]*[numReasons]uint64{}, made: map[string]*[numReasons]uint64{},
		caches: map[*Cache][3]uint64{}, budgets: map[*Budget]uint64{}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSignatures, descCacheLookups, descCacheInserts, descRefused, descExpiry, descNextKeyEvent} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	src := c.source()
	now := c.now().Unix()

	c.mu.Lock()
	c.count(src)
	zones := make([]string, 0, len(c.made))
	for z := range c.made {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		for r, n := range c.made[z] {
			ch <- prometheus.MustNewConstMetric(descSignatures, prometheus.CounterValue, float64(n), z, Reason(r).String())
		}
	}
	ch <- prometheus.MustNewConstMetric(descCacheLookups, prometheus.CounterValue, float64(c.cache[0]), "hit")
	ch <- prometheus.MustNewConstMetric(descCacheLookups, prometheus.CounterValue, float64(c.cache[1]), "miss")
	ch <- prometheus.MustNewConstMetric(descCacheInserts, prometheus.CounterValue, float64(c.cache[2]))
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(c.refused))
	c.mu.Unlock()

	for _, z := range src.Zones {
		if z.Signer == nil {
			continue
		}
		if z.Expiry != 0 {
			ch <- prometheus.MustNewConstMetric(descExpiry, prometheus.GaugeValue, float64(int64(z.Expiry)-now), z.Signer.Zone)
		}
		if !z.NextKeyEvent.IsZero() {
			ch <- prometheus.MustNewConstMetric(descNextKeyEvent, prometheus.GaugeValue, float64(z.NextKeyEvent.UnixMilli())/1000, z.Signer.Zone)
		}
	}
}

// count adds to the totals what each signer, cache and budget made since
// the last scrape, those src no longer holds included (read a last time,
// then forgotten). Zones no longer served lose their series.
func (c *Collector) count(src Source) {
	signers := map[*Signer]bool{}
	caches := map[*Cache]bool{}
	budgets := map[*Budget]bool{}
	for _, z := range src.Zones {
		if s := z.Signer; s != nil {
			signers[s] = true
			if s.Cache != nil {
				caches[s.Cache] = true
			}
			if s.Budget != nil {
				budgets[s.Budget] = true
			}
		}
	}
	for _, k := range src.Caches {
		if k != nil {
			caches[k] = true
		}
	}
	for _, b := range src.Budgets {
		if b != nil {
			budgets[b] = true
		}
	}

	served := map[string]bool{}
	for s := range signers {
		served[s.Zone] = true
		if c.signers[s] == nil {
			c.signers[s] = new([numReasons]uint64)
		}
	}
	for s, last := range c.signers {
		tot := c.made[s.Zone]
		if tot == nil {
			tot = new([numReasons]uint64)
			c.made[s.Zone] = tot
		}
		for r := range numReasons {
			n := s.Made(r)
			tot[r] += n - last[r]
			last[r] = n
		}
		if !signers[s] {
			delete(c.signers, s)
		}
	}
	for z := range c.made {
		if !served[z] {
			delete(c.made, z)
		}
	}

	for k := range caches {
		if _, ok := c.caches[k]; !ok {
			c.caches[k] = [3]uint64{}
		}
	}
	for k, last := range c.caches {
		var cur [3]uint64
		cur[0], cur[1], cur[2] = k.Stats()
		for i := range cur {
			c.cache[i] += cur[i] - last[i]
		}
		if caches[k] {
			c.caches[k] = cur
		} else {
			delete(c.caches, k)
		}
	}

	for b := range budgets {
		if _, ok := c.budgets[b]; !ok {
			c.budgets[b] = 0
		}
	}
	for b, last := range c.budgets {
		cur := b.Refused()
		c.refused += cur - last
		if budgets[b] {
			c.budgets[b] = cur
		} else {
			delete(c.budgets, b)
		}
	}
}
