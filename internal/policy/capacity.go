package policy

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Capacity feedback ("healthy but full").
//
// A pool may declare a capacity (target and max) in the unit of a load
// feed. When the pool's reported load is above its target, the record
// sheds just enough of the pool's networks to the next candidate of their
// own rule, as if the pool were down for those clients only:
//
//   - A network is a leaf of the record's compiled partition (the widest
//     prefix with one outcome), so a shed network's answer is the same for
//     every address in it and its ECS scope is its own prefix. A client in
//     a network not shed gets a scope no wider than the longest prefix
//     around it that holds no shed network (found from the shed networks
//     next to it in address order), so no scope ever covers a network
//     that was not shed together with one that was, health widening
//     included. A pool answered by a single leaf (a record with one rule
//     and no match) can only be shed whole: the granularity is the
//     partition's.
//   - Networks are ranked by answers per address over the last interval
//     (counted on the query path, one atomic add per steered query of a
//     record with a capacity pool, at the leaf position the lookup found),
//     busiest first.
//   - Damping: one step (one load update) moves at most MaxShift of the
//     pool's traffic; networks come back (last shed first) only once the
//     load is below LowWater × target, and only as many as keep the
//     predicted load under the middle of the band.
//   - Stale load (older than StaleAfter) is ignored: the pool gets its
//     networks back. Akamai GTM keeps the last value when a fetch fails;
//     a value that stays "over target" while the pool has shed its
//     traffic keeps shedding on an old picture, and when it finally
//     updates the whole shed share swings back at once, which is the
//     oscillation its docs warn of. Failing back to the configured policy
//     is the state an operator already knows.
//   - Above Max the pool takes no new networks: networks shed by another
//     pool skip it.
//
// The decision reaches the query path through an immutable shed state
// (an atomic pointer, like health and latency): per record, the shed
// networks of each family sorted by address. A query of such a record
// does one binary search; records without a capacity pool do nothing.
// A step reads the counters of the capacity pools' networks and rebuilds
// the shed lists of the records whose shed set changed (proportional to
// their shed networks), nothing for the others.

// Capacity is a pool's declared capacity in the unit of its load feed.
type Capacity struct {
	// Target is the load above which the pool sheds networks.
	Target float64
	// Max is the load above which the pool takes no new networks.
	Max float64
}

// Load is one pool's reported load.
type Load struct {
	Value float64
	At    time.Time
}

// ShedOptions damp the feedback loop.
type ShedOptions struct {
	// MaxShift is the largest share of a pool's traffic one step moves
	// (default 0.25).
	MaxShift float64
	// LowWater is the share of the target below which shed networks come
	// back (default 0.85).
	LowWater float64
	// StaleAfter is how old a load may be before it is ignored (default
	// 1m).
	StaleAfter time.Duration
}

// The defaults of ShedOptions.
const (
	DefaultMaxShift   = 0.25
	DefaultLowWater   = 0.85
	DefaultStaleAfter = time.Minute
)

// WithDefaults fills in the zero fields.
func (o ShedOptions) WithDefaults() ShedOptions {
	if o.MaxShift <= 0 {
		o.MaxShift = DefaultMaxShift
	}
	if o.LowWater <= 0 {
		o.LowWater = DefaultLowWater
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	return o
}

// PoolLoad is the capacity state of one pool, as status, explain, the
// dashboard and the metrics show it.
type PoolLoad struct {
	Record, Pool string
	Target, Max  float64
	// Load is the last reported load and At its time (zero: none yet).
	Load float64
	At   time.Time
	// State is "ok", "shed" (networks shed), "full" (above max: shedding
	// and taking no new networks), "stale" (the load is older than its
	// limit and ignored) or "no data".
	State string
	// Networks is how many networks the pool answers with every pool up,
	// Shed how many of them are shed now; ShedShare is the shed ones'
	// share of those networks' answers over the last interval.
	Networks, Shed int
	ShedShare      float64
	// Moved is how many networks the last step moved (+ shed, - back).
	Moved int
}

// Ratio is the load as a share of the target.
func (p *PoolLoad) Ratio() float64 {
	if p.Target <= 0 {
		return 0
	}
	return p.Load / p.Target
}

// Reason says the state in words: "shed: load 130 % of target (5 of 32
// networks, 31 % of its answers)".
func (p *PoolLoad) Reason() string { return p.ReasonAt(time.Now()) }

// ReasonAt is Reason at the time now (a simulation's clock: how old a
// stale load is).
func (p *PoolLoad) ReasonAt(now time.Time) string {
	pct := math.Round(100 * p.Ratio())
	switch p.State {
	case "no data":
		return "capacity: no load reported yet"
	case "stale":
		return fmt.Sprintf("capacity: load data stale (%s old), ignored", now.Sub(p.At).Round(time.Second))
	case "ok":
		if p.Shed > 0 {
			return fmt.Sprintf("shed: load %.0f %% of target, %d of %d networks still shed (back below the low-water mark)", pct, p.Shed, p.Networks)
		}
		return fmt.Sprintf("capacity: load %.0f %% of target", pct)
	case "full":
		return fmt.Sprintf("full: load %.0f %% of target, above max %g: takes no new networks; shed %d of %d networks (%.0f %% of its answers)",
			pct, p.Max, p.Shed, p.Networks, 100*p.ShedShare)
	}
	return fmt.Sprintf("shed: load %.0f %% of target (%d of %d networks, %.0f %% of its answers)", pct, p.Shed, p.Networks, 100*p.ShedShare)
}

// capNet is one network of a record with a capacity pool.
type capNet struct {
	hi, lo uint64 // the prefix's first address (IPv4 in hi's top 32 bits)
	bits   uint8
	v6     bool
	slot   int32  // counter index in its family's counters
	pools  uint64 // the capacity pools it is answered by, every pool up
}

func (n *capNet) prefix() netip.Prefix {
	if !n.v6 {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], uint32(n.hi>>32))
		return netip.PrefixFrom(netip.AddrFrom4(a), int(n.bits))
	}
	var a [16]byte
	binary.BigEndian.PutUint64(a[:8], n.hi)
	binary.BigEndian.PutUint64(a[8:], n.lo)
	return netip.PrefixFrom(netip.AddrFrom16(a), int(n.bits))
}

// recCap is the capacity state of one record: the query path's counters
// and the controller's networks.
type recCap struct {
	c4, c6 []atomic.Uint32 // answers per leaf slot (trie.slot)
	nets   []capNet
	// controller only (Live.capMu):
	last  []uint32 // answers per network over the last interval
	shed  []uint64 // per network: the pools that shed it
	pools []*poolCtl
}

// poolCtl is the controller's state of one capacity pool.
type poolCtl struct {
	pool  *Pool
	nets  []int32 // networks the pool answers
	order []int32 // shed networks, in the order shed
	st    PoolLoad
	// acted is the time of the load the last move answered: a step with
	// no newer load (a reload, a timer) moves nothing more, or a pool
	// would shed again for a load its last move already answered.
	acted time.Time
}

// count notes one query at leaf position pos of t (v6: the IPv6 trie).
func (c *recCap) count(t *trie, v6 bool, pos uint32) {
	cs := c.c4
	if v6 {
		cs = c.c6
	}
	if i := t.slot(pos); i < len(cs) {
		cs[i].Add(1)
	}
}

// slot is the counter index of the leaf at pos (lookup's): its position
// in nodes, or after them the first table entry of its run, or last the
// root when the root is a leaf.
func (t *trie) slot(pos uint32) int {
	switch {
	case pos == noPos:
		return len(t.nodes) + len(t.table)
	case pos&tablePos != 0:
		i := pos &^ tablePos
		if int(i) >= len(t.depth) {
			return math.MaxInt
		}
		return len(t.nodes) + int(i&^(1<<(strideBits-uint32(t.depth[i]))-1))
	}
	return int(pos)
}

// slots is how many counter slots t has.
func (t *trie) slots() int { return len(t.nodes) + len(t.table) + 1 }

// leaves calls f for every leaf of t with its first address (hi, lo),
// depth and slot.
func (t *trie) leaves(f func(hi, lo uint64, depth int, slot int, outcome uint32)) {
	var walk func(ref uint32, hi, lo uint64, d int, pos int)
	walk = func(ref uint32, hi, lo uint64, d int, pos int) {
		if isLeaf(ref) {
			f(hi, lo, d, pos, ref&^leafBit)
			return
		}
		for bit := range 2 {
			h, l := hi, lo
			if bit == 1 {
				if d < 64 {
					h |= 1 << (63 - d)
				} else {
					l |= 1 << (127 - d)
				}
			}
			walk(t.nodes[2*ref+uint32(bit)], h, l, d+1, int(2*ref)+bit)
		}
	}
	if t.table == nil {
		walk(t.root, 0, 0, 0, len(t.nodes))
		return
	}
	for i := 0; i < len(t.table); {
		hi := uint64(i) << (64 - strideBits)
		d := int(t.depth[i])
		if isLeaf(t.table[i]) {
			f(hi, 0, d, len(t.nodes)+i, t.table[i]&^leafBit)
			i += 1 << (strideBits - d)
			continue
		}
		walk(t.table[i], hi, 0, strideBits, -1)
		i++
	}
}

// newRecCap returns r's capacity state, nil when no pool of r declares a
// capacity. It walks r's partition once (at NewLive).
func newRecCap(r *Record) *recCap {
	var capPools uint64
	for _, p := range r.Pools {
		if p.Capacity != nil {
			capPools |= 1 << p.Index
		}
	}
	if capPools == 0 || len(r.outcomes) == 0 {
		return nil
	}
	// Which capacity pools each outcome answers with every pool up and
	// could shed: without the pool, its rules still answer.
	fam := r.hasV4 | r.hasV6
	if r.Type == dns.TypeCNAME {
		fam = r.allPools
	}
	ans := make([]uint64, len(r.outcomes))
	q := &Query{Client: zeroV4, Up: r.Enabled, Stable: true}
	decide := func(o *outcome, avail uint64) Decision {
		d := Decision{Rule: -1}
		r.decideOutcome(&d, o, o.mask&r.clientRules|r.defaultBit, fam, avail, q)
		return d
	}
	for oi := range r.outcomes {
		o := &r.outcomes[oi]
		d := decide(o, r.Enabled)
		if d.AllDown {
			continue
		}
		for m := d.Pools & capPools; m != 0; m &= m - 1 {
			bit := m & -m
			if e := decide(o, r.Enabled&^bit); !e.AllDown && e.Pools&bit == 0 {
				ans[oi] |= bit
			}
		}
	}
	c := &recCap{c4: make([]atomic.Uint32, r.v4.slots()), c6: make([]atomic.Uint32, r.v6.slots())}
	for v6, t := range []*trie{&r.v4, &r.v6} {
		t.leaves(func(hi, lo uint64, depth, slot int, oi uint32) {
			if int(oi) >= len(ans) || ans[oi] == 0 {
				return
			}
			c.nets = append(c.nets, capNet{hi: hi, lo: lo, bits: uint8(depth), v6: v6 == 1, slot: int32(slot), pools: ans[oi]})
		})
	}
	c.last = make([]uint32, len(c.nets))
	c.shed = make([]uint64, len(c.nets))
	for _, p := range r.Pools {
		if p.Capacity == nil {
			continue
		}
		pc := &poolCtl{pool: p, st: PoolLoad{Record: r.Name, Pool: p.Name, Target: p.Capacity.Target, Max: p.Capacity.Max, State: "no data"}}
		for i := range c.nets {
			if c.nets[i].pools&(1<<p.Index) != 0 {
				pc.nets = append(pc.nets, int32(i))
			}
		}
		pc.st.Networks = len(pc.nets)
		c.pools = append(c.pools, pc)
	}
	return c
}

// shedState is what the query path reads: per record, the shed networks.
type shedState struct {
	recs  []*recShed // by record index; nil: nothing shed
	loads [][]PoolLoad
}

// recShed is one record's shed networks of each family, sorted by first
// address; drop is the pools a query in the network does not get.
type recShed struct {
	v4, v6 []shedEntry
	closed uint64 // the pools above max when it was built
}

type shedEntry struct {
	hi, lo uint64
	bits   int
	drop   uint64
}

// find returns, for addr, the pools its shed network drops and the
// network's prefix length (in true), or when addr is in no shed network
// the shortest prefix length around it that covers none (0: any).
func (s *recShed) find(addr netip.Addr) (drop uint64, scope int, in bool) {
	es, width := s.v4, 32
	var hi, lo uint64
	if addr.Is4() {
		a := addr.As4()
		hi = uint64(binary.BigEndian.Uint32(a[:])) << 32
	} else {
		es, width = s.v6, 128
		a := addr.As16()
		hi, lo = binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	}
	i, j := 0, len(es)
	for i < j { // the first entry starting after addr
		h := int(uint(i+j) >> 1)
		if e := &es[h]; hi < e.hi || hi == e.hi && lo < e.lo {
			j = h
		} else {
			i = h + 1
		}
	}
	if i > 0 {
		e := &es[i-1]
		c := cpl(hi, lo, e.hi, e.lo)
		if c >= e.bits {
			return e.drop, e.bits, true
		}
		scope = c + 1
	}
	if i < len(es) {
		e := &es[i]
		scope = max(scope, cpl(hi, lo, e.hi, e.lo)+1)
	}
	return 0, min(scope, width), false
}

func cpl(ahi, alo, bhi, blo uint64) int {
	if x := ahi ^ bhi; x != 0 {
		return bits.LeadingZeros64(x)
	}
	return 64 + bits.LeadingZeros64(alo^blo)
}

// capacity is the Live state of capacity feedback.
type capacity struct {
	recs []*recCap // by record index, nil without a capacity pool
	any  bool
	mu   sync.Mutex // serialises SetLoad
	prev time.Time  // the last step
}

func (c *capacity) init(t *Table) {
	c.recs = make([]*recCap, len(t.Records))
	for i, r := range t.Records {
		if c.recs[i] = newRecCap(r); c.recs[i] != nil {
			c.any = true
		}
	}
}

// carry takes the shed networks and last counts of prev's records into
// c (a reload: a new table's state starts from the old one's), matched
// by record name, pool name and network prefix, and returns the shed
// state to publish; nil when nothing carries. O(the capacity records'
// networks).
func (c *capacity) carry(t *Table, prev *Live) *shedState {
	if !c.any || prev == nil || !prev.cap.any {
		return nil
	}
	prev.cap.mu.Lock()
	defer prev.cap.mu.Unlock()
	old := prev.shed.Load()
	st := &shedState{recs: make([]*recShed, len(c.recs)), loads: make([][]PoolLoad, len(c.recs))}
	any := false
	for ri, rc := range c.recs {
		if rc == nil {
			continue
		}
		r := t.Records[ri]
		pr := prev.t.Get(r.Name)
		if pr == nil || pr.Index >= len(prev.cap.recs) || prev.cap.recs[pr.Index] == nil {
			continue
		}
		oc := prev.cap.recs[pr.Index]
		type key struct {
			hi, lo uint64
			bits   uint8
			v6     bool
		}
		at := make(map[key]int32, len(rc.nets))
		for i, n := range rc.nets {
			at[key{n.hi, n.lo, n.bits, n.v6}] = int32(i)
		}
		for oi, n := range oc.nets {
			if ni, ok := at[key{n.hi, n.lo, n.bits, n.v6}]; ok {
				rc.last[ni] = oc.last[oi]
			}
		}
		var loads []PoolLoad
		for _, pc := range rc.pools {
			for _, opc := range oc.pools {
				if opc.pool.Name != pc.pool.Name {
					continue
				}
				bit := uint64(1) << pc.pool.Index
				for _, oi := range opc.order {
					n := oc.nets[oi]
					if ni, ok := at[key{n.hi, n.lo, n.bits, n.v6}]; ok && rc.nets[ni].pools&bit != 0 && rc.shed[ni]&bit == 0 {
						rc.shed[ni] |= bit
						pc.order = append(pc.order, ni)
					}
				}
				nets := pc.st.Networks
				pc.st = opc.st
				pc.st.Record, pc.st.Target, pc.st.Max, pc.st.Networks, pc.st.Shed = r.Name, pc.pool.Capacity.Target, pc.pool.Capacity.Max, nets, len(pc.order)
			}
			loads = append(loads, pc.st)
		}
		st.loads[ri] = loads
		any = true
		var closed uint64
		if old != nil && pr.Index < len(old.recs) {
			closed = remapPools(closedOf(old.recs[pr.Index]), pr, r)
		}
		st.recs[ri] = rc.publish(closed)
	}
	if !any {
		return nil
	}
	return st
}

// remapPools renumbers a mask of from's pools as to's, by name.
func remapPools(m uint64, from, to *Record) uint64 {
	var out uint64
	for ; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if i >= len(from.Pools) {
			continue
		}
		for _, p := range to.Pools {
			if p.Name == from.Pools[i].Name {
				out |= 1 << p.Index
			}
		}
	}
	return out
}

// SetLoad is one step of the feedback loop: load gives each capacity
// pool's last reported load (false: none), now is the step's time. It
// reads the answers counted since the previous step, moves networks of
// the pools above target (or back, below the low-water mark, or all back
// when the load is stale), publishes the new shed state, and returns
// every capacity pool's state.
func (l *Live) SetLoad(load func(record, pool string) (Load, bool), now time.Time, o ShedOptions) []PoolLoad {
	c := &l.cap
	if !c.any {
		return nil
	}
	o = o.WithDefaults()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prev = now
	old := l.shed.Load()
	st := &shedState{recs: make([]*recShed, len(c.recs)), loads: make([][]PoolLoad, len(c.recs))}
	var out []PoolLoad
	for ri, rc := range c.recs {
		if rc == nil {
			continue
		}
		r := l.t.Records[ri]
		for i := range rc.nets {
			n := &rc.nets[i]
			cs := rc.c4
			if n.v6 {
				cs = rc.c6
			}
			rc.last[i] = cs[n.slot].Swap(0)
		}
		// Pools above max take no new networks: close them first.
		var closed uint64
		for _, pc := range rc.pools {
			ld, ok := load(r.Name, pc.pool.Name)
			if ok && now.Sub(ld.At) <= o.StaleAfter && ld.Value > pc.pool.Capacity.Max {
				closed |= 1 << pc.pool.Index
			}
		}
		changed := false
		for _, pc := range rc.pools {
			ld, ok := load(r.Name, pc.pool.Name)
			if rc.step(pc, ld, ok, now, o) {
				changed = true
			}
		}
		loads := make([]PoolLoad, len(rc.pools))
		for i, pc := range rc.pools {
			loads[i] = pc.st
		}
		st.loads[ri] = loads
		out = append(out, loads...)
		if !changed && old != nil && ri < len(old.recs) && closedOf(old.recs[ri]) == closed {
			st.recs[ri] = old.recs[ri]
			continue
		}
		st.recs[ri] = rc.publish(closed)
	}
	l.shed.Store(st)
	return out
}

// closedOf is the closed pools s was built with.
func closedOf(s *recShed) uint64 {
	if s == nil {
		return 0
	}
	return s.closed
}

// step moves pc's networks for its load; it reports whether any moved.
func (rc *recCap) step(pc *poolCtl, ld Load, ok bool, now time.Time, o ShedOptions) bool {
	bit := uint64(1) << pc.pool.Index
	capa := pc.pool.Capacity
	st := &pc.st
	st.Moved = 0
	var total, active, shedAns uint64
	for _, ni := range pc.nets {
		total += uint64(rc.last[ni])
		if rc.shed[ni]&bit != 0 {
			shedAns += uint64(rc.last[ni])
		} else {
			active += uint64(rc.last[ni])
		}
	}
	unshed := func(ni int32) {
		rc.shed[ni] &^= bit
		st.Moved--
	}
	switch {
	case !ok:
		st.State = "no data"
	case now.Sub(ld.At) > o.StaleAfter:
		st.State = "stale"
		st.Load, st.At = ld.Value, ld.At
	default:
		st.Load, st.At = ld.Value, ld.At
		st.State = "ok"
		if ld.Value > capa.Target {
			st.State = "shed"
			if ld.Value > capa.Max {
				st.State = "full"
			}
		}
	}
	limit := o.MaxShift * float64(total)
	if (st.State == "shed" || st.State == "full" || st.State == "ok") && !ld.At.After(pc.acted) {
		st.Shed = len(pc.order)
		return false // no newer load than the one last answered
	}
	if st.State != "no data" && st.State != "stale" {
		pc.acted = ld.At
	}
	switch st.State {
	case "no data", "stale":
		// Ignored: every network back.
		for _, ni := range pc.order {
			unshed(ni)
		}
		pc.order = pc.order[:0]
	case "shed", "full":
		// Shed the share of the pool's answers that brings the load to
		// the target, assuming load follows answers.
		need := min((1-capa.Target/ld.Value)*float64(active), limit)
		cand := make([]int32, 0, len(pc.nets))
		for _, ni := range pc.nets {
			if rc.shed[ni]&bit == 0 && rc.last[ni] > 0 {
				cand = append(cand, ni)
			}
		}
		slices.SortFunc(cand, func(a, b int32) int {
			// busiest per address first: last/2^(width-bits), compared
			// without dividing.
			da, db := rc.density(a), rc.density(b)
			switch {
			case da > db:
				return -1
			case da < db:
				return 1
			}
			return int(a - b)
		})
		moved := 0.0
		for _, ni := range cand {
			if moved >= need {
				break
			}
			x := float64(rc.last[ni])
			if moved+x/2 > need && moved > 0 {
				continue // would overshoot by more than half of it
			}
			if moved+x > limit && moved > 0 {
				continue
			}
			rc.shed[ni] |= bit
			pc.order = append(pc.order, ni)
			moved += x
			st.Moved++
		}
	case "ok":
		if len(pc.order) == 0 || ld.Value >= o.LowWater*capa.Target {
			break // inside the band: hold
		}
		// Bring back, last shed first, as much as keeps the predicted
		// load under the middle of the band.
		aim := (1 + o.LowWater) / 2 * capa.Target
		room := math.Inf(1)
		if active > 0 && ld.Value > 0 {
			room = (aim/ld.Value - 1) * float64(active)
		}
		room = min(room, limit)
		moved := 0.0
		for len(pc.order) > 0 {
			ni := pc.order[len(pc.order)-1]
			x := float64(rc.last[ni])
			if moved+x > room && !(active == 0 && st.Moved == 0) {
				break // it would overshoot (with nothing left answering, one comes back)
			}
			pc.order = pc.order[:len(pc.order)-1]
			unshed(ni)
			moved += x
		}
	}
	st.Shed = len(pc.order)
	shedAns = 0
	for _, ni := range pc.order {
		shedAns += uint64(rc.last[ni])
	}
	st.ShedShare = 0
	if total > 0 {
		st.ShedShare = float64(shedAns) / float64(total)
	}
	return st.Moved != 0
}

// density is network ni's answers per address over the last interval, as
// a float (addresses 2^(width-bits)).
func (rc *recCap) density(ni int32) float64 {
	n := &rc.nets[ni]
	width := 32
	if n.v6 {
		width = 128
	}
	return math.Ldexp(float64(rc.last[ni]), int(n.bits)-width)
}

// publish builds the record's shed lists: every network shed by a pool,
// dropping that pool and the closed ones.
func (rc *recCap) publish(closed uint64) *recShed {
	s := &recShed{closed: closed}
	for i, m := range rc.shed {
		if m == 0 {
			continue
		}
		n := &rc.nets[i]
		e := shedEntry{hi: n.hi, lo: n.lo, bits: int(n.bits), drop: m | closed}
		if n.v6 {
			s.v6 = append(s.v6, e)
		} else {
			s.v4 = append(s.v4, e)
		}
	}
	if len(s.v4) == 0 && len(s.v6) == 0 {
		if closed == 0 {
			return nil
		}
		return s
	}
	less := func(a, b shedEntry) int {
		switch {
		case a.hi != b.hi:
			if a.hi < b.hi {
				return -1
			}
			return 1
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	}
	slices.SortFunc(s.v4, less)
	slices.SortFunc(s.v6, less)
	return s
}

// Loads returns every capacity pool's state after the last SetLoad (nil
// before one, or without capacity pools).
func (l *Live) Loads() []PoolLoad {
	st := l.shed.Load()
	if st == nil {
		return nil
	}
	var out []PoolLoad
	for _, ls := range st.loads {
		out = append(out, ls...)
	}
	return out
}

// PoolLoad returns the capacity state of pool p of r, false when p has
// no capacity.
func (l *Live) PoolLoad(r *Record, p *Pool) (PoolLoad, bool) {
	if p.Capacity == nil {
		return PoolLoad{}, false
	}
	if st := l.shed.Load(); st != nil && r.Index < len(st.loads) {
		for _, pl := range st.loads[r.Index] {
			if pl.Pool == p.Name {
				return pl, true
			}
		}
	}
	return PoolLoad{Record: r.Name, Pool: p.Name, Target: p.Capacity.Target, Max: p.Capacity.Max, State: "no data"}, true
}

// CountAnswers adds n answers to the counter of client's network of r,
// as n steered queries from client would on the query path: the next
// SetLoad ranks the networks by them. A simulation, which decides a
// network once for the many queries it models, counts them so
// (Query.Uncounted keeps its decisions out). Records without a capacity
// pool count nothing.
func (l *Live) CountAnswers(r *Record, client netip.Addr, n uint32) {
	rc, _ := l.shedFor(r)
	if rc == nil || !client.IsValid() || n == 0 {
		return
	}
	t := &r.v4
	a := client.Unmap()
	if a.Is6() {
		t = &r.v6
	}
	_, pos, _ := t.lookup(a)
	cs := rc.c4
	if t == &r.v6 {
		cs = rc.c6
	}
	if i := t.slot(pos); i < len(cs) {
		cs[i].Add(n)
	}
}

// ShedNetworks returns the networks of r shed now and the pools each
// drops (explain, the dashboard).
func (l *Live) ShedNetworks(r *Record) map[netip.Prefix][]string {
	st := l.shed.Load()
	if st == nil || r.Index >= len(st.recs) || st.recs[r.Index] == nil {
		return nil
	}
	out := map[netip.Prefix][]string{}
	s := st.recs[r.Index]
	for v6, es := range [][]shedEntry{s.v4, s.v6} {
		for _, e := range es {
			n := capNet{hi: e.hi, lo: e.lo, bits: uint8(e.bits), v6: v6 == 1}
			out[n.prefix()] = r.PoolNames(e.drop)
		}
	}
	return out
}

// shedFor returns the shed state the query path reads for r, nil when r
// has no capacity pool or nothing is shed.
func (l *Live) shedFor(r *Record) (*recCap, *recShed) {
	c := &l.cap
	if !c.any || r.Index >= len(c.recs) || c.recs[r.Index] == nil {
		return nil, nil
	}
	var s *recShed
	if st := l.shed.Load(); st != nil && r.Index < len(st.recs) {
		s = st.recs[r.Index]
	}
	return c.recs[r.Index], s
}

// ShedAt reports whether client's network of r is shed now: its prefix
// and the pools it does not get (explain).
func (l *Live) ShedAt(r *Record, client netip.Addr) (netip.Prefix, []string, bool) {
	_, s := l.shedFor(r)
	if s == nil || !client.IsValid() {
		return netip.Prefix{}, nil, false
	}
	a := client.Unmap()
	drop, scope, in := s.find(a)
	if !in {
		return netip.Prefix{}, nil, false
	}
	p, _ := a.Prefix(scope)
	return p, r.PoolNames(drop), true
}
