package policy

import (
	"fmt"
	"math/bits"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Live is the state of a Table while it is served: the health of its
// pools and addresses (and the scopes and group resolutions that follow
// from it), the latency rankings, and when each pool was last answered.
// The Table it is for never changes; a Live changes under the query path
// without locks (atomic pointers and counters). Its time is the caller's:
// Decide is given the server's coarse clock, so a simulation can give it
// its own and no goroutine of this package keeps one.
type Live struct {
	t      *Table
	hooks  Hooks
	health atomic.Pointer[Health]
	lat    atomic.Pointer[LatencyState]
	// latFam is the table's latency families, found at the first
	// SetLatency (latency.go); only SetLatency, serialised, touches it.
	latFam *latFamilies
	// lastAnswer[record][pool] is when the pool was last answered (Unix s).
	lastAnswer [][]atomic.Int64
	// seed is the widenings of the state this one follows, for its first
	// SetHealth (widen.go); nil after it.
	seed atomic.Pointer[map[scopeKey]*Scopes]
	// onHealth is called with the sets a new health state makes
	// reachable, before it is published (OnHealth).
	onHealth atomic.Pointer[func(r *Record, qtype uint16, rrs []dns.RR)]
	// cap is the capacity feedback's counters and controller, shed what
	// it sheds now (capacity.go).
	cap  capacity
	shed atomic.Pointer[shedState]
}

// Hooks are called from the query path for each steered answer; they must
// not block or allocate. They are given when the live state is created.
type Hooks struct {
	// Answered is called once for each steered answer with its decision
	// (by value: a pointer would make every decision escape) and the
	// family of the ECS subnet the query was steered by, 4 or 6, or 0
	// when it had none (no scope is returned). d.Pools has a bit for each
	// pool named in the answer; d.Rule is -1 when no rule decided. One
	// call, not one per pool and one for the decision: the metrics and
	// the traffic recorder each read their counter table once an answer.
	Answered func(record int, d Decision, ecs int)
}

// LiveOptions are what a live state starts from.
type LiveOptions struct {
	// Hooks are called for each steered answer.
	Hooks Hooks
	// Previous is the live state of the table the new one was built from
	// (BuildWith's prev): when both were compiled against the same geo
	// databases, its widenings seed the new state's.
	Previous *Live
	// Start is when every pool counts as last answered (unknown history:
	// as if just answered); zero means now.
	Start time.Time
}

// NewLive returns the live state of t: no health yet (every enabled pool
// usable), no latency state (latency actions take their fallback order).
func NewLive(t *Table, o LiveOptions) *Live {
	l := &Live{t: t, hooks: o.Hooks}
	l.cap.init(t)
	if st := l.cap.carry(t, o.Previous); st != nil {
		l.shed.Store(st)
	}
	if p := o.Previous; p != nil && p.t.geo == t.geo {
		if h := p.health.Load(); h != nil && h.cache != nil {
			// Partitions taken from the previous table keep their widenings too.
			l.seed.Store(&h.cache)
		}
	}
	start := o.Start
	if start.IsZero() {
		start = time.Now()
	}
	now := start.Unix()
	l.lastAnswer = make([][]atomic.Int64, len(t.Records))
	n := 0
	for _, r := range t.Records {
		n += len(r.Pools)
	}
	all := make([]atomic.Int64, n) // one allocation for every record's pools
	for i, r := range t.Records {
		l.lastAnswer[i], all = all[:len(r.Pools):len(r.Pools)], all[len(r.Pools):]
		for j := range l.lastAnswer[i] {
			l.lastAnswer[i][j].Store(now)
		}
	}
	return l
}

// Table returns the compiled table this is the state of.
func (l *Live) Table() *Table { return l.t }

// Hooks returns the hooks the state was created with (a rebuild against
// new databases gives them to the next one).
func (l *Live) Hooks() Hooks { return l.hooks }

// Decide is the one step every steered answer takes, on the query path
// (fast and general) and in explain and simulation alike: it reads the
// usable pools, widened scopes and latency state of r once, decides q,
// and, when the decision answers (neither SERVFAIL nor NODATA), marks its
// pools answered at now (Unix seconds) and calls the hooks. q's Up,
// Scopes and Latency are set from the state; the rest (client, resolver,
// qtype) is the caller's. The result also carries the addresses the
// answer may use and its TTL. It does not allocate or lock.
func (l *Live) Decide(r *Record, q *Query, now int64) Steered {
	var s Steered
	l.DecideInto(&s, r, q, now)
	return s
}

// DecideInto is Decide writing its result into s (the fast path's, in
// place: an 80-byte result returned by value was copied on every steered
// answer).
func (l *Live) DecideInto(s *Steered, r *Record, q *Query, now int64) {
	h := l.health.Load()
	q.Up, q.Scopes = h.usable(r, q.Qtype)
	q.Latency = nil
	q.capc, q.shed = l.shedFor(r)
	if q.Uncounted {
		q.capc = nil
	}
	if r.HasLatency() {
		q.Latency = l.lat.Load()
	}
	var rs *[2]resolution
	if h != nil && r.Index < len(h.res) {
		rs = h.res[r.Index]
	}
	r.decideWithInto(&s.Decision, q, rs)
	s.Addrs, s.TTL = nil, r.TTL
	if s.ServFail || s.NoData {
		return
	}
	l.answered(r, &s.Decision, now, ecsFamily(q))
	if h != nil && r.Index < len(h.addrs) {
		if !s.AllDown {
			s.Addrs = h.addrs[r.Index]
		}
		if r.DegradedTTL != 0 && h.degraded[r.Index] {
			s.TTL = r.DegradedTTL
		}
	}
}

// Steered is a decision with what answering it takes from the live state.
type Steered struct {
	Decision
	// Addrs is, per pool, the addresses the answer may use: the usable
	// ones, or nil (all) when there is no health state or the decision
	// failed open because nothing was usable (as AddrMasks).
	Addrs []uint64
	// TTL is the answer's TTL (as Live.TTL).
	TTL uint32
}

// Health is the usable state of every record's pools and addresses, as
// health checks last reported it. The query path reads it through an
// atomic pointer; Live.SetHealth swaps in a new one.
type Health struct {
	pools    [][2]uint64      // per record: usable pools for A (0) and AAAA (1)
	addrs    [][]uint64       // per record, per pool: usable addresses (V4 then V6)
	degraded []bool           // per record: a pool is down or drained
	ovr      [][]PoolOverride // per record, per pool: the operator's override
	res      []*[2]resolution // per record: its groups' resolutions (A, AAAA), nil without groups
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
func (l *Live) SetHealth(usable func(addr netip.Addr, check string) bool, pool func(record, pool string) PoolOverride) {
	t := l.t
	h := &Health{pools: make([][2]uint64, len(t.Records)), addrs: make([][]uint64, len(t.Records)),
		degraded: make([]bool, len(t.Records)), ovr: make([][]PoolOverride, len(t.Records)),
		res: make([]*[2]resolution, len(t.Records))}
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
		h.res[i] = r.resolutions(r.Enabled&h.pools[i][0], r.Enabled&h.pools[i][1])
	}
	prev := l.health.Load()
	l.setScopes(h, prev)
	if fn := l.onHealth.Load(); fn != nil {
		l.reachable(h, prev, *fn)
	}
	l.health.Store(h)
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
func (l *Live) PoolState(r *Record, p *Pool) (state, reason string, override bool) {
	bit := uint64(1) << p.Index
	if r.Enabled&bit == 0 {
		return "disabled", "enabled: false", false
	}
	h := l.health.Load()
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
	if (l.Up(r, dns.TypeA)|l.Up(r, dns.TypeAAAA))&bit == 0 {
		if p.Check == "" {
			return "down", "none of its addresses is usable (target overrides)", false
		}
		return "down", fmt.Sprintf("fewer than %d of its addresses pass %s", p.MinUp, p.Check), false
	}
	return "up", "", false
}

// Up returns the pools of r usable now for qtype: enabled, and healthy.
func (l *Live) Up(r *Record, qtype uint16) uint64 {
	h := l.health.Load()
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
func (l *Live) TTL(r *Record) uint32 {
	if r.DegradedTTL == 0 {
		return r.TTL
	}
	if h := l.health.Load(); h != nil && r.Index < len(h.degraded) && h.degraded[r.Index] {
		return r.DegradedTTL
	}
	return r.TTL
}

// AddrMasks returns, per pool of r, the addresses a decision may answer
// with: the usable ones, or nil (all) when there is no health state or the
// decision failed open because nothing was usable.
func (l *Live) AddrMasks(r *Record, d *Decision) []uint64 {
	h := l.health.Load()
	if h == nil || d.AllDown || r.Index >= len(h.addrs) {
		return nil
	}
	return h.addrs[r.Index]
}

// answered notes that the pools of d were named in an answer of r at now
// (Unix seconds; for drain: a drained pool is safe to take down once the
// record's TTL has passed since then) and calls the hooks. It does not
// allocate or lock.
func (l *Live) answered(r *Record, d *Decision, now int64, ecs int) {
	if r.Index >= len(l.lastAnswer) {
		return
	}
	mask := d.Pools
	if l.hooks.Answered != nil {
		l.hooks.Answered(r.Index, *d, ecs)
	}
	last := l.lastAnswer[r.Index]
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if i < len(last) && last[i].Load() != now {
			last[i].Store(now)
		}
	}
}

// ecsFamily is the family of q's ECS subnet, 0 without one.
func ecsFamily(q *Query) int {
	switch {
	case q.NoECS || !q.Client.IsValid():
		return 0
	case q.Client.Is4():
		return 4
	}
	return 6
}

// LastAnswered returns when pool of r was last named in an answer (to the
// second of the clock Decide was given), or when the state was created if
// it has not been since.
func (l *Live) LastAnswered(r *Record, pool int) time.Time {
	if r.Index >= len(l.lastAnswer) || pool >= len(l.lastAnswer[r.Index]) {
		return time.Time{}
	}
	return time.Unix(l.lastAnswer[r.Index][pool].Load(), 0)
}

// DrainSafe reports whether, at now, no resolver can still hold an answer
// naming pool of r: the record's TTL has passed since the last one (plus
// the clock's granularity).
func (l *Live) DrainSafe(r *Record, pool int, now time.Time) bool {
	last := l.LastAnswered(r, pool)
	return now.Sub(last) > time.Duration(r.TTL)*time.Second+time.Second
}
