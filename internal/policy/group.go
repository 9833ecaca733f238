package policy

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
)

// Groups make actions nest, as Route 53's traffic-flow trees, Azure's
// nested profiles and gdnsd's metafo/multifo do: a group is a pool made
// of pools or other groups, with its own action. Actions refer to members
// by index: 0..len(Pools)-1 are the pools, len(Pools)+i is Groups[i].
//
// A group is usable when its own action can answer, which (every action
// answering whenever one of its members can) is when any pool under it is
// usable: its mask, every pool under it, is all a query needs to skip a
// branch, so health prunes branches at every level without a walk. Only
// the chosen branch is descended.
//
// A nested geoproximity action is ranked at compile time like a top-level
// one (Record.proximity holds every ranking action of the tree), so the
// partition splits wherever any level's ranking changes and the ECS
// scope stays exact through the tree; a nested latency action has its
// own rankings per network, and the rules whose tree holds one compute
// the client's latency class (latencyRules).

// Group is a compiled group.
type Group struct {
	Name  string
	Index int // its member index: len(Pools) + position in Groups
	Line  int
	// Action chooses among the group's members.
	Action Action
	// Site and the location stand for the group in a latency or
	// geoproximity ranking: its own, else its first member's.
	Site     string
	Lat, Lon float64
	HasLoc   bool
	// Depth is the group's height: 1 when its members are pools only.
	Depth int
	hash  uint64
	// mask is every pool under the group.
	mask uint64
	// path is where it is defined ("records[3].groups.eu" or
	// "policies.web.groups.eu"), for messages; cfg is what it was built
	// from.
	path string
	cfg  config.Group
}

// MaxGroups bounds a record's groups, MaxDepth the height of its trees
// (a rule's action is level 1, a group it names level 2, and so on).
const (
	MaxGroups = 64
	MaxDepth  = 8
)

// member helpers: what a member index stands for.

func (r *Record) isGroup(m int) bool { return m >= len(r.Pools) }

func (r *Record) group(m int) *Group { return r.Groups[m-len(r.Pools)] }

// MemberName names member m (a pool or a group).
func (r *Record) MemberName(m int) string {
	if r.isGroup(m) {
		return r.group(m).Name
	}
	return r.Pools[m].Name
}

// memberKind says "pool" or "group", for messages.
func (r *Record) memberKind(m int) string {
	if r.isGroup(m) {
		return "group"
	}
	return "pool"
}

func (r *Record) memberMask(m int) uint64 {
	if r.isGroup(m) {
		return r.group(m).mask
	}
	return 1 << m
}

func (r *Record) memberLoc(m int) (lat, lon float64, ok bool, bias int) {
	if r.isGroup(m) {
		g := r.group(m)
		return g.Lat, g.Lon, g.HasLoc, 0
	}
	p := r.Pools[m]
	return p.Lat, p.Lon, p.HasLoc, p.Bias
}

func (r *Record) memberSite(m int) string {
	if r.isGroup(m) {
		return r.group(m).Site
	}
	return r.Pools[m].Site
}

func (r *Record) memberHash(m int) uint64 {
	if r.isGroup(m) {
		return r.group(m).hash
	}
	return r.Pools[m].hash
}

// memberIndex returns the member named name, or -1.
func (r *Record) memberIndex(name string) int {
	if p := r.poolIndex(name); p >= 0 {
		return p
	}
	for _, g := range r.Groups {
		if g.Name == name {
			return g.Index
		}
	}
	return -1
}

// usableMember reports whether member m can answer with the usable pools
// avail.
func (r *Record) usableMember(m int, avail uint64) bool { return r.mmask[m]&avail != 0 }

// pick descends into member m: a pool answers itself, a group its own
// action's choice, short-cut by the resolution of the current health
// (where a chain of pool, failover and first actions leads, computed
// once per health change) when it was computed for these usable pools.
func (r *Record) pick(m int, o *outcome, avail uint64, q *Query) (uint64, int, int) {
	a := r.gact[m]
	if a == nil {
		return 1 << m, 0, 0
	}
	if rs := q.res; rs != nil && rs.avail == avail {
		e := &rs.to[m]
		if e.act == nil {
			return e.pools, 0, 0
		}
		a = e.act
	}
	return r.choose(a, o, avail, q)
}

// resolution is where each member leads for one set of usable pools:
// through pool, failover and first actions, whose choice depends on
// health alone, to a pool or to the first action that depends on the
// client or on chance (split, multivalue, geoproximity, latency).
type resolution struct {
	avail uint64
	to    []resolved // by member index
}

type resolved struct {
	pools uint64  // the pool reached, when act is nil
	act   *Action // the action to apply, when the chain reaches one
}

// resolve computes the resolution of r's members for avail.
func (r *Record) resolve(avail uint64) resolution {
	rs := resolution{avail: avail, to: make([]resolved, len(r.mmask))}
	var walk func(m, depth int) resolved
	walk = func(m, depth int) resolved {
		a := r.gact[m]
		if a == nil {
			return resolved{pools: 1 << m}
		}
		if depth > MaxDepth {
			return resolved{act: a}
		}
		switch a.Kind {
		case ActPool, ActFailover, ActFirst:
			for _, mm := range a.Pools {
				if r.usableMember(mm, avail) {
					return walk(mm, depth+1)
				}
			}
			return resolved{act: a} // nothing usable: the action says so itself
		}
		return resolved{act: a}
	}
	for m := range rs.to {
		rs.to[m] = walk(m, 0)
	}
	return rs
}

// resolutions computes the resolutions of the usable pools of each
// address family (A, AAAA; a CNAME record's two are the same), for the
// health just computed. Records without groups have none (nil).
func (r *Record) resolutions(up4, up6 uint64) *[2]resolution {
	if len(r.Groups) == 0 {
		return nil
	}
	var rs [2]resolution
	if r.Type == dns.TypeCNAME {
		rs[0] = r.resolve(up4 | up6)
		rs[1] = rs[0]
	} else {
		rs[0] = r.resolve(up4 & r.hasV4)
		rs[1] = r.resolve(up6 & r.hasV6)
	}
	return &rs
}

// chooseNested is choose for an action with a group among its members.
// The usable members are those with a usable pool under them; the one
// chosen is descended into (for multivalue: every usable one, their
// answers together).
func (r *Record) chooseNested(a *Action, o *outcome, avail uint64, q *Query) (uint64, int, int) {
	switch a.Kind {
	case ActPool, ActFailover, ActFirst:
		for _, m := range a.Pools {
			if r.usableMember(m, avail) {
				return r.pick(m, o, avail, q)
			}
		}
	case ActMultivalue:
		var out uint64
		sticky := 0
		for _, m := range a.Pools {
			if r.usableMember(m, avail) {
				p, _, s := r.pick(m, o, avail, q)
				out |= p
				sticky = max(sticky, s)
			}
		}
		return out, a.Limit, sticky
	case ActProximity:
		if o.ranks != nil {
			for _, m := range o.ranks[a.Proximity] {
				if r.usableMember(int(m), avail) {
					return r.pick(int(m), o, avail, q)
				}
			}
		}
		for _, m := range a.Pools {
			if r.usableMember(m, avail) {
				return r.pick(m, o, avail, q)
			}
		}
	case ActLatency:
		m, depth := r.latencyMember(a, o, avail, q)
		if m < 0 {
			return 0, 0, depth
		}
		p, limit, s := r.pick(m, o, avail, q)
		return p, limit, max(s, depth)
	case ActSplit:
		var m, bits int
		switch {
		case a.Sticky:
			m, bits = r.stickyMember(a, avail, q)
		case q.Stable:
			m = r.heaviestMember(a, avail)
		default:
			m = r.randomMember(a, avail, q)
		}
		if m < 0 {
			return 0, 0, 0
		}
		p, limit, s := r.pick(m, o, avail, q)
		return p, limit, max(s, bits)
	}
	return 0, 0, 0
}

// heaviestMember is the split member a stable decision (Query.Stable)
// takes: the usable one of highest weight, ties broken by the lowest
// name; the first usable one when only zero weights are usable; -1 when
// none is usable.
func (r *Record) heaviestMember(a *Action, avail uint64) int {
	best, first := -1, -1
	var bestW uint32
	for i, m := range a.Pools {
		if !r.usableMember(m, avail) {
			continue
		}
		if first < 0 {
			first = m
		}
		w := a.Weights[i]
		if w == 0 {
			continue
		}
		if best < 0 || w > bestW || w == bestW && r.MemberName(m) < r.MemberName(best) {
			best, bestW = m, w
		}
	}
	if best < 0 {
		return first
	}
	return best
}

// randomMember draws a usable member of a split by weight (the first
// usable one when only zero weights are usable); -1 when none is usable.
// It draws from q.Rand when set, as a split of pools does.
func (r *Record) randomMember(a *Action, avail uint64, q *Query) int {
	var total uint64
	first := -1
	for i, m := range a.Pools {
		if r.usableMember(m, avail) {
			total += uint64(a.Weights[i])
			if first < 0 {
				first = m
			}
		}
	}
	if total == 0 {
		return first
	}
	x := q.draw(total)
	for i, m := range a.Pools {
		if !r.usableMember(m, avail) {
			continue
		}
		if w := uint64(a.Weights[i]); x < w {
			return m
		} else {
			x -= w
		}
	}
	return first
}

// stickyMember is sticky for members: weighted rendezvous hashing of the
// client's subnet over the usable members.
func (r *Record) stickyMember(a *Action, avail uint64, q *Query) (int, int) {
	hi, lo, bitsLen := clientKey(q)
	best, bestScore := -1, math.Inf(-1)
	first := -1
	for i, m := range a.Pools {
		if !r.usableMember(m, avail) {
			continue
		}
		if first < 0 {
			first = m
		}
		if a.Weights[i] == 0 {
			continue
		}
		if s := rendezvous(hi, lo, r.memberHash(m), a.Weights[i]); s > bestScore {
			best, bestScore = m, s
		}
	}
	if best < 0 {
		return first, bitsLen
	}
	return best, bitsLen
}

// latencyMember is latencyChoose for members: the first usable member of
// the client network's ranking, else of the fallback order (-1: none).
func (r *Record) latencyMember(a *Action, o *outcome, avail uint64, q *Query) (int, int) {
	rank, depth := r.latencyRanking(a, o, q)
	for _, m := range rank {
		if r.usableMember(int(m), avail) {
			return int(m), depth
		}
	}
	for _, m := range a.Pools {
		if r.usableMember(m, avail) {
			return m, depth
		}
	}
	return -1, depth
}

// groups builds the record's groups: first every name (so members may
// refer to groups defined later), then nothing else until the rules are
// built; finishGroups does the rest.
func (b *builder) groupStubs() {
	r := b.r
	names, paths := b.cfg.GroupNames(b.idx)
	if len(names) == 0 {
		return
	}
	if len(names) > MaxGroups {
		b.errf(".groups", "record %s has %d groups; at most %d are supported", r.Name, len(names), MaxGroups)
		return
	}
	b.groupIdx = map[string]int{}
	rc := b.cfg.Records[b.idx]
	for i, name := range names {
		path := paths[i]
		at := b.groupAt(path)
		if _, dup := b.groupIdx[name]; dup {
			b.errf(at, "record %s: group %s is defined both in the record and in policy %s", r.Name, name, rc.Policy)
			continue
		}
		if _, clash := b.poolIdx[name]; clash {
			b.errf(at, "record %s: group %s has the name of a pool; pools and groups share one namespace", r.Name, name)
			continue
		}
		var gc config.Group
		if strings.HasPrefix(path, "policies.") {
			gc = b.cfg.Policies[rc.Policy].Groups[name]
		} else {
			gc = rc.Groups[name]
		}
		h := fnv.New64a()
		h.Write([]byte("group " + name))
		g := &Group{Name: name, Index: len(r.Pools) + len(r.Groups), Line: b.cfg.Line(path), path: path, cfg: gc, hash: h.Sum64()}
		if g.Line == 0 {
			g.Line = b.line(at)
		}
		b.groupIdx[name] = g.Index
		r.Groups = append(r.Groups, g)
	}
}

// groupAt is the builder path (under the record) of a group defined at
// path, for messages: the policy's groups are pointed at in the policy.
func (b *builder) groupAt(path string) string {
	if i := strings.Index(path, ".groups."); i >= 0 {
		return path[i:]
	}
	return ".groups"
}

// finishGroups builds the groups' actions, rejects cycles, depth beyond
// MaxDepth and groups nothing uses, and computes what the query path and
// the compiler need: every action's mask, the ranking actions of the
// whole tree, the rules whose tree ranks by latency.
func (b *builder) finishGroups() {
	r := b.r
	for _, g := range r.Groups {
		g.Action = b.action(g.cfg.Action, b.groupAt(g.path), false)
		g.Site = g.cfg.Site
		if l := g.cfg.Location; l != nil {
			if l.Lat < -90 || l.Lat > 90 || l.Lon < -180 || l.Lon > 180 {
				b.errf(b.groupAt(g.path)+".location", "record %s: group %s: location %v,%v is not a latitude and longitude", r.Name, g.Name, l.Lat, l.Lon)
			}
			g.Lat, g.Lon, g.HasLoc = l.Lat, l.Lon, true
		}
	}
	// Depth-first from each group: a member on the stack is a cycle.
	const (
		unseen = iota
		active
		done
	)
	state := make([]uint8, len(r.Groups))
	var stack []string
	cyclic := false
	var visit func(g *Group) int
	visit = func(g *Group) int {
		i := g.Index - len(r.Pools)
		switch state[i] {
		case active:
			if !cyclic {
				at := slices.Index(stack, g.Name)
				b.errf(b.groupAt(g.path), "record %s: group %s refers to itself: %s", r.Name, g.Name, strings.Join(append(stack[at:], g.Name), " → "))
				cyclic = true
			}
			return 0
		case done:
			return g.Depth
		}
		state[i] = active
		stack = append(stack, g.Name)
		depth := 1
		var mask uint64
		for _, m := range actionMembers(&g.Action) {
			if r.isGroup(m) {
				sub := r.group(m)
				depth = max(depth, 1+visit(sub))
				mask |= sub.mask
			} else {
				mask |= 1 << m
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		g.Depth, g.mask = depth, mask
		return depth
	}
	for _, g := range r.Groups {
		visit(g)
	}
	if cyclic {
		return
	}
	// A group's site and location default to its first member's.
	var inherit func(g *Group)
	inherit = func(g *Group) {
		ms := actionMembers(&g.Action)
		if len(ms) == 0 {
			return
		}
		first := ms[0]
		if r.isGroup(first) {
			inherit(r.group(first))
		}
		if g.Site == "" {
			g.Site = r.memberSite(first)
		}
		if !g.HasLoc {
			g.Lat, g.Lon, g.HasLoc, _ = r.memberLoc(first)
		}
	}
	for _, g := range r.Groups {
		inherit(g)
	}
	used := make([]bool, len(r.Groups))
	var use func(a *Action)
	use = func(a *Action) {
		for _, m := range actionMembers(a) {
			if r.isGroup(m) && !used[m-len(r.Pools)] {
				used[m-len(r.Pools)] = true
				use(&r.group(m).Action)
			}
		}
	}
	for _, rule := range r.Rules {
		use(&rule.Action)
		if d := 1 + b.actionDepth(&rule.Action); d > MaxDepth {
			b.errf(fmt.Sprintf(".rules[%d]", rule.Index), "record %s: rule %d's tree is %d levels deep; at most %d are supported", r.Name, rule.Index+1, d, MaxDepth)
		}
	}
	for i, g := range r.Groups {
		if !used[i] {
			b.errOnce(b.groupAt(g.path), "record %s: group %s is used by no rule or group", r.Name, g.Name)
		}
	}
	for _, g := range r.Groups {
		b.neverChosen(&g.Action, b.groupAt(g.path), "group "+g.Name)
	}
	for _, rule := range r.Rules {
		b.neverChosen(&rule.Action, fmt.Sprintf(".rules[%d]", rule.Index), fmt.Sprintf("rule %d", rule.Index+1))
	}
}

// actionDepth is the height of the groups under a.
func (b *builder) actionDepth(a *Action) int {
	d := 0
	for _, m := range actionMembers(a) {
		if b.r.isGroup(m) {
			d = max(d, b.r.group(m).Depth)
		}
	}
	return d
}

// actionMembers lists every member an action may choose.
func actionMembers(a *Action) []int {
	if a.Kind == ActProximity || a.Kind == ActLatency {
		out := append([]int(nil), a.Candidates...)
		for _, m := range a.Pools {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
		return out
	}
	return a.Pools
}

// neverChosen warns about the members of a failover or first list that
// no health state can bring to be chosen: whenever one is usable, an
// earlier one is too (its pools are all under earlier members).
func (b *builder) neverChosen(a *Action, at, what string) {
	if a.Kind != ActFailover && a.Kind != ActFirst {
		return
	}
	var before uint64
	for _, m := range a.Pools {
		mm := b.r.memberMask(m)
		if mm&^before == 0 && before != 0 {
			b.warnf(at, "record %s: %s: %s can never be chosen: every pool under it is under an earlier member of the list", b.r.Name, what, b.r.MemberName(m))
		}
		before |= mm
	}
}

// finishActions computes, once the groups are built, every action's mask
// and whether it has a group among its members, and collects the ranking
// actions of every level: geoproximity (ranked per outcome at compile
// time) and latency (ranked per network at update time), with the checks
// that need the members' locations.
func (b *builder) finishActions() {
	r := b.r
	r.proximity, r.latencyActs, r.latencyRules = nil, nil, 0
	acts := make([]*Action, 0, len(r.Rules)+len(r.Groups))
	ats := make([]string, 0, cap(acts))
	for _, rule := range r.Rules {
		acts = append(acts, &rule.Action)
		ats = append(ats, fmt.Sprintf(".rules[%d]%s", rule.Index, map[bool]string{true: ".default", false: ""}[rule.Default]))
	}
	for _, g := range r.Groups {
		acts = append(acts, &g.Action)
		ats = append(ats, b.groupAt(g.path))
	}
	for i, a := range acts {
		a.mask, a.nested = 0, false
		for _, m := range actionMembers(a) {
			a.mask |= r.memberMask(m)
			a.nested = a.nested || r.isGroup(m)
		}
		switch a.Kind {
		case ActProximity:
			a.Proximity = len(r.proximity)
			r.proximity = append(r.proximity, a)
			located := 0
			for _, m := range a.Candidates {
				if _, _, ok, _ := r.memberLoc(m); ok {
					located++
				} else {
					b.warnf(ats[i]+".by", "record %s: %s %s has no location: geoproximity ranks it last", r.Name, r.memberKind(m), r.MemberName(m))
				}
			}
			if located == 0 {
				b.errf(ats[i]+".by", "record %s: geoproximity needs pools with a location", r.Name)
			}
		case ActLatency:
			a.Latency = len(r.latencyActs)
			r.latencyActs = append(r.latencyActs, a)
			located := 0
			for _, m := range a.Candidates {
				if _, _, ok, _ := r.memberLoc(m); ok {
					located++
				}
			}
			if located == 0 && len(b.cfg.Latency.Files) == 0 {
				b.warnf(ats[i]+".by", "record %s: by: latency has no latency files and no pool with a location to estimate from: it answers in fallback order until measurements are pushed", r.Name)
			}
		}
	}
	for _, rule := range r.Rules {
		if r.treeHasLatency(&rule.Action) {
			r.latencyRules |= 1 << rule.Index
		}
	}
	// What the query path reads of a member: one load each.
	r.mmask = make([]uint64, len(r.Pools)+len(r.Groups))
	r.gact = make([]*Action, len(r.mmask))
	for m := range r.mmask {
		r.mmask[m] = r.memberMask(m)
		if r.isGroup(m) {
			r.gact[m] = &r.group(m).Action
		}
	}
}

func (r *Record) treeHasLatency(a *Action) bool {
	if a.Kind == ActLatency {
		return true
	}
	for _, m := range actionMembers(a) {
		if r.isGroup(m) && r.treeHasLatency(&r.group(m).Action) {
			return true
		}
	}
	return false
}

// errOnce reports an error about a group or rule of a named policy once
// for the policy, not once per record using it.
func (b *builder) errOnce(at, format string, args ...any) {
	if strings.HasPrefix(at, ".groups.") && b.policy != "" {
		key := "error\x00" + b.policy + "\x00" + at
		if b.warnedPolicy[key] {
			b.failed = true // the record still fails, without saying it again
			return
		}
		b.warnedPolicy[key] = true
	}
	b.errf(at, format, args...)
}
