package policy

import (
	"fmt"
	"math/bits"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

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
	q.Up, q.Scopes = s.Table.Usable(r, qtype)
	if r.HasLatency() {
		q.Latency = s.Table.Latency()
	}
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
	s.Table.Answered(r, &d)
	start := len(a.Answer)
	a.Answer = r.AppendAnswer(a.Answer, &d, qtype, s.Table.AddrMasks(r, &d))
	if ttl := s.Table.TTL(r); ttl != r.TTL {
		for i := start; i < len(a.Answer); i++ {
			rr := dns.Copy(a.Answer[i])
			rr.Header().Ttl = ttl
			a.Answer[i] = rr
		}
	}
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
	pools    [][2]uint64      // per record: usable pools for A (0) and AAAA (1)
	addrs    [][]uint64       // per record, per pool: usable addresses (V4 then V6)
	degraded []bool           // per record: a pool is down or drained
	ovr      [][]PoolOverride // per record, per pool: the operator's override
	// scopes, per record and family (A, AAAA), are the scopes widened
	// by this state (widen.go); nil when no record's are.
	scopes [][2]*Scopes
	cache  map[scopeKey]*Scopes // every widening computed or taken, nil ones too
	widen  WidenStats
}

// SetHealth recomputes the usable pools and addresses of every record from
// usable (whether one address passes its pool's check, "" when the pool has
// none) and swaps them in. A pool
// is up when at least MinUp of its addresses are usable, and answers for a
// family only with usable addresses of that family.
//
// pool, when not nil, gives an operator's override for a whole pool: it
// returns PoolAuto to follow the checks, PoolUp to answer with all its
// addresses whatever the checks say, or PoolDown (down or drained) to give
// it no answers.
func (t *Table) SetHealth(usable func(addr netip.Addr, check string) bool, pool func(record, pool string) PoolOverride) {
	h := &Health{pools: make([][2]uint64, len(t.Records)), addrs: make([][]uint64, len(t.Records)),
		degraded: make([]bool, len(t.Records)), ovr: make([][]PoolOverride, len(t.Records))}
	for i, r := range t.Records {
		h.addrs[i] = make([]uint64, len(r.Pools))
		h.ovr[i] = make([]PoolOverride, len(r.Pools))
		for _, p := range r.Pools {
			bit := uint64(1) << p.Index
			ov := PoolAuto
			if pool != nil {
				ov = pool(r.Name, p.Name)
			}
			h.ovr[i][p.Index] = ov
			if ov == PoolDown || ov == PoolDrain {
				h.degraded[i] = true
				continue // no answers, no addresses
			}
			// Forced up, names (never checked), and pools too large for a
			// mask (check refuses health_check on them) answer whole.
			if ov == PoolUp || r.Type == dns.TypeCNAME || len(p.V4)+len(p.V6) > 64 {
				h.addrs[i][p.Index] = ^uint64(0)
				if r.Type == dns.TypeCNAME || len(p.V4) > 0 {
					h.pools[i][0] |= bit
				}
				if r.Type == dns.TypeCNAME || len(p.V6) > 0 {
					h.pools[i][1] |= bit
				}
				continue
			}
			// Every address is asked, checked or not: an operator's
			// override of a target applies to unchecked addresses too.
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
			if n < p.MinUp {
				h.degraded[i] = true
			}
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
	for i, r := range t.Records {
		r.setResolutions(r.Enabled&h.pools[i][0], r.Enabled&h.pools[i][1])
	}
	t.setScopes(h, t.health.Load())
	t.health.Store(h)
}

// PoolOverride is an operator's state for a whole pool.
type PoolOverride uint8

// The pool overrides.
const (
	PoolAuto  PoolOverride = iota // follow the health checks
	PoolUp                        // answer with every address
	PoolDown                      // no answers: a known failure
	PoolDrain                     // no answers: a planned removal
)

// PoolState classifies pool p of r now, the one place status, metrics,
// explain and the transition log read it from: "disabled" (enabled:
// false), "drain", "down" or "up" as set by the operator ("up" then
// answers with every address), or "down"/"up" as the checks say. reason
// says why in words; override is true when the operator decided.
func (t *Table) PoolState(r *Record, p *Pool) (state, reason string, override bool) {
	bit := uint64(1) << p.Index
	if r.Enabled&bit == 0 {
		return "disabled", "enabled: false", false
	}
	h := t.health.Load()
	if h != nil && r.Index < len(h.ovr) && p.Index < len(h.ovr[r.Index]) {
		switch h.ovr[r.Index][p.Index] {
		case PoolUp:
			return "up", "set up by the operator", true
		case PoolDown:
			return "down", "set down by the operator", true
		case PoolDrain:
			return "drain", "drained by the operator", true
		}
	}
	if (t.Up(r, dns.TypeA)|t.Up(r, dns.TypeAAAA))&bit == 0 {
		if p.Check == "" {
			return "down", "none of its addresses is usable (target overrides)", false
		}
		return "down", fmt.Sprintf("fewer than %d of its addresses pass %s", p.MinUp, p.Check), false
	}
	return "up", "", false
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

// TTL returns the TTL answers of r carry now: ttl_while_degraded while a
// pool is down or drained, the record's TTL otherwise.
func (t *Table) TTL(r *Record) uint32 {
	if r.DegradedTTL == 0 {
		return r.TTL
	}
	if h := t.health.Load(); h != nil && r.Index < len(h.degraded) && h.degraded[r.Index] {
		return r.DegradedTTL
	}
	return r.TTL
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

// coarseNow is the time in Unix seconds, updated four times a second, so
// the query path can note when a pool was last answered without reading
// the clock.
var (
	coarseNow   atomic.Int64
	clockOnce   sync.Once
	clockPeriod = 250 * time.Millisecond
)

func startClock() {
	clockOnce.Do(func() {
		coarseNow.Store(time.Now().Unix())
		go func() {
			for range time.Tick(clockPeriod) {
				coarseNow.Store(time.Now().Unix())
			}
		}()
	})
}

// Answered notes that the pools in mask of r were just named in an answer
// (for drain: a drained pool is safe to take down once the record's TTL has
// passed since then). It does not allocate or lock.
func (t *Table) Answered(r *Record, d *Decision) {
	if r.Index >= len(t.lastAnswer) {
		return
	}
	mask := d.Pools
	if t.Observe != nil {
		for m := mask; m != 0; m &= m - 1 {
			t.Observe(r.Index, bits.TrailingZeros64(m), d.AllDown)
		}
	}
	if t.Decided != nil && d.Rule >= 0 {
		t.Decided(r.Index, d.Rule)
	}
	now := coarseNow.Load()
	last := t.lastAnswer[r.Index]
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if i < len(last) && last[i].Load() != now {
			last[i].Store(now)
		}
	}
}

// LastAnswered returns when pool of r was last named in an answer (at most
// a quarter second off), or when the table was built if it has not been
// since.
func (t *Table) LastAnswered(r *Record, pool int) time.Time {
	if r.Index >= len(t.lastAnswer) || pool >= len(t.lastAnswer[r.Index]) {
		return time.Time{}
	}
	return time.Unix(t.lastAnswer[r.Index][pool].Load(), 0)
}

// DrainSafe reports whether no resolver can still hold an answer naming
// pool of r: the record's TTL has passed since the last one (plus the
// clock's granularity).
func (t *Table) DrainSafe(r *Record, pool int) bool {
	last := t.LastAnswered(r, pool)
	return time.Since(last) > time.Duration(r.TTL)*time.Second+time.Second
}
