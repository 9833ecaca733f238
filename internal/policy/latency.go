package policy

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"sync"
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
//     anti-flap state (kept in a LatencyMemory, off the query path), and
//     publishes an immutable LatencyState: per network a ranking, the
//     current choice first, then the rest by RTT. Records that share a
//     partition, candidates and usable candidates share that work and that
//     state (latency groups, below): an update costs in proportion to the
//     policies, not the names.
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
	m      *latency.Map
	mem    *LatencyMemory
	update uint64
	*latCells
	recs []*recordLatency // by record index; records of one group share one
	// Stats describe the evaluation that built the state.
	Stats LatencyStats
}

// LatencyStats describe one SetLatency evaluation.
type LatencyStats struct {
	Update uint64 // the map's update counter
	Cells  int    // CIDR cells (distinct most specific keys)
	// Networks is the (cell, class) networks the choices cover, over all
	// actions of all groups: it follows the policies, not the records.
	// Evaluated is those evaluated by this call (the others were kept).
	Networks, Evaluated int
	Rankings            int // distinct rankings stored
	// Groups is the latency groups evaluated (records that share a
	// partition, candidates and usable candidates), Records the records
	// they answer for.
	Groups, Records int
	// Reused is the groups whose rankings were kept: nothing they read
	// changed since their last evaluation (a reload).
	Reused int
	Took   time.Duration // evaluation time
}

// recordLatency is the rankings of one latency group, which every record
// of the group answers from, and the networks they are for.
type recordLatency struct {
	g *latGroup
	netIndex
	acts []actionLatency
}

type actionLatency struct {
	rankings [][]uint8 // rankings[0] is empty
	ids      []uint32  // by network (netIndex.nets): its ranking
}

// netIndex finds a network among a family's networks: the classes with no
// CIDR key first (network i is class i), then each cell's classes.
type netIndex struct {
	nets      []network
	classes   int      // networks of cell 0
	cellStart []uint32 // by cell: where its networks start (len: cells+1)
}

// find returns the position of (cell, class) in nets, or -1.
func (x *netIndex) find(cell uint32, class int32) int {
	if cell == 0 {
		if class >= 0 && int(class) < x.classes {
			return int(class)
		}
		return -1
	}
	if int(cell)+1 >= len(x.cellStart) {
		return -1
	}
	for i := x.cellStart[cell]; i < x.cellStart[cell+1]; i++ {
		if x.nets[i].class == class {
			return int(i)
		}
	}
	return -1
}

// Latency returns the latency state the query path uses (nil before the
// first SetLatency).
func (l *Live) Latency() *LatencyState { return l.lat.Load() }

// Records that evaluate alike share one evaluation and one anti-flap
// state: a latency update costs in proportion to the policies, not to the
// names. Two records evaluate alike when they share
//
//   - the compiled partition (share.go), which gives the networks (the
//     latency classes and, for each CIDR cell, the classes under it),
//   - their latency actions' candidates: positions, names, sites and
//     locations (latencyKey), which the map is asked about, and
//   - which of those candidates are usable now (their own pools' health),
//     which anti-flap reads.
//
// Records of one such family that have each had the same evaluations make
// one latency group, whose anti-flap state (one latency.Choice per action
// and network) is the state each of them would have kept alone. The
// grouping is remembered by record name in the LatencyMemory, across
// updates and tables (a reload):
//
//   - When the records of a group come to evaluate apart (a pool of some
//     of them goes down, or a reload gives some other candidates), the
//     largest part keeps the group and every other part continues from a
//     copy of its state.
//   - Groups that evaluate alike again join when their states are the
//     same (as they become once the anti-flap rounds have played out);
//     until then each keeps its own, as the records would alone.
//   - A record the memory has not seen (a new name, the first update)
//     joins the largest group that evaluates as it does, else starts one.

// LatencyMemory is what latency choices remember from one update to the
// next, across tables: the anti-flap state of every latency group, which
// group each record name is in, and the CIDR cells of the last map. Calls
// of SetLatency that share one are serialised by the caller; explain reads
// it at any time.
type LatencyMemory struct {
	h     *latency.Hysteresis // the options and the anti-flap rule (nil: none)
	mu    sync.Mutex          // guards the groups and their states
	of    map[string]*latMember
	next  uint64
	cells *latCells
	nets  map[*outcome]*netsAt // by partition: its networks for cells
}

// NewLatencyMemory returns an empty memory with the anti-flap options of o.
func NewLatencyMemory(o latency.Options) *LatencyMemory {
	return &LatencyMemory{h: latency.NewHysteresis(o), of: map[string]*latMember{}, nets: map[*outcome]*netsAt{}}
}

// latMember is a record name's group and the last update it was
// evaluated at.
type latMember struct {
	g    *latGroup
	seen uint64
}

// latGroup is the anti-flap state of one latency group: one
// latency.Choice per action and network, laid out as the networks of the
// family it was last evaluated for.
type latGroup struct {
	id    uint64
	fam   famID              // the layout: the family's networks for cells
	cells *latCells          //
	keys  []flapKey          // by network: its identity
	slots [][]latency.Choice // by action, by network
	seen  uint64             // the last update it was evaluated at
	last  *latEval           // its last evaluation, while its layout stays
}

// latEval is a group's last evaluation and what it read: evaluating
// again with the same would give the same rankings and leave the state as
// it is (several evaluations within one update count as one round), so a
// reload that changes nothing of it keeps them.
type latEval struct {
	m      *latency.Map
	update uint64
	usable usableSet
	now    time.Time
	rl     *recordLatency
	nets   int // the networks it evaluated, over its actions
}

// flapKey is a network's identity within a group, with the action (the
// row of slots): stable across updates and reloads while the most
// specific CIDR key (the zero prefix for none) and the geo facts stay the
// same.
type flapKey struct {
	cell  netip.Prefix
	class string
}

func (mem *LatencyMemory) newGroup() *latGroup {
	mem.next++
	return &latGroup{id: mem.next}
}

// fork returns a new group that continues from a copy of g's state.
func (mem *LatencyMemory) fork(g *latGroup) *latGroup {
	n := mem.newGroup()
	n.fam, n.cells, n.keys = g.fam, g.cells, g.keys // keys are never written
	n.slots = make([][]latency.Choice, len(g.slots))
	for i, row := range g.slots {
		n.slots[i] = slices.Clone(row)
	}
	return n
}

// layout lays g's state out as f's networks for c, carrying each
// network's state over by its identity; networks gone are forgotten.
func (g *latGroup) layout(f *latFamily, c *latCells) {
	if g.fam == f.id && g.cells == c {
		return
	}
	nets := f.nets
	keys := make([]flapKey, len(nets))
	for i, n := range nets {
		keys[i] = flapKey{cell: c.cellPrefix[n.cell], class: f.rep.latClassKeys[n.class]}
	}
	slots := make([][]latency.Choice, len(f.acts))
	for ai := range slots {
		slots[ai] = make([]latency.Choice, len(nets))
	}
	if len(g.slots) > 0 {
		old := make(map[flapKey]int, len(g.keys))
		for i, k := range g.keys {
			old[k] = i
		}
		for i, k := range keys {
			if j, ok := old[k]; ok {
				for ai := range min(len(slots), len(g.slots)) {
					slots[ai][i] = g.slots[ai][j]
				}
			}
		}
	}
	g.fam, g.cells, g.keys, g.slots, g.last = f.id, c, keys, slots, nil
}

// sameState reports whether g and o, laid out alike, would choose alike
// from now on.
func sameState(g, o *latGroup) bool {
	if g.fam != o.fam || g.cells != o.cells || len(g.slots) != len(o.slots) {
		return false
	}
	for ai, row := range g.slots {
		for i := range row {
			if !row[i].Same(&o.slots[ai][i]) {
				return false
			}
		}
	}
	return true
}

// state returns the state of action ai for the network (cell, class), or
// nil.
func (g *latGroup) state(ai int, cell netip.Prefix, class string) *latency.Choice {
	if ai >= len(g.slots) {
		return nil
	}
	for i, k := range g.keys {
		if k.cell == cell && k.class == class {
			return &g.slots[ai][i]
		}
	}
	return nil
}

// latCells is the CIDR cells of a set of map prefixes.
type latCells struct {
	m          *latency.Map // a map with these prefixes
	cells4     trie
	cells6     trie
	cellPrefix []netip.Prefix // by cell; cell 0 is "no CIDR key" (the zero prefix)
	cellKeys   []string       // cellPrefix as text ("-" for cell 0)
}

// cellsFor returns the cells of m's prefixes, the last ones when m has
// the same prefixes.
func (mem *LatencyMemory) cellsFor(m *latency.Map) *latCells {
	if c := mem.cells; c != nil && c.m.SamePrefixes(m) {
		return c
	}
	c := &latCells{m: m}
	c.cells4, c.cells6, c.cellPrefix = buildCells(m.Prefixes())
	c.cellKeys = make([]string, len(c.cellPrefix))
	c.cellKeys[0] = "-"
	for i, p := range c.cellPrefix[1:] {
		c.cellKeys[i+1] = p.String()
	}
	mem.cells = c
	return c
}

// latFamilies is the records of a table that evaluate alike but for
// health, found once per live state.
type latFamilies struct {
	fams []*latFamily
	of   []int32 // by record index: its family, -1 without latency
}

// latFamily is one family: its first record stands for all.
type latFamily struct {
	rep      *Record
	acts     []latAct // by Action.Latency
	cands    []int    // every candidate member of every action
	id       famID
	netIndex           // its networks for netsOf
	netsOf   *latCells // the cells they were listed for
}

// famID is a family's identity across tables: the partition (records
// sharing one share its slices) and the latency key.
type famID struct {
	part *outcome
	key  string
}

// netsAt is a partition's networks for a set of cells.
type netsAt struct {
	cells *latCells
	x     netIndex
	seen  uint64
}

// latAct is what evaluating one action reads of its candidates.
type latAct struct {
	sites   []latency.Site
	names   []string // the candidates' member names
	members []int    // the candidates
}

// member returns the candidate named name, or -1.
func (a *latAct) member(name string) int {
	for i, n := range a.names {
		if n == name {
			return a.members[i]
		}
	}
	return -1
}

// latencyKey describes what evaluating r's latency actions reads beyond
// its partition: each candidate's position, name, site and location.
func (r *Record) latencyKey() string {
	var b []byte
	for _, a := range r.latencyActs {
		b = append(b, '|')
		for _, p := range a.Candidates {
			lat, lon, ok, _ := r.memberLoc(p)
			b = strconv.AppendInt(b, int64(p), 10)
			b = append(b, ' ')
			b = append(b, r.MemberName(p)...)
			b = append(b, 0)
			b = append(b, r.memberSite(p)...)
			b = append(b, 0)
			if ok {
				b = strconv.AppendFloat(b, lat, 'g', -1, 64)
				b = append(b, ',')
				b = strconv.AppendFloat(b, lon, 'g', -1, 64)
			}
			b = append(b, ';')
		}
	}
	return string(b)
}

// latencyFamilies returns the table's families, finding them at the
// first call (SetLatency calls on one Live are serialised).
func (l *Live) latencyFamilies() *latFamilies {
	if l.latFam != nil {
		return l.latFam
	}
	fs := &latFamilies{of: make([]int32, len(l.t.Records))}
	index := map[famID]int32{}
	for i, r := range l.t.Records {
		fs.of[i] = -1
		if !r.HasLatency() {
			continue
		}
		k := famID{key: r.latKey}
		if k.key == "" {
			k.key = r.latencyKey() // a record not from Build
		}
		if len(r.outcomes) > 0 {
			k.part = &r.outcomes[0] // records sharing a partition share its slices
		}
		fi, ok := index[k]
		if !ok {
			fi = int32(len(fs.fams))
			index[k] = fi
			f := &latFamily{rep: r, id: k, acts: make([]latAct, len(r.latencyActs))}
			seen := map[int]bool{}
			for ai, a := range r.latencyActs {
				la := &f.acts[ai]
				la.sites = r.latencySites(nil, a)
				for _, p := range a.Candidates {
					la.names = append(la.names, r.MemberName(p))
					la.members = append(la.members, p)
					if !seen[p] {
						seen[p] = true
						f.cands = append(f.cands, p)
					}
				}
			}
			fs.fams = append(fs.fams, f)
		}
		fs.of[i] = fi
	}
	l.latFam = fs
	return fs
}

// usableSet is a set of member indices.
type usableSet [4]uint64

func (u *usableSet) has(m int) bool { return m >= 0 && m < 256 && u[m>>6]&(1<<(m&63)) != 0 }

// usable returns which of f's candidates r can answer with when the pools
// in up are usable.
func (f *latFamily) usable(r *Record, up uint64) usableSet {
	var u usableSet
	for _, m := range f.cands {
		if m < 256 && r.usableMember(m, up) {
			u[m>>6] |= 1 << (m & 63)
		}
	}
	return u
}

// networks returns the networks of f's partition for cells, listing them
// again only when the cells changed (kept across tables: a reload that
// keeps a partition keeps its networks).
func (mem *LatencyMemory) networks(f *latFamily, c *latCells, update uint64) []network {
	if f.netsOf != c {
		e := mem.nets[f.id.part]
		if e == nil || e.cells != c {
			e = &netsAt{cells: c, x: f.rep.latencyNetworks(c)}
			mem.nets[f.id.part] = e
		}
		e.seen = update
		f.netIndex, f.netsOf = e.x, c
	}
	return f.nets
}

// latBucket is the records of one group at this update.
type latBucket struct {
	fam    int32
	usable usableSet
	g      *latGroup
	recs   []int32
}

// buckets puts the table's latency records into groups for this update
// (see above) and records each name's group; mem.mu is held.
func (mem *LatencyMemory) buckets(l *Live, fs *latFamilies, cells *latCells, update uint64) []*latBucket {
	type key struct {
		fam    int32
		usable usableSet
		g      *latGroup
	}
	index := map[key]*latBucket{}
	var all []*latBucket
	for _, r := range l.t.Records {
		fi := fs.of[r.Index]
		if fi < 0 {
			continue
		}
		k := key{fam: fi, usable: fs.fams[fi].usable(r, l.Up(r, dns.TypeA)|l.Up(r, dns.TypeAAAA))}
		if e := mem.of[r.Name]; e != nil {
			k.g = e.g
		}
		b := index[k]
		if b == nil {
			b = &latBucket{fam: k.fam, usable: k.usable, g: k.g}
			index[k] = b
			all = append(all, b)
		}
		b.recs = append(b.recs, int32(r.Index))
	}
	// Remembered groups first, largest first.
	slices.SortStableFunc(all, func(a, b *latBucket) int {
		if (a.g == nil) != (b.g == nil) {
			if a.g == nil {
				return 1
			}
			return -1
		}
		return cmp.Compare(len(b.recs), len(a.recs))
	})
	kept := map[*latGroup]bool{}
	for _, b := range all {
		if b.g == nil {
			continue
		}
		if kept[b.g] {
			b.g = mem.fork(b.g) // the group's records now evaluate apart
		} else {
			kept[b.g] = true
		}
	}
	type eval struct {
		fam    int32
		usable usableSet
	}
	first := map[eval][]*latBucket{}
	out := all[:0]
	for _, b := range all {
		e := eval{b.fam, b.usable}
		mem.networks(fs.fams[b.fam], cells, update)
		if b.g != nil {
			b.g.layout(fs.fams[b.fam], cells)
		}
		joined := false
		for _, f := range first[e] {
			if b.g == nil || sameState(f.g, b.g) {
				f.recs = append(f.recs, b.recs...)
				joined = true
				break
			}
		}
		if joined {
			continue
		}
		if b.g == nil {
			b.g = mem.newGroup()
			b.g.layout(fs.fams[b.fam], cells)
		}
		first[e] = append(first[e], b)
		out = append(out, b)
	}
	for _, b := range out {
		for _, ri := range b.recs {
			name := l.t.Records[ri].Name
			e := mem.of[name]
			if e == nil {
				e = &latMember{}
				mem.of[name] = e
			}
			e.g, e.seen = b.g, update
		}
	}
	return out
}

// turnedStale reports whether a value of m fresh at from is stale at now
// (memo caches the answer by from).
func (mem *LatencyMemory) turnedStale(m *latency.Map, from, now time.Time, memo map[time.Time]bool) bool {
	if m.Options().MaxAge <= 0 {
		return false
	}
	stale, ok := memo[from]
	if !ok {
		next := m.NextStale(from)
		stale = !next.IsZero() && !next.After(now)
		memo[from] = stale
	}
	return stale
}

// prune forgets the records not evaluated since update (and so the groups
// only they were in).
func (mem *LatencyMemory) prune(update uint64) {
	for name, e := range mem.of {
		if e.seen < update {
			delete(mem.of, name)
		}
	}
	for p, e := range mem.nets {
		if e.seen < update || e.cells != mem.cells {
			delete(mem.nets, p)
		}
	}
}

// SetLatency evaluates every by: latency action of the table against m,
// with the anti-flap state in mem (nil: none), and publishes the result
// for the query path. update is the map's update counter (several calls
// with the same update count as one round for anti-flap); now decides
// which values are stale. Callers serialise calls on one Live and on one
// memory. Pool usability is the live health: a network whose current
// choice is unusable switches at once. Records that evaluate alike are
// evaluated once (see above).
func (l *Live) SetLatency(m *latency.Map, mem *LatencyMemory, update uint64, now time.Time) LatencyStats {
	t := l.t
	start := time.Now()
	s := &LatencyState{m: m, mem: mem, update: update, recs: make([]*recordLatency, len(t.Records))}
	if !slices.ContainsFunc(t.Records, (*Record).HasLatency) {
		// Nothing steers by latency: no cells to split, no networks.
		s.Stats = LatencyStats{Update: update, Took: time.Since(start)}
		l.lat.Store(s)
		return s.Stats
	}
	if mem == nil {
		mem = &LatencyMemory{of: map[string]*latMember{}, nets: map[*outcome]*netsAt{}} // no anti-flap
	}
	fs := l.latencyFamilies()
	s.latCells = mem.cellsFor(m)
	st := LatencyStats{Update: update, Cells: len(s.cellPrefix) - 1}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	ev := evaluator{h: mem.h}
	staleSince := map[time.Time]bool{}
	for _, b := range mem.buckets(l, fs, s.latCells, update) {
		f := fs.fams[b.fam]
		nets := f.nets
		if e := b.g.last; e != nil && e.m == m && e.update == update && e.usable == b.usable && !now.Before(e.now) &&
			!mem.turnedStale(m, e.now, now, staleSince) {
			// Nothing it reads changed since (a reload that keeps the
			// partition and candidates): the same rankings.
			for _, ri := range b.recs {
				s.recs[ri] = e.rl
			}
			b.g.seen = update
			st.Groups++
			st.Reused++
			st.Records += len(b.recs)
			st.Networks += e.nets
			continue
		}
		before := st.Networks
		rl := &recordLatency{g: b.g, netIndex: f.netIndex, acts: make([]actionLatency, len(f.acts))}
		ev.usable = b.usable
		for ai := range f.acts {
			al := &rl.acts[ai]
			al.rankings = [][]uint8{nil}
			al.ids = make([]uint32, len(nets))
			intern := map[string]uint32{"": 0}
			slots := b.g.slots[ai]
			for i, n := range nets {
				rk := ev.evaluate(f, ai, s, n, &slots[i], update, now)
				id, ok := intern[string(rk)]
				if !ok {
					id = uint32(len(al.rankings))
					al.rankings = append(al.rankings, append([]uint8(nil), rk...))
					intern[string(rk)] = id
				}
				al.ids[i] = id
				st.Networks++
			}
			st.Rankings += len(al.rankings) - 1
		}
		b.g.seen = update
		b.g.last = &latEval{m: m, update: update, usable: b.usable, now: now, rl: rl, nets: st.Networks - before}
		st.Evaluated += st.Networks - before
		for _, ri := range b.recs {
			s.recs[ri] = rl
		}
		st.Groups++
		st.Records += len(b.recs)
	}
	mem.prune(update)
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
func (r *Record) latencyNetworks(s *latCells) netIndex {
	out := make([]network, 0, len(r.latClasses)+len(s.cellPrefix))
	for g := range r.latClasses {
		out = append(out, network{0, int32(g)})
	}
	x := netIndex{classes: len(out), cellStart: make([]uint32, len(s.cellPrefix)+1)}
	seen := map[int32]bool{}
	for c := 1; c < len(s.cellPrefix); c++ {
		x.cellStart[c] = uint32(len(out))
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
	x.cellStart[len(s.cellPrefix)] = uint32(len(out))
	x.nets = out
	return x
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

// evaluator holds scratch space reused across networks, and the group
// being evaluated.
type evaluator struct {
	h      *latency.Hysteresis
	usable usableSet
	la     *latAct
	rtts   []latency.RTT
	known  []latency.RTT
	rank   []uint8
	ok     func(site string) bool
}

// evaluate returns network n's ranking for action ai of f, for a group
// whose usable candidates are ev.usable and whose state for n is ch: the
// current choice first,
// then the other candidates with an RTT, lowest first. Candidates with no
// RTT (no measurement and no location to estimate from) are left out: the
// action's fallback order covers them.
func (ev *evaluator) evaluate(f *latFamily, ai int, s *LatencyState, n network, ch *latency.Choice, update uint64, now time.Time) []uint8 {
	r, la := f.rep, &f.acts[ai]
	c := r.latClasses[n.class].client(s.latCells, n.cell)
	ev.rtts = s.m.Lookup(ev.rtts[:0], &c, la.sites, now)
	ev.known = ev.known[:0]
	for i := range ev.rtts {
		if ev.rtts[i].Source == latency.SourceNone {
			continue
		}
		k := ev.rtts[i]
		k.Site = la.names[i]
		ev.known = append(ev.known, k)
	}
	ev.rank = ev.rank[:0]
	if len(ev.known) == 0 {
		return ev.rank
	}
	slices.SortStableFunc(ev.known, func(x, y latency.RTT) int { return cmp.Compare(x.Ms, y.Ms) })
	cur := ""
	if ev.h != nil {
		if ev.ok == nil {
			ev.ok = func(site string) bool { return ev.usable.has(ev.la.member(site)) }
		}
		ev.la = la
		cur = ev.h.Step(ch, ev.known, ev.ok, update)
	}
	if cur != "" {
		ev.rank = append(ev.rank, uint8(la.member(cur)))
	}
	for _, k := range ev.known {
		if k.Site != cur {
			ev.rank = append(ev.rank, uint8(la.member(k.Site)))
		}
	}
	return ev.rank
}

// client is what the map is asked about the network of class c in cell:
// the whole cell prefix (cell 0: no CIDR key at all) with c's geo facts.
func (c *latClass) client(s *latCells, cell uint32) latency.Client {
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
	rl := s.recs[r.Index]
	al := &rl.acts[a.Latency]
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
	if i := rl.find(cell, o.lclass); i >= 0 {
		id = al.ids[i]
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
	// RUMKey and RUMms are the real-user value that went into RTT
	// (blended with the probes' by rum.weight), when there is one.
	RUMKey string  `json:"rum_key,omitempty"`
	RUMms  float64 `json:"rum_ms,omitempty"`
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
	var h *latency.Hysteresis
	if s.mem != nil {
		h = s.mem.h
	}
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
	c := cls.client(s.latCells, cell)
	tr.Network = s.cellKeys[cell] + " " + cls.key()
	rtts := s.m.Lookup(nil, &c, r.latencySites(nil, a), now)
	best, bestMs := "", math.Inf(1)
	for i, rt := range rtts {
		m := a.Candidates[i]
		name := r.MemberName(m)
		lc := LatencyCandidate{Pool: name, Site: r.memberSite(m), RTT: rt.Ms, Source: rt.Source, Key: rt.Key, Usable: r.usableMember(m, avail),
			RUMKey: rt.RUMKey, RUMms: rt.RUMms}
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
	if h != nil && g >= 0 && r.Index < len(s.recs) && s.recs[r.Index] != nil {
		// The state of the record's group, as SetLatency left it.
		s.mem.mu.Lock()
		st, ok := h.StateOf(s.recs[r.Index].g.state(a.Latency, s.cellPrefix[cell], r.latClassKeys[g]))
		s.mem.mu.Unlock()
		if ok {
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
