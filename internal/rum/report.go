package rum

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/latency"
)

// The report answers "where is GeoIP wrong?" from what users measured
// (steer rum report, GET /v1/rum/report). Its inputs are narrow on
// purpose: the store's aggregates, where the geo databases put a block,
// and what the policy chooses for it. It never decides anything itself.
//
// Every figure is a p75, the statistic the scenario's detection rule
// names. A country's (or a site's) p75 over many blocks is the 75th
// percentile of the mixture of its blocks' distributions, each block
// weighing its decayed count and summarised by what the store keeps of
// it: half its weight at its p50, a quarter at its p75 and a quarter at
// p75 + (p75 - p50), the upper quartile extrapolated. A block alone gets
// its own p75 back.
//
// Three findings, each with the decayed count and the total of the
// beacons behind it:
//
//   - Countries far above their neighbours: a country's p75 to the sites
//     the policy chooses for its networks is more than CountryFactor
//     times the median of its neighbours' (the scenario's rule). The
//     neighbours of a country are the countries with data whose centres
//     (geo's country table) are within NeighbourKm; when none is that
//     close, those of its continent.
//   - Networks GeoIP seems to misplace: a network whose measured best
//     site beats, by the margin, its own p75 to the site that is best
//     for the country GeoIP puts it in (the site most of the country's
//     networks measure best, weighed by their beacons: a majority, so
//     that misplaced networks cannot move it until they are most of
//     the country). Its users are best served from
//     somewhere else than their supposed compatriots: a VPN egress, a
//     mobile or corporate network whose addresses are placed at a head
//     office. The country whose p75 to the sites looks most like the
//     network's is named (resembles). A network slower everywhere (a
//     mobile network in the right country) has the same best site as
//     its country and is not listed.
//   - Networks steered off their measured best: the site the policy
//     chooses for the network is slower, by more than the margin, than
//     the network's measured best. After real-user measurements feed
//     the latency map this list empties as anti-flap lets each network
//     switch; what stays is steered by rules that do not read latency.
//
// The margin is the latency map's switch margin: a difference anti-flap
// would not act on is not a finding.

// Report defaults.
const (
	DefaultCountryFactor = 1.5
	DefaultNeighbourKm   = 2000
	DefaultMinCount      = 3
)

// ReportOptions tune the report's rules; zero fields take the defaults.
type ReportOptions struct {
	// CountryFactor: a country is listed when its p75 to the sites the
	// policy chooses is above CountryFactor times its neighbours' median
	// (default DefaultCountryFactor; must be > 1).
	CountryFactor float64 `json:"country_factor"`
	// NeighbourKm: countries whose centres are at most this far apart
	// are neighbours (default DefaultNeighbourKm).
	NeighbourKm float64 `json:"neighbour_km"`
	// Margin is the relative improvement a measured best must show
	// (default latency.DefaultSwitchMargin; the node passes its latency
	// map's switch_margin).
	Margin float64 `json:"margin"`
	// MinCount is the decayed number of beacons a (block, site) cell
	// needs to take part (default DefaultMinCount).
	MinCount float64 `json:"min_count"`
}

// WithDefaults returns o with zero fields set to the defaults.
func (o ReportOptions) WithDefaults() ReportOptions {
	if o.CountryFactor == 0 {
		o.CountryFactor = DefaultCountryFactor
	}
	if o.NeighbourKm == 0 {
		o.NeighbourKm = DefaultNeighbourKm
	}
	if o.Margin == 0 {
		o.Margin = latency.DefaultSwitchMargin
	}
	if o.MinCount == 0 {
		o.MinCount = DefaultMinCount
	}
	return o
}

// Validate names the first bad option.
func (o ReportOptions) Validate() error {
	switch {
	case !(o.CountryFactor > 1) || math.IsInf(o.CountryFactor, 0):
		return fmt.Errorf("country_factor %v: want a number > 1", o.CountryFactor)
	case !(o.NeighbourKm > 0) || math.IsInf(o.NeighbourKm, 0):
		return fmt.Errorf("neighbour_km %v: want a distance > 0", o.NeighbourKm)
	case !(o.Margin > 0 && o.Margin < 1):
		return fmt.Errorf("margin %v: want a fraction between 0 and 1", o.Margin)
	case !(o.MinCount > 0) || math.IsInf(o.MinCount, 0):
		return fmt.Errorf("min_count %v: want a number > 0", o.MinCount)
	}
	return nil
}

// ReportInput is what a report reads.
type ReportInput struct {
	// Record names the steered record whose choices are compared.
	Record string
	// Aggregates are the store's cells (Store.Snapshot).
	Aggregates []Aggregate
	// Locate says where the geo databases put a block: country,
	// continent, location. A block is placed by its first address, as
	// the server places an ECS query for it.
	Locate func(block netip.Prefix) geo.Info
	// Choose returns the site the policy answers the block with now
	// ("" when it answers none): the server's own decision for an ECS
	// query from the block, without counting it as an answer.
	Choose func(block netip.Prefix) string
	// Now stamps the report (zero: time.Now).
	Now time.Time
}

// Report is the body of GET /v1/rum/report.
type Report struct {
	Record    string        `json:"record"`
	Generated time.Time     `json:"generated"`
	Options   ReportOptions `json:"options"`
	// Blocks is the number of network blocks with measurements, Cells
	// the (block, site) cells, Count their decayed beacons, Total every
	// beacon they ever took.
	Blocks int     `json:"blocks"`
	Cells  int     `json:"cells"`
	Count  float64 `json:"count"`
	Total  uint64  `json:"total"`
	// Sites is, per site, the p75 over every block that measured it.
	Sites []SiteP75 `json:"sites"`
	// Countries is, per country GeoIP places blocks in, the p75 to each
	// site and to the sites the policy chooses.
	Countries []CountryReport `json:"countries"`
	// FarAbove lists the countries whose p75 to the chosen sites is
	// far above their neighbours'.
	FarAbove []CountryFinding `json:"countries_far_above_neighbours"`
	// Misplaced lists the networks whose measurements do not fit the
	// country GeoIP puts them in.
	Misplaced []NetworkFinding `json:"networks_misplaced"`
	// OffBest lists the networks the policy steers to a site slower than
	// their measured best by more than the margin.
	OffBest []NetworkFinding `json:"networks_off_best"`
}

// SiteP75 is a p75 to one site and the beacons behind it.
type SiteP75 struct {
	Site   string  `json:"site"`
	P75    float64 `json:"p75_ms"`
	Count  float64 `json:"count"`
	Total  uint64  `json:"total"`
	Blocks int     `json:"blocks"`
}

// CountryReport is one country as GeoIP places blocks in it.
type CountryReport struct {
	Country   string    `json:"country"` // "" : not placed
	Continent string    `json:"continent,omitempty"`
	Blocks    int       `json:"blocks"`
	Sites     []SiteP75 `json:"sites"`
	// Chosen is the p75 of each block to the site the policy chooses for
	// it (blocks that measured their chosen site).
	Chosen *SiteP75 `json:"chosen,omitempty"`
	// Best is the site most of the country's networks measure best,
	// weighed by their beacons.
	Best string `json:"best_site,omitempty"`
}

// CountryFinding is a country whose p75 is far above its neighbours'.
type CountryFinding struct {
	Country string `json:"country"`
	// P75 is the country's p75 to the chosen sites, Neighbours the
	// median of its neighbours', Factor their ratio.
	P75        float64 `json:"p75_ms"`
	Neighbours float64 `json:"neighbours_p75_ms"`
	Factor     float64 `json:"factor"`
	// NeighbourList names the neighbours compared with.
	NeighbourList []string `json:"neighbours"`
	// Count and Total are the country's beacons behind P75;
	// NeighbourCount those behind the neighbours'.
	Count          float64 `json:"count"`
	Total          uint64  `json:"total"`
	NeighbourCount float64 `json:"neighbours_count"`
	Blocks         int     `json:"blocks"`
}

// NetworkFinding is one network block and what its users measured.
type NetworkFinding struct {
	Block   string `json:"block"`
	Country string `json:"country,omitempty"` // where GeoIP puts it
	// Best is the block's measured best site and BestP75 its p75 there.
	Best    string  `json:"best_site"`
	BestP75 float64 `json:"best_p75_ms"`
	// Versus is the site compared with: the country's best site
	// (misplaced) or the policy's choice (off best); VersusP75 the
	// block's p75 there.
	Versus    string  `json:"versus_site"`
	VersusP75 float64 `json:"versus_p75_ms"`
	// CountryP75 is the country's p75 to Versus (misplaced only).
	CountryP75 float64 `json:"country_p75_ms,omitempty"`
	// Chosen is the policy's choice for the block now.
	Chosen string `json:"chosen_site,omitempty"`
	// Resembles is the country whose p75 to the sites is closest to the
	// block's (misplaced only).
	Resembles string `json:"resembles,omitempty"`
	// Count and Total are the block's beacons to the two sites compared.
	Count float64 `json:"count"`
	Total uint64  `json:"total"`
}

// weighted is one point of a p75 mixture.
type weighted struct{ ms, w float64 }

// mixture accumulates cells into a p75 and counts.
type mixture struct {
	pts    []weighted
	count  float64
	total  uint64
	blocks int
}

func (m *mixture) add(a *Aggregate) {
	up := a.P75 + max(a.P75-a.P50, 0)
	m.pts = append(m.pts, weighted{a.P50, a.Count / 2}, weighted{a.P75, a.Count / 4}, weighted{up, a.Count / 4})
	m.count += a.Count
	m.total += a.Total
	m.blocks++
}

// p75 returns the mixture's 75th percentile (0 when empty).
func (m *mixture) p75() float64 {
	if m.count <= 0 {
		return 0
	}
	slices.SortFunc(m.pts, func(a, b weighted) int { return cmp.Compare(a.ms, b.ms) })
	target, cum := 0.75*m.count, 0.0
	for _, p := range m.pts {
		cum += p.w
		if cum >= target*(1-1e-12) {
			return p.ms
		}
	}
	return m.pts[len(m.pts)-1].ms
}

func (m *mixture) row(site string) SiteP75 {
	return SiteP75{Site: site, P75: round1(m.p75()), Count: round1(m.count), Total: m.total, Blocks: m.blocks}
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// reportBlock is one block's cells that count.
type reportBlock struct {
	p       netip.Prefix
	info    geo.Info
	cells   []*Aggregate // sorted by site, Count >= MinCount
	chosen  string
	best    *Aggregate
	country *countryAcc
}

func (b *reportBlock) cell(site string) *Aggregate {
	for _, c := range b.cells {
		if c.Site == site {
			return c
		}
	}
	return nil
}

type countryAcc struct {
	code, continent string
	blocks          int
	sites           map[string]*mixture
	chosen          mixture
	votes           map[string]float64 // by site: the count of the blocks it is best for
	best            string
	p75             map[string]float64 // by site, for resemblance
}

// BuildReport builds the report for in. Its cost is proportional to the
// cells, plus one Locate and one Choose per block.
func BuildReport(in ReportInput, o ReportOptions) (*Report, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	rep := &Report{Record: in.Record, Generated: now.UTC(), Options: o}
	// Group the cells by block (Snapshot sorts by block, but do not rely
	// on it).
	aggs := slices.Clone(in.Aggregates)
	sortAggregates(aggs)
	var blocks []*reportBlock
	siteAll := map[string]*mixture{}
	countries := map[string]*countryAcc{}
	for i := range aggs {
		a := &aggs[i]
		rep.Cells++
		rep.Count += a.Count
		rep.Total += a.Total
		if a.Count < o.MinCount || !(a.P75 > 0) {
			continue
		}
		if n := len(blocks); n == 0 || blocks[n-1].p != a.Block {
			blocks = append(blocks, &reportBlock{p: a.Block})
		}
		b := blocks[len(blocks)-1]
		b.cells = append(b.cells, a)
		m := siteAll[a.Site]
		if m == nil {
			m = &mixture{}
			siteAll[a.Site] = m
		}
		m.add(a)
	}
	rep.Count = round1(rep.Count)
	rep.Blocks = len(blocks)
	for _, b := range blocks {
		if in.Locate != nil {
			b.info = in.Locate(b.p)
		}
		if in.Choose != nil {
			b.chosen = in.Choose(b.p)
		}
		for _, c := range b.cells {
			if b.best == nil || c.P75 < b.best.P75 {
				b.best = c
			}
		}
		ca := countries[b.info.Country]
		if ca == nil {
			ca = &countryAcc{code: b.info.Country, continent: b.info.Continent, sites: map[string]*mixture{}, votes: map[string]float64{}}
			countries[b.info.Country] = ca
		}
		b.country = ca
		ca.blocks++
		for _, c := range b.cells {
			m := ca.sites[c.Site]
			if m == nil {
				m = &mixture{}
				ca.sites[c.Site] = m
			}
			m.add(c)
		}
		if c := b.cell(b.chosen); c != nil {
			ca.chosen.add(c)
		}
		if b.best != nil {
			ca.votes[b.best.Site] += b.best.Count
		}
	}
	for _, site := range sortedKeys(siteAll) {
		rep.Sites = append(rep.Sites, siteAll[site].row(site))
	}
	for _, code := range sortedKeys(countries) {
		ca := countries[code]
		cr := CountryReport{Country: code, Continent: ca.continent, Blocks: ca.blocks}
		ca.p75 = map[string]float64{}
		for _, site := range sortedKeys(ca.sites) {
			row := ca.sites[site].row(site)
			cr.Sites = append(cr.Sites, row)
			ca.p75[site] = row.P75
		}
		// The country's best site is the one most of its beacons' networks
		// measure best (ties: the lower p75). Not the lowest p75: the
		// networks GeoIP misplaces into a country can be more than a
		// quarter of it, and would move its p75s.
		bestVotes := -1.0
		for _, site := range sortedKeys(ca.votes) {
			v := ca.votes[site]
			if v > bestVotes || v == bestVotes && ca.p75[site] < ca.p75[ca.best] {
				ca.best, bestVotes = site, v
			}
		}
		cr.Best = ca.best
		if ca.chosen.count > 0 {
			r := ca.chosen.row("")
			cr.Chosen = &r
		}
		rep.Countries = append(rep.Countries, cr)
	}
	rep.FarAbove = farAbove(rep.Countries, o)
	for _, b := range blocks {
		if f, ok := misplaced(b, countries, o); ok {
			rep.Misplaced = append(rep.Misplaced, f)
		}
		if f, ok := offBest(b, o); ok {
			rep.OffBest = append(rep.OffBest, f)
		}
	}
	return rep, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// beats reports whether best is better than other by the margin.
func beats(best, other float64, o ReportOptions) bool { return best <= other*(1-o.Margin) }

// farAbove applies the country rule.
func farAbove(rows []CountryReport, o ReportOptions) []CountryFinding {
	type placed struct {
		row      *CountryReport
		lat, lon float64
		ok       bool
	}
	var cs []placed
	for i := range rows {
		r := &rows[i]
		if r.Country == "" || r.Chosen == nil {
			continue
		}
		c, ok := geo.LookupCountry(r.Country)
		cs = append(cs, placed{row: r, lat: c.Lat, lon: c.Lon, ok: ok})
	}
	var out []CountryFinding
	for i, c := range cs {
		var near, cont []int
		for j, d := range cs {
			if i == j {
				continue
			}
			if c.ok && d.ok && geo.Distance(c.lat, c.lon, d.lat, d.lon) <= o.NeighbourKm {
				near = append(near, j)
			}
			if c.row.Continent != "" && d.row.Continent == c.row.Continent {
				cont = append(cont, j)
			}
		}
		if len(near) == 0 {
			near = cont
		}
		if len(near) == 0 {
			continue
		}
		var p75s []float64
		var names []string
		var nCount float64
		for _, j := range near {
			p75s = append(p75s, cs[j].row.Chosen.P75)
			names = append(names, cs[j].row.Country)
			nCount += cs[j].row.Chosen.Count
		}
		slices.Sort(p75s)
		med := p75s[len(p75s)/2]
		if len(p75s)%2 == 0 {
			med = (p75s[len(p75s)/2-1] + med) / 2
		}
		ch := c.row.Chosen
		if med > 0 && ch.P75 > o.CountryFactor*med {
			out = append(out, CountryFinding{Country: c.row.Country, P75: ch.P75, Neighbours: round1(med),
				Factor: math.Round(ch.P75/med*100) / 100, NeighbourList: names, Count: ch.Count, Total: ch.Total,
				NeighbourCount: round1(nCount), Blocks: ch.Blocks})
		}
	}
	slices.SortFunc(out, func(a, b CountryFinding) int { return cmp.Compare(b.Factor, a.Factor) })
	return out
}

// misplaced applies the network rule against the block's country.
func misplaced(b *reportBlock, countries map[string]*countryAcc, o ReportOptions) (NetworkFinding, bool) {
	ca := b.country
	if ca.code == "" || ca.best == "" || b.best == nil || b.best.Site == ca.best {
		return NetworkFinding{}, false
	}
	vs := b.cell(ca.best)
	if vs == nil || !beats(b.best.P75, vs.P75, o) {
		return NetworkFinding{}, false
	}
	f := NetworkFinding{Block: b.p.String(), Country: ca.code, Best: b.best.Site, BestP75: round1(b.best.P75),
		Versus: ca.best, VersusP75: round1(vs.P75), CountryP75: ca.p75[ca.best], Chosen: b.chosen,
		Count: round1(b.best.Count + vs.Count), Total: b.best.Total + vs.Total}
	// The country that looks most like the block: the smallest mean
	// log-ratio over the sites both measured (two at least), among the
	// countries whose best site is the block's.
	bestD := math.Inf(1)
	for _, code := range sortedKeys(countries) {
		c := countries[code]
		if code == "" || code == ca.code || c.best != b.best.Site {
			continue
		}
		var sum float64
		n := 0
		for _, cell := range b.cells {
			if p, ok := c.p75[cell.Site]; ok && p > 0 {
				sum += math.Abs(math.Log(cell.P75 / p))
				n++
			}
		}
		if n >= 2 && sum/float64(n) < bestD {
			f.Resembles, bestD = code, sum/float64(n)
		}
	}
	return f, true
}

// offBest applies the network rule against the policy's choice.
func offBest(b *reportBlock, o ReportOptions) (NetworkFinding, bool) {
	if b.chosen == "" || b.best == nil || b.best.Site == b.chosen {
		return NetworkFinding{}, false
	}
	vs := b.cell(b.chosen)
	if vs == nil || !beats(b.best.P75, vs.P75, o) {
		return NetworkFinding{}, false
	}
	return NetworkFinding{Block: b.p.String(), Country: b.country.code, Best: b.best.Site, BestP75: round1(b.best.P75),
		Versus: b.chosen, VersusP75: round1(vs.P75), Chosen: b.chosen,
		Count: round1(b.best.Count + vs.Count), Total: b.best.Total + vs.Total}, true
}

// WriteText prints the report as tables for a terminal, listing at most
// limit networks per finding (0: all).
func (r *Report) WriteText(w io.Writer, limit int) {
	fmt.Fprintf(w, "real-user measurements for %s, %s\n", r.Record, r.Generated.Format(time.DateTime+" MST"))
	fmt.Fprintf(w, "%d networks, %d cells, %.0f beacons (decayed), %d ever; p75 in ms, count = decayed beacons\n",
		r.Blocks, r.Cells, r.Count, r.Total)
	fmt.Fprintf(w, "rules: country_factor %.2f, neighbour_km %.0f, margin %.0f%%, min_count %.0f\n\n",
		r.Options.CountryFactor, r.Options.NeighbourKm, 100*r.Options.Margin, r.Options.MinCount)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var sites []string
	for _, s := range r.Sites {
		sites = append(sites, s.Site)
	}
	fmt.Fprintf(tw, "COUNTRY\tNETWORKS\t%s\tCHOSEN p75 (count)\tBEST\n", strings.Join(siteHeads(sites), "\t"))
	for _, c := range r.Countries {
		row := []string{orDash(c.Country), fmt.Sprint(c.Blocks)}
		for _, s := range sites {
			cell := "-"
			for _, cs := range c.Sites {
				if cs.Site == s {
					cell = fmt.Sprintf("%.1f (%.0f)", cs.P75, cs.Count)
				}
			}
			row = append(row, cell)
		}
		ch := "-"
		if c.Chosen != nil {
			ch = fmt.Sprintf("%.1f (%.0f)", c.Chosen.P75, c.Chosen.Count)
		}
		row = append(row, ch, orDash(c.Best))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	row := []string{"all", fmt.Sprint(r.Blocks)}
	for _, s := range r.Sites {
		row = append(row, fmt.Sprintf("%.1f (%.0f)", s.P75, s.Count))
	}
	fmt.Fprintln(tw, strings.Join(append(row, "", ""), "\t"))
	tw.Flush()

	fmt.Fprintf(w, "\ncountries far above their neighbours (p75 to the chosen sites > %.2f x the neighbours' median): %d\n",
		r.Options.CountryFactor, len(r.FarAbove))
	if len(r.FarAbove) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNTRY\tp75\tNEIGHBOURS p75\tFACTOR\tCOUNT\tNEIGHBOURS (count)")
		for _, f := range r.FarAbove {
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2f\t%.0f\t%s (%.0f)\n", f.Country, f.P75, f.Neighbours, f.Factor, f.Count,
				strings.Join(f.NeighbourList, " "), f.NeighbourCount)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nnetworks GeoIP seems to misplace (their best site beats their country's best by %.0f%%): %d\n",
		100*r.Options.Margin, len(r.Misplaced))
	if len(r.Misplaced) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NETWORK\tGEOIP\tRESEMBLES\tBEST p75\tCOUNTRY'S BEST: p75 (country's)\tCHOSEN\tCOUNT")
		for _, f := range firstFindings(r.Misplaced, limit) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %.1f\t%s %.1f (%.1f)\t%s\t%.0f\n", f.Block, f.Country, orDash(f.Resembles), f.Best, f.BestP75,
				f.Versus, f.VersusP75, f.CountryP75, orDash(f.Chosen), f.Count)
		}
		tw.Flush()
		writeMore(w, len(r.Misplaced), limit)
	}
	fmt.Fprintf(w, "\nnetworks steered off their measured best by more than %.0f%%: %d\n", 100*r.Options.Margin, len(r.OffBest))
	if len(r.OffBest) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NETWORK\tGEOIP\tBEST p75\tCHOSEN p75\tCOUNT")
		for _, f := range firstFindings(r.OffBest, limit) {
			fmt.Fprintf(tw, "%s\t%s\t%s %.1f\t%s %.1f\t%.0f\n", f.Block, orDash(f.Country), f.Best, f.BestP75, f.Versus, f.VersusP75, f.Count)
		}
		tw.Flush()
		writeMore(w, len(r.OffBest), limit)
	}
}

// firstFindings returns the first limit findings (all when limit is 0).
func firstFindings(fs []NetworkFinding, limit int) []NetworkFinding {
	if limit > 0 && len(fs) > limit {
		return fs[:limit]
	}
	return fs
}

func writeMore(w io.Writer, n, limit int) {
	if limit > 0 && n > limit {
		fmt.Fprintf(w, "... and %d more (--limit 0 or --json lists all)\n", n-limit)
	}
}

func siteHeads(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x + " p75 (count)"
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
