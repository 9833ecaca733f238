package simulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/loadfeed"
	"github.com/steer-dns/steer/internal/policy"
)

// Capacity prediction: what capacity feedback (policy/capacity.go) does
// with a load feed, interval by interval.
//
// It runs the node's own step, policy.Live.SetLoad, on a live state of
// each phase's table of its own (carried from phase to phase as a
// reload carries it), fed by a deterministic traffic model instead of
// queries. In each feed interval every client subnet of the population
// (through its resolver) is decided once by Live.Decide with the shed
// state the interval runs with; the answers steer would count for it
// are added to the live state's per-network counters (Live.CountAnswers)
// so that SetLoad ranks the networks as the node would; at the end of
// the interval the feed reports each capacity pool's load and SetLoad
// takes one step. The model, per subnet and interval:
//
//   - user queries: the subnet's rate over the interval (its group's
//     daily profile included);
//   - steer's answers (what the node's counters see): with no cache
//     every user query; through a resolver's caches the misses of the
//     cache entry the subnet shares (its ECS block: the source prefix
//     masked to the scope steer returned, or the whole resolver without
//     ECS), λ/(1+λL) per cache instance for an entry of rate λ and life
//     L (the stationary renewal rate the cost calculator uses, TTL
//     violators mixed in by their share);
//   - cache lag: a part of the interval's user queries is still
//     answered by the previous interval's decision, the entries alive
//     at the boundary until they expire (an approximation that looks
//     back one interval);
//   - a random split is decided once per stratum of 64.
//
// The load model: "fixed" reports the given load every interval (a
// pool whose load does not follow what it is sent keeps shedding, as a
// node would); "proportional" scales it by the user queries the pool
// answered in the interval against the first interval's (nothing shed
// yet), the load following the traffic as on a real site.

// CapacityFeed is a compiled capacity section.
type CapacityFeed struct {
	// Interval is the feed's interval; Intervals how many are predicted.
	Interval  time.Duration
	Intervals int
	// Proportional: the load follows the user queries the pool answers.
	Proportional bool
	// Options damp the loop: the configuration's load section.
	Options policy.ShedOptions
	// Changes are the feed's values in time order, the first at 0:
	// from At on, each named pool of the record reports its load (nil:
	// it stops reporting).
	Changes []LoadChange
}

// LoadChange is the feed's values from a time on.
type LoadChange struct {
	At    time.Duration
	Loads map[string]*float64
	// Line is the scenario line that set it (0: the capacity section or
	// a flag).
	Line int
}

// CapacityResult is a capacity prediction.
type CapacityResult struct {
	Record string
	// Pools are the record's pools (the union over phases), the order
	// of the per-pool slices.
	Pools []string
	// Capacity is the pools that declare a capacity.
	Capacity []string
	Interval time.Duration
	// Model is "fixed" or "proportional".
	Model string
	// Options are the damping the loop ran with.
	Options policy.ShedOptions
	// Steps are the intervals in order.
	Steps []CapacityStep
	// PhasesLeftOut counts the steps that moved networks beyond the
	// phases Run gives its Monte-Carlo runs (maxCapacityPhases): from
	// the first of them, the runs keep the last shed networks given.
	PhasesLeftOut int
}

// CapacityStep is one feed interval.
type CapacityStep struct {
	// At is the interval's start.
	At time.Duration
	// Share, per pool: the share of the user queries answered with it
	// in the interval; Answers the share of the answers steer gives
	// (what its answer counters and steer_steered_answers_total count:
	// with resolver caches, the misses).
	Share, Answers []float64
	// UserQPS and AuthQPS are the user queries and steer's answers per
	// second.
	UserQPS, AuthQPS float64
	// Shed are the networks shed during the interval (the state it ran
	// with), most users first, at most maxShedListed; ShedCount is how
	// many there were.
	Shed      []ShedNetwork
	ShedCount int
	// Pools are the capacity pools' state after the step at the end of
	// the interval: the load fed and what the step did.
	Pools []CapacityPool
}

// CapacityPool is a capacity pool's state after one step.
type CapacityPool struct {
	Pool string
	// Fed: the feed reported a load at the end of the interval (false:
	// the last report stands, and turns stale after stale_after).
	Fed bool
	// Load is the last reported load; Percent it as a share of the
	// target (1 = 100 %).
	Load, Percent float64
	// State, Networks, Shed, ShedShare and Moved are policy.PoolLoad's.
	State          string
	Networks, Shed int
	ShedShare      float64
	Moved          int
	// Reason says it as explain and status do ("shed: load 150 % of
	// target (...)").
	Reason string
}

// ShedNetwork is a network shed during an interval.
type ShedNetwork struct {
	Prefix netip.Prefix
	// Dropped are the pools that shed it (and any above max).
	Dropped []string
	// To are the pools its users were answered with instead.
	To []string
	// Share is its share of the interval's user queries.
	Share float64
	// Countries are its client subnets' countries (when known).
	Countries []string
}

// maxShedListed bounds the networks listed per interval.
const maxShedListed = 20

// maxCapacityIntervals bounds a prediction.
const maxCapacityIntervals = 10_000

// capacity compiles the scenario's capacity section into m.Capacity,
// reporting problems at their lines: the pools must be the asked
// record's and declare a capacity.
func (c *compiler) capacity(m *Model) {
	sc := c.sc
	spec := sc.Capacity
	if spec == nil {
		return
	}
	var probs []string
	sc.checkCapacity(func(line int, format string, args ...any) {
		c.add(line, format, args...)
		probs = append(probs, format)
	}, sc.keyLine("capacity"))
	if len(probs) > 0 {
		return
	}
	line := spec.Line
	if line == 0 {
		line = sc.keyLine("capacity")
	}
	f := &CapacityFeed{Interval: time.Duration(spec.Interval), Intervals: spec.Intervals, Proportional: spec.Model == "proportional"}
	lc := c.b.Config.Load
	f.Options = policy.ShedOptions{MaxShift: lc.MaxShift, LowWater: lc.LowWater, StaleAfter: time.Duration(lc.StaleAfter)}.WithDefaults()
	if f.Intervals == 0 {
		f.Intervals = int(m.Duration / f.Interval)
		if f.Intervals == 0 {
			c.add(line, "capacity: the interval %s is longer than the duration %s: give intervals", spec.Interval, sc.Duration)
			return
		}
	}
	if f.Intervals > maxCapacityIntervals {
		c.add(line, "capacity: %d intervals is more than the limit of %d", f.Intervals, maxCapacityIntervals)
		return
	}
	rec := m.Phases[0].Record
	pool := func(ref string, line int) (string, bool) {
		name := ref
		if i := strings.LastIndexByte(ref, '/'); i >= 0 {
			if dns.CanonicalName(ref[:i]) != m.Record {
				c.add(line, "capacity: load: %s: only the pools of %s, the record asked, are predicted", ref, strings.TrimSuffix(m.Record, "."))
				return "", false
			}
			name = ref[i+1:]
		}
		var names []string
		for _, p := range rec.Pools {
			if p.Name != name {
				if p.Capacity != nil {
					names = append(names, p.Name)
				}
				continue
			}
			if p.Capacity == nil {
				c.add(line, "capacity: load: pool %s of %s declares no capacity (capacity: { target: N })", name, strings.TrimSuffix(m.Record, "."))
				return "", false
			}
			return name, true
		}
		c.add(line, "capacity: load: %s is not a pool of %s (pools with a capacity: %s)", name, strings.TrimSuffix(m.Record, "."), strings.Join(names, ", "))
		return "", false
	}
	first := LoadChange{Loads: map[string]*float64{}, Line: line}
	if spec.LoadFile != "" {
		p := spec.LoadFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(sc.File), p)
		}
		if c.b.LoadConfig == nil {
			c.add(line, "capacity: load_file %s: not available through the API (give load)", spec.LoadFile)
			return
		}
		data, err := os.ReadFile(p)
		var items []loadfeed.Item
		if err == nil {
			items, err = loadfeed.Parse(spec.LoadFile, data)
		}
		if err != nil {
			c.add(line, "capacity: load_file: %v", err)
			return
		}
		for i, it := range items {
			at := fmt.Sprintf("%s: loads[%d]", spec.LoadFile, i)
			switch {
			case dns.CanonicalName(it.Record) != m.Record:
				c.add(line, "capacity: %s: record %s is not the record asked (%s)", at, it.Record, strings.TrimSuffix(m.Record, "."))
				continue
			case it.Current == nil:
				c.add(line, "capacity: %s: current-load is required", at)
				continue
			case !validLoad(*it.Current):
				c.add(line, "capacity: %s: current-load %v is not a number ≥ 0", at, *it.Current)
				continue
			}
			if name, ok := pool(it.Pool, line); ok {
				v := *it.Current
				first.Loads[name] = &v
			}
		}
	}
	for _, ref := range sortedKeys(spec.Load) {
		if name, ok := pool(ref, line); ok {
			v := spec.Load[ref]
			first.Loads[name] = &v
		}
	}
	f.Changes = append(f.Changes, first)
	events := slices.Clone(sc.Events)
	sort.SliceStable(events, func(i, j int) bool { return events[i].At < events[j].At })
	for _, e := range events {
		if e.Load == nil {
			continue
		}
		ch := LoadChange{At: time.Duration(e.At), Loads: map[string]*float64{}, Line: e.Line}
		for _, ref := range sortedKeys(e.Load) {
			if name, ok := pool(ref, e.Line); ok {
				ch.Loads[name] = e.Load[ref]
			}
		}
		f.Changes = append(f.Changes, ch)
	}
	m.Capacity = f
}

// capUnit is the traffic decided as one: the users of one client subnet
// (at the ECS source length its resolver sends) through one resolver.
type capUnit struct {
	res     int
	client  netip.Addr
	bits    int
	noECS   bool
	comps   []comp // its peak rate per group (user q/s, all caches)
	country string
	prev    []float64 // per result pool: the previous interval's decision
}

// capKey is a cache entry's key: a resolver and the prefix its answer
// serves (invalid: the whole resolver).
type capKey struct {
	res int
	p   netip.Prefix
}

// PredictCapacity runs m's capacity feed (nil without one) over the
// population and phases of m; see the comment above. It is what Run
// adds to its result; it needs no Monte-Carlo runs. Its live states are
// its own, with the health and overrides Compile gave each phase; a
// phase built in code has every pool usable (its Live's health is not
// copied).
func PredictCapacity(ctx context.Context, m *Model) (*CapacityResult, error) {
	r, _, err := predictCapacity(ctx, m, false)
	return r, err
}

// maxCapacityPhases bounds the phases a capacity prediction adds to the
// Monte-Carlo runs (one per step that moved networks).
const maxCapacityPhases = 200

// predictCapacity is PredictCapacity; with phases set it also returns
// the phases the Monte-Carlo runs take instead of m's: m's own, each
// with the shed networks it starts with, and one at the end of every
// interval whose step moved networks (at most maxCapacityPhases of
// those; later moves are left out, CapacityResult.PhasesLeftOut says
// how many).
func predictCapacity(ctx context.Context, m *Model, phases bool) (*CapacityResult, []Phase, error) {
	f := m.Capacity
	if f == nil {
		return nil, nil, nil
	}
	if f.Interval <= 0 || f.Intervals <= 0 || len(m.Phases) == 0 {
		return nil, nil, errors.New("simulate: a capacity prediction needs an interval, intervals and a phase")
	}
	// Pools: the union over phases, in order of first appearance.
	idx := map[string]int{}
	var pools []string
	for _, ph := range m.Phases {
		for _, p := range ph.Record.Pools {
			if _, ok := idx[p.Name]; !ok {
				idx[p.Name] = len(pools)
				pools = append(pools, p.Name)
			}
		}
	}
	np := len(pools)
	units := capacityUnits(m)
	model := "fixed"
	if f.Proportional {
		model = "proportional"
	}
	out := &CapacityResult{Record: m.Record, Pools: pools, Interval: f.Interval, Model: model, Options: f.Options.WithDefaults()}
	for _, p := range m.Phases[0].Record.Pools {
		if p.Capacity != nil {
			out.Capacity = append(out.Capacity, p.Name)
		}
	}
	I := f.Interval.Seconds()
	// The counters take whole answers, as a node's do: each subnet's
	// expected answers of the interval, rounded. When a subnet would
	// count less than one (a quiet one behind a cache), every count is
	// scaled by the power of ten that gives each at least one (chosen at
	// the first interval, the peak total kept under 10⁹): SetLoad's
	// choices depend on the counts' ratios.
	peak := 0.0
	for _, u := range units {
		for _, c := range u.comps {
			peak += c.rate
		}
	}
	scale := 0.0
	counts := make([]float64, len(units))
	var (
		live    *policy.Live
		phase   = -1
		poolMap []int32
		vals    = map[string]*float64{} // the feed's current values
		last    = map[string]policy.Load{}
		ref     []float64 // proportional: the user q/s per pool in the first interval
		ci      int
		keyRate = map[capKey]float64{}
		src     = &stratSource{}
		srnd    = rand.New(src)
		cs      = &countSource{src: rand.NewPCG(m.Seed, 0xca9ac17e)}
		crnd    = rand.New(cs)
		frac    = make([][]float64, len(units))
		scopes  = make([]int, len(units))
		lives   = make([][2]float64, len(units)) // life, a violator's life
		rates   = make([]float64, len(units))
	)
	for i := range frac {
		frac[i] = make([]float64, np)
	}
	start := m.Start
	var (
		mc      []Phase // the runs' phases
		added   int
		wasFull = map[string]bool{}
	)
	for k := 0; k < f.Intervals; k++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		t0 := time.Duration(k) * f.Interval
		for phase+1 < len(m.Phases) && m.Phases[phase+1].At <= t0 {
			phase++
			ph := &m.Phases[phase]
			live = policy.NewLive(ph.Table, policy.LiveOptions{Start: start, Previous: live})
			if ph.health != nil {
				ph.health(live)
			}
			poolMap = make([]int32, len(ph.Record.Pools))
			for i, p := range ph.Record.Pools {
				poolMap[i] = int32(idx[p.Name])
			}
			if phases {
				mc = addPhase(mc, freeze(ph, live, start, ph.At, ph.Label, ph.Line))
			}
		}
		for ci < len(f.Changes) && f.Changes[ci].At <= t0 {
			for p, v := range f.Changes[ci].Loads {
				vals[p] = v
			}
			ci++
		}
		ph := &m.Phases[phase]
		rec := ph.Record
		at := start.Add(t0).Unix()
		// Decide every unit with the interval's shed state.
		clear(keyRate)
		for ui := range units {
			u := &units[ui]
			r := &m.Resolvers[u.res]
			site := &m.Sites[r.Site]
			rates[ui] = u.rate(m, t0, t0+f.Interval)
			fr := frac[ui]
			clear(fr)
			add := func(ps uint64, w float64) {
				n := bits.OnesCount64(ps)
				for x := ps; x != 0; x &= x - 1 {
					fr[poolMap[bits.TrailingZeros64(x)]] += w / float64(n)
				}
			}
			q := policy.Query{Qtype: m.Qtype, Client: u.client, ClientBits: u.bits, Resolver: r.Addr, NoECS: u.noECS, Uncounted: true, Rand: crnd}
			cs.n = 0
			s := live.Decide(rec, &q, at)
			if cs.n == 0 {
				add(s.Pools, 1)
			} else {
				const draws = 64
				for j := range draws {
					src.i = uint64(j * (strata / draws))
					q := policy.Query{Qtype: m.Qtype, Client: u.client, ClientBits: u.bits, Resolver: r.Addr, NoECS: u.noECS, Uncounted: true, Rand: srnd}
					add(live.Decide(rec, &q, at).Pools, 1.0/draws)
				}
			}
			scope := s.Scope
			if u.client.Is4In6() {
				scope -= 96
			}
			scopes[ui] = scope
			lo, hi := 1.0, math.Inf(1)
			if site.MinTTL > 0 {
				lo = max(lo, site.MinTTL.Seconds())
			}
			if site.MaxTTL > 0 {
				hi = site.MaxTTL.Seconds()
			}
			life := min(max(float64(s.TTL), lo), hi)
			lives[ui] = [2]float64{life, max(life, site.ExtendTo.Seconds())}
			if r.Caches > 0 {
				keyRate[u.key(site, scope)] += rates[ui]
			}
		}
		st := CapacityStep{At: t0, Share: make([]float64, np), Answers: make([]float64, np)}
		for ui := range units {
			u := &units[ui]
			r := &m.Resolvers[u.res]
			site := &m.Sites[r.Site]
			rate := rates[ui]
			misses, lag := rate, 0.0
			if r.Caches > 0 && rate > 0 {
				kr := keyRate[u.key(site, scopes[ui])]
				lam := kr / float64(r.Caches) // per cache instance
				v := site.Violators
				l0, l1 := lives[ui][0], lives[ui][1]
				missRate := func(l float64) float64 { return lam / (1 + lam*l) }
				keyMisses := float64(r.Caches) * ((1-v)*missRate(l0) + v*missRate(l1))
				misses = keyMisses * rate / kr
				// The entries alive at the interval's start keep the
				// previous decision until they expire (residual life
				// uniform over L).
				held := func(l float64) float64 {
					alive := lam * l / (1 + lam*l)
					if l <= I {
						return alive * l / (2 * I)
					}
					return alive * (1 - I/(2*l))
				}
				lag = (1-v)*held(l0) + v*held(l1)
			}
			if k == 0 {
				lag = 0
			}
			for p, x := range frac[ui] {
				st.Answers[p] += misses * x
				prev := x
				if u.prev != nil {
					prev = u.prev[p]
				}
				st.Share[p] += rate * ((1-lag)*x + lag*prev)
			}
			if u.prev == nil {
				u.prev = make([]float64, np)
			}
			copy(u.prev, frac[ui])
			st.UserQPS += rate
			st.AuthQPS += misses
			counts[ui] = misses * I
		}
		if scale == 0 {
			scale = countScale(counts, peak*I)
		}
		for ui, c := range counts {
			if n := math.Round(c * scale); n > 0 {
				live.CountAnswers(rec, units[ui].client, uint32(min(n, math.MaxUint32)))
			}
		}
		userByPool := slices.Clone(st.Share)
		for p := range st.Share {
			if st.UserQPS > 0 {
				st.Share[p] /= st.UserQPS
			}
			if st.AuthQPS > 0 {
				st.Answers[p] /= st.AuthQPS
			}
		}
		st.Shed, st.ShedCount = shedNetworks(live, rec, units, rates, frac, pools, st.UserQPS)
		if k == 0 {
			ref = userByPool
		}
		// The feed reports at the end of the interval; SetLoad steps.
		now := start.Add(t0 + f.Interval)
		fed := map[string]bool{}
		for _, name := range out.Capacity {
			v := vals[name]
			if v == nil {
				continue
			}
			load := *v
			if f.Proportional {
				if i, ok := idx[name]; ok && ref[i] > 0 {
					load *= userByPool[i] / ref[i]
				}
			}
			last[name] = policy.Load{Value: load, At: now}
			fed[name] = true
		}
		pls := live.SetLoad(func(record, pool string) (policy.Load, bool) {
			if record != rec.Name {
				return policy.Load{}, false
			}
			l, ok := last[pool]
			return l, ok
		}, now, out.Options)
		for _, pl := range pls {
			if pl.Record != rec.Name {
				continue
			}
			st.Pools = append(st.Pools, CapacityPool{Pool: pl.Pool, Fed: fed[pl.Pool], Load: pl.Load, Percent: pl.Ratio(), State: pl.State,
				Networks: pl.Networks, Shed: pl.Shed, ShedShare: pl.ShedShare, Moved: pl.Moved, Reason: pl.ReasonAt(now)})
		}
		out.Steps = append(out.Steps, st)
		// The runs take the new shed networks from the step's time.
		if at := t0 + f.Interval; phases && at < m.Duration {
			var moved []string
			for _, p := range st.Pools {
				full := p.State == "full"
				if p.Moved != 0 || full != wasFull[p.Pool] {
					moved = append(moved, fmt.Sprintf("%s %+d (%s)", p.Pool, p.Moved, p.State))
				}
				wasFull[p.Pool] = full
			}
			if len(moved) > 0 {
				if added < maxCapacityPhases {
					added++
					mc = addPhase(mc, freeze(ph, live, start, at, "capacity: "+strings.Join(moved, ", "), 0))
				} else {
					out.PhasesLeftOut++
				}
			}
		}
	}
	if phases {
		// m's phases after the last interval start with its shed state.
		for phase+1 < len(m.Phases) {
			phase++
			ph := &m.Phases[phase]
			live = policy.NewLive(ph.Table, policy.LiveOptions{Start: start, Previous: live})
			if ph.health != nil {
				ph.health(live)
			}
			mc = addPhase(mc, freeze(ph, live, start, ph.At, ph.Label, ph.Line))
		}
	}
	return out, mc, nil
}

// freeze returns a phase of ph's table from at whose live state holds
// live's shed networks (carried over as a reload carries them) and ph's
// health, and is never stepped: the Monte-Carlo runs read it while the
// prediction's own live state moves on.
func freeze(ph *Phase, live *policy.Live, start time.Time, at time.Duration, label string, line int) Phase {
	l := policy.NewLive(ph.Table, policy.LiveOptions{Start: start, Previous: live})
	if ph.health != nil {
		ph.health(l)
	}
	return Phase{At: at, Label: label, Table: ph.Table, Live: l, Record: ph.Record, Line: line, health: ph.health}
}

// addPhase appends p after dropping the phases that start at or after
// it (their labels go to p): an event's phase, which the prediction
// takes at the interval start after it, is given its own time, and a
// step's shed networks taken in between start with it.
func addPhase(ps []Phase, p Phase) []Phase {
	for len(ps) > 0 && ps[len(ps)-1].At >= p.At {
		last := ps[len(ps)-1]
		p.Label = last.Label + "; " + p.Label
		if p.Line == 0 {
			p.Line = last.Line
		}
		ps = ps[:len(ps)-1]
	}
	return append(ps, p)
}

// countScale is the power of ten (at least 1) that makes the smallest
// nonzero count at least one, with peak (an upper bound of the counts'
// total) times it under 10⁹.
func countScale(counts []float64, peak float64) float64 {
	low := math.Inf(1)
	for _, c := range counts {
		if c > 0 {
			low = min(low, c)
		}
	}
	scale := 1.0
	for low*scale < 1 && peak*scale*10 < 1e9 {
		scale *= 10
	}
	return scale
}

// key is the cache entry unit u's answers live in at scope.
func (u *capUnit) key(site *Site, scope int) capKey {
	switch {
	case u.noECS:
		return capKey{res: u.res}
	case site.HonorsScope:
		p, _ := u.client.Prefix(max(min(scope, u.bits), 0))
		return capKey{u.res, p}
	}
	p, _ := u.client.Prefix(u.bits)
	return capKey{u.res, p}
}

// rate is u's mean user q/s over [from, to).
func (u *capUnit) rate(m *Model, from, to time.Duration) float64 {
	v := 0.0
	for _, c := range u.comps {
		v += c.rate * groupFactor(m, int(c.g), from, to)
	}
	return v
}

// groupFactor is group g's mean daily factor over [from, to): the
// cosine of Group.Diurnal (as the engine's), averaged over eight points.
func groupFactor(m *Model, g int, from, to time.Duration) float64 {
	d := m.Groups[g].Diurnal
	if d == nil {
		return 1
	}
	const n = 8
	sum := 0.0
	for i := range n {
		t := m.Start.Add(from + time.Duration((float64(i)+0.5)/n*float64(to-from)))
		tod := float64(t.UTC().Sub(t.UTC().Truncate(24*time.Hour))) / float64(time.Second)
		x := 2 * math.Pi * (tod - d.Peak.Seconds()) / 86400
		sum += max(d.Trough+(1-d.Trough)*(1+math.Cos(x))/2, 1e-9)
	}
	return sum / n
}

// capacityUnits are m's subnets per resolver at the source length the
// resolver sends (the resolver's own address without ECS), merged when
// they fall together.
func capacityUnits(m *Model) []capUnit {
	var out []capUnit
	for ri := range m.Resolvers {
		r := &m.Resolvers[ri]
		site := &m.Sites[r.Site]
		at := map[netip.Addr]int{}
		for i, s := range r.Subnets {
			sn := &m.Subnets[s]
			rate := m.Groups[sn.Group].Rate * sn.Weight * r.Share[i]
			u := capUnit{res: ri, country: sn.Country}
			src := site.SourceV4
			if a := sn.Prefix.Addr(); a.Is6() && !a.Is4In6() {
				src = site.SourceV6
			}
			src = min(src, sn.Prefix.Bits())
			if !site.ECS || src <= 0 {
				u.client, u.bits, u.noECS = r.Addr, r.Addr.BitLen(), true
			} else {
				cp, _ := sn.Prefix.Addr().Prefix(src)
				u.client, u.bits = cp.Addr(), src
			}
			j, ok := at[u.client]
			if !ok {
				j = len(out)
				at[u.client] = j
				out = append(out, u)
			}
			x := &out[j]
			found := false
			for ci := range x.comps {
				if x.comps[ci].g == int32(sn.Group) {
					x.comps[ci].rate += rate
					found = true
				}
			}
			if !found {
				x.comps = append(x.comps, comp{g: int32(sn.Group), rate: rate})
			}
		}
	}
	return out
}

// shedNetworks lists the networks shed in the interval just decided:
// per network its users' share, the pools they got and their countries.
func shedNetworks(live *policy.Live, rec *policy.Record, units []capUnit, rates []float64, frac [][]float64, pools []string, total float64) ([]ShedNetwork, int) {
	nets := live.ShedNetworks(rec)
	if len(nets) == 0 {
		return nil, 0
	}
	type acc struct {
		share     float64
		to        []float64
		countries map[string]bool
		dropped   []string
	}
	by := map[netip.Prefix]*acc{}
	for ui := range units {
		u := &units[ui]
		p, dropped, ok := live.ShedAt(rec, u.client)
		if !ok {
			continue
		}
		a := by[p]
		if a == nil {
			a = &acc{to: make([]float64, len(pools)), countries: map[string]bool{}, dropped: dropped}
			by[p] = a
		}
		a.share += rates[ui]
		for i, x := range frac[ui] {
			a.to[i] += rates[ui] * x
		}
		if u.country != "" {
			a.countries[u.country] = true
		}
	}
	out := make([]ShedNetwork, 0, len(nets))
	for p, dropped := range nets {
		sn := ShedNetwork{Prefix: p, Dropped: dropped}
		if a := by[p]; a != nil {
			if total > 0 {
				sn.Share = a.share / total
			}
			for i, x := range a.to {
				if x > 0 {
					sn.To = append(sn.To, pools[i])
				}
			}
			sn.Countries = sortedKeys(a.countries)
		}
		out = append(out, sn)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Share != out[j].Share {
			return out[i].Share > out[j].Share
		}
		return out[i].Prefix.String() < out[j].Prefix.String()
	})
	n := len(out)
	if len(out) > maxShedListed {
		out = out[:maxShedListed]
	}
	return out, n
}
