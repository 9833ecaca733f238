package simulate

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/steer-dns/steer/internal/policy"
)

// ecsCalculator fills the calculator cases of res.Cost (one row per
// phase and site, in the order reduce wrote them): the analytic cost of
// each site's users without ECS, with ECS and steer's scopes, and with
// ECS cached per source prefix. Each ECS case decides each client
// prefix once per phase to learn its scope (scopes do not depend on a
// split's draw); nothing here depends on the run.
func (p *plan) ecsCalculator(res *Result) {
	m := p.m
	probe := rand.New(rand.NewPCG(m.Seed, 0xc057))
	bySite := make([][]int, len(m.Sites))
	for ri := range m.Resolvers {
		s := m.Resolvers[ri].Site
		bySite[s] = append(bySite[s], ri)
	}
	row := 0
	for pi := range p.phases {
		pp := &p.phases[pi]
		span := min(pp.end, p.dur) - pp.start
		if span <= 0 {
			continue
		}
		for s := range m.Sites {
			if row >= len(res.Cost) {
				return
			}
			c := &res.Cost[row]
			row++
			site := &m.Sites[s]
			c.ECS = site.ecsWords()
			life := p.life(pp.ph, site)
			v4, v6 := site.SourceV4, site.SourceV6
			if !site.ECS || v4 <= 0 {
				v4, v6 = 24, 56
			}
			for _, ri := range bySite[s] {
				r := &m.Resolvers[ri]
				pr := &p.res[ri]
				caches := float64(r.Caches)
				var total float64
				scoped := map[netip.Prefix]float64{}
				perPrefix := map[netip.Prefix]float64{}
				for i, sn := range r.Subnets {
					g := int(pr.group[i])
					rate := pr.rate[i] * p.meanMult(g, pp.start, min(pp.end, p.dur))
					total += rate
					sp := m.Subnets[sn].Prefix
					src := v4
					if sp.Addr().Is6() && !sp.Addr().Is4In6() {
						src = v6
					}
					src = min(src, sp.Bits())
					cp, _ := sp.Addr().Prefix(src)
					perPrefix[cp] += rate
					q := policy.Query{Qtype: m.Qtype, Client: cp.Addr(), ClientBits: src, Resolver: r.Addr, Rand: probe}
					d := pp.ph.Live.Decide(pp.ph.Record, &q, p.start+int64(pp.start))
					scope := d.Scope
					if cp.Addr().Is4In6() {
						scope -= 96
					}
					key, _ := cp.Addr().Prefix(max(min(scope, src), 0))
					scoped[key] += rate
				}
				c.NoECS.add(total, life, caches)
				for _, rate := range scoped {
					c.Scoped.add(rate, life, caches)
				}
				for _, rate := range perPrefix {
					c.PerPrefix.add(rate, life, caches)
				}
			}
		}
	}
}

// add counts caches cache entries of rate λ (per cache) and life L.
func (c *CostCase) add(lambda, life, caches float64) {
	if lambda <= 0 {
		return
	}
	x := lambda * life
	c.AuthQPS += caches * lambda / (1 + x)
	c.Entries += caches * x / (1 + x)
}

// life is how long a site's caches keep the phase's answer, in seconds:
// the record's TTL in the phase (the degraded one while a pool is down or
// drained) within the site's clamps, at least a second (as the
// engine's entries).
func (p *plan) life(ph *Phase, site *Site) float64 {
	ttl := time.Duration(ph.Live.TTL(ph.Record)) * time.Second
	if site.MinTTL > 0 && ttl < site.MinTTL {
		ttl = site.MinTTL
	}
	if site.MaxTTL > 0 && ttl > site.MaxTTL {
		ttl = site.MaxTTL
	}
	return max(ttl.Seconds(), 1)
}

// ecsWords says how a site sends ECS.
func (s *Site) ecsWords() string {
	if !s.ECS || s.SourceV4 <= 0 {
		return "none"
	}
	how := "honours scope"
	if !s.HonorsScope {
		how = "per source prefix"
	}
	return fmt.Sprintf("/%d /%d, %s", s.SourceV4, s.SourceV6, how)
}
