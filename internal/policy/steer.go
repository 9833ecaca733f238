package policy

import (
	"net/netip"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/zone"
)

// Steerer answers steered names for one query: it implements zone.Steering
// for the client in Query. The server and explain both answer through it.
type Steerer struct {
	Table *Table
	Query Query
	// Trace, when non-nil, receives every decision made (explain).
	Trace func(r *Record, q *Query, d *Decision)
}

// Steer implements zone.Steering.
func (s *Steerer) Steer(a *zone.Answer, name string, qtype uint16) (string, bool) {
	r := s.Table.Get(name)
	if r == nil {
		return "", false
	}
	q := s.Query
	q.Qtype = qtype
	q.Up = s.Table.Up(r, qtype)
	d := r.Decide(&q)
	if s.Trace != nil {
		s.Trace(r, &q, &d)
	}
	switch {
	case d.ServFail:
		a.Rcode = dns.RcodeServerFailure
		a.Scope = max(a.Scope, d.Scope)
		return "", true
	case d.NoData:
		if d.Rule >= 0 {
			a.Scope = max(a.Scope, d.Scope)
		}
		return "", false
	}
	a.Scope = max(a.Scope, d.Scope)
	start := len(a.Answer)
	a.Answer = r.AppendAnswer(a.Answer, &d, qtype, s.Table.AddrMasks(r, &d))
	if r.Type == dns.TypeCNAME && len(a.Answer) > start {
		if c, ok := a.Answer[start].(*dns.CNAME); ok && qtype != dns.TypeCNAME {
			return dns.CanonicalName(c.Target), true
		}
	}
	return "", true
}

// Health is the usable state of every record's pools and addresses, as
// health checks last reported it. The query path reads it through an
// atomic pointer; SetHealth swaps in a new one.
type Health struct {
	pools [][2]uint64 // per record: usable pools for A (0) and AAAA (1)
	addrs [][]uint64  // per record, per pool: usable addresses (V4 then V6)
}

// SetHealth recomputes the usable pools and addresses of every record from
// usable (whether one address passes one check) and swaps them in. A pool
// is up when at least MinUp of its addresses are usable, and answers for a
// family only with usable addresses of that family.
func (t *Table) SetHealth(usable func(addr netip.Addr, check string) bool) {
	h := &Health{pools: make([][2]uint64, len(t.Records)), addrs: make([][]uint64, len(t.Records))}
	for i, r := range t.Records {
		h.addrs[i] = make([]uint64, len(r.Pools))
		for _, p := range r.Pools {
			bit := uint64(1) << p.Index
			if p.Check == "" {
				h.addrs[i][p.Index] = ^uint64(0)
				if r.Type == dns.TypeCNAME || len(p.V4) > 0 {
					h.pools[i][0] |= bit
				}
				if r.Type == dns.TypeCNAME || len(p.V6) > 0 {
					h.pools[i][1] |= bit
				}
				continue
			}
			var mask uint64
			n, v4, v6 := 0, false, false
			for j, a := range p.V4 {
				if usable(a, p.Check) {
					mask |= 1 << j
					n, v4 = n+1, true
				}
			}
			for j, a := range p.V6 {
				if usable(a, p.Check) {
					mask |= 1 << (len(p.V4) + j)
					n, v6 = n+1, true
				}
			}
			h.addrs[i][p.Index] = mask
			if n >= p.MinUp {
				if v4 {
					h.pools[i][0] |= bit
				}
				if v6 {
					h.pools[i][1] |= bit
				}
			}
		}
	}
	t.health.Store(h)
}

// Up returns the pools of r usable now for qtype: enabled, and healthy.
func (t *Table) Up(r *Record, qtype uint16) uint64 {
	h := t.health.Load()
	if h == nil || r.Index >= len(h.pools) {
		return r.Enabled
	}
	fam := 0
	if qtype == dns.TypeAAAA {
		fam = 1
	}
	if r.Type == dns.TypeCNAME {
		return r.Enabled & (h.pools[r.Index][0] | h.pools[r.Index][1])
	}
	return r.Enabled & h.pools[r.Index][fam]
}

// AddrMasks returns, per pool of r, the addresses a decision may answer
// with: the usable ones, or nil (all) when there is no health state or the
// decision failed open because nothing was usable.
func (t *Table) AddrMasks(r *Record, d *Decision) []uint64 {
	h := t.health.Load()
	if h == nil || d.AllDown || r.Index >= len(h.addrs) {
		return nil
	}
	return h.addrs[r.Index]
}
