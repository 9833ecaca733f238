package policy

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/netip"

	"github.com/miekg/dns"
)

// Query is the input of a decision.
type Query struct {
	// Client is the address steering looks at: the ECS subnet's address
	// (already truncated to its source prefix) or the resolver's address.
	Client netip.Addr
	// ClientBits is the client's prefix length: the ECS source prefix, or
	// the full address length when there was no ECS.
	ClientBits int
	// Resolver is the packet's source address.
	Resolver netip.Addr
	// NoECS: the query had no usable ECS subnet (none, ECS off, or a /0
	// source), so Client is the resolver's address. With
	// ecs.unknown_client: node such a query may be steered by the node's
	// location instead (node.go).
	NoECS bool
	// Qtype is A, AAAA or, for CNAME records, anything.
	Qtype uint16
	// Up has a bit set for each usable pool (enabled and healthy).
	Up uint64
	// Latency is the live latency state (Live.Latency), for by:
	// latency actions; nil means they take their fallback order.
	Latency *LatencyState
	// res is the resolution of the record's groups for Up (Decide sets
	// it from the live health, Live.Decide, when it matches).
	res *resolution
	// Scopes are the record's scopes widened by the current health
	// (Live.Usable, widen.go); nil means the partition's own.
	Scopes *Scopes
	// Stable asks for the same decision every time for the same input:
	// a non-sticky split takes its heaviest usable member (ties by
	// name) instead of drawing one. A transfer's exported fallback is
	// decided so, so that its serial moves only when health does.
	Stable bool
	// Rand, when set, draws a non-sticky split's member instead of the
	// process's random source: a simulation gives a seeded one so that
	// a run can be repeated (internal/simulate).
	Rand *rand.Rand
	// Uncounted keeps the decision out of capacity feedback's answer
	// counters: a simulation decides a network once for many modelled
	// queries and counts them itself (Live.CountAnswers).
	Uncounted bool
	// capc counts the query at its leaf, shed drops pools for the
	// networks capacity feedback shed (Live.Decide sets both, capacity.go).
	capc *recCap
	shed *recShed
}

// draw returns a number in [0, n) from q.Rand, or from the process's
// source when q has none: every random split draws here.
func (q *Query) draw(n uint64) uint64 {
	if q.Rand != nil {
		return q.Rand.Uint64N(n)
	}
	return rand.Uint64N(n)
}

// Decision is the outcome of a query.
type Decision struct {
	// Pools has a bit set for each pool whose records answer.
	Pools uint64
	// Limit caps the number of addresses (multivalue); 0 means all.
	Limit int
	// Rule is the index of the deciding rule; -1 when none (NoData).
	Rule int
	// Scope is the widest prefix length around the client over which the
	// decision is the same, for the ECS SCOPE PREFIX-LENGTH.
	Scope int
	// WidenedFrom, when not 0, is the partition's scope that health
	// widened Scope from: every network in the wider prefix gets the
	// same answer while the pools stay as they are (widen.go).
	WidenedFrom int
	// AllDown is set when no pool was usable and WhenAllDown decided.
	AllDown bool
	// NoData: the record has nothing of this type (or when_all_down: nodata).
	NoData bool
	// ServFail: when_all_down: servfail.
	ServFail bool
	// Input says what the decision steered by: the client (ECS subnet
	// or resolver address) or, for an unknown client, the node.
	Input Input
}

// Families reports whether the record has pools with IPv4 and with IPv6
// addresses (an A-type record answers A and AAAA with them); both false
// for a CNAME record.
func (r *Record) Families() (v4, v6 bool) {
	if r.Type == dns.TypeCNAME {
		return false, false
	}
	return r.hasV4 != 0, r.hasV6 != 0
}

// family returns the pools that can answer qtype.
func (r *Record) family(qtype uint16) uint64 {
	switch {
	case r.Type == dns.TypeCNAME:
		return r.allPools
	case qtype == dns.TypeA:
		return r.hasV4
	case qtype == dns.TypeAAAA:
		return r.hasV6
	}
	return 0
}

// Decide chooses the pools that answer q. It reads only immutable data and
// does not allocate. It is the decision alone, for a Query whose Up,
// Scopes and Latency the caller set; Live.Decide is the step the server
// takes, which sets them from the live state and marks the answer.
func (r *Record) Decide(q *Query) Decision { return r.decideWith(q, nil) }

// decideWith is Decide with the resolutions of the record's groups for
// the current health (nil: none computed), a short-cut for Up.
func (r *Record) decideWith(q *Query, rs *[2]resolution) Decision {
	var d Decision
	r.decideWithInto(&d, q, rs)
	return d
}

// decideWithInto is decideWith writing into d (Live.DecideInto's, in
// place).
func (r *Record) decideWithInto(d *Decision, q *Query, rs *[2]resolution) {
	r.decideInto(d, q, rs)
	if d.Input != InputClient {
		// Steered by the node: no client bit took part.
		d.Scope, d.WidenedFrom = 0, 0
		return
	}
	if d.Rule >= 0 && q.Client.Is4In6() {
		// An IPv4-mapped client was steered by its IPv4 address: the
		// scope is in IPv4 bits, and ::ffff:0:0/96 comes before them.
		d.Scope += 96
		if d.WidenedFrom != 0 {
			d.WidenedFrom += 96
		}
	}
}

// decideInto decides for q into d, before decideWithInto's scope
// adjustments.
func (r *Record) decideInto(d *Decision, q *Query, rs *[2]resolution) {
	fam := r.family(q.Qtype)
	if fam == 0 {
		// Nothing of this type anywhere: the answer does not depend on
		// the client.
		*d = Decision{Rule: -1, NoData: true}
		return
	}
	t := &r.v4
	addr := q.Client.Unmap()
	if addr.Is6() {
		t = &r.v6
	}
	oi, pos, depth := t.lookup(addr)
	if q.capc != nil {
		q.capc.count(t, t == &r.v6, pos)
	}
	leafDepth := depth
	widened := 0
	if w := q.Scopes; w != nil {
		if s, ok := w.depth(t == &r.v6, pos); ok && s != depth {
			widened, depth = depth, s
		}
	}
	o := &r.outcomes[oi]
	input := InputClient
	if r.nodeTwins && q.NoECS {
		// An unknown client: the node's location stands in for it when
		// the resolver is far from its clients or nowhere (node.go).
		ut := &r.u4
		if addr.Is6() {
			ut = &r.u6
		}
		u, _, _ := ut.lookup(addr)
		if r.node.anycast.contains(addr) {
			input = InputNodeAnycast
		} else if u&1 != 0 {
			input = InputNodeUnplaced
		}
		if input != InputClient {
			o = &r.outcomes[r.twinBase+u>>1]
		}
	}
	var drop uint64
	if s := q.shed; s != nil && input == InputClient {
		// Capacity feedback: a shed network answers without the pools
		// that shed it, over its own prefix; any other client's scope
		// covers no shed network.
		d, sc, in := s.find(addr)
		switch {
		case in:
			drop, depth, widened = d, sc, 0
		case sc >= leafDepth && depth < leafDepth:
			depth, widened = leafDepth, 0
		case sc > depth:
			depth = sc
		}
	}
	mask := o.mask&r.clientRules | r.defaultBit
	if r.resolverRules != 0 && q.Resolver.IsValid() {
		rt := &r.r4
		ra := q.Resolver.Unmap()
		if ra.Is6() {
			rt = &r.r6
		}
		mi, _, _ := rt.lookup(ra)
		mask |= r.masks[mi] & r.resolverRules
	}
	avail := q.Up & fam &^ drop
	q.res = nil
	if r.gact != nil && rs != nil {
		i := 0
		if q.Qtype == dns.TypeAAAA {
			i = 1
		}
		if rs[i].avail == avail {
			q.res = &rs[i]
		}
	}
	*d = Decision{Rule: -1, Scope: depth, WidenedFrom: widened, Input: input}
	r.decideOutcome(d, o, mask, fam, avail, q)
	if drop != 0 && d.AllDown {
		// Nothing else of its rules is usable now: the shed pool answers.
		*d = Decision{Rule: -1, Scope: depth, Input: input}
		r.decideOutcome(d, o, mask, fam, q.Up&fam, q)
	}
}

// decideOutcome decides into d (Rule -1, Scope the partition's) for a
// client whose partition outcome is o and whose matching rules are mask,
// given the family's pools fam and the usable ones avail; a sticky split
// or a latency cell may narrow d.Scope. It is the one place the rules are
// applied: the query path and the health widening (widen.go) both decide
// with it.
func (r *Record) decideOutcome(d *Decision, o *outcome, mask, fam, avail uint64, q *Query) {
	first := -1
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if first < 0 {
			first = i
		}
		rule := r.Rules[i]
		pools, limit, sticky := r.choose(&rule.Action, o, avail, q)
		if pools != 0 {
			d.Pools, d.Limit, d.Rule = pools, limit, i
			if sticky > d.Scope {
				d.Scope = sticky
			}
			return
		}
		if !r.NextRule {
			break
		}
	}
	d.AllDown = true
	d.Rule = first
	switch r.WhenAllDown {
	case AnswerAll:
		d.Pools = r.Rules[first].Action.mask & fam
		if d.Pools == 0 {
			d.Pools = fam
		}
	case FallbackPool:
		d.Pools = 1 << r.FallbackPool & fam
	case ServFail:
		d.ServFail = true
	}
	if d.Pools == 0 && !d.ServFail {
		d.NoData = true
	}
}

// choose applies action a given the usable pools avail. It returns the
// chosen pools (0 when none is usable), a multivalue limit, and the prefix
// length a sticky split hashed on (0 otherwise).
func (r *Record) choose(a *Action, o *outcome, avail uint64, q *Query) (uint64, int, int) {
	if a.nested {
		return r.chooseNested(a, o, avail, q)
	}
	switch a.Kind {
	case ActPool:
		return a.mask & avail, 0, 0
	case ActMultivalue:
		return a.mask & avail, a.Limit, 0
	case ActFailover, ActFirst:
		for _, p := range a.Pools {
			if avail&(1<<p) != 0 {
				return 1 << p, 0, 0
			}
		}
		return 0, 0, 0
	case ActProximity:
		if o.ranks != nil {
			for _, p := range o.ranks[a.Proximity] {
				if avail&(1<<p) != 0 {
					return 1 << p, 0, 0
				}
			}
		}
		for _, p := range a.Pools {
			if avail&(1<<p) != 0 {
				return 1 << p, 0, 0
			}
		}
		return 0, 0, 0
	case ActLatency:
		p, depth := r.latencyChoose(a, o, avail, q)
		return p, 0, depth
	case ActSplit:
		if a.mask&avail == 0 {
			return 0, 0, 0
		}
		if a.Sticky {
			p, bits := r.sticky(a, avail, q)
			return 1 << p, 0, bits
		}
		if q.Stable {
			return 1 << r.heaviestMember(a, avail), 0, 0
		}
		var total uint64
		for i, p := range a.Pools {
			if avail&(1<<p) != 0 {
				total += uint64(a.Weights[i])
			}
		}
		if total == 0 {
			// Only zero-weight pools are usable: the first of them, as
			// a sticky split does.
			for _, p := range a.Pools {
				if avail&(1<<p) != 0 {
					return 1 << p, 0, 0
				}
			}
			return 0, 0, 0
		}
		x := q.draw(total)
		for i, p := range a.Pools {
			if avail&(1<<p) == 0 {
				continue
			}
			if w := uint64(a.Weights[i]); x < w {
				return 1 << p, 0, 0
			} else {
				x -= w
			}
		}
	}
	return 0, 0, 0
}

// mix is splitmix64's finaliser: a fixed, well-spread 64-bit hash step, so
// every steer node and every restart maps a subnet to the same pool.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// sticky picks a split pool for the client's subnet by weighted rendezvous
// hashing: a subnet keeps its pool while weights stay put, and when a pool
// goes down only the subnets it had move. It returns the pool and the
// prefix length hashed (the client's source prefix).
func (r *Record) sticky(a *Action, avail uint64, q *Query) (int, int) {
	hi, lo, bitsLen := clientKey(q)
	best, bestScore := -1, math.Inf(-1)
	for i, p := range a.Pools {
		if avail&(1<<p) == 0 || a.Weights[i] == 0 {
			continue
		}
		if score := rendezvous(hi, lo, r.Pools[p].hash, a.Weights[i]); score > bestScore {
			best, bestScore = p, score
		}
	}
	if best < 0 { // all remaining weights are zero: first usable
		for _, p := range a.Pools {
			if avail&(1<<p) != 0 {
				return p, bitsLen
			}
		}
	}
	return best, bitsLen
}

// clientKey is the client's subnet as sticky splits hash it: its two
// 64-bit halves and its prefix length (the client's source prefix).
func clientKey(q *Query) (hi, lo uint64, bitsLen int) {
	addr := q.Client.Unmap()
	bitsLen = q.ClientBits
	if addr.Is4() && bitsLen > 32 {
		bitsLen -= 96
	}
	if bitsLen > addr.BitLen() || bitsLen < 0 {
		bitsLen = addr.BitLen()
	}
	pfx, _ := addr.Prefix(bitsLen)
	b16 := pfx.Addr().As16()
	return binary.BigEndian.Uint64(b16[:8]), binary.BigEndian.Uint64(b16[8:]), bitsLen
}

// rendezvous is a member's weighted rendezvous score for a client subnet.
func rendezvous(hi, lo, hash uint64, weight uint32) float64 {
	h := mix(mix(hi^hash) ^ lo)
	// u in (0,1]; score = -w / ln(u) (weighted rendezvous hashing).
	u := (float64(h>>11) + 1) / (1 << 53)
	if u == 1 {
		return math.Inf(1)
	}
	return -float64(weight) / math.Log(u)
}
