package simulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steer-dns/steer/internal/policy"
)

// Options bound a simulation.
type Options struct {
	// Workers is how many runs execute at once (0: GOMAXPROCS).
	Workers int
	// MaxMisses caps the cache misses (decisions) over all runs; over
	// it Run stops with ErrTooLarge. 0: no cap.
	MaxMisses int64
}

// ErrTooLarge is returned when a simulation would take more cache misses
// than Options.MaxMisses allows.
var ErrTooLarge = errors.New("simulation too large: more cache misses than allowed")

// Run simulates m: m.Runs Monte-Carlo runs, run i seeded m.Seed+i, over
// o.Workers goroutines, and reduces them to bands. The result depends on
// the model and seed only, not on the number of workers. Cancelling ctx
// stops it promptly with ctx's error.
//
// How a run works (see the package comment): each cache instance of each
// resolver holds one entry per block, where a block is the set of client
// subnets one cached answer serves (the whole resolver without ECS; the
// ECS source prefix masked to the returned scope with ECS). The blocks of
// a phase are found at its start by deciding each subnet once. A block's
// stream of entries is simulated on its own, one step per miss: the next
// query after an entry expires arrives after an exponential time at the
// block's rate (a nonhomogeneous one when groups follow the day: the
// cumulative rate is inverted per bin), is decided by the phase's
// policy.Live (with the block's first subnet as the client: every
// subnet of a block is decided alike, that is what its scope says), and
// fills an entry that lives the answer's TTL (clamped,
// or stretched by a violator); the user queries inside its life are
// Poisson per output bin. Streams do not interact, so a run costs
// O(misses) with no event queue. Decisions that draw nothing from the
// random source (no split, or a sticky one) are the same at every miss of
// a phase and are taken once at its start; the others are taken at each
// miss with the run's seeded source.
//
// The caches start warm: at 0 each entry is alive with the probability
// of its steady state under the first phase (λL/(1+λL)), aged uniformly
// over its life, so the first minutes look like any other and TTL windows
// do not all start together at 0.
//
// Configured is steer's own split with no cache: per phase, each block's
// decision taken once per stratum of its random source (1,024 strata, so
// a 95/5 split gives 95.02/4.98), weighted by the block's rate and the
// groups' daily profiles per bin.
//
// A phase change keeps every entry until it expires. When the blocks
// change with it (a drain widening scopes, an undrain narrowing them),
// each subnet stays covered by its old entry until that expires
// (RFC 7871 §7.3.1: a more specific cached answer wins for its clients,
// and a wider one serves every client without a more specific one); a
// new block's rate grows, step by step, by its subnets' rates as their
// old entries expire. The approximation: the covered part of a block is
// taken to follow the block's own daily profile (its groups' mix).
func Run(ctx context.Context, m *Model, o Options) (*Result, error) {
	began := time.Now()
	// With a load feed the capacity prediction runs first, and the runs
	// take its shed networks as phases of their own (capacity.go).
	capRes, capPhases, err := predictCapacity(ctx, m, true)
	if err != nil {
		return nil, err
	}
	if capRes != nil {
		mc := *m
		mc.Phases = capPhases
		m = &mc
	}
	p, err := newPlan(m)
	if err != nil {
		return nil, err
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, m.Runs)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	red := newReducer(p)
	var (
		next   atomic.Int64
		misses atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		done   = make(map[int]*runOut)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := newRunState(p)
			for {
				i := int(next.Add(1) - 1)
				if i >= m.Runs || ctx.Err() != nil {
					return
				}
				out, err := st.run(ctx, i, &misses, o.MaxMisses)
				if err != nil {
					cancel(err)
					return
				}
				// Reduce in run order, whichever worker finishes first,
				// so that sums come out the same bit for bit.
				mu.Lock()
				done[i] = out
				for {
					d, ok := done[red.next]
					if !ok {
						break
					}
					delete(done, red.next)
					red.add(d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if red.next < m.Runs {
		if err := context.Cause(ctx); err != nil {
			return nil, err
		}
	}
	r := red.result()
	r.Capacity = capRes
	r.Elapsed = time.Since(began)
	return r, nil
}

// plan is a model prepared for runs: everything that does not depend on
// the seed. Runs read it and never write it.
type plan struct {
	m        *Model
	nb       int     // bins
	bin, dur float64 // seconds
	// The daily profiles are steps of slot seconds (the bin, or ten
	// minutes when bins are longer), nslot of them.
	slot    float64
	nslot   int
	start   int64 // Unix seconds of offset 0
	pools   []string
	nSites  int
	diurnal bool
	mult    [][]float64 // [group][slot]: the rate's daily factor
	cum     [][]float64 // [group][slot boundary]: ∫ mult dt
	phases  []planPhase
	res     []planRes
	drains  []planDrain
	// configured[bin][pool] is Bin.Configured; confPhase[phase][pool]
	// the phase's own (at peak rates).
	configured [][]float64
	confPhase  [][]float64
}

// planRes is a resolver's subnets, at the rate one cache instance sees.
type planRes struct {
	rate  []float64 // per local subnet: peak q/s per cache
	group []int32
}

type planPhase struct {
	start, end float64
	ph         *Phase
	poolMap    []int32 // record pool index → result pool index
	res        []phaseRes
}

type phaseRes struct {
	blocks  []block
	blockOf []int32 // per local subnet
}

// block is the subnets one cache entry serves in a phase.
type block struct {
	client netip.Addr
	bits   int
	noECS  bool
	base   float64 // peak q/s per cache
	comps  []comp  // its rate per group (peak q/s per cache)
	subs   []int32 // local subnet indices
	// fixed: the decision does not draw from the random source, so
	// every miss gets det (computed once at the phase start).
	fixed bool
	det   policy.Steered
}

type comp struct {
	g    int32
	rate float64
}

type planDrain struct {
	Drain
	pool     int     // result pool index
	at, end  float64 // the window: the drain until the pool comes back
	firstBin int
	endBin   int // exclusive
}

func newPlan(m *Model) (*plan, error) {
	if m == nil || len(m.Phases) == 0 {
		return nil, errors.New("simulate: a model needs at least one phase")
	}
	if m.Bin <= 0 || m.Duration <= 0 {
		return nil, errors.New("simulate: duration and bin must be positive")
	}
	if m.Runs <= 0 {
		return nil, errors.New("simulate: runs must be positive")
	}
	p := &plan{
		m:      m,
		bin:    m.Bin.Seconds(),
		dur:    m.Duration.Seconds(),
		start:  m.Start.Unix(),
		nSites: len(m.Sites),
	}
	p.nb = int(math.Ceil(p.dur/p.bin - 1e-9))
	// Pools: the union over phases, in order of first appearance.
	idx := map[string]int{}
	for i := range m.Phases {
		ph := &m.Phases[i]
		if ph.Record == nil || ph.Live == nil {
			return nil, fmt.Errorf("simulate: phase %q has no record or live state", ph.Label)
		}
		if (i == 0 && ph.At != 0) || (i > 0 && ph.At < m.Phases[i-1].At) {
			return nil, fmt.Errorf("simulate: phase %q starts at %v: the first must start at 0 and the others in time order", ph.Label, ph.At)
		}
		for _, pl := range ph.Record.Pools {
			if _, ok := idx[pl.Name]; !ok {
				idx[pl.Name] = len(p.pools)
				p.pools = append(p.pools, pl.Name)
			}
		}
	}
	// Daily profiles.
	for _, g := range m.Groups {
		if g.Diurnal != nil {
			p.diurnal = true
		}
	}
	p.slot = min(p.bin, 600)
	p.nslot = int(math.Ceil(p.dur/p.slot - 1e-9))
	p.mult = make([][]float64, len(m.Groups))
	p.cum = make([][]float64, len(m.Groups))
	for gi, g := range m.Groups {
		mu := make([]float64, p.nslot)
		cu := make([]float64, p.nslot+1)
		for b := range mu {
			mu[b] = 1
			if d := g.Diurnal; d != nil {
				mid := m.Start.Add(time.Duration((float64(b) + 0.5) * p.slot * float64(time.Second)))
				tod := float64(mid.UTC().Sub(mid.UTC().Truncate(24*time.Hour))) / float64(time.Second)
				x := 2 * math.Pi * (tod - d.Peak.Seconds()) / 86400
				mu[b] = max(d.Trough+(1-d.Trough)*(1+math.Cos(x))/2, 1e-9)
			}
			cu[b+1] = cu[b] + mu[b]*p.slot
		}
		p.mult[gi], p.cum[gi] = mu, cu
	}
	// Per resolver: the rate one cache sees from each subnet.
	p.res = make([]planRes, len(m.Resolvers))
	for ri := range m.Resolvers {
		r := &m.Resolvers[ri]
		if r.Caches < 1 {
			return nil, fmt.Errorf("simulate: resolver %d has %d caches", ri, r.Caches)
		}
		if r.Site < 0 || r.Site >= len(m.Sites) {
			return nil, fmt.Errorf("simulate: resolver %d is in no site", ri)
		}
		if len(r.Share) != len(r.Subnets) {
			return nil, fmt.Errorf("simulate: resolver %d has %d subnets and %d shares", ri, len(r.Subnets), len(r.Share))
		}
		pr := planRes{rate: make([]float64, len(r.Subnets)), group: make([]int32, len(r.Subnets))}
		for i, s := range r.Subnets {
			if s < 0 || int(s) >= len(m.Subnets) || m.Subnets[s].Group < 0 || m.Subnets[s].Group >= len(m.Groups) {
				return nil, fmt.Errorf("simulate: resolver %d serves subnet %d, which is not in the model", ri, s)
			}
			sn := &m.Subnets[s]
			pr.rate[i] = m.Groups[sn.Group].Rate * sn.Weight * r.Share[i] / float64(r.Caches)
			pr.group[i] = int32(sn.Group)
		}
		p.res[ri] = pr
	}
	p.phases = make([]planPhase, len(m.Phases))
	probe := rand.New(rand.NewPCG(m.Seed, 0x51a7))
	p.confPhase = make([][]float64, len(m.Phases))
	confRate := make([][][]float64, len(m.Phases)) // [phase][group][pool]
	for pi := range m.Phases {
		ph := &m.Phases[pi]
		pp := planPhase{start: ph.At.Seconds(), end: p.dur, ph: ph}
		if pi+1 < len(m.Phases) {
			pp.end = min(m.Phases[pi+1].At.Seconds(), p.dur)
		}
		pp.poolMap = make([]int32, len(ph.Record.Pools))
		for i, pl := range ph.Record.Pools {
			pp.poolMap[i] = int32(idx[pl.Name])
		}
		pp.res = make([]phaseRes, len(m.Resolvers))
		for ri := range m.Resolvers {
			pp.res[ri] = p.blocks(ph, ri, probe)
		}
		p.phases[pi] = pp
		confRate[pi] = p.configuredRates(&pp)
	}
	// Configured shares per phase (peak rates) and per bin.
	groupRate := make([]float64, len(m.Groups))
	for ri, pr := range p.res {
		for i, r := range pr.rate {
			groupRate[pr.group[i]] += r * float64(m.Resolvers[ri].Caches)
		}
	}
	for pi := range p.phases {
		c := make([]float64, len(p.pools))
		tot := 0.0
		for g := range m.Groups {
			tot += groupRate[g]
			for k := range c {
				c[k] += confRate[pi][g][k]
			}
		}
		for k := range c {
			if tot > 0 {
				c[k] /= tot
			}
		}
		p.confPhase[pi] = c
	}
	p.configured = make([][]float64, p.nb)
	for b := range p.configured {
		c := make([]float64, len(p.pools))
		bs, be := float64(b)*p.bin, min(float64(b+1)*p.bin, p.dur)
		for pi, pp := range p.phases {
			w := (min(be, pp.end) - max(bs, pp.start)) / (be - bs)
			if w <= 0 {
				continue
			}
			num := make([]float64, len(p.pools))
			den := 0.0
			for g := range m.Groups {
				f := p.meanMult(g, max(bs, pp.start), min(be, pp.end))
				den += f * groupRate[g]
				for k := range num {
					num[k] += f * confRate[pi][g][k]
				}
			}
			for k := range c {
				if den > 0 {
					c[k] += w * num[k] / den
				}
			}
		}
		p.configured[b] = c
	}
	// Drains: the window runs from the drain until a later phase gives
	// the pool a configured share again.
	for _, d := range m.Drains {
		k, ok := idx[d.Pool]
		if !ok {
			return nil, fmt.Errorf("simulate: drained pool %q is not a pool of %s", d.Pool, m.Record)
		}
		pd := planDrain{Drain: d, pool: k, at: d.At.Seconds(), end: p.dur}
		for pi, pp := range p.phases {
			if pp.start > pd.at && p.confPhase[pi][k] > 1e-9 {
				pd.end = pp.start
				break
			}
		}
		pd.firstBin = min(int(pd.at/p.bin), p.nb)
		pd.endBin = min(int(math.Ceil(pd.end/p.bin-1e-9)), p.nb)
		p.drains = append(p.drains, pd)
	}
	return p, nil
}

// meanMult is group g's mean daily factor over [x, y] (seconds).
func (p *plan) meanMult(g int, x, y float64) float64 {
	if y <= x {
		return p.mult[g][min(max(int(x/p.slot), 0), p.nslot-1)]
	}
	at := func(t float64) float64 {
		b := min(max(int(t/p.slot), 0), p.nslot-1)
		return p.cum[g][b] + p.mult[g][b]*(t-float64(b)*p.slot)
	}
	return (at(y) - at(x)) / (y - x)
}

// query returns the query a miss of block k sends.
func (m *Model) query(r *Resolver, k *block, rnd *rand.Rand) policy.Query {
	return policy.Query{Qtype: m.Qtype, Client: k.client, ClientBits: k.bits, Resolver: r.Addr, NoECS: k.noECS, Rand: rnd}
}

// blocks finds resolver ri's blocks in phase ph: each subnet is decided
// once to learn its scope.
func (p *plan) blocks(ph *Phase, ri int, probe *rand.Rand) phaseRes {
	m := p.m
	r := &m.Resolvers[ri]
	site := &m.Sites[r.Site]
	pr := &p.res[ri]
	out := phaseRes{blockOf: make([]int32, len(r.Subnets))}
	at := p.start + int64(ph.At.Seconds())
	add := func(k block, sub int) int32 {
		k.subs = append(k.subs, int32(sub))
		k.base += pr.rate[sub]
		g := pr.group[sub]
		found := false
		for i := range k.comps {
			if k.comps[i].g == g {
				k.comps[i].rate += pr.rate[sub]
				found = true
			}
		}
		if !found {
			k.comps = append(k.comps, comp{g: g, rate: pr.rate[sub]})
		}
		out.blocks = append(out.blocks, k)
		return int32(len(out.blocks) - 1)
	}
	grow := func(bi int32, sub int) {
		k := &out.blocks[bi]
		k.subs = append(k.subs, int32(sub))
		k.base += pr.rate[sub]
		g := pr.group[sub]
		for i := range k.comps {
			if k.comps[i].g == g {
				k.comps[i].rate += pr.rate[sub]
				return
			}
		}
		k.comps = append(k.comps, comp{g: g, rate: pr.rate[sub]})
	}
	// Without ECS (or with a /0 source, which is no subnet at all) the
	// resolver's own address is the client: one block.
	noECS := int32(-1)
	byPrefix := map[netip.Prefix]int32{}
	for i, s := range r.Subnets {
		sp := m.Subnets[s].Prefix
		src := site.SourceV4
		if sp.Addr().Is6() && !sp.Addr().Is4In6() {
			src = site.SourceV6
		}
		src = min(src, sp.Bits())
		if !site.ECS || src <= 0 {
			if noECS < 0 {
				noECS = add(block{client: r.Addr, bits: r.Addr.BitLen(), noECS: true}, i)
			} else {
				grow(noECS, i)
			}
			out.blockOf[i] = noECS
			continue
		}
		cp, _ := sp.Addr().Prefix(src)
		key := cp
		if site.HonorsScope {
			q := policy.Query{Qtype: m.Qtype, Client: cp.Addr(), ClientBits: src, Resolver: r.Addr, Rand: probe}
			d := ph.Live.Decide(ph.Record, &q, at)
			scope := d.Scope
			if cp.Addr().Is4In6() {
				scope -= 96
			}
			key, _ = cp.Addr().Prefix(max(min(scope, src), 0))
		}
		if bi, ok := byPrefix[key]; ok {
			grow(bi, i)
			out.blockOf[i] = bi
			continue
		}
		bi := add(block{client: cp.Addr(), bits: src}, i)
		byPrefix[key] = bi
		out.blockOf[i] = bi
	}
	// Decisions that draw nothing from the random source are the same at
	// every miss of the phase: decide them once.
	for i := range out.blocks {
		k := &out.blocks[i]
		cs := &countSource{src: probe}
		q := m.query(r, k, rand.New(cs))
		s := ph.Live.Decide(ph.Record, &q, at)
		if cs.n == 0 {
			k.fixed, k.det = true, s
		}
	}
	return out
}

// configuredRates returns, per group and pool, the user q/s (at peak
// rates) steer's decisions give the pool in phase pp with no cache. A
// random decision is taken once per stratum of its random source; blocks
// decided by the same rule usually draw alike, so a few strata are
// compared with the last full set taken for that rule before deciding
// every stratum again.
func (p *plan) configuredRates(pp *planPhase) [][]float64 {
	m := p.m
	out := make([][]float64, len(m.Groups))
	for g := range out {
		out[g] = make([]float64, len(p.pools))
	}
	at := p.start + int64(pp.ph.At.Seconds())
	src := &stratSource{}
	rnd := rand.New(src)
	type memo struct{ pools [strata]uint64 }
	byRule := map[int]*memo{}
	frac := make([]float64, len(p.pools))
	for ri := range m.Resolvers {
		r := &m.Resolvers[ri]
		for bi := range pp.res[ri].blocks {
			k := &pp.res[ri].blocks[bi]
			clear(frac)
			addPools := func(pools uint64, w float64) {
				n := bits.OnesCount64(pools)
				for x := pools; x != 0; x &= x - 1 {
					frac[pp.poolMap[bits.TrailingZeros64(x)]] += w / float64(n)
				}
			}
			decide := func(i int) policy.Steered {
				src.i = uint64(i)
				q := m.query(r, k, rnd)
				return pp.ph.Live.Decide(pp.ph.Record, &q, at)
			}
			if k.fixed {
				addPools(k.det.Pools, 1)
			} else {
				first := decide(0)
				mm := byRule[first.Rule]
				same := mm != nil && mm.pools[0] == first.Pools
				for i := strata / 16; same && i < strata; i += strata / 16 {
					same = decide(i).Pools == mm.pools[i]
				}
				if !same {
					mm = &memo{}
					for i := range strata {
						mm.pools[i] = decide(i).Pools
					}
					byRule[first.Rule] = mm
				}
				for i := range strata {
					addPools(mm.pools[i], 1.0/strata)
				}
			}
			caches := float64(r.Caches)
			for _, c := range k.comps {
				for j, f := range frac {
					out[c.g][j] += f * c.rate * caches
				}
			}
		}
	}
	return out
}
