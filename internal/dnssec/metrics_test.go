package dnssec

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// TestCollector: signatures by zone and reason, cache and budget counters
// and each zone's earliest expiry, counted on across a reload that
// replaces the signer, the cache and the budget (counters never go back),
// and gone with the zone.
func TestCollector(t *testing.T) {
	k := algKeys(t)["ed25519"]
	newSigner := func() *Signer {
		s, err := NewSigner("example.com.", []*Key{k}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Cache, s.Budget = NewCache(16), NewBudget(10) // a burst of one signature
		return s
	}
	s1 := newSigner()
	now := time.Unix(1_800_000_000, 0)
	var src Source
	src.Zones = []ZoneState{{Signer: s1, Expiry: uint32(now.Unix()) + 3600}}
	extra := NewCache(4)
	src.Caches = []*Cache{extra, s1.Cache} // s1's cache counted once
	c := NewCollector(func() Source { return src })
	c.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	a := mustRR(t, "www.example.com. 60 IN A 192.0.2.1")
	sign := func(s *Signer, why Reason) {
		if _, err := s.Sign([]dns.RR{a}, now, why); err != nil {
			t.Fatal(err)
		}
	}
	sign(s1, ReasonLoad)
	sign(s1, ReasonLoad)
	sign(s1, ReasonDenial)
	key := CacheKey{Name: "x.example.com.", Type: dns.TypeNSEC, Sum: 1}
	s1.Cache.Get(key, 1)                         // miss
	s1.Cache.Put(&Entry{Key: key, Refresh: 100}) // insert
	s1.Cache.Get(key, 1)                         // hit
	extra.Get(key, 1)                            // miss
	s1.Budget.Take(now.UnixNano())               // allowed
	s1.Budget.Take(now.UnixNano())               // refused

	want := func(step string, w map[string]float64) {
		t.Helper()
		got := gather(t, reg)
		for k, v := range w {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", step, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := w[k]; !ok {
				t.Errorf("%s: unexpected series %s = %v", step, k, got[k])
			}
		}
	}
	series := func(load, denial, online, hits, misses, inserts, refused float64, expiry float64, served bool) map[string]float64 {
		m := map[string]float64{
			"steer_dnssec_cache_lookups_total{result=hit}":  hits,
			"steer_dnssec_cache_lookups_total{result=miss}": misses,
			"steer_dnssec_cache_inserts_total{}":            inserts,
			"steer_dnssec_budget_refused_total{}":           refused,
		}
		if served {
			m["steer_dnssec_signature_expires_in_seconds{zone=example.com.}"] = expiry
			for r, n := range map[string]float64{"load": load, "denial": denial, "online": online, "renew": 0, "steered": 0} {
				m["steer_dnssec_signatures_total{reason="+r+",zone=example.com.}"] = n
			}
		}
		return m
	}
	want("first scrape", series(2, 1, 0, 1, 2, 1, 1, 3600, true))

	// A reload: a new signer, cache and budget. The old signer makes one
	// more signature before the next scrape; it is counted, once.
	s2 := newSigner()
	sign(s1, ReasonOnline)
	src = Source{Zones: []ZoneState{{Signer: s2, Expiry: uint32(now.Unix()) + 60}}}
	sign(s2, ReasonLoad)
	s2.Cache.Get(key, 1)
	s1.Cache.Get(key, 1) // the old cache: a last hit, read once more
	want("after the reload", series(3, 1, 1, 2, 3, 1, 1, 60, true))
	sign(s1, ReasonOnline) // retired and forgotten: no longer counted
	sign(s2, ReasonDenial)
	want("later", series(3, 2, 1, 2, 3, 1, 1, 60, true))

	// A key plan with an event scheduled: its time, in Unix seconds.
	src.Zones[0].NextKeyEvent = now.Add(90*time.Second + 500*time.Millisecond)
	w := series(3, 2, 1, 2, 3, 1, 1, 60, true)
	w["steer_dnssec_next_key_event_timestamp_seconds{zone=example.com.}"] = float64(now.Unix()) + 90.5
	want("a key event scheduled", w)
	src.Zones[0].NextKeyEvent = time.Time{}

	// The zone is no longer served: its series go.
	src = Source{}
	want("zone removed", series(0, 0, 0, 2, 3, 1, 1, 0, false))
}

// gather returns the steer_dnssec_ series of reg as name{label=value,...}
// (labels sorted) to value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue()
			if m.GetGauge() != nil {
				v = m.GetGauge().GetValue()
			}
			out[f.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}
