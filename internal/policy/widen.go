package policy

import (
	"math/bits"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// Scope that follows health.
//
// The compiled partition is exact while every pool is usable: its leaves
// are the widest prefixes with one outcome. When a pool is not usable,
// neighbouring leaves whose outcomes differed only by that pool now get the
// same answer, and a resolver's subnet cache would still miss once for
// each of them. So when SetHealth publishes a new pool state it also
// computes, off the query path, for each record with a pool of the asked
// family not usable:
//
//   - for every outcome of the partition, the decision under the current
//     state, made by decideOutcome, the code the query path decides with;
//     its answer is the chosen pools, the multivalue limit and the all-down
//     behaviour (not the deciding rule: two rules answering the same pools
//     give the same answer). An outcome whose decision depends on more than
//     the leaf (an action at any level of a tried rule's tree of groups
//     ranks by latency or splits, sticky or at random; or a source:
//     resolver rule could come before the deciding one) has no answer of
//     its own and never merges;
//   - bottom-up over the trie, the answer of every inner node whose whole
//     subtree gives one answer;
//   - top-down, for every leaf position, the depth of its highest ancestor
//     whose subtree gives one answer (its own depth when there is none).
//     Those ancestors partition the space, so widened scopes never overlap,
//     and every address inside one gets the same answer.
//
// The query path reads that depth with one array index (Query.Scopes).
// When the pool returns, the record's state equals its configured one and
// nothing is computed or kept: the scopes are the partition's again.
//
// Records with the same partition and the same actions under the same
// effective pool state share one computation and one array (scopeKey), and
// a state computed for the previous Health is reused.
//
// Cost, measured with BenchmarkWiden and BenchmarkDecideWidened (go test
// -bench, 2-core VM, noisy neighbours; minimum of several runs):
//
//   - The embedded country database's record (rules on countries and a
//     continent, geoproximity default: 414,453 inner nodes IPv4, 415,814
//     IPv6, 11 outcomes) with one pool down: 19-25 ms for one computation,
//     1,791,606 bytes kept (one byte per child slot of both tries, about a
//     quarter of the tries' own 7.3 MB, plus 64 kB per first-level table),
//     and about 6.8 MB allocated and dropped while computing.
//   - 10,000 records sharing that named policy, one pool down in each: one
//     computation and one array (the same 1.79 MB) for all of them; the
//     whole SetHealth widening step takes 24-28 ms, so the 10,000 keys cost
//     about 3-5 ms, and the Health holds 16 bytes a record for the pointers.
//   - Records with distinct partitions each pay their own computation,
//     but only when their own effective state changes: a state seen by
//     the previous Health is reused, so a flap elsewhere costs the keys;
//     so is one of the previous table's for a partition a reload kept.
//   - The query path: one nil check while nothing is widened (Decide and
//     the steered fast path measure the same as before, within noise);
//     with widened scopes, one bounds check and one byte load (about 1.0-
//     1.1x BenchmarkDecide's time on the same state without them).

// Scopes are one record's ECS scopes under the current pool state for one
// query family (A, or AAAA): for each leaf position of the IPv4 and the
// IPv6 partition (trie.lookup's pos), the prefix length to answer with. A
// nil slice means that family's partition keeps its own depths.
type Scopes struct {
	v4, v6 []uint8
	// t4 and t6 are by first-level table entry, for the leaves a
	// partition's table holds (lookup's tablePos|i).
	t4, t6 []uint8
}

// depth returns the scope for the leaf at pos of the v4 (v6 false) or v6
// partition, and false when the partition's own depth stands.
func (s *Scopes) depth(v6 bool, pos uint32) (int, bool) {
	byPos, byTable := s.v4, s.t4
	if v6 {
		byPos, byTable = s.v6, s.t6
	}
	if pos&tablePos == 0 {
		if pos < uint32(len(byPos)) {
			return int(byPos[pos]), true
		}
	} else if i := pos &^ tablePos; i < uint32(len(byTable)) {
		return int(byTable[i]), true
	}
	return 0, false
}

// Bytes is the memory the scopes hold.
func (s *Scopes) Bytes() int {
	if s == nil {
		return 0
	}
	return len(s.v4) + len(s.v6) + len(s.t4) + len(s.t6)
}

// WidenStats describe the last SetHealth's widening.
type WidenStats struct {
	// Records is how many (record, family) pairs answer widened scopes.
	Records int
	// Computed is how many widenings were computed, Reused how many were
	// taken from the previous state (or shared with another record).
	Computed, Reused int
	// Bytes is the memory the arrays hold.
	Bytes int
	// Took is how long computing them took.
	Took time.Duration
}

// scopeKey is what a widening depends on: the partition (by its outcomes'
// identity: records sharing a partition share them), the actions and
// all-down behaviour (decisionKey), the family and the usable pools.
type scopeKey struct {
	part       *outcome
	dkey       string
	fam, avail uint64
}

// decisionKey describes everything decideOutcome reads from r apart from
// the partition (the rules' and the groups' actions, the families, the
// all-down behaviour): two records with equal keys and one partition decide
// alike for every outcome and pool state.
func (r *Record) decisionKey() string {
	b := make([]byte, 0, 64+32*len(r.Rules))
	num := func(v uint64) { b = strconv.AppendUint(b, v, 16); b = append(b, ',') }
	num(uint64(r.Type))
	num(r.hasV4)
	num(r.hasV6)
	num(r.allPools)
	num(r.clientRules)
	num(r.resolverRules)
	num(r.defaultBit)
	num(uint64(r.WhenAllDown))
	num(uint64(r.FallbackPool))
	if r.NextRule {
		b = append(b, 'n')
	}
	action := func(a *Action) {
		num(uint64(a.Kind))
		num(a.mask)
		num(uint64(a.Limit))
		num(uint64(a.Proximity))
		num(uint64(a.Latency))
		if a.Sticky {
			b = append(b, 's')
		}
		if a.nested {
			b = append(b, 'g')
		}
		for i, p := range a.Pools {
			num(uint64(p))
			if i < len(a.Weights) {
				num(uint64(a.Weights[i]))
			}
		}
		b = append(b, ':')
		for _, p := range a.Candidates {
			num(uint64(p))
		}
	}
	for _, rule := range r.Rules {
		b = append(b, '|')
		action(&rule.Action)
	}
	// Members are numbered pools first, then groups.
	b = append(b, '#')
	num(uint64(len(r.Pools)))
	for _, g := range r.Groups {
		b = append(b, '|')
		action(&g.Action)
	}
	return string(b)
}

// fixedAction reports whether a's choice depends only on the pool state
// and the client's partition outcome, at every level of its tree.
func (r *Record) fixedAction(a *Action, depth int) bool {
	switch a.Kind {
	case ActPool, ActMultivalue, ActFailover, ActFirst, ActProximity:
	default:
		return false // by: latency, split (sticky or random)
	}
	if !a.nested {
		return true
	}
	if depth >= MaxDepth {
		return false
	}
	for _, m := range actionMembers(a) {
		if m < len(r.gact) && r.gact[m] != nil && !r.fixedAction(r.gact[m], depth+1) {
			return false
		}
	}
	return true
}

// leafOnly reports whether d, decided for an outcome whose client rules
// are mask, is the same for every client of the outcome: every rule tried
// picks by the leaf alone, and no source: resolver rule could have come
// first.
func (r *Record) leafOnly(d *Decision, mask uint64) bool {
	tried := mask
	if d.Rule >= 0 && !d.AllDown {
		tried &= uint64(2)<<d.Rule - 1 // up to the decider (2<<63 wraps to all)
	}
	if !r.NextRule {
		tried &= -tried // only the first is tried
	}
	for m := tried; m != 0; m &= m - 1 {
		if !r.fixedAction(&r.Rules[bits.TrailingZeros64(m)].Action, 1) {
			return false
		}
	}
	before := r.resolverRules // resolver rules that could decide instead
	if d.Rule >= 0 && !(d.AllDown && r.NextRule) {
		before &= uint64(1)<<d.Rule - 1
	}
	return before == 0
}

var zeroV4 = netip.IPv4Unspecified()

// answerKey is what makes two decisions the same answer.
type answerKey struct {
	pools                     uint64
	limit                     int
	allDown, noData, servFail bool
}

// widen computes r's scopes for the family fam with the usable pools
// avail, or nil when no leaf widens.
func (r *Record) widen(fam, avail uint64) *Scopes {
	ids := make([]int32, len(r.outcomes))
	index := map[answerKey]int32{}
	// Deciding needs a client only for the actions that never merge.
	q := &Query{Client: zeroV4, Up: avail}
	for oi := range r.outcomes {
		o := &r.outcomes[oi]
		mask := o.mask&r.clientRules | r.defaultBit
		d := Decision{Rule: -1}
		r.decideOutcome(&d, o, mask, fam, avail, q)
		if !r.leafOnly(&d, mask) {
			ids[oi] = -1
			continue
		}
		k := answerKey{d.Pools, d.Limit, d.AllDown, d.NoData, d.ServFail}
		id, ok := index[k]
		if !ok {
			id = int32(len(index))
			index[k] = id
		}
		ids[oi] = id
	}
	s := &Scopes{}
	s.v4, s.t4 = r.v4.widen(ids)
	s.v6, s.t6 = r.v6.widen(ids)
	if s.v4 == nil && s.v6 == nil {
		return nil
	}
	return s
}

// widen returns, for each position of t.nodes that holds a leaf, the depth
// of the leaf's highest ancestor (or itself) whose whole subtree has one
// answer id (ids by outcome; -1 never merges), and the same by entry of the
// first-level table for the leaves it holds; nil when that is every leaf's
// own depth.
func (t *trie) widen(ids []int32) (byPos, byTable []uint8) {
	n := len(t.nodes) / 2
	if n == 0 {
		return nil, nil // the root is a leaf: scope 0 already
	}
	// The builder appends a node after both its subtrees: children have
	// smaller indices than their parent, and the root is the last node.
	uni := make([]int32, n) // the subtree's one answer, -1 when mixed
	val := func(ref uint32) int32 {
		if isLeaf(ref) {
			return ids[ref&^leafBit]
		}
		return uni[ref]
	}
	for i := range n {
		a, b := val(t.nodes[2*i]), val(t.nodes[2*i+1])
		if a != b {
			a = -1
		}
		uni[i] = a
	}
	const none = 0xFF
	depth := make([]uint8, n) // of each inner node
	inh := make([]uint8, n)   // the widened depth its leaves take, none
	depth[t.root], inh[t.root] = 0, none
	out := make([]uint8, len(t.nodes))
	widened := false
	for i := int(t.root); i >= 0; i-- {
		d, w := depth[i], inh[i]
		if w == none && uni[i] >= 0 {
			w = d
		}
		for bit := range 2 {
			pos := 2*i + bit
			c := t.nodes[pos]
			if isLeaf(c) {
				if w == none {
					out[pos] = d + 1
				} else {
					out[pos] = w
					widened = true
				}
				continue
			}
			depth[c], inh[c] = d+1, w
		}
	}
	if !widened {
		return nil, nil
	}
	if t.table == nil {
		return out, nil
	}
	// A leaf at depth d < strideBits fills an aligned run of 2^(16-d)
	// entries: walk to its position once per run.
	tab := make([]uint8, len(t.table))
	for i := 0; i < len(t.table); {
		if !isLeaf(t.table[i]) {
			i++
			continue
		}
		d := int(t.depth[i])
		ref, pos := t.root, 0
		for k := range d {
			pos = 2*int(ref) + i>>(strideBits-1-k)&1
			ref = t.nodes[pos]
		}
		run := 1 << (strideBits - d)
		for j := i; j < i+run; j++ {
			tab[j] = out[pos]
		}
		i += run
	}
	return out, tab
}

// setScopes computes h.scopes for t's records from h.pools, reusing the
// widenings of prev (the state being replaced) where their keys are equal,
// or for a table's first state those of the table it was built from (a
// reload that kept the partitions keeps their widenings).
func (l *Live) setScopes(h, prev *Health) {
	t := l.t
	start := time.Now()
	var st WidenStats
	var seed map[scopeKey]*Scopes
	if prev != nil {
		seed = prev.cache
	} else if p := l.seed.Load(); p != nil {
		seed = *p // the previous table's: its partitions may be ours
	}
	l.seed.Store(nil)
	for i, r := range t.Records {
		if len(r.outcomes) == 0 {
			continue
		}
		for f, qt := range [2]uint16{dns.TypeA, dns.TypeAAAA} {
			fam := r.family(qt)
			up := h.pools[i][f]
			if r.Type == dns.TypeCNAME {
				up = h.pools[i][0] | h.pools[i][1]
			}
			avail := r.Enabled & up & fam
			if fam == 0 || avail == r.Enabled&fam {
				continue // every configured pool usable: the partition is exact
			}
			dkey := r.dkey
			if dkey == "" {
				dkey = r.decisionKey() // a record not from Build
			}
			k := scopeKey{&r.outcomes[0], dkey, fam, avail}
			sc, ok := h.cache[k]
			if !ok {
				sc, ok = seed[k]
			}
			if ok {
				st.Reused++
			} else {
				sc = r.widen(fam, avail)
				st.Computed++
			}
			if h.cache == nil {
				h.cache = map[scopeKey]*Scopes{}
			}
			h.cache[k] = sc
			if sc == nil {
				continue
			}
			if h.scopes == nil {
				h.scopes = make([][2]*Scopes, len(t.Records))
			}
			h.scopes[i][f] = sc
			st.Records++
		}
	}
	for _, sc := range h.cache {
		st.Bytes += sc.Bytes()
	}
	st.Took = time.Since(start)
	h.widen = st
}

// Usable returns the pools of r usable now for qtype (as Up) and the
// scopes health widened for it (nil: the partition's own), from one read
// of the state.
func (l *Live) Usable(r *Record, qtype uint16) (uint64, *Scopes) {
	return l.health.Load().usable(r, qtype)
}

// usable is Usable in health state h (nil: none yet, every enabled pool).
func (h *Health) usable(r *Record, qtype uint16) (uint64, *Scopes) {
	if h == nil || r.Index >= len(h.pools) {
		return r.Enabled, nil
	}
	f := 0
	if qtype == dns.TypeAAAA {
		f = 1
	}
	var sc *Scopes
	if r.Index < len(h.scopes) {
		sc = h.scopes[r.Index][f]
	}
	if r.Type == dns.TypeCNAME {
		return r.Enabled & (h.pools[r.Index][0] | h.pools[r.Index][1]), sc
	}
	return r.Enabled & h.pools[r.Index][f], sc
}

// WidenStats returns what the current state's widening computed.
func (l *Live) WidenStats() WidenStats {
	if h := l.health.Load(); h != nil {
		return h.widen
	}
	return WidenStats{}
}
