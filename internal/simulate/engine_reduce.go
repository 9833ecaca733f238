package simulate

import (
	"math"
	"slices"
	"sort"
	"time"
)

// safeShare is the share of user queries a drained pool may still get
// in a bin that counts as safe.
const safeShare = 0.01

// binWidth is bin b's width in seconds (the last may be cut short).
func (p *plan) binWidth(b int) float64 {
	return min(p.bin, p.dur-float64(b)*p.bin)
}

// summarise reduces the run's counters to what the result needs.
func (st *runState) summarise(i int) *runOut {
	p := st.p
	np, ns, nb := len(p.pools), p.nSites, p.nb
	out := &runOut{
		i:       i,
		share:   make([]float64, nb*np),
		auth:    make([]float64, nb),
		queries: make([]float64, nb),
		entries: make([]float64, nb),
		uq:      slices.Clone(st.uq),
		ut:      slices.Clone(st.ut),
		cost:    make([][3]float64, len(p.phases)*ns),
		dev:     make([][3]float64, np),
		safe:    make([]float64, len(p.drains)),
		lastQ:   make([]float64, len(p.drains)),
		exc:     make([]excursion, np),
	}
	users := make([]float64, nb)
	for b := range nb {
		w := p.binWidth(b)
		var u, mi, en float64
		for s := range ns {
			i := b*ns + s
			u += st.ut[i]
			mi += st.mi[i]
			en += st.en[i]
			for k := range np {
				out.share[b*np+k] += st.uq[i*np+k]
			}
		}
		users[b] = u
		if u > 0 {
			for k := range np {
				out.share[b*np+k] /= u
			}
		}
		out.auth[b] = mi / w
		out.queries[b] = u / w
		out.entries[b] = en / w
		out.totalMisses += mi
		out.totalQueries += u
		out.totalEntrySec += en
		// Cost: the bin's counts shared among the phases it overlaps.
		bs, be := float64(b)*p.bin, float64(b)*p.bin+w
		for pi, pp := range p.phases {
			f := (min(be, pp.end) - max(bs, pp.start)) / w
			if f <= 0 {
				continue
			}
			for s := range ns {
				i := b*ns + s
				c := &out.cost[pi*ns+s]
				c[0] += f * st.mi[i]
				c[1] += f * st.en[i]
				c[2] += f * st.ut[i]
			}
		}
	}
	// Deviation from the configured share, in percentage points.
	devs := make([]float64, 0, nb)
	for k := range np {
		devs = devs[:0]
		for b := range nb {
			if users[b] > 0 {
				devs = append(devs, 100*math.Abs(out.share[b*np+k]-p.configured[b][k]))
			}
		}
		slices.Sort(devs)
		if len(devs) > 0 {
			out.dev[k] = [3]float64{percentile(devs, 0.5), percentile(devs, 0.95), devs[len(devs)-1]}
		}
	}
	// Drains: safe from the first bin after which every bin of the
	// window has at most 1 % of the users on the pool.
	for di := range p.drains {
		d := &p.drains[di]
		safeFrom := d.firstBin
		for b := d.firstBin; b < d.endBin; b++ {
			if users[b] > 0 && out.share[b*np+d.pool] > safeShare {
				safeFrom = b + 1
			}
		}
		switch {
		case safeFrom >= d.endBin && d.endBin > d.firstBin && safeFrom > d.firstBin:
			out.safe[di] = -1 // never within the window
		default:
			out.safe[di] = max(float64(safeFrom)*p.bin, d.at) - d.at
		}
		if l := st.last[di]; l.ok {
			// The last user query of the last entry carrying the pool:
			// looking back from the entry's end, the gap to the last
			// arrival is exponential; none in the life leaves the miss.
			last := l.a
			if l.rate > 0 {
				last = max(l.a, l.e-st.rng.ExpFloat64()/l.rate)
			}
			last = min(last, d.end, p.dur)
			out.lastQ[di] = max(last-d.at, 0)
		}
	}
	// The largest excursion above the configured share, per pool, and
	// the site whose users carried most of the excess.
	for k := range np {
		ex := &out.exc[k]
		for b := range nb {
			if users[b] == 0 {
				continue
			}
			if x := out.share[b*np+k] - p.configured[b][k]; !ex.ok || x > ex.excess {
				*ex = excursion{bin: b, share: out.share[b*np+k], conf: p.configured[b][k], excess: x, ok: true}
			}
		}
		if !ex.ok {
			continue
		}
		best := math.Inf(-1)
		for s := range ns {
			i := ex.bin*ns + s
			if x := st.uq[i*np+k] - ex.conf*st.ut[i]; x > best {
				best, ex.site = x, s
				ex.siteShare = st.ut[i] / users[ex.bin]
			}
		}
	}
	return out
}

// reducer adds the runs up in run order.
type reducer struct {
	p    *plan
	next int
	runs []*runOut // kept without their per-site arrays
	// sums over runs
	queries, entries []float64
	uq, ut           []float64
	cost             [][3]float64
}

func newReducer(p *plan) *reducer {
	return &reducer{
		p:       p,
		queries: make([]float64, p.nb),
		entries: make([]float64, p.nb),
		uq:      make([]float64, p.nb*p.nSites*len(p.pools)),
		ut:      make([]float64, p.nb*p.nSites),
		cost:    make([][3]float64, len(p.phases)*p.nSites),
	}
}

func (r *reducer) add(o *runOut) {
	for b := range r.queries {
		r.queries[b] += o.queries[b]
		r.entries[b] += o.entries[b]
	}
	for i, x := range o.uq {
		r.uq[i] += x
	}
	for i, x := range o.ut {
		r.ut[i] += x
	}
	for i, c := range o.cost {
		for j := range c {
			r.cost[i][j] += c[j]
		}
	}
	o.uq, o.ut, o.cost = nil, nil, nil
	r.runs = append(r.runs, o)
	r.next++
}

func (r *reducer) result() *Result {
	p := r.p
	m := p.m
	np, ns, nb := len(p.pools), p.nSites, p.nb
	n := float64(len(r.runs))
	res := &Result{
		Record: m.Record,
		Pools:  slices.Clone(p.pools),
		Bin:    m.Bin,
		Runs:   len(r.runs),
		Seed:   m.Seed,
		Bins:   make([]Bin, nb),
	}
	for _, s := range m.Sites {
		res.Sites = append(res.Sites, s.Name)
	}
	for _, ph := range m.Phases {
		res.Phases = append(res.Phases, PhaseInfo{At: ph.At, Label: ph.Label})
	}
	xs := make([]float64, len(r.runs))
	for b := range nb {
		bin := Bin{
			Start:      time.Duration(float64(b) * p.bin * float64(time.Second)),
			Share:      make([]Band, np),
			Configured: slices.Clone(p.configured[b]),
			SiteShare:  make([][]float64, ns),
			Queries:    r.queries[b] / n,
			Entries:    r.entries[b] / n,
		}
		for k := range np {
			for i, o := range r.runs {
				xs[i] = o.share[b*np+k]
			}
			bin.Share[k] = band(xs)
		}
		for i, o := range r.runs {
			xs[i] = o.auth[b]
		}
		bin.AuthQPSBand = band(xs)
		bin.AuthQPS = bin.AuthQPSBand.Mean
		for s := range ns {
			ss := make([]float64, np)
			if u := r.ut[b*ns+s]; u > 0 {
				for k := range np {
					ss[k] = r.uq[(b*ns+s)*np+k] / u
				}
			}
			bin.SiteShare[s] = ss
		}
		res.Bins[b] = bin
	}
	// Deviation.
	for k := range np {
		d := Deviation{Pool: p.pools[k]}
		for j, dst := range []*Band{&d.Median, &d.P95, &d.Max} {
			for i, o := range r.runs {
				xs[i] = o.dev[k][j]
			}
			*dst = band(xs)
		}
		sum := 0.0
		for b := range nb {
			sum += p.configured[b][k]
		}
		d.ConfiguredMean = sum / float64(nb)
		res.Deviation = append(res.Deviation, d)
	}
	// Drains.
	for di, d := range p.drains {
		dr := DrainResult{Pool: d.Pool, At: d.At, Label: d.Label}
		var safe, last []float64
		for _, o := range r.runs {
			if o.safe[di] < 0 {
				dr.Never++
			} else {
				safe = append(safe, o.safe[di])
			}
			last = append(last, o.lastQ[di])
		}
		dr.SafeAt, dr.LastQuery = band(safe), band(last)
		res.Drains = append(res.Drains, dr)
	}
	// Cost per phase and site.
	for pi, pp := range p.phases {
		span := min(pp.end, p.dur) - pp.start
		if span <= 0 {
			continue
		}
		for s := range ns {
			c := r.cost[pi*ns+s]
			res.Cost = append(res.Cost, Cost{
				Phase:   pp.ph.Label,
				Site:    m.Sites[s].Name,
				AuthQPS: c[0] / span / n,
				Entries: c[1] / span / n,
				UserQPS: c[2] / span / n,
			})
		}
	}
	p.ecsCalculator(res)
	// Notable excursions: per pool, the largest over runs, if it is
	// more than half a percentage point.
	for k := range np {
		var top *excursion
		for _, o := range r.runs {
			if e := &o.exc[k]; e.ok && (top == nil || e.excess > top.excess) {
				top = e
			}
		}
		if top == nil || top.excess < 0.005 {
			continue
		}
		cnt := 0
		for _, o := range r.runs {
			if e := &o.exc[k]; e.ok && e.excess >= top.excess/2 {
				cnt++
			}
		}
		ex := Excursion{
			Bin:        time.Duration(float64(top.bin) * p.bin * float64(time.Second)),
			Pool:       p.pools[k],
			Share:      top.share,
			Configured: top.conf,
			SiteShare:  top.siteShare,
			Runs:       float64(cnt) / n,
		}
		if ns > 0 {
			ex.Site = m.Sites[top.site].Name
		}
		res.Notable = append(res.Notable, ex)
	}
	sort.SliceStable(res.Notable, func(i, j int) bool {
		return res.Notable[i].Share-res.Notable[i].Configured > res.Notable[j].Share-res.Notable[j].Configured
	})
	return res
}
