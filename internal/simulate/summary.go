package simulate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summary explains a result in words on one page (about 40 lines): what
// was simulated, per pool the configured and observed shares and the
// deviation, the biggest excursion and which resolver site caused it,
// when each drain is safe, and the authoritative and cache cost per
// phase and site. The text depends only on r, and not on how long the
// simulation took: the same seed gives the same text.
func Summary(r *Result) string {
	if r == nil {
		return "steer simulate: no result\n"
	}
	var b strings.Builder
	summaryHead(&b, r)
	summaryPools(&b, r)
	summaryExcursion(&b, r)
	summaryDrains(&b, r)
	summaryCost(&b, r)
	summaryCapacity(&b, r)
	return b.String()
}

const (
	maxSummaryPoolLines = 14
	maxSummaryCost      = 10
	maxSummaryPhases    = 6
)

func summaryHead(b *strings.Builder, r *Result) {
	dur := time.Duration(len(r.Bins)) * r.Bin
	users := 0.0
	for _, bin := range r.Bins {
		users += finite(bin.Queries)
	}
	if len(r.Bins) > 0 {
		users /= float64(len(r.Bins))
	}
	fmt.Fprintf(b, "steer simulate: %s\n", recordName(r))
	seeds := fmt.Sprintf("seed %d", r.Seed)
	if r.Runs > 1 {
		seeds = fmt.Sprintf("seeds %d…%d", r.Seed, r.Seed+uint64(r.Runs)-1)
	}
	runs := "runs"
	if r.Runs == 1 {
		runs = "run"
	}
	fmt.Fprintf(b, "simulated %s in %s bins of %s, %s %s (%s), %s user q/s on average",
		fmtDurWords(dur), fmtGrouped(float64(len(r.Bins))), fmtDurWords(r.Bin), fmtGrouped(float64(r.Runs)), runs, seeds, fmtQPS(users))
	// Not the wall time (Elapsed, in result.json): the same seed gives
	// the same text.
	b.WriteString("\n")
	if len(r.Phases) > 0 {
		parts := make([]string, 0, len(r.Phases))
		for i, ph := range r.Phases {
			if i == maxSummaryPhases {
				parts = append(parts, fmt.Sprintf("%d more", len(r.Phases)-i))
				break
			}
			parts = append(parts, fmt.Sprintf("%s %q", fmtClockShort(ph.At), ph.Label))
		}
		fmt.Fprintf(b, "phases: %s\n", strings.Join(parts, "; "))
	}
}

// poolStats are a pool's shares over some bins, from the per-bin bands.
type poolStats struct {
	configured float64 // query-weighted mean of the configured share
	median     float64 // median over bins of the per-bin p50
	mean       float64 // query-weighted mean of the per-bin mean (the long-run share)
	p95        float64 // the highest per-bin p95
	p95At      time.Duration
}

// poolStatsOf is pool's poolStats over bins (at least one).
func poolStatsOf(bins []Bin, pool int) poolStats {
	var s poolStats
	p50s := make([]float64, 0, len(bins))
	var wsum, conf, mean float64
	s.p95 = -1
	for _, bin := range bins {
		band := elemAt(bin.Share, pool)
		p50s = append(p50s, finite(band.P50))
		w := finite(bin.Queries)
		if w <= 0 {
			w = 1e-12 // a bin without users still counts, barely
		}
		wsum += w
		conf += w * finite(elemAt(bin.Configured, pool))
		mean += w * finite(band.Mean)
		if v := finite(band.P95); v > s.p95 {
			s.p95, s.p95At = v, bin.Start
		}
	}
	slices.Sort(p50s)
	n := len(p50s)
	s.median = p50s[n/2]
	if n%2 == 0 {
		s.median = (p50s[n/2-1] + p50s[n/2]) / 2
	}
	s.configured, s.mean = conf/wsum, mean/wsum
	return s
}

// phaseBins is the bins of one phase.
type phaseBins struct {
	label string
	bins  []Bin
	from  time.Duration
	to    time.Duration // exclusive
}

// phaseBinsOf splits the bins by phase (a phase starting inside a bin
// starts its phaseBins at the next bin).
func phaseBinsOf(r *Result) []phaseBins {
	var out []phaseBins
	for i, ph := range r.Phases {
		end := time.Duration(math.MaxInt64)
		if i+1 < len(r.Phases) {
			end = r.Phases[i+1].At
		}
		var seg phaseBins
		seg.label, seg.from, seg.to = ph.Label, ph.At, end
		for _, b := range r.Bins {
			if b.Start >= ph.At && b.Start < end {
				seg.bins = append(seg.bins, b)
			}
		}
		if len(seg.bins) > 0 {
			out = append(out, seg)
		}
	}
	if len(out) == 0 && len(r.Bins) > 0 {
		out = append(out, phaseBins{bins: r.Bins, to: time.Duration(math.MaxInt64)})
	}
	return out
}

func summaryPools(b *strings.Builder, r *Result) {
	if len(r.Pools) == 0 {
		b.WriteString("pools: none\n")
		return
	}
	segs := phaseBinsOf(r)
	fmt.Fprintf(b, "share of user queries per pool (per %s; bands are p5–p95 over runs):\n", binUnit(r))
	width := 0
	for _, p := range r.Pools {
		width = max(width, len(p))
	}
	lines := 0
	var idle []string
	defer func() {
		if len(idle) > 0 {
			fmt.Fprintf(b, "  (no user queries: %s)\n", strings.Join(idle, ", "))
		}
	}()
	for i, pool := range r.Pools {
		if !poolInPlay(r, i) {
			idle = append(idle, pool)
			continue
		}
		if lines >= maxSummaryPoolLines {
			fmt.Fprintf(b, "  … %d more pools in share.csv\n", len(r.Pools)-i)
			break
		}
		// Consecutive phases with the same configured share for the
		// pool are one stretch.
		var groups []phaseBins
		for _, seg := range segs {
			c := poolStatsOf(seg.bins, i).configured
			if n := len(groups); n > 0 && math.Abs(poolStatsOf(groups[n-1].bins, i).configured-c) < 0.0005 {
				g := &groups[n-1]
				g.bins = append(slices.Clip(g.bins), seg.bins...)
				g.to = seg.to
				g.label = strings.SplitN(g.label, "\" … \"", 2)[0] + "\" … \"" + seg.label
				continue
			}
			groups = append(groups, seg)
		}
		for _, seg := range groups {
			s := poolStatsOf(seg.bins, i)
			if s.configured < 0.0005 && s.mean < 0.0005 && s.p95 < 0.0005 {
				continue // not in play in this phase
			}
			if lines >= maxSummaryPoolLines {
				break
			}
			name := ""
			if len(segs) > 1 {
				name = fmt.Sprintf("in \"%s\": ", seg.label)
			}
			fmt.Fprintf(b, "  %-*s %sconfigured %s %%; observed median %s %%, mean %s %%, highest p95 %s %% (%s)",
				width, pool, name, fmtPct(s.configured), fmtPct(s.median), fmtPct(s.mean), fmtPct(s.p95), fmtClockShort(s.p95At))
			if e, ok := excursionOf(r, pool); ok && e.Bin >= seg.from && e.Bin < seg.to {
				word := "peak"
				if e.Share < e.Configured {
					word = "low"
				}
				fmt.Fprintf(b, "; %s %s %% in one run (%s)", word, fmtPct(e.Share), fmtClockShort(e.Bin))
			}
			b.WriteString("\n")
			lines++
		}
		for _, d := range r.Deviation {
			if d.Pool != pool {
				continue
			}
			fmt.Fprintf(b, "  %-*s |observed − configured| over all bins: median %s pp (%s), p95 %s pp (%s), max %s pp (%s)\n",
				width, "", fmtPP(d.Median.P50), ppBand(d.Median), fmtPP(d.P95.P50), ppBand(d.P95), fmtPP(d.Max.P50), ppBand(d.Max))
			lines++
			break
		}
	}
}

// poolInPlay says whether pool has a configured or observed share in
// some bin.
func poolInPlay(r *Result, pool int) bool {
	for _, bin := range r.Bins {
		sh := elemAt(bin.Share, pool)
		if elemAt(bin.Configured, pool) > 0 || sh.P95 > 0 || sh.Mean > 0 || sh.P50 > 0 {
			return true
		}
	}
	return false
}

// excursionOf is the largest excursion of pool among r.Notable.
func excursionOf(r *Result, pool string) (Excursion, bool) {
	var best Excursion
	found := false
	for _, e := range r.Notable {
		if e.Pool == pool && (!found || math.Abs(e.Share-e.Configured) > math.Abs(best.Share-best.Configured)) {
			best, found = e, true
		}
	}
	return best, found
}

// biggestExcursion is the excursion furthest from its configured share.
func biggestExcursion(r *Result) (Excursion, bool) {
	var best Excursion
	found := false
	for _, e := range r.Notable {
		if !found || math.Abs(e.Share-e.Configured) > math.Abs(best.Share-best.Configured) {
			best, found = e, true
		}
	}
	return best, found
}

func summaryExcursion(b *strings.Builder, r *Result) {
	e, ok := biggestExcursion(r)
	if !ok {
		worst := 0.0
		for _, d := range r.Deviation {
			worst = max(worst, finite(d.Max.P95))
		}
		if len(r.Deviation) > 0 {
			fmt.Fprintf(b, "biggest excursion: none notable; every pool stayed within %s pp of its configured share (max, p95 over runs)\n", fmtPP(worst))
		} else {
			b.WriteString("biggest excursion: none recorded\n")
		}
		return
	}
	unit := binUnit(r)
	c, s := e.Configured, e.SiteShare
	up := e.Share >= c
	verb := "reached"
	if !up {
		verb = "fell to"
	}
	fmt.Fprintf(b, "biggest excursion: %s %s %s %% for one %s in one run (bin %s, configured %s %%)",
		e.Pool, verb, fmtPct(e.Share), unit, fmtClockShort(e.Bin), fmtPct(c))
	if e.Runs > 0 {
		fmt.Fprintf(b, "; %s %% of the runs have an excursion at least half as large", fmtPct(e.Runs))
	}
	b.WriteString(".\n")
	if e.Site == "" || s <= 0 {
		return
	}
	// One cache holding the pool's answer for the whole site puts the
	// site's whole share on the pool, plus the configured share of
	// everybody else: full. A peak at least that high is that story.
	full := s + c*(1-s)
	if ph, before, ok := changedJustBefore(r, e); ok && up {
		when := fmt.Sprintf("the %s of", binUnit(r))
		if e.Bin > ph.At {
			when = fmt.Sprintf("%s after", fmtRel((e.Bin - ph.At).Seconds()))
		}
		fmt.Fprintf(b, "  why: it is %s %q (%s), which lowered %s from %s %% to %s %%: caches filled before it keep the old answer until their TTL ends; resolver site %s (%s %% of the users) held most of it.\n",
			when, ph.Label, fmtClockShort(ph.At), e.Pool, fmtPct(before), fmtPct(c), e.Site, fmtPct(s))
		return
	}
	switch {
	case up && e.Share >= full-0.03:
		fmt.Fprintf(b, "  why: resolver site %s holds %s %% of the users and cached the %s answer for its TTL: %s %% (%s, all on %s) + %s %% of the other %s %% = %s %%",
			e.Site, fmtPct(s), e.Pool, fmtPct(s), e.Site, e.Pool, fmtPct(c), fmtPct(1-s), fmtPct(full))
		if extra := e.Share - full; extra > 0.03 {
			fmt.Fprintf(b, "; in this run the other resolvers added %s pp by chance", fmtPP(extra*100))
		}
		b.WriteString(".\n")
		if c > 0 && c < 0.5 {
			fmt.Fprintf(b, "  Each of its cache fills draws %s with the configured %s %%, about one fill in %s; the other %s %% of the users are spread over %s, whose caches average out.\n",
				e.Pool, fmtPct(c), fmtGrouped(math.Round(1/c)), fmtPct(1-s), otherSites(r, e))
		}
		summaryStraddle(b, r, e, full)
	case up:
		fmt.Fprintf(b, "  why: resolver site %s (%s %% of the users) carried most of the excess: more of its caches than usual held the %s answer at the same time (its caches draw independently; busy client subnets behind one cache move the share most).\n",
			e.Site, fmtPct(s), e.Pool)
	default:
		fmt.Fprintf(b, "  why: resolver site %s (%s %% of the users) carried most of it: its caches held another pool's answer.\n", e.Site, fmtPct(s))
	}
}

// changedJustBefore finds the phase change an excursion follows
// closely (within 5 bins or 5 minutes, whichever is longer) that gave
// its pool a lower configured share: the excess is answers cached
// before the change. It returns the phase and the configured share in
// the bin before it.
func changedJustBefore(r *Result, e Excursion) (PhaseInfo, float64, bool) {
	window := max(5*r.Bin, 5*time.Minute)
	pi := indexOfName(r.Pools, e.Pool)
	for i := len(r.Phases) - 1; i >= 0; i-- {
		ph := r.Phases[i]
		if ph.At <= 0 || ph.At > e.Bin+r.Bin {
			continue
		}
		if e.Bin-ph.At >= window {
			break
		}
		// The configured share in the last bin that ends by the change.
		before := -1.0
		for _, bin := range r.Bins {
			if bin.Start+r.Bin <= ph.At {
				before = elemAt(bin.Configured, pi)
			}
		}
		if pi >= 0 && before > e.Configured+0.005 {
			return ph, before, true
		}
		break
	}
	return PhaseInfo{}, 0, false
}

// summaryStraddle explains why most spikes look smaller than the full
// one, when the data show it. A cached answer lives one TTL; when TTL
// windows straddle bins, a spike splits its share between two bins, so
// the bins' p95 over runs spreads between the baseline and the full
// spike; when windows fill whole bins, it sits at either end.
func summaryStraddle(b *strings.Builder, r *Result, e Excursion, full float64) {
	unit := binUnit(r)
	c, s := e.Configured, e.SiteShare
	pi := indexOfName(r.Pools, e.Pool)
	if pi < 0 || full-c < 0.05 {
		return
	}
	var p50s []float64
	middle, top, n := 0, 0, 0
	for _, bin := range r.Bins {
		if math.Abs(elemAt(bin.Configured, pi)-c) >= 0.005 {
			continue
		}
		band := elemAt(bin.Share, pi)
		p50s = append(p50s, finite(band.P50))
		x := (finite(band.P95) - c) / (full - c)
		n++
		switch {
		case x >= 0.25 && x <= 0.75:
			middle++
		case x > 0.85:
			top++
		}
	}
	if n < 4 || middle*10 < n || middle < 2*top {
		return
	}
	slices.Sort(p50s)
	base := p50s[len(p50s)/2]
	fmt.Fprintf(b, "  Most spikes look smaller: a cached answer lives one TTL, and a TTL window that straddles two %ss splits the site's %s %% between them, so a spike shows as two %ss of about %s %% each (%s %% + %s %%/2) rather than one of %s %%; %d of %d %ss have their p95 over runs in between.\n",
		unit, fmtPct(s), unit, fmtPct(base+s/2), fmtPct(base), fmtPct(s), fmtPct(full), middle, n, unit)
}

// otherSites names the sites other than e.Site with their share of the
// users (from the cost of the phase the excursion is in).
func otherSites(r *Result, e Excursion) string {
	phase := ""
	for _, ph := range r.Phases {
		if ph.At <= e.Bin {
			phase = ph.Label
		}
	}
	if indexOfName(costPhases(r), phase) < 0 && len(r.Cost) > 0 {
		phase = r.Cost[0].Phase
	}
	total := 0.0
	type siteUsers struct {
		name  string
		users float64
	}
	var others []siteUsers
	for _, c := range r.Cost {
		if c.Phase != phase {
			continue
		}
		total += finite(c.UserQPS)
		if c.Site != e.Site && c.UserQPS > 0 {
			others = append(others, siteUsers{c.Site, finite(c.UserQPS)})
		}
	}
	if len(others) == 0 || total <= 0 {
		return "the other resolver sites"
	}
	slices.SortStableFunc(others, func(a, b siteUsers) int {
		switch {
		case a.users > b.users:
			return -1
		case a.users < b.users:
			return 1
		}
		return 0
	})
	parts := []string{}
	for i, o := range others {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more", len(others)-i))
			break
		}
		if len(others) == 1 {
			parts = append(parts, o.name)
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s %%)", o.name, fmtPct(o.users/total)))
	}
	return strings.Join(parts, ", ")
}

func costPhases(r *Result) []string {
	phases, _ := costAxes(r)
	return phases
}

func summaryDrains(b *strings.Builder, r *Result) {
	if len(r.Drains) == 0 {
		b.WriteString("drains: none\n")
		return
	}
	b.WriteString("drains:\n")
	for _, d := range r.Drains {
		lq := d.LastQuery
		if r.Runs > 0 && d.Never >= r.Runs {
			fmt.Fprintf(b, "  %s drained at %s (%q) is never safe (≤ 1 %% of user queries) before the end of the simulation; the last user query reaches it at %s (p5–p95 %s).\n",
				d.Pool, fmtClockShort(d.At), d.Label, fmtRel(lq.P50), fmtRelBand(lq))
			continue
		}
		fmt.Fprintf(b, "  %s drained at %s (%q) is safe (≤ 1 %% of user queries) at %s (p5–p95 %s)",
			d.Pool, fmtClockShort(d.At), d.Label, fmtRel(d.SafeAt.P50), fmtRelBand(d.SafeAt))
		// Resolvers that keep an answer long past its TTL (violators,
		// clamps) are the tail after the drain is safe.
		if lq.P50 > 2*d.SafeAt.P50+60 {
			fmt.Fprintf(b, "; with TTL violators (resolvers keeping answers past the TTL) the last user query reaches it only at %s (p5–p95 %s), long after it is safe", fmtRel(lq.P50), fmtRelBand(lq))
		} else {
			fmt.Fprintf(b, "; the last user query reaches it at %s (p5–p95 %s)", fmtRel(lq.P50), fmtRelBand(lq))
		}
		if d.Never > 0 {
			fmt.Fprintf(b, "; in %d of %d runs it was not safe before the end (the band is over the others)", d.Never, r.Runs)
		}
		b.WriteString(".\n")
	}
}

func summaryCost(b *strings.Builder, r *Result) {
	if len(r.Cost) == 0 {
		b.WriteString("cost: none recorded\n")
		return
	}
	phases, sites := costAxes(r)
	pw, sw := len("phase"), len("site")
	for _, p := range phases {
		pw = max(pw, len(p))
	}
	for _, s := range sites {
		sw = max(sw, len(s))
	}
	pw, sw = min(pw, 28), min(sw, 24)
	b.WriteString("cost (auth q/s are the cache misses steer answers):\n")
	fmt.Fprintf(b, "  %-*s  %-*s  %12s  %12s  %12s\n", pw, "phase", sw, "site", "auth q/s", "entries", "user q/s")
	rows := r.Cost
	for i, c := range rows {
		if i == maxSummaryCost {
			fmt.Fprintf(b, "  … %d more rows in cost.csv\n", len(rows)-i)
			break
		}
		fmt.Fprintf(b, "  %-*s  %-*s  %12s  %12s  %12s\n", pw, clipText(c.Phase, pw), sw, clipText(c.Site, sw), fmtQPS(c.AuthQPS), fmtQPS(c.Entries), fmtQPS(c.UserQPS))
	}
	lines := 0
	for _, m := range ecsMultipliers(r, phases) {
		if lines == 3 {
			break
		}
		b.WriteString("  " + m + "\n")
		lines++
	}
	for _, m := range phaseChanges(r, phases, sites) {
		if lines == 5 {
			break
		}
		b.WriteString("  " + m + "\n")
		lines++
	}
}

// ecsMultipliers is the ECS cache-cost calculator in words, for the
// first phase: per site, what its users cost steer and the caches with
// steer's scopes, without ECS, and cached per source prefix.
func ecsMultipliers(r *Result, phases []string) []string {
	if len(phases) == 0 {
		return nil
	}
	var out []string
	for _, c := range r.Cost {
		if c.Phase != phases[0] || c.NoECS.AuthQPS <= 0 || c.ECS == "" {
			continue
		}
		times := func(x CostCase) string {
			return fmt.Sprintf("%s q/s, %s entries (%s)", fmtQPS(x.AuthQPS), fmtQPS(x.Entries), fmtTimes(x.AuthQPS/c.NoECS.AuthQPS))
		}
		out = append(out, fmt.Sprintf("ECS calculator (%s; analytic, at mean rates, no TTL stretching): %s (ECS %s): without ECS %s q/s, %s entries; with ECS and steer's scopes %s; per ECS source prefix %s",
			phases[0], c.Site, c.ECS, fmtQPS(c.NoECS.AuthQPS), fmtQPS(c.NoECS.Entries), times(c.Scoped), times(c.PerPrefix)))
	}
	return out
}

// phaseChanges says, per site, how its cost changed from the first to
// the last phase when it changed by half or more.
func phaseChanges(r *Result, phases, sites []string) []string {
	if len(phases) < 2 {
		return nil
	}
	find := func(ph, site string) (Cost, bool) {
		for _, c := range r.Cost {
			if c.Phase == ph && c.Site == site {
				return c, true
			}
		}
		return Cost{}, false
	}
	first, last := phases[0], phases[len(phases)-1]
	var out []string
	for _, s := range sites {
		a, okA := find(first, s)
		z, okZ := find(last, s)
		if !okA || !okZ || a.AuthQPS <= 0 {
			continue
		}
		f := z.AuthQPS / a.AuthQPS
		if f >= 1.5 || f <= 1/1.5 {
			out = append(out, fmt.Sprintf("%s: %s → %s auth q/s (%s) and %s → %s entries from %q to %q",
				s, fmtQPS(a.AuthQPS), fmtQPS(z.AuthQPS), fmtTimes(f), fmtQPS(a.Entries), fmtQPS(z.Entries), first, last))
		}
	}
	return out
}

func clipText(s string, w int) string {
	if len(s) <= w {
		return s
	}
	return s[:w-1] + "…"
}

// binUnit names a bin: "minute" for 1-minute bins, else "bin".
func binUnit(r *Result) string {
	if r.Bin == time.Minute {
		return "minute"
	}
	return "bin"
}

// fmtPct formats a fraction as a percentage with one decimal.
func fmtPct(v float64) string { return strconv.FormatFloat(finite(v)*100, 'f', 1, 64) }

// fmtPP formats percentage points with one decimal.
func fmtPP(v float64) string { return strconv.FormatFloat(finite(v), 'f', 1, 64) }

func ppBand(b Band) string { return fmtPP(b.P5) + "–" + fmtPP(b.P95) }

// fmtRel formats seconds after an event: "+61 s", "+2.5 s", "+59m40s".
func fmtRel(s float64) string {
	s = finite(s)
	sign := "+"
	if s < 0 {
		sign, s = "-", -s
	}
	switch {
	case s < 10 && s != math.Trunc(s):
		return sign + strconv.FormatFloat(s, 'f', 1, 64) + " s"
	case s < 120:
		return sign + strconv.FormatFloat(math.Round(s), 'f', 0, 64) + " s"
	}
	return sign + (time.Duration(math.Round(s)) * time.Second).String()
}

// fmtRelBand formats a band of seconds after an event from p5 to p95:
// "+60…+62 s", "+59m0s…+1h0m30s".
func fmtRelBand(b Band) string {
	lo, hi := fmtRel(b.P5), fmtRel(b.P95)
	if lo == hi {
		return lo
	}
	if strings.HasSuffix(lo, " s") && strings.HasSuffix(hi, " s") {
		return strings.TrimSuffix(lo, " s") + "…" + hi
	}
	return lo + "…" + hi
}

// fmtClockShort formats an offset from the start as HH:MM, or HH:MM:SS
// when it is not a whole minute.
func fmtClockShort(d time.Duration) string {
	c := fmtClock(d)
	if d%time.Minute == 0 {
		return c[:len(c)-3]
	}
	return c
}

// fmtBinWidth names a bin width for a title: "1-min", "10-s", "1-h".
func fmtBinWidth(d time.Duration) string {
	switch {
	case d <= 0:
		return "0-s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "-h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "-min"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "-s"
	}
	return d.String()
}

// fmtDurWords formats a duration for reading: "24 h", "90 min", "1 min",
// "10 s", "1h30m".
func fmtDurWords(d time.Duration) string {
	switch {
	case d <= 0:
		return "0 s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	case d%time.Minute == 0 && d < 2*time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	case d%time.Second == 0 && d < 2*time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + " s"
	}
	return d.String()
}

// fmtGrouped formats a whole number with thousands separators: 1,440.
func fmtGrouped(v float64) string {
	s := strconv.FormatFloat(math.Round(finite(v)), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// fmtQPS formats a rate or count: grouped whole numbers from 100 on,
// three significant digits below (71.4, 9.80, 0.0167).
func fmtQPS(v float64) string {
	v = finite(v)
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 100:
		return fmtGrouped(v)
	case a >= 0.001:
		// three significant digits, counted after rounding (0.9996 is 1.00)
		r, _ := strconv.ParseFloat(strconv.FormatFloat(a, 'g', 3, 64), 64)
		digits := 2 - int(math.Floor(math.Log10(r)))
		return strconv.FormatFloat(v, 'f', max(digits, 0), 64)
	}
	return strconv.FormatFloat(v, 'e', 2, 64)
}

// fmtTimes formats a multiplier: ×4,284, ×8.0, ×0.50.
func fmtTimes(f float64) string {
	f = finite(f)
	switch {
	case f >= 100:
		return "×" + fmtGrouped(f)
	case f >= 1:
		return "×" + strconv.FormatFloat(f, 'f', 1, 64)
	}
	return "×" + strconv.FormatFloat(f, 'f', 2, 64)
}
