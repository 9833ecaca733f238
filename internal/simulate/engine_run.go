package simulate

import (
	"context"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/steer-dns/steer/internal/policy"
)

// runState is one worker's scratch, reused from run to run.
type runState struct {
	p   *plan
	rng *rand.Rand
	pcg *rand.PCG
	// Counters per bin and site (and pool): user queries answered with
	// each pool, all user queries, misses, entry-seconds.
	uq, ut, mi, en []float64
	// Scratch for one cache instance: when each local subnet's last
	// entry expires, and the phase's blocks' last entry ends.
	cov, lastEnd []float64
	steps        []step
	// stream state
	k          *block
	lamT, lamV float64   // lam's last point
	segT       []float64 // segment ends (ascending), the last +Inf
	segU       []float64 // the uncovered fraction of the block's rate in each
	site       int
	pools      []int32 // result pools of the current entry
	// drains: the last entry carrying each drained pool.
	last []lastEntry
	// misses counted but not yet added to the shared count.
	pending int64
}

type step struct {
	t, rate float64
}

type lastEntry struct {
	a, e, rate float64
	ok         bool
}

func newRunState(p *plan) *runState {
	nbs := p.nb * p.nSites
	st := &runState{
		p:    p,
		uq:   make([]float64, nbs*len(p.pools)),
		ut:   make([]float64, nbs),
		mi:   make([]float64, nbs),
		en:   make([]float64, nbs),
		last: make([]lastEntry, len(p.drains)),
	}
	st.pcg = rand.NewPCG(0, 0)
	st.rng = rand.New(st.pcg)
	return st
}

// runOut is what one run contributes to the result.
type runOut struct {
	i int
	// share[bin*P+pool], auth[bin], queries[bin], entries[bin]
	share, auth, queries, entries []float64
	// site sums, to be added in run order: uq, ut (per bin, site)
	uq, ut []float64
	// per phase and site: misses, entry-seconds, user queries
	cost          [][3]float64
	dev           [][3]float64 // per pool: median, p95, max (pp)
	safe          []float64    // per drain: seconds after the drain; -1 never
	lastQ         []float64
	exc           []excursion // per pool: the largest excursion of the run
	totalMisses   float64
	totalQueries  float64
	totalEntrySec float64
}

type excursion struct {
	bin                    int
	share, conf, siteShare float64
	site                   int
	excess                 float64
	ok                     bool
}

const checkEvery = 4096

// run simulates run i.
func (st *runState) run(ctx context.Context, i int, misses *atomic.Int64, maxMisses int64) (*runOut, error) {
	p := st.p
	m := p.m
	clear(st.uq)
	clear(st.ut)
	clear(st.mi)
	clear(st.en)
	clear(st.last)
	st.pending = 0
	st.pcg.Seed(m.Seed+uint64(i), 0x5eed5eed)
	rng := st.rng
	flush := func() error {
		n := misses.Add(st.pending)
		st.pending = 0
		if maxMisses > 0 && n > maxMisses {
			return ErrTooLarge
		}
		return ctx.Err()
	}
	for ri := range m.Resolvers {
		r := &m.Resolvers[ri]
		site := &m.Sites[r.Site]
		st.site = r.Site
		violator := site.Violators > 0 && rng.Float64() < site.Violators
		lt := lifeBounds{lo: 1, hi: math.Inf(1)}
		if site.MinTTL > 0 {
			lt.lo = max(lt.lo, site.MinTTL.Seconds())
		}
		if site.MaxTTL > 0 {
			lt.hi = site.MaxTTL.Seconds()
		}
		if violator {
			lt.ext = site.ExtendTo.Seconds()
		}
		nsub := len(r.Subnets)
		if cap(st.cov) < nsub {
			st.cov = make([]float64, nsub)
		}
		st.cov = st.cov[:nsub]
		for c := 0; c < r.Caches; c++ {
			clear(st.cov)
			for pi := range p.phases {
				pp := &p.phases[pi]
				if pp.start >= p.dur {
					break
				}
				pr := &pp.res[ri]
				if cap(st.lastEnd) < len(pr.blocks) {
					st.lastEnd = make([]float64, len(pr.blocks))
				}
				st.lastEnd = st.lastEnd[:len(pr.blocks)]
				for bi := range pr.blocks {
					k := &pr.blocks[bi]
					st.lastEnd[bi] = 0
					if k.base <= 0 {
						continue
					}
					st.stream(pp, ri, k, pi > 0)
					t := pp.start
					if pi == 0 {
						// Start in the steady state of the first phase: an
						// entry is alive at 0 with probability λL/(1+λL)
						// (the part of a renewal cycle it covers), its age
						// uniform over its life; otherwise the next query
						// is exponential from 0 as usual.
						pools, life := st.decide(pp, r, k, 0, lt)
						lr := st.rateAt(0) * life
						if rng.Float64()*(1+lr) < lr {
							e := rng.Float64() * life
							st.fill(pp, 0, e, pools, false)
							t = e
							st.lastEnd[bi] = e
						}
					}
					for {
						ta := st.nextArrival(t, pp.end)
						if ta >= pp.end {
							break
						}
						pools, life := st.decide(pp, r, k, ta, lt)
						e := ta + life
						st.fill(pp, ta, e, pools, true)
						t = e
						st.lastEnd[bi] = e
						st.pending++
						if st.pending >= checkEvery {
							if err := flush(); err != nil {
								return nil, err
							}
						}
					}
				}
				if pi+1 < len(p.phases) {
					for s := range st.cov {
						st.cov[s] = max(st.cov[s], st.lastEnd[pr.blockOf[s]])
					}
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return st.summarise(i), nil
}

// lifeBounds is how a resolver's cache keeps an answer: its TTL clamped
// to [lo, hi], then stretched to ext (a TTL violator). lo is at least a
// second: a resolver that kept nothing would send every query.
type lifeBounds struct{ lo, hi, ext float64 }

// decide decides a miss of block k at t (seconds) and returns the
// answer's pools and how long the cache keeps it.
func (st *runState) decide(pp *planPhase, r *Resolver, k *block, t float64, lt lifeBounds) (uint64, float64) {
	var s policy.Steered
	if k.fixed {
		s = k.det
	} else {
		q := st.p.m.query(r, k, st.rng)
		s = pp.ph.Live.Decide(pp.ph.Record, &q, st.p.start+int64(t))
	}
	life := min(max(float64(s.TTL), lt.lo), lt.hi)
	return s.Pools, max(life, lt.ext)
}

// stream prepares the segments of block k's rate in phase pp: with
// transition set, the parts of the block still covered by entries from
// earlier phases (cov) join as those expire.
func (st *runState) stream(pp *planPhase, ri int, k *block, transition bool) {
	st.k = k
	st.lamT = math.NaN()
	st.segT = st.segT[:0]
	st.segU = st.segU[:0]
	if transition {
		st.steps = st.steps[:0]
		pr := &st.p.res[ri]
		covered := 0.0
		for _, s := range k.subs {
			if c := st.cov[s]; c > pp.start {
				st.steps = append(st.steps, step{c, pr.rate[s]})
				covered += pr.rate[s]
			}
		}
		if len(st.steps) > 0 {
			slices.SortFunc(st.steps, func(a, b step) int {
				switch {
				case a.t < b.t:
					return -1
				case a.t > b.t:
					return 1
				}
				return 0
			})
			unc := k.base - covered
			for _, s := range st.steps {
				if n := len(st.segT); n > 0 && st.segT[n-1] == s.t {
					unc += s.rate
					continue
				}
				st.segT = append(st.segT, s.t)
				st.segU = append(st.segU, max(unc/k.base, 0))
				unc += s.rate
			}
		}
	}
	st.segT = append(st.segT, math.Inf(1))
	st.segU = append(st.segU, 1)
}

// lam is the block's cumulative expected queries (per cache) at t. It
// remembers the last point (lamT, lamV): a stream asks for the same
// times in turn (an arrival, then its entry's bins, then its expiry,
// then the next arrival from there).
func (st *runState) lam(t float64) float64 {
	k := st.k
	p := st.p
	if !p.diurnal {
		return k.base * t
	}
	if t == st.lamT {
		return st.lamV
	}
	st.lamT = t
	st.lamV = st.lamAt(t)
	return st.lamV
}

func (st *runState) lamAt(t float64) float64 {
	k := st.k
	p := st.p
	b := int(t / p.slot)
	if b >= p.nslot {
		b = p.nslot - 1
	}
	if b < 0 {
		b = 0
	}
	dt := t - float64(b)*p.slot
	v := 0.0
	for _, c := range k.comps {
		v += c.rate * (p.cum[c.g][b] + p.mult[c.g][b]*dt)
	}
	return v
}

// rateAt is the block's rate (per cache, all of it) at t.
func (st *runState) rateAt(t float64) float64 {
	k := st.k
	p := st.p
	if !p.diurnal {
		return k.base
	}
	b := min(max(int(t/p.slot), 0), p.nslot-1)
	v := 0.0
	for _, c := range k.comps {
		v += c.rate * p.mult[c.g][b]
	}
	return v
}

// invLam returns the t ≥ from at which lam(t) = v (v ≥ lam(from)).
func (st *runState) invLam(v, from float64) float64 {
	k := st.k
	p := st.p
	if !p.diurnal {
		return v / k.base
	}
	at := func(b int) float64 {
		x := 0.0
		for _, c := range k.comps {
			x += c.rate * p.cum[c.g][b]
		}
		return x
	}
	// The bin holding v: arrivals are mostly near from, so walk forward
	// a few bins before searching.
	b := min(max(int(from/p.slot), 0), p.nslot-1)
	for i := 0; b < p.nslot-1 && at(b+1) <= v; i++ {
		if i == 4 {
			b += sort.Search(p.nslot-1-b, func(j int) bool { return at(b+j+1) > v })
			break
		}
		b++
	}
	rate := 0.0
	for _, c := range k.comps {
		rate += c.rate * p.mult[c.g][b]
	}
	return float64(b)*p.slot + (v-at(b))/rate
}

// nextArrival returns the time of the first query after t from the
// uncovered part of the block, or +Inf when it would come at or after
// limit.
func (st *runState) nextArrival(t, limit float64) float64 {
	e := st.rng.ExpFloat64()
	for i, end := range st.segT {
		if end <= t {
			continue
		}
		u := st.segU[i]
		if u <= 0 {
			t = end
			if t >= limit {
				return math.Inf(1)
			}
			continue
		}
		l0 := st.lam(t)
		if !math.IsInf(end, 1) {
			if avail := u * (st.lam(end) - l0); avail < e {
				e -= avail
				t = end
				if t >= limit {
					return math.Inf(1)
				}
				continue
			}
		}
		v := l0 + e/u
		ta := st.invLam(v, t)
		if ta >= limit {
			return math.Inf(1)
		}
		st.lamT, st.lamV = ta, v
		return ta
	}
	return math.Inf(1)
}

// expected is the expected user queries of the block's uncovered part in
// [x, y].
func (st *runState) expected(x, y float64) float64 {
	if len(st.segT) == 1 {
		lx := st.lam(x)
		return st.lam(y) - lx
	}
	v := 0.0
	a := x
	for i, end := range st.segT {
		if end <= a {
			continue
		}
		b := min(end, y)
		if st.segU[i] > 0 {
			la := st.lam(a)
			v += st.segU[i] * (st.lam(b) - la)
		}
		a = b
		if a >= y {
			break
		}
	}
	return v
}

// uncoveredAt is the uncovered fraction of the block at t.
func (st *runState) uncoveredAt(t float64) float64 {
	for i, end := range st.segT {
		if t < end {
			return st.segU[i]
		}
	}
	return 1
}

// fill counts an entry filled at a (with miss, a miss and the query that
// missed; without, an entry already alive at the start) living until e,
// answered with pools.
func (st *runState) fill(pp *planPhase, a, e float64, pools uint64, miss bool) {
	p := st.p
	np := len(p.pools)
	st.pools = st.pools[:0]
	for x := pools; x != 0; x &= x - 1 {
		st.pools = append(st.pools, pp.poolMap[bits.TrailingZeros64(x)])
	}
	per := 0.0
	if len(st.pools) > 0 {
		per = 1 / float64(len(st.pools))
	}
	ba := min(int(a/p.bin), p.nb-1)
	bs := ba*p.nSites + st.site
	if miss {
		st.mi[bs]++
		st.ut[bs]++
		for _, k := range st.pools {
			st.uq[bs*np+int(k)] += per
		}
	}
	end := min(e, p.dur)
	for b := ba; b < p.nb; b++ {
		x := max(a, float64(b)*p.bin)
		if x >= end {
			break
		}
		y := min(end, float64(b+1)*p.bin)
		i := b*p.nSites + st.site
		st.en[i] += y - x
		n := poisson(st.rng, st.expected(x, y))
		if n > 0 {
			st.ut[i] += n
			for _, k := range st.pools {
				st.uq[i*np+int(k)] += n * per
			}
		}
	}
	for di := range p.drains {
		d := &p.drains[di]
		if a >= d.end || e <= d.at || !slices.Contains(st.pools, int32(d.pool)) {
			continue
		}
		if l := &st.last[di]; !l.ok || e > l.e {
			*l = lastEntry{a: a, e: e, rate: st.rateAt(e) * st.uncoveredAt(e), ok: true}
		}
	}
}
