// Package policy owns traffic steering: a steered record's pools and rules,
// their compilation against the loaded geo databases into a partition of
// the IPv4 and IPv6 address space, and the per-query decision.
//
// Compiling walks the address space once, splitting it wherever a
// database's network or a rule's CIDR changes, evaluates the rules once per
// piece, and merges neighbouring pieces with the same outcome. A query is
// then one trie walk that yields both the rules that match the client and
// the widest prefix over which that is true, which becomes the ECS scope.
// Health (pool usability) is applied per query on top of the partition, so
// a health change never recompiles it; while a pool is not usable, the
// leaves that then give one answer answer with their merged scope,
// computed when the state changes (widen.go).
//
// The package has two halves. A Table (build.go) is the compiled records
// of one configuration; it never changes once built, and a reload builds
// a new one (reusing what it can, reuse.go and share.go). A Live
// (live.go) is the state of one Table while it is served: health, the
// scopes and group resolutions that follow from it, latency rankings
// (latency.go) and when each pool was last answered, all read lock-free.
// Live.Decide is the one decision step: the server's fast and general
// paths, explain and a simulation all call it, with the caller's clock,
// so nothing here runs a goroutine or reads a ticker of its own.
//
// answersets.go enumerates every RRset a record can answer with (for a
// signed zone to sign each ahead of time, package presign): a multivalue
// limit answers a rotation window of its addresses so there are n such
// sets, not n-choose-limit; Live.OnHealth hands over the sets a health
// change makes reachable before the change is published.
package policy

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"sync"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/geo"
)

// Record is a compiled steered record. It never changes once compiled.
type Record struct {
	// Name is the owner in canonical form.
	Name string
	// Type is dns.TypeA (answering A and AAAA) or dns.TypeCNAME.
	Type uint16
	TTL  uint32
	// DegradedTTL, when not 0, replaces TTL while any pool is down or
	// draining (ttl_while_degraded).
	DegradedTTL uint32
	Pools       []*Pool
	// Groups are the record's groups (its own and its policy's), whose
	// member indices follow the pools' (see group.go).
	Groups []*Group
	// ruleSet is the rules and what follows from them alone, shared by
	// the records of a policy whose pools are named alike (shareRules):
	// one pointer a record, not 152 bytes (issue 31).
	*ruleSet
	// NextRule: when the matched rule has no usable pool, try the next
	// matching rule (on_unhealthy: next_rule). Otherwise go straight to
	// WhenAllDown.
	NextRule    bool
	WhenAllDown AllDown
	// FallbackPool is the pool of when_all_down: fallback_pool.
	FallbackPool int
	// Enabled has a bit set for each pool not disabled in the config.
	Enabled uint64
	// Line is where the record starts in the configuration file.
	Line int
	// Index is the record's position in its Table.
	Index int

	// partition is the compiled partition, shared by every record with
	// its compile key (share.go).
	*partition
	hasV4, hasV6 uint64 // pools with addresses of each family
	allPools     uint64
	// nodeTwins: r has unknown-client tries (u4, u6) for ecs.unknown_client:
	// node, whose leaves hold the outcome of a client at the node there
	// (its twin) and whether the geo databases place nobody there
	// (node.go); node is then the table's node.
	nodeTwins bool
	node      *nodeInput
	ckey      string // what the partition depends on (share.go)
	dkey      string // what a decision reads beyond the partition (widen.go)
	// latKey is what evaluating its latency actions reads beyond the
	// partition (latency.go), "" without any.
	latKey string
	src    int // index in the configuration's records
	// warns are the warnings building and compiling the record gave, for
	// a build that reuses it to give again (reuse.go).
	warns []warning
}

// ruleSet is a record's compiled rules and what is derived from them and
// its members' masks. It never changes once built: a record that changes
// any of it (a reload moving the rules' lines) gets a copy (reuse.go).
type ruleSet struct {
	Rules []*Rule
	// mmask and gact are, by member index, its pools and, for a group,
	// its action (nil for a pool): what a nested decision reads.
	mmask         []uint64
	gact          []*Action
	clientRules   uint64
	resolverRules uint64
	defaultBit    uint64
	proximity     []*Action // actions that rank pools by distance
	latencyActs   []*Action // by: latency actions, by Action.Latency
	latencyRules  uint64    // rules whose action is by: latency
}

// partition is what compile makes of a record: the tries and what their
// leaves index. It depends on the compile key alone, so the records of one
// key point at one (sharePartition) instead of each holding a copy of its
// slice headers, and it never changes once compiled.
type partition struct {
	v4, v6   trie
	r4, r6   trie // by resolver address, when a rule has source: resolver
	outcomes []outcome
	masks    []uint64 // resolver trie leaves
	// latClasses are the latency classes of the outcomes (latency.go).
	latClasses    []latClass
	latClassKeys  []string // latClasses[i].key()
	latClassIndex map[latClass]int32
	// u4 and u6 are the unknown-client tries of a record with node twins.
	u4, u6 trie
	// twinBase is added to a leaf's twin: the one twin of a record
	// without CIDR matches, whose u4 and u6 are the table's placed tries
	// (their leaves' twin part is 0).
	twinBase uint32
	// Stats describe the compiled partition.
	Stats Stats
}

// Stats describe a compiled partition.
type Stats struct {
	Leaves4, Leaves6 int
	Nodes4, Nodes6   int
	Outcomes         int
	Bytes            int
}

// AllDown is what a record answers when no pool is usable.
type AllDown uint8

// The when_all_down behaviours.
const (
	// AnswerAll answers with every pool of the matched rule (fail open).
	AnswerAll AllDown = iota
	// FallbackPool answers with Record.FallbackPool.
	FallbackPool
	// NoData answers NOERROR with no records.
	NoData
	// ServFail answers SERVFAIL.
	ServFail
)

func (a AllDown) String() string {
	return [...]string{"answer_all", "fallback_pool", "nodata", "servfail"}[a]
}

// Pool is one site of one record: its addresses (or CNAME target), its
// line, and the PoolSpec of what else it is. It never changes once
// compiled.
type Pool struct {
	// PoolSpec is shared by the pools of every record of a table that
	// name and describe a pool alike (most records of a policy do): a
	// name's pools hold their addresses and 8 bytes more, not a copy of
	// its name, site, check and location. With the answer records made
	// when an answer needs them (answer.go) rather than kept, a pool is
	// 80 bytes, not 256 and 88 a record (issue 31).
	*PoolSpec
	V4, V6 []netip.Addr
	Target string // CNAME records
	Line   int
}

// PoolSpec is what a pool is apart from its addresses and lines.
type PoolSpec struct {
	Name   string
	Index  int
	Lat    float64
	Lon    float64
	HasLoc bool
	Bias   int
	// Site is the name the latency map measures the pool under: the
	// configured site label, or the pool's name.
	Site string
	hash uint64 // of Name, for sticky splits
	// Check names the health check template whose targets are the pool's
	// addresses ("" for none); MinUp of them must be usable.
	Check string
	MinUp int
	// Capacity, when set, is the pool's capacity in the unit of its load
	// feed (capacity.go).
	Capacity *Capacity
}

// ActionKind says how an action picks pools.
type ActionKind uint8

// The kinds of action.
const (
	ActPool ActionKind = iota
	ActSplit
	ActMultivalue
	ActFailover
	ActProximity
	ActFirst
	ActLatency
)

func (k ActionKind) String() string {
	return [...]string{"pool", "split", "multivalue", "failover", "geoproximity", "first", "latency"}[k]
}

// Action picks pools.
type Action struct {
	Kind ActionKind
	// Pools are the candidates in order: the pool; the split's pools; the
	// multivalue pools; the failover list; the fallback list.
	Pools   []int
	Weights []uint32 // split
	Sticky  bool     // split hashed on the client subnet
	Limit   int      // multivalue: at most this many addresses
	// Proximity is the index of this action's ranking in an outcome.
	Proximity int
	// Candidates are the pools geoproximity or latency ranks.
	Candidates []int
	// Latency is the index of a by: latency action in its record.
	Latency int
	mask    uint64 // every pool the action may answer with
	nested  bool   // a group is among its members
}

// Rule is a compiled rule.
type Rule struct {
	Index   int
	Line    int
	Default bool
	Match   *Match // nil for the default
	Action  Action
}

// outcome is what the partition knows about one piece of address space.
type outcome struct {
	mask  uint64    // client rules that match
	ranks [][]uint8 // per proximity action: candidate pools nearest first; nil without a location
	// lclass is the client's latency class (index in Record.latClasses)
	// where a by: latency rule may decide, -1 elsewhere.
	lclass int32
	// virtual marks the outcome of a client at the node (node.go).
	virtual bool
}

// MaxPools and MaxRules bound a record (masks are 64 bits).
const (
	MaxPools = 64
	MaxRules = 64
)

// compileMode says how a compile runs; every mode gives the same
// partition (TestSplitCompileIsSequential).
type compileMode uint8

const (
	// compileSplit builds the IPv4 and IPv6 client tries at once, on two
	// goroutines (a core is free).
	compileSplit compileMode = 1 << iota
	// compileNetip walks the partition over netip prefixes where it
	// would walk over integers (tests: the walk the integer one must
	// equal).
	compileNetip
)

// compile builds the partitions of r against g, looking clients up in
// part (g compiled once) when it is not nil.
func (r *Record) compile(g *geo.Set, part *geo.Partition, mode compileMode) error {
	r.partition = &partition{} // its own: never one shared with another record
	c := r.compiler(g, part, r.partition)
	c.netip = mode&compileNetip != 0
	var err error
	if mode&compileSplit != 0 && part != nil && r.latencyRules == 0 {
		err = c.buildSplit()
	} else {
		if r.v4, err = c.build(netip.PrefixFrom(netip.IPv4Unspecified(), 0), false); err == nil {
			r.v6, err = c.build(netip.PrefixFrom(netip.IPv6Unspecified(), 0), false)
		}
	}
	if err != nil {
		return err
	}
	if r.resolverRules != 0 {
		c.masks = map[uint64]uint32{}
		if r.r4, err = c.build(netip.PrefixFrom(netip.IPv4Unspecified(), 0), true); err != nil {
			return err
		}
		if r.r6, err = c.build(netip.PrefixFrom(netip.IPv6Unspecified(), 0), true); err != nil {
			return err
		}
	}
	switch {
	case r.nodeTwins && len(c.cidrs) == 0:
		// One twin for the whole space, and the table's placed tries.
		r.twinBase = c.outcome(c.nodeInfo, netip.PrefixFrom(netip.IPv4Unspecified(), 0), true)
		r.u4, r.u6 = r.node.placed4, r.node.placed6
	case r.nodeTwins:
		// The unknown-client tries (node.go), apart from the client's so
		// that a subnet's scope stays what it is without them.
		c.unknown = true
		if r.u4, err = c.build(netip.PrefixFrom(netip.IPv4Unspecified(), 0), false); err != nil {
			return err
		}
		if r.u6, err = c.build(netip.PrefixFrom(netip.IPv6Unspecified(), 0), false); err != nil {
			return err
		}
	}
	n4, b4 := r.v4.size()
	n6, b6 := r.v6.size()
	_, rb4 := r.r4.size()
	_, rb6 := r.r6.size()
	var ub4, ub6 int
	if c.unknown { // its own: the placed tries are the table's
		_, ub4 = r.u4.size()
		_, ub6 = r.u6.size()
	}
	r.Stats = Stats{Nodes4: n4, Nodes6: n6, Leaves4: n4 + 1, Leaves6: n6 + 1, Outcomes: len(r.outcomes), Bytes: b4 + b6 + rb4 + rb6 + ub4 + ub6}
	return nil
}

// compiler returns a compiler of r's partitions that adds outcomes to out.
func (r *Record) compiler(g *geo.Set, part *geo.Partition, out *partition) *compiler {
	c := &compiler{r: r, out: out, geo: g, part: part, index: map[string]uint32{}, twin: -1}
	if r.nodeTwins {
		c.nodeInfo = &r.node.info
	}
	if part != nil {
		c.cur = part.Cursor()
	}
	for _, rule := range r.Rules {
		if rule.Match != nil {
			c.cidrs = rule.Match.cidrs(c.cidrs)
		}
	}
	return c
}

// buildSplit builds r's IPv4 client trie here and its IPv6 one on another
// goroutine, with a compiler of its own (its own outcomes, rankings and
// memo; the two only read r, the geo set and the partition), then adds
// the IPv6 outcomes the IPv4 trie did not have after IPv4's, in the order
// the IPv6 walk met them, and renumbers the IPv6 trie's leaves: what a
// walk of IPv4 then IPv6 with one compiler numbers (the outcomes of a
// walk are numbered as first met). Not for records with latency rules,
// whose outcomes add latency classes to r as they are met.
func (c *compiler) buildSplit() error {
	r := c.r
	c6 := r.compiler(c.geo, c.part, &partition{})
	c6.netip = c.netip
	var t6 trie
	var err6 error
	var wg sync.WaitGroup
	wg.Go(func() { t6, err6 = c6.build(netip.PrefixFrom(netip.IPv6Unspecified(), 0), false) })
	t4, err := c.build(netip.PrefixFrom(netip.IPv4Unspecified(), 0), false)
	wg.Wait()
	if err != nil {
		return err
	}
	if err6 != nil {
		return err6
	}
	keys := make([]string, len(c6.index))
	for k, i := range c6.index {
		keys[i] = k
	}
	to := make([]uint32, len(keys))
	for i, k := range keys {
		j, ok := c.index[k]
		if !ok {
			j = uint32(len(c.out.outcomes))
			c.out.outcomes = append(c.out.outcomes, c6.out.outcomes[i])
			c.index[k] = j
		}
		to[i] = j
	}
	renumber := func(refs []uint32) {
		for i, ref := range refs {
			if isLeaf(ref) {
				refs[i] = to[ref&^leafBit] | leafBit
			}
		}
	}
	renumber(t6.nodes)
	renumber(t6.table)
	t6.root = renumber1(t6.root, to)
	r.v4, r.v6 = t4, t6
	return nil
}

func renumber1(ref uint32, to []uint32) uint32 {
	if isLeaf(ref) {
		return to[ref&^leafBit] | leafBit
	}
	return ref
}

type compiler struct {
	r    *Record
	out  *partition // where outcomes are added: r's, or a split build's own
	geo  *geo.Set
	part *geo.Partition // nil: look up in geo
	cur  *geo.Cursor    // on part
	// memo, rmemo and umemo hold the leaf value of each of part's infos
	// (client, resolver and unknown-client tries), when no CIDR match
	// makes leaves depend on more.
	memo, rmemo, umemo []uint32
	cidrs              []netip.Prefix
	index              map[string]uint32 // outcome key -> index
	masks              map[uint64]uint32 // resolver mask -> index
	b                  trieBuilder
	key                []byte
	ranks              map[[2]float64][][]uint8 // rankings by client location
	// nodeInfo is the virtual client at the node when r has node twins;
	// twin its outcome, when no CIDR match makes it depend on the
	// address; unknown is set while the unknown-client tries are built.
	nodeInfo   *geo.Info
	twin       int64
	unknown    bool
	placedOnly bool // the table's placed tries: leaves say only whether info places anybody
	// info is node's lookup when there is no partition; none the facts
	// of space no database is asked about (never written).
	info, none geo.Info
	netip      bool // compileNetip
}

// unrouted reports IPv6 space that holds no real clients once IPv4-mapped
// addresses are unmapped, or that databases alias to IPv4 (6to4, Teredo):
// it is compiled as one leaf with no geo data instead of a second copy of
// the IPv4 tree.
func unrouted(p netip.Prefix) bool {
	for _, u := range unroutedV6 {
		if u.Bits() <= p.Bits() && u.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

var unroutedV6 = []netip.Prefix{
	netip.MustParsePrefix("::/80"),        // IPv4-compatible and IPv4-mapped
	netip.MustParsePrefix("2001::/32"),    // Teredo
	netip.MustParsePrefix("2002::/16"),    // 6to4
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64
}

func (c *compiler) build(root netip.Prefix, resolver bool) (trie, error) {
	c.b = trieBuilder{}
	if !resolver && !c.unknown && c.r.clientIndependent() && len(c.cidrs) == 0 {
		// No rule looks at the client: every piece of the space has
		// the one outcome, and the walk below would fold its leaves
		// back into that one leaf. Made directly, a failover or
		// weighted record costs nothing per network of the databases.
		var none geo.Info
		return c.b.finish(c.b.leaf(c.outcomeOf(&none, root)), root.Addr().BitLen()), nil
	}
	if c.part != nil {
		// A trie over the partition has at most one inner node per
		// leaf of that family: made at that size once, instead of
		// grown by appends that keep every smaller copy until the
		// collector runs (most of a one-policy start-up's peak).
		v4, v6 := c.part.Leaves()
		n := v6
		if root.Addr().Is4() {
			n = v4
		}
		c.b.t.nodes = make([]uint32, 0, 2*n+2)
	}
	var ref uint32
	switch {
	case c.cur != nil && len(c.cidrs) == 0 && !c.netip && root.Addr().Is4():
		ref = c.node4(0, 0, resolver)
	case c.cur != nil && len(c.cidrs) == 0 && !c.netip:
		ref = c.node6(0, 0, 0, resolver)
	default:
		var err error
		if ref, err = c.node(root, resolver); err != nil {
			return trie{}, err
		}
	}
	return c.b.finish(ref, root.Addr().BitLen()), nil
}

// node4 is node over the partition for the IPv4 prefix a/bits when no
// CIDR match makes leaves depend on more than the facts: the same walk
// over integers, a prefix made only where a leaf's value is computed
// (once a distinct info). It was most of a compile: a cursor lookup,
// halves and the unrouted test over netip values at every node.
func (c *compiler) node4(a uint32, bits int, resolver bool) uint32 {
	ip, idx, uniform := c.cur.Lookup4(a)
	if uniform <= bits || bits == 32 {
		return c.b.leaf(c.memoLeaf(ip, int(idx), 0, uint64(a), bits, true, resolver))
	}
	x := c.node4(a, bits+1, resolver)
	y := c.node4(a|1<<(31-bits), bits+1, resolver)
	return c.b.node(x, y)
}

// node6 is node4 for the IPv6 prefix (hi, lo)/bits.
func (c *compiler) node6(hi, lo uint64, bits int, resolver bool) uint32 {
	if unrouted6(hi, lo, bits) {
		// As node: not looked up, a leaf of no facts.
		return c.b.leaf(c.memoLeaf(&c.none, -1, hi, lo, bits, false, resolver))
	}
	ip, idx, uniform := c.cur.Lookup6(hi, lo)
	if uniform <= bits || bits == 128 {
		return c.b.leaf(c.memoLeaf(ip, int(idx), hi, lo, bits, false, resolver))
	}
	x := c.node6(hi, lo, bits+1, resolver)
	if bits < 64 {
		hi |= 1 << (63 - bits)
	} else {
		lo |= 1 << (127 - bits)
	}
	y := c.node6(hi, lo, bits+1, resolver)
	return c.b.node(x, y)
}

// memoLeaf is node's leaf value for ip at the prefix (hi, lo)/bits (an
// IPv4 one in lo when is4), memoized by the partition's index of ip
// (memo, -1 for none).
func (c *compiler) memoLeaf(ip *geo.Info, memo int, hi, lo uint64, bits int, is4, resolver bool) uint32 {
	if memo >= 0 {
		if m := *c.memos(resolver); m != nil && m[memo] != ^uint32(0) {
			return m[memo]
		}
	}
	var p netip.Prefix
	if is4 {
		p = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)}), bits)
	} else {
		var b [16]byte
		for i := range 8 {
			b[i], b[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
		}
		p = netip.PrefixFrom(netip.AddrFrom16(b), bits)
	}
	return c.leafAt(ip, memo, p, resolver)
}

// memos returns the memo of the trie being built (client, resolver or
// unknown-client).
func (c *compiler) memos(resolver bool) *[]uint32 {
	switch {
	case resolver:
		return &c.rmemo
	case c.unknown:
		return &c.umemo
	}
	return &c.memo
}

// leafAt returns the leaf value for ip at p, memoized by the partition's
// index of ip (memo; -1 when the value may depend on p).
func (c *compiler) leafAt(ip *geo.Info, memo int, p netip.Prefix, resolver bool) uint32 {
	memos := c.memos(resolver)
	if memo >= 0 {
		if *memos == nil {
			*memos = make([]uint32, c.part.Infos())
			for i := range *memos {
				(*memos)[i] = ^uint32(0)
			}
		}
		if v := (*memos)[memo]; v != ^uint32(0) {
			return v
		}
	}
	var v uint32
	switch {
	case resolver:
		v = c.resolverLeaf(ip, p)
	case c.unknown:
		v = c.unknownLeaf(ip, p)
	default:
		v = c.outcomeOf(ip, p)
	}
	if memo >= 0 {
		(*memos)[memo] = v
	}
	return v
}

// unroutedV6Bits is unroutedV6 as (hi, lo, bits).
var unroutedV6Bits = func() (out [][3]uint64) {
	for _, u := range unroutedV6 {
		b := u.Addr().As16()
		var hi, lo uint64
		for i := range 8 {
			hi, lo = hi<<8|uint64(b[i]), lo<<8|uint64(b[8+i])
		}
		out = append(out, [3]uint64{hi, lo, uint64(u.Bits())})
	}
	return out
}()

// unroutedTops are the first 16 bits of the unroutedV6 prefixes, which
// are all /16 or longer.
var unroutedTops = func() (out []uint64) {
	for _, u := range unroutedV6Bits {
		if u[2] < 16 {
			panic("policy: an unrouted IPv6 prefix shorter than /16")
		}
		out = append(out, u[0]>>48)
	}
	return out
}()

// unrouted6 is unrouted for the prefix (hi, lo)/bits.
func unrouted6(hi, lo uint64, bits int) bool {
	// The unrouted prefixes are /16 or longer, in a few /16s: most of
	// the walk's prefixes are in none.
	if bits < 16 || !slices.Contains(unroutedTops, hi>>48) {
		return false
	}
	for _, u := range unroutedV6Bits {
		n := int(u[2])
		if n > bits {
			continue
		}
		// The first n bits of the address are u's.
		var mh, ml uint64
		switch {
		case n >= 64:
			mh, ml = ^uint64(0), ^uint64(0)<<(128-n)
		case n > 0:
			mh = ^uint64(0) << (64 - n)
		}
		if hi&mh == u[0] && lo&ml == u[1] {
			return true
		}
	}
	return false
}

func (c *compiler) node(p netip.Prefix, resolver bool) (uint32, error) {
	// ip is read only before the walk goes down (into c.info, which the
	// children overwrite after): a local Info would be allocated at every
	// node of the walk, 1.7 M times for the embedded database.
	ip := &c.none
	uniform := 0
	memo := -1 // the partition's index of ip, when the leaf may be memoized
	if p.Addr().Is4() || !unrouted(p) {
		if c.cur != nil {
			var idx uint32
			ip, idx, uniform = c.cur.Lookup(p.Addr())
			if len(c.cidrs) == 0 {
				memo = int(idx) // no CIDR match: the leaf depends on the facts alone
			}
		} else {
			var err error
			c.info, uniform, err = c.geo.LookupInfo(p.Addr())
			if err != nil {
				return 0, err
			}
			ip = &c.info
		}
	}
	for _, cidr := range c.cidrs {
		if cidr.Addr().BitLen() == p.Addr().BitLen() && cidr.Bits() > p.Bits() && p.Contains(cidr.Addr()) {
			uniform = max(uniform, p.Bits()+1)
		}
	}
	if uniform <= p.Bits() || p.Bits() == p.Addr().BitLen() {
		return c.b.leaf(c.leafAt(ip, memo, p, resolver)), nil
	}
	lo, hi := geo.Halves(p)
	a, err := c.node(lo, resolver)
	if err != nil {
		return 0, err
	}
	b, err := c.node(hi, resolver)
	if err != nil {
		return 0, err
	}
	return c.b.node(a, b), nil
}

// clientIndependent reports whether r's outcome is the same for every
// client: its only rule is the default, and the default neither ranks
// pools by the client's location nor by its latency class, nor does a
// rule look at the resolver or the node.
func (r *Record) clientIndependent() bool {
	for _, rule := range r.Rules {
		if !rule.Default {
			return false
		}
	}
	return len(r.proximity) == 0 && r.latencyRules == 0 && r.resolverRules == 0 && !r.nodeTwins
}

// evalMask returns the rules whose match holds for info at p, among the
// rules that look at the client (resolver false) or the resolver.
func (r *Record) evalMask(info *geo.Info, p netip.Prefix, resolver bool) uint64 {
	var mask uint64
	for _, rule := range r.Rules {
		if rule.Default || rule.Match.Resolver != resolver {
			continue
		}
		if rule.Match.matches(info, p, nil) {
			mask |= 1 << rule.Index
		}
	}
	return mask
}

func (c *compiler) resolverLeaf(info *geo.Info, p netip.Prefix) uint32 {
	m := c.r.evalMask(info, p, true)
	if i, ok := c.masks[m]; ok {
		return i
	}
	i := uint32(len(c.r.masks))
	c.r.masks = append(c.r.masks, m)
	c.masks[m] = i
	return i
}

func (c *compiler) outcomeOf(info *geo.Info, p netip.Prefix) uint32 {
	return c.outcome(info, p, false)
}

// unknownLeaf is the leaf of the unknown-client tries at p, where the geo
// databases say info: the outcome of a client at the node there (its
// twin, which CIDR matches make depend on p) and whether info places
// nobody (node.go).
func (c *compiler) unknownLeaf(info *geo.Info, p netip.Prefix) uint32 {
	if c.placedOnly {
		if placed(info) {
			return 0
		}
		return 1
	}
	var twin uint32
	if c.twin >= 0 {
		twin = uint32(c.twin)
	} else {
		twin = c.outcome(c.nodeInfo, p, true)
		if len(c.cidrs) == 0 { // the same for every piece
			c.twin = int64(twin)
		}
	}
	v := twin << 1
	if !placed(info) {
		v |= 1
	}
	return v
}

// outcome returns the index of the outcome for info at p, adding it when
// new; virtual for a client at the node.
func (c *compiler) outcome(info *geo.Info, p netip.Prefix, virtual bool) uint32 {
	mask := c.r.evalMask(info, p, false)
	key := c.key[:0]
	for i := range 8 {
		key = append(key, byte(mask>>(8*i)))
	}
	var ranks [][]uint8
	if len(c.r.proximity) > 0 && info.HasLocation {
		// Clients share few distinct locations (often country
		// centroids): rank once per location.
		loc := [2]float64{info.Lat, info.Lon}
		ranks = c.ranks[loc]
		if ranks == nil {
			ranks = make([][]uint8, len(c.r.proximity))
			for i, a := range c.r.proximity {
				ranks[i] = c.r.rank(a, info.Lat, info.Lon)
			}
			if c.ranks == nil {
				c.ranks = map[[2]float64][][]uint8{}
			}
			c.ranks[loc] = ranks
		}
	}
	for _, rk := range ranks {
		key = append(key, 0xFF)
		key = append(key, rk...)
	}
	lclass := int32(-1)
	if (mask|c.r.defaultBit|c.r.resolverRules)&c.r.latencyRules != 0 {
		lclass = c.r.latClassOf(info)
		key = append(key, 0xFE, byte(lclass), byte(lclass>>8), byte(lclass>>16), byte(lclass>>24))
	}
	if virtual {
		key = append(key, 0xFD)
	}
	c.key = key
	if i, ok := c.index[string(key)]; ok {
		return i
	}
	i := uint32(len(c.out.outcomes))
	c.out.outcomes = append(c.out.outcomes, outcome{mask: mask, ranks: ranks, lclass: lclass, virtual: virtual})
	c.index[string(key)] = i
	return i
}

// rank orders a's candidate pools by biased great-circle distance from
// (lat, lon), nearest first; ties keep the configured order.
func (r *Record) rank(a *Action, lat, lon float64) []uint8 {
	type cand struct {
		pool int
		d    float64
	}
	cs := make([]cand, 0, len(a.Candidates))
	for _, p := range a.Candidates {
		d := math.Inf(1)
		if plat, plon, ok, bias := r.memberLoc(p); ok {
			d = Distance(lat, lon, plat, plon) * (1 - float64(bias)/100)
		}
		cs = append(cs, cand{p, d})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	out := make([]uint8, len(cs))
	for i, c := range cs {
		out[i] = uint8(c.pool)
	}
	return out
}

// Distance is the great-circle distance in kilometres between two points
// given in degrees (see geo.Distance).
func Distance(lat1, lon1, lat2, lon2 float64) float64 { return geo.Distance(lat1, lon1, lat2, lon2) }

func (r *Record) String() string {
	return fmt.Sprintf("%s %s (%d pools, %d rules)", r.Name, dns.TypeToString[r.Type], len(r.Pools), len(r.Rules))
}
