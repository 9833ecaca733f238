package policy

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/latency"
)

// Latency steering (by: latency) is split between compile time and update
// time so that the query path stays one more trie walk and one lookup:
//
//   - Compiling a record that has a latency rule adds the client's latency
//     class (the geo facts the latency map can key on: ASN, subdivision,
//     country, continent, location) to the outcome of each piece of the
//     partition, so the partition splits wherever any of them changes.
//   - Each latency update (a file version, a push, a value turning stale)
//     calls Live.SetLatency with the new latency.Map. It splits the address
//     space by the map's CIDR keys into cells (a cell is the set of
//     addresses whose most specific CIDR key is the same), enumerates every
//     network that exists, a (cell, class) pair, evaluates its RTTs and the
//     anti-flap state (latency.Hysteresis, which lives only here, off the
//     query path), and publishes an immutable LatencyState: per network a
//     ranking, the current choice first, then the rest by RTT.
//   - A query walks the cell trie, finds its network's ranking and answers
//     the first usable pool in it, or the action's fallback order when none
//     is. Its ECS scope is the longer of the partition leaf and the cell
//     leaf, so it never claims more than either the geo data or the map's
//     own prefixes allow.

// latClass is what the latency map can know about a client apart from its
// address.
type latClass struct {
	asn                          uint32
	subdivision, country, contin string
	lat, lon                     float64
	hasLoc                       bool
}

// key is the class's stable name, part of a network's anti-flap identity.
func (c *latClass) key() string {
	s := "AS" + strconv.FormatUint(uint64(c.asn), 10) + " " + c.subdivision + " " + c.country + " " + c.contin
	if c.hasLoc {
		s += " " + strconv.FormatFloat(c.lat, 'f', 4, 64) + "," + strconv.FormatFloat(c.lon, 'f', 4, 64)
	}
	return s
}

func classOf(info *geo.Info) latClass {
	c := latClass{asn: info.ASN, subdivision: info.Subdivision, country: info.Country, contin: info.Continent}
	if info.HasLocation {
		c.lat, c.lon, c.hasLoc = info.Lat, info.Lon, true
	}
	return c
}

// latClassOf returns the index of info's class, adding it when new.
func (r *Record) latClassOf(info *geo.Info) int32 {
	c := classOf(info)
	if i, ok := r.latClassIndex[c]; ok {
		return i
	}
	if r.latClassIndex == nil {
		r.latClassIndex = map[latClass]int32{}
	}
	i := int32(len(r.latClasses))
	r.latClasses = append(r.latClasses, c)
	r.latClassKeys = append(r.latClassKeys, c.key())
	r.latClassIndex[c] = i
	return i
}

// LatencySites returns the site names the latency map may measure for
// t's latency-steered records (what a latency push may name).
func (t *Table) LatencySites() map[string]bool {
	out := map[string]bool{}
	if t == nil {
		return out
	}
	for _, r := range t.Records {
		for _, a := range r.latencyActs {
			for _, p := range a.Candidates {
				out[r.memberSite(p)] = true
			}
		}
	}
	return out
}

// HasLatency reports whether r has a by: latency rule.
func (r *Record) HasLatency() bool { return len(r.latencyActs) > 0 }

// LatencyState is the latency choices of every record of a Table for one
// latency map: immutable once published.
type LatencyState struct {
	m              *latency.Map
	h              *latency.Hysteresis
	update         uint64
	cells4, cells6 trie
	cellPrefix     []netip.Prefix // by cell; cell 0 is "no CIDR key"
	cellKeys       []string       // cellPrefix as text ("-" for cell 0)
	recs           []*recordLatency
	// Stats describe the evaluation that built the state.
	Stats LatencyStats
}

// LatencyStats describe one SetLatency evaluation.
type LatencyStats struct {
	Update   uint64        // the map's update counter
	Cells    int           // CIDR cells (distinct most specific keys)
	Networks int           // (cell, class) networks evaluated, over all actions
	Rankings int           // distinct rankings stored
	Took     time.Duration // evaluation time
}

type recordLatency struct {
	acts []actionLatency
}

type actionLatency struct {
	rankings [][]uint8         // rankings[0] is empty
	byClass  []uint32          // cell 0: ranking per class
	byCell   map[uint64]uint32 // cell<<32 | class -> ranking
}

// Latency returns the latency state the query path uses (nil before the
// first SetLatency).
func (l *Live) Latency() *LatencyState { return l.lat.Load() }

// SetLatency evaluates every by: latency action of the table against m,
// with the anti-flap state in h, and publishes the result for the query
// path. update is the map's update counter (several calls with the same
// update count as one round for anti-flap); now decides which values are
// stale. Callers serialise calls on one Live. Pool usability is the
// live health: a network whose current choice is unusable
// switches at once.
func (l *Live) SetLatency(m *latency.Map, h *latency.Hysteresis, update uint64, now time.Time) LatencyStats {
	t := l.t
	start := time.Now()
	s := &LatencyState{m: m, h: h, update: update, recs: make([]*recordLatency, len(t.Records))}
	if !slices.ContainsFunc(t.Records, (*Record).HasLatency) {
		// Nothing steers by latency: no cells to split, no networks.
		s.Stats = LatencyStats{Update: update, Took: time.Since(start)}
		l.lat.Store(s)
		return s.Stats
	}
	prev := l.lat.Load()
	if prev != nil && prev.m.SamePrefixes(m) {
		s.cells4, s.cells6, s.cellPrefix, s.cellKeys = prev.cells4, prev.cells6, prev.cellPrefix, prev.cellKeys
	} else {
		s.cells4, s.cells6, s.cellPrefix = buildCells(m.Prefixes())
		s.cellKeys = make([]string, len(s.cellPrefix))
		s.cellKeys[0] = "-"
		for i, p := range s.cellPrefix[1:] {
			s.cellKeys[i+1] = p.String()
		}
	}
	st := LatencyStats{Update: update, Cells: len(s.cellPrefix) - 1}
	var ev evaluator
	for _, r := range t.Records {
		if !r.HasLatency() {
			continue
		}
		up := l.Up(r, dns.TypeA) | l.Up(r, dns.TypeAAAA)
		nets := r.latencyNetworks(s)
		rl := &recordLatency{acts: make([]actionLatency, len(r.latencyActs))}
		for ai, a := range r.latencyActs {
			al := &rl.acts[ai]
			al.rankings = [][]uint8{nil}
			al.byClass = make([]uint32, len(r.latClasses))
			al.byCell = make(map[uint64]uint32, len(nets)-len(r.latClasses))
			intern := map[string]uint32{"": 0}
			for _, n := range nets {
				rk := ev.evaluate(r, a, s, n, m, h, up, update, now)
				id, ok := intern[string(rk)]
				if !ok {
					id = uint32(len(al.rankings))
					al.rankings = append(al.rankings, append([]uint8(nil), rk...))
					intern[string(rk)] = id
				}
				if n.cell == 0 {
					al.byClass[n.class] = id
				} else {
					al.byCell[uint64(n.cell)<<32|uint64(n.class)] = id
				}
				st.Networks++
			}
			st.Rankings += len(al.rankings) - 1
		}
		s.recs[r.Index] = rl
	}
	if h != nil {
		h.Prune(update)
	}
	st.Took = time.Since(start)
	s.Stats = st
	l.lat.Store(s)
	return st
}

// network is one (cell, class) pair that exists in a record's partition.
type network struct {
	cell  uint32
	class int32
}

// latencyNetworks lists the networks of r: every class with no CIDR key,
// and for each CIDR cell the classes of the partition leaves under its
// prefix (a superset when a longer key covers some of them: harmless).
func (r *Record) latencyNetworks(s *LatencyState) []network {
	out := make([]network, 0, len(r.latClasses)+len(s.cellPrefix))
	for g := range r.latClasses {
		out = append(out, network{0, int32(g)})
	}
	seen := map[int32]bool{}
	for c := 1; c < len(s.cellPrefix); c++ {
		p := s.cellPrefix[c]
		t := &r.v6
		if p.Addr().Is4() {
			t = &r.v4
		}
		clear(seen)
		r.leavesUnder(t, p, func(oi uint32) {
			if g := r.outcomes[oi].lclass; g >= 0 && !seen[g] {
				seen[g] = true
				out = append(out, network{uint32(c), g})
			}
		})
	}
	return out
}

// leavesUnder calls f with the outcome of every leaf of t that overlaps p.
func (r *Record) leavesUnder(t *trie, p netip.Prefix, f func(uint32)) {
	if !isLeaf(t.root) && len(t.nodes) == 0 {
		return // never built
	}
	b := p.Addr().As16()
	if p.Addr().Is4() {
		a4 := p.Addr().As4()
		copy(b[:], a4[:])
	}
	ref := t.root
	for d := 0; d < p.Bits() && !isLeaf(ref); d++ {
		bit := uint32(b[d>>3]>>(7-uint(d&7))) & 1
		ref = t.nodes[2*ref+bit]
	}
	var walk func(ref uint32)
	walk = func(ref uint32) {
		if isLeaf(ref) {
			f(ref &^ leafBit)
			return
		}
		walk(t.nodes[2*ref])
		walk(t.nodes[2*ref+1])
	}
	walk(ref)
}

// evaluator holds scratch space reused across networks.
type evaluator struct {
	sites  []latency.Site
	rtts   []latency.RTT
	known  []latency.RTT
	rank   []uint8
	up     uint64
	r      *Record
	usable func(site string) bool
}

// evaluate returns network n's ranking for action a: the current choice
// first, then the other candidates with an RTT, lowest first. Candidates
// with no RTT (no measurement and no location to estimate from) are left
// out: the action's fallback order covers them.
func (ev *evaluator) evaluate(r *Record, a *Action, s *LatencyState, n network, m *latency.Map, h *latency.Hysteresis, up uint64, update uint64, now time.Time) []uint8 {
	c := r.latClasses[n.class].client(s, n.cell)
	ev.sites = r.latencySites(ev.sites[:0], a)
	ev.rtts = m.Lookup(ev.rtts[:0], &c, ev.sites, now)
	ev.known = ev.known[:0]
	for i := range ev.rtts {
		if ev.rtts[i].Source == latency.SourceNone {
			continue
		}
		k := ev.rtts[i]
		k.Site = r.MemberName(a.Candidates[i])
		ev.known = append(ev.known, k)
	}
	ev.rank = ev.rank[:0]
	if len(ev.known) == 0 {
		return ev.rank
	}
	slices.SortStableFunc(ev.known, func(x, y latency.RTT) int { return cmp.Compare(x.Ms, y.Ms) })
	cur := ""
	if h != nil {
		ev.up, ev.r = up, r
		if ev.usable == nil {
			ev.usable = func(site string) bool {
				m := ev.r.memberIndex(site)
				return m >= 0 && ev.r.usableMember(m, ev.up)
			}
		}
		cur, _ = h.Choose(r.networkKey(a, s, n), ev.known, ev.usable, update)
	}
	if cur != "" {
		ev.rank = append(ev.rank, uint8(r.memberIndex(cur)))
	}
	for _, k := range ev.known {
		if k.Site != cur {
			ev.rank = append(ev.rank, uint8(r.memberIndex(k.Site)))
		}
	}
	return ev.rank
}

// client is what the map is asked about the network of class c in cell:
// the whole cell prefix (cell 0: no CIDR key at all) with c's geo facts.
func (c *latClass) client(s *LatencyState, cell uint32) latency.Client {
	lc := latency.Client{ASN: c.asn, Subdivision: c.subdivision, Country: c.country, Continent: c.contin,
		Lat: c.lat, Lon: c.lon, HasLocation: c.hasLoc}
	if cell != 0 {
		p := s.cellPrefix[cell]
		lc.Addr, lc.Bits = p.Addr(), p.Bits()
	}
	return lc
}

// latencySites appends the sites of a's candidates to dst.
func (r *Record) latencySites(dst []latency.Site, a *Action) []latency.Site {
	for _, p := range a.Candidates {
		lat, lon, ok, _ := r.memberLoc(p)
		dst = append(dst, latency.Site{Name: r.memberSite(p), Lat: lat, Lon: lon, HasLocation: ok})
	}
	return dst
}

// networkKey is network n's anti-flap identity for action a of r: stable
// across updates and reloads while the record, the rule, the most specific
// CIDR key and the geo facts stay the same.
func (r *Record) networkKey(a *Action, s *LatencyState, n network) string {
	return r.Name + " #" + strconv.Itoa(a.Latency) + " " + s.cellKeys[n.cell] + " " + r.latClassKeys[n.class]
}

// poolIndex returns the index of the pool named name, or -1.
func (r *Record) poolIndex(name string) int {
	for _, p := range r.Pools {
		if p.Name == name {
			return p.Index
		}
	}
	return -1
}

// latencyChoose applies a by: latency action: the first usable pool of the
// client network's ranking, else of the fallback order. The third result
// is the depth of the client's cell (the scope the map's prefixes allow).
func (r *Record) latencyChoose(a *Action, o *outcome, avail uint64, q *Query) (uint64, int) {
	rank, depth := r.latencyRanking(a, o, q)
	for _, p := range rank {
		if avail&(1<<p) != 0 {
			return 1 << p, depth
		}
	}
	for _, p := range a.Pools {
		if avail&(1<<p) != 0 {
			return 1 << p, depth
		}
	}
	return 0, depth
}

// latencyRanking returns the client network's ranking of a's members
// (nil when the map knows none) and the depth of the client's cell.
func (r *Record) latencyRanking(a *Action, o *outcome, q *Query) ([]uint8, int) {
	s := q.Latency
	if s == nil || r.Index >= len(s.recs) || s.recs[r.Index] == nil || o.lclass < 0 {
		return nil, 0
	}
	al := &s.recs[r.Index].acts[a.Latency]
	t := &s.cells4
	addr := q.Client.Unmap()
	if addr.Is6() {
		t = &s.cells6
	}
	var cell uint32
	depth := 0
	if !o.virtual { // a client at the node has no address: no CIDR key
		cell, _, depth = t.lookup(addr)
	}
	var id uint32
	if cell == 0 {
		if int(o.lclass) < len(al.byClass) {
			id = al.byClass[o.lclass]
		}
	} else {
		id = al.byCell[uint64(cell)<<32|uint64(o.lclass)]
	}
	return al.rankings[id], depth
}

// buildCells splits each address family by the prefixes: cell i (from 1)
// is the addresses whose most specific prefix is prefixes[i-1], cell 0 the
// addresses no prefix covers. Sibling leaves of the same cell merge, so a
// leaf's depth is the widest prefix over which the cell is the same.
func buildCells(prefixes []netip.Prefix) (v4, v6 trie, cells []netip.Prefix) {
	cells = make([]netip.Prefix, 1, len(prefixes)+1)
	var p4, p6 []netip.Prefix
	for _, p := range prefixes {
		if p.Addr().Is4() {
			p4 = append(p4, p)
		} else {
			p6 = append(p6, p)
		}
	}
	index := map[netip.Prefix]uint32{}
	for _, p := range prefixes {
		index[p] = uint32(len(cells))
		cells = append(cells, p)
	}
	build := func(root netip.Prefix, ps []netip.Prefix) trie {
		// ps is sorted by address, then length: every prefix inside a
		// node's range is one contiguous run of it.
		var b trieBuilder
		var node func(p netip.Prefix, ps []netip.Prefix, cur uint32) uint32
		node = func(p netip.Prefix, ps []netip.Prefix, cur uint32) uint32 {
			for len(ps) > 0 && ps[0].Bits() <= p.Bits() {
				if ps[0] == p {
					cur = index[p]
				}
				ps = ps[1:]
			}
			if len(ps) == 0 {
				return b.leaf(cur)
			}
			lo, hi := geo.Halves(p)
			split := sort.Search(len(ps), func(i int) bool { return !lo.Contains(ps[i].Addr()) })
			z := node(lo, ps[:split], cur)
			o := node(hi, ps[split:], cur)
			return b.node(z, o)
		}
		ref := node(root, ps, 0)
		return b.finish(ref, root.Addr().BitLen())
	}
	v4 = build(netip.PrefixFrom(netip.IPv4Unspecified(), 0), p4)
	v6 = build(netip.PrefixFrom(netip.IPv6Unspecified(), 0), p6)
	return v4, v6, cells
}

// LatencyCandidate is one candidate pool in a latency explanation.
type LatencyCandidate struct {
	Pool string  `json:"pool"`
	Site string  `json:"site"`
	RTT  float64 `json:"rtt_ms,omitempty"`
	// Source is measured, estimated, stale (a stale measurement was
	// skipped; RTT then comes from a less specific key or the estimate)
	// or none.
	Source string `json:"source"`
	// Key is the map key a measurement came from.
	Key string `json:"key,omitempty"`
	// Estimate shows the estimate's arithmetic when Source is estimated.
	Estimate string `json:"estimate,omitempty"`
	Usable   bool   `json:"usable"`
}

// LatencyTrace explains one by: latency decision.
type LatencyTrace struct {
	Rule       int                `json:"rule"` // 1-based
	Network    string             `json:"network"`
	Candidates []LatencyCandidate `json:"candidates"`
	// State is the network's anti-flap state (absent before its first
	// evaluation).
	State  *latency.State `json:"state,omitempty"`
	Update uint64         `json:"update"`
	Winner string         `json:"winner,omitempty"`
	Why    string         `json:"why"`
}

// ExplainLatency explains rule's by: latency action for a client at addr
// (info being its geo facts; addr invalid for the node's virtual client) and the pools in avail (the usable ones),
// given that winner was answered ("" when none), with the map and anti-flap
// state of the table's current latency state.
func (l *Live) ExplainLatency(r *Record, rule int, addr netip.Addr, info *geo.Info, avail uint64, winner string, now time.Time) *LatencyTrace {
	return l.explainLatency(r, &r.Rules[rule].Action, rule, addr, info, avail, winner, now)
}

// explainLatency is ExplainLatency for any by: latency action of r (a
// rule's or a group's).
func (l *Live) explainLatency(r *Record, a *Action, rule int, addr netip.Addr, info *geo.Info, avail uint64, winner string, now time.Time) *LatencyTrace {
	if a.Kind != ActLatency {
		return nil
	}
	tr := &LatencyTrace{Rule: rule + 1, Winner: winner}
	s := l.Latency()
	if s == nil {
		tr.Why = "no latency map evaluated yet: fallback order"
		return tr
	}
	tr.Update = s.update
	h := s.h
	in, cell := info, uint32(0)
	if addr.IsValid() { // invalid: a client at the node, which has no address (no CIDR key)
		var p netip.Prefix
		p, in = asDecided(netip.PrefixFrom(addr, addr.BitLen()), info)
		tt := &s.cells4
		if p.Addr().Is6() {
			tt = &s.cells6
		}
		cell, _, _ = tt.lookup(p.Addr())
	}
	cls := classOf(in)
	// Evaluate as SetLatency did: for the whole cell and class.
	g, ok := r.latClassIndex[cls]
	if !ok {
		g = -1
	}
	c := cls.client(s, cell)
	tr.Network = s.cellKeys[cell] + " " + cls.key()
	rtts := s.m.Lookup(nil, &c, r.latencySites(nil, a), now)
	best, bestMs := "", math.Inf(1)
	for i, rt := range rtts {
		m := a.Candidates[i]
		name := r.MemberName(m)
		lc := LatencyCandidate{Pool: name, Site: r.memberSite(m), RTT: rt.Ms, Source: rt.Source, Key: rt.Key, Usable: r.usableMember(m, avail)}
		if rt.Stale {
			lc.Source = latency.SourceStale + " → " + rt.Source
		}
		if rt.Source == latency.SourceEstimated {
			o := s.m.Options()
			plat, plon, _, _ := r.memberLoc(m)
			lc.Estimate = fmt.Sprintf("2 × %.0f km / %g km/ms + %g ms", Distance(cls.lat, cls.lon, plat, plon), o.KmPerMs, o.OverheadMs)
		}
		if rt.Source != latency.SourceNone && lc.Usable && rt.Ms < bestMs {
			best, bestMs = name, rt.Ms
		}
		tr.Candidates = append(tr.Candidates, lc)
	}
	if h != nil && g >= 0 {
		if st, ok := h.State(r.networkKey(a, s, network{cell, g})); ok {
			tr.State = &st
		}
	}
	switch {
	case winner == "":
		tr.Why = "no usable pool among the candidates or the fallback order"
	case best == "":
		tr.Why = "no usable candidate has an RTT (measured or estimated): first usable pool of the fallback order"
	case tr.State != nil && tr.State.Current == winner && winner != best:
		m := h.Options().SwitchMargin
		if tr.State.Pending != "" {
			tr.Why = fmt.Sprintf("kept %s (current choice): %s is better by at least %.0f%% but only for %d of %d updates", winner, tr.State.Pending, 100*m, tr.State.Rounds, tr.State.Needed)
		} else {
			tr.Why = fmt.Sprintf("kept %s (current choice): no usable site is better by the switch margin of %.0f%%", winner, 100*m)
		}
	case tr.State != nil && tr.State.Current != winner:
		tr.Why = fmt.Sprintf("the current choice %s is unusable: next lowest RTT", tr.State.Current)
	default:
		tr.Why = fmt.Sprintf("lowest RTT among usable candidates (%.1f ms)", bestMs)
	}
	return tr
}
