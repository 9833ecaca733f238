package simulate

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Write writes a result's files into dir (created 0755 when missing;
// files 0644, overwritten):
//
//	share.csv      per bin and pool: the share of user queries (percent),
//	               its p5, p50, p95 and mean over runs, and the configured share
//	sites.csv      per bin, resolver site and pool: the share of the site's
//	               user queries answered with the pool (percent, mean over runs)
//	bins.csv       per bin: user q/s, authoritative q/s (mean and band) and
//	               live cache entries
//	deviation.csv  per pool: median, p95 and max of |observed − configured|
//	               (percentage points) with their band over runs
//	drains.csv     per drain: "safe at" and the last query (seconds after
//	               the drain) with their bands, and the runs never safe
//	capacity.csv   with a load feed: per feed interval and pool the share of
//	               user queries and of steer's answers, and for a capacity
//	               pool the load fed and the step (state, shed, moved, reason)
//	cost.csv       per phase and site: authoritative q/s, cache entries, user q/s
//	result.json    everything above as ResultJSON (shares as fractions)
//	share.png/.svg   share over time per pool: p50 line, p5–p95 band, the
//	                 configured share dashed, phase changes marked
//	cost.png/.svg    authoritative q/s per resolver site and phase (bars)
//	entries.png/.svg cache entries per resolver site and phase (bars)
//
// Every file is attempted; Write returns the first error.
func Write(dir string, r *Result) error {
	if r == nil {
		return fmt.Errorf("simulate: write %s: no result", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	file := func(name string, data []byte, err error) {
		if err != nil {
			keep(fmt.Errorf("simulate: %s: %w", name, err))
			return
		}
		keep(writeFile(filepath.Join(dir, name), data))
	}
	for _, t := range []struct {
		name string
		rows func(*Result) [][]string
	}{
		{"share.csv", shareRows}, {"sites.csv", siteRows}, {"bins.csv", binRows},
		{"deviation.csv", deviationRows}, {"drains.csv", drainRows}, {"cost.csv", costRows},
		{"capacity.csv", capacityRows},
	} {
		if t.name == "capacity.csv" && r.Capacity == nil {
			continue
		}
		data, err := csvBytes(t.rows(r))
		file(t.name, data, err)
	}
	js, err := json.MarshalIndent(r.JSON(), "", " ")
	if err == nil {
		js = append(js, '\n')
	}
	file("result.json", js, err)
	for _, ch := range charts(r) {
		for _, format := range []string{"png", "svg"} {
			name := ch.name + "." + format
			data, err := renderChart(ch, format)
			file(name, data, err)
		}
	}
	return first
}

func writeFile(path string, data []byte) error {
	// os.WriteFile keeps an existing file's mode: make overwritten
	// files 0644 too.
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	return os.Chmod(path, 0o644)
}

// csvBytes encodes rows (the first the header) as CSV.
func csvBytes(rows [][]string) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.WriteAll(rows); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// fmtNum formats v with prec decimals, without locale; non-finite values
// (no data) are empty cells.
func fmtNum(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if s == "-"+strconv.FormatFloat(0, 'f', prec, 64) {
		s = s[1:]
	}
	return s
}

// csvPct formats a fraction as percent with 4 decimals.
func csvPct(v float64) string { return fmtNum(v*100, 4) }

// fmtSecs formats a duration as seconds.
func fmtSecs(d time.Duration) string { return fmtNum(d.Seconds(), 3) }

// fmtClock formats an offset from the simulated start as HH:MM:SS (hours
// run past 24).
func fmtClock(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	s := int64(d / time.Second)
	out := fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
	if neg {
		out = "-" + out
	}
	return out
}

// elemAt returns v[i], or 0 when the slice is short (a result built by hand
// or a pool that did not exist in some phase).
func elemAt[T any](v []T, i int) T {
	if i < len(v) {
		return v[i]
	}
	var zero T
	return zero
}

func shareRows(r *Result) [][]string {
	rows := [][]string{{"bin_start_s", "bin_start", "pool", "share_p5", "share_p50", "share_p95", "share_mean", "configured"}}
	for _, b := range r.Bins {
		for p, pool := range r.Pools {
			s := elemAt(b.Share, p)
			rows = append(rows, []string{fmtSecs(b.Start), fmtClock(b.Start), pool,
				csvPct(s.P5), csvPct(s.P50), csvPct(s.P95), csvPct(s.Mean), csvPct(elemAt(b.Configured, p))})
		}
	}
	return rows
}

func siteRows(r *Result) [][]string {
	rows := [][]string{{"bin_start_s", "bin_start", "site", "pool", "share"}}
	for _, b := range r.Bins {
		for s, site := range r.Sites {
			ss := elemAt(b.SiteShare, s)
			for p, pool := range r.Pools {
				rows = append(rows, []string{fmtSecs(b.Start), fmtClock(b.Start), site, pool, csvPct(elemAt(ss, p))})
			}
		}
	}
	return rows
}

func binRows(r *Result) [][]string {
	rows := [][]string{{"bin_start_s", "bin_start", "user_qps", "auth_qps", "auth_qps_p5", "auth_qps_p50", "auth_qps_p95", "cache_entries"}}
	for _, b := range r.Bins {
		rows = append(rows, []string{fmtSecs(b.Start), fmtClock(b.Start), fmtNum(b.Queries, 4), fmtNum(b.AuthQPS, 6),
			fmtNum(b.AuthQPSBand.P5, 6), fmtNum(b.AuthQPSBand.P50, 6), fmtNum(b.AuthQPSBand.P95, 6), fmtNum(b.Entries, 3)})
	}
	return rows
}

func deviationRows(r *Result) [][]string {
	rows := [][]string{{"pool", "configured_mean", "statistic", "p5", "p50", "p95", "mean"}}
	for _, d := range r.Deviation {
		for _, st := range []struct {
			name string
			b    Band
		}{{"median", d.Median}, {"p95", d.P95}, {"max", d.Max}} {
			rows = append(rows, []string{d.Pool, csvPct(d.ConfiguredMean), st.name,
				fmtNum(st.b.P5, 4), fmtNum(st.b.P50, 4), fmtNum(st.b.P95, 4), fmtNum(st.b.Mean, 4)})
		}
	}
	return rows
}

func drainRows(r *Result) [][]string {
	rows := [][]string{{"pool", "label", "at_s", "at", "safe_at_p5_s", "safe_at_p50_s", "safe_at_p95_s", "safe_at_mean_s",
		"last_query_p5_s", "last_query_p50_s", "last_query_p95_s", "last_query_mean_s", "never_safe_runs", "runs"}}
	for _, d := range r.Drains {
		rows = append(rows, []string{d.Pool, d.Label, fmtSecs(d.At), fmtClock(d.At),
			fmtNum(d.SafeAt.P5, 3), fmtNum(d.SafeAt.P50, 3), fmtNum(d.SafeAt.P95, 3), fmtNum(d.SafeAt.Mean, 3),
			fmtNum(d.LastQuery.P5, 3), fmtNum(d.LastQuery.P50, 3), fmtNum(d.LastQuery.P95, 3), fmtNum(d.LastQuery.Mean, 3),
			strconv.Itoa(d.Never), strconv.Itoa(r.Runs)})
	}
	return rows
}

func costRows(r *Result) [][]string {
	rows := [][]string{{"phase", "site", "auth_qps", "cache_entries", "user_qps", "ecs",
		"no_ecs_auth_qps", "no_ecs_entries", "scoped_auth_qps", "scoped_entries", "per_prefix_auth_qps", "per_prefix_entries"}}
	for _, c := range r.Cost {
		rows = append(rows, []string{c.Phase, c.Site, fmtNum(c.AuthQPS, 6), fmtNum(c.Entries, 3), fmtNum(c.UserQPS, 4), c.ECS,
			fmtNum(c.NoECS.AuthQPS, 6), fmtNum(c.NoECS.Entries, 3), fmtNum(c.Scoped.AuthQPS, 6), fmtNum(c.Scoped.Entries, 3),
			fmtNum(c.PerPrefix.AuthQPS, 6), fmtNum(c.PerPrefix.Entries, 3)})
	}
	return rows
}

// ResultJSON is a prediction as result.json and the admin API's
// POST /v1/simulate carry it. Times are seconds (float) from the
// simulated start unless said otherwise, in keys ending in "_s"; shares
// and deviations are fractions of the user queries (0.05 is 5 %, a
// deviation of 0.081 is 8.1 percentage points); rates are per second.
// Arrays never encode as null; values with no data (NaN, ±Inf) are 0.
type ResultJSON struct {
	// Record is the steered name the users ask for.
	Record string `json:"record"`
	// Pools and Sites name the entries of every per-pool and per-site
	// array below, in this order.
	Pools []string `json:"pools"`
	Sites []string `json:"sites"`
	// BinS is the width of a time bin, DurationS the simulated time.
	BinS      float64 `json:"bin_s"`
	DurationS float64 `json:"duration_s"`
	// Runs is the number of Monte-Carlo runs, seeded Seed, Seed+1, …
	Runs int    `json:"runs"`
	Seed uint64 `json:"seed"`
	// ElapsedS is the wall time the simulation took.
	ElapsedS float64 `json:"elapsed_s"`
	// Phases are the policy states in time order (the first at 0).
	Phases []PhaseJSON `json:"phases"`
	// Bins are the time bins in order.
	Bins []BinJSON `json:"bins"`
	// Deviation is, per pool, the distance from the configured share.
	Deviation []DeviationJSON `json:"deviation"`
	// Drains say when a drained pool stops receiving user queries.
	Drains []DrainJSON `json:"drains"`
	// Cost is the authoritative and cache cost per phase and site.
	Cost []CostJSON `json:"cost"`
	// Notable are the largest excursions from the configured shares.
	Notable []ExcursionJSON `json:"notable"`
	// Capacity is the capacity prediction (with a load feed only).
	Capacity *CapacityJSON `json:"capacity,omitempty"`
}

// BandJSON is a statistic over the runs: 5th, 50th, 95th percentile and
// the mean.
type BandJSON struct {
	P5   float64 `json:"p5"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	Mean float64 `json:"mean"`
}

// PhaseJSON is when a phase starts and what started it.
type PhaseJSON struct {
	AtS   float64 `json:"at_s"`
	Label string  `json:"label"`
}

// BinJSON is one time bin.
type BinJSON struct {
	// StartS is the bin's start; it lasts bin_s.
	StartS float64 `json:"start_s"`
	// Share, per pool: the share of user queries answered with the
	// pool, over the runs.
	Share []BandJSON `json:"share"`
	// Configured, per pool: the share steer's decisions give the pool
	// without caches (what the deviation is measured from).
	Configured []float64 `json:"configured"`
	// SiteShare, per site then per pool: the share of the site's user
	// queries answered with the pool (mean over runs).
	SiteShare [][]float64 `json:"site_share"`
	// UserQPS is the user queries per second; AuthQPS the queries steer
	// answers (cache misses) per second, mean over runs, and
	// AuthQPSBand their band.
	UserQPS     float64  `json:"user_qps"`
	AuthQPS     float64  `json:"auth_qps"`
	AuthQPSBand BandJSON `json:"auth_qps_band"`
	// Entries is the mean number of live resolver cache entries.
	Entries float64 `json:"entries"`
}

// DeviationJSON is one pool's |observed − configured| share over the
// bins: its median, 95th percentile and maximum, each a band over runs.
type DeviationJSON struct {
	Pool           string   `json:"pool"`
	ConfiguredMean float64  `json:"configured_mean"`
	Median         BandJSON `json:"median"`
	P95            BandJSON `json:"p95"`
	Max            BandJSON `json:"max"`
}

// DrainJSON is the prediction for one drain: from SafeAtS after the
// drain every bin has ≤ 1 % of user queries reaching the pool;
// LastQueryS after the drain the last user query reaches it (bands over
// runs); Never runs were not safe before the end.
type DrainJSON struct {
	Pool       string   `json:"pool"`
	AtS        float64  `json:"at_s"`
	Label      string   `json:"label"`
	SafeAtS    BandJSON `json:"safe_at_s"`
	LastQueryS BandJSON `json:"last_query_s"`
	Never      int      `json:"never"`
}

// CostJSON is one resolver site's cost in one phase: the queries it
// sends steer per second, the cache entries it holds and the user
// queries it answers per second (means over runs).
type CostJSON struct {
	Phase   string  `json:"phase"`
	Site    string  `json:"site"`
	AuthQPS float64 `json:"auth_qps"`
	Entries float64 `json:"entries"`
	UserQPS float64 `json:"user_qps"`
	// ECS is how the site sends ECS as simulated; NoECS, Scoped and
	// PerPrefix are the ECS cache-cost calculator's cases (analytic, at
	// the phase's mean rates, without TTL violators): the same users
	// without ECS, with ECS and steer's scopes, with ECS cached per
	// source prefix.
	ECS       string       `json:"ecs"`
	NoECS     CostCaseJSON `json:"no_ecs"`
	Scoped    CostCaseJSON `json:"scoped"`
	PerPrefix CostCaseJSON `json:"per_prefix"`
}

// CostCaseJSON is one case of the ECS cache-cost calculator.
type CostCaseJSON struct {
	AuthQPS float64 `json:"auth_qps"`
	Entries float64 `json:"entries"`
}

func (c CostCase) json() CostCaseJSON {
	return CostCaseJSON{AuthQPS: finite(c.AuthQPS), Entries: finite(c.Entries)}
}

// ExcursionJSON is a bin where a pool's share was far from its
// configured share (Share is the run where it peaked), the resolver
// site that carried most of the excess and its share of the users, and
// the fraction of runs with an excursion at least half as large.
type ExcursionJSON struct {
	BinS       float64 `json:"bin_s"`
	Pool       string  `json:"pool"`
	Share      float64 `json:"share"`
	Configured float64 `json:"configured"`
	Site       string  `json:"site"`
	SiteShare  float64 `json:"site_share"`
	Runs       float64 `json:"runs"`
}

// finite maps values with no data to 0: JSON has no NaN or Inf.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

func bandJSON(b Band, scale float64) BandJSON {
	return BandJSON{P5: finite(b.P5 * scale), P50: finite(b.P50 * scale), P95: finite(b.P95 * scale), Mean: finite(b.Mean * scale)}
}

func finiteAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = finite(x)
	}
	return out
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// JSON returns the result as the JSON shape result.json and the admin
// API share.
func (r *Result) JSON() ResultJSON {
	j := ResultJSON{
		Record:    r.Record,
		Pools:     nonNil(r.Pools),
		Sites:     nonNil(r.Sites),
		BinS:      r.Bin.Seconds(),
		DurationS: (time.Duration(len(r.Bins)) * r.Bin).Seconds(),
		Runs:      r.Runs,
		Seed:      r.Seed,
		ElapsedS:  r.Elapsed.Seconds(),
		Phases:    make([]PhaseJSON, 0, len(r.Phases)),
		Bins:      make([]BinJSON, 0, len(r.Bins)),
		Deviation: make([]DeviationJSON, 0, len(r.Deviation)),
		Drains:    make([]DrainJSON, 0, len(r.Drains)),
		Cost:      make([]CostJSON, 0, len(r.Cost)),
		Notable:   make([]ExcursionJSON, 0, len(r.Notable)),
		Capacity:  r.Capacity.JSON(),
	}
	for _, p := range r.Phases {
		j.Phases = append(j.Phases, PhaseJSON{AtS: p.At.Seconds(), Label: p.Label})
	}
	for _, b := range r.Bins {
		bj := BinJSON{
			StartS:      b.Start.Seconds(),
			Share:       make([]BandJSON, len(b.Share)),
			Configured:  finiteAll(b.Configured),
			SiteShare:   make([][]float64, len(b.SiteShare)),
			UserQPS:     finite(b.Queries),
			AuthQPS:     finite(b.AuthQPS),
			AuthQPSBand: bandJSON(b.AuthQPSBand, 1),
			Entries:     finite(b.Entries),
		}
		for i, s := range b.Share {
			bj.Share[i] = bandJSON(s, 1)
		}
		for i, s := range b.SiteShare {
			bj.SiteShare[i] = finiteAll(s)
		}
		j.Bins = append(j.Bins, bj)
	}
	for _, d := range r.Deviation {
		// Result.Deviation is in percentage points; JSON carries fractions.
		j.Deviation = append(j.Deviation, DeviationJSON{Pool: d.Pool, ConfiguredMean: finite(d.ConfiguredMean),
			Median: bandJSON(d.Median, 0.01), P95: bandJSON(d.P95, 0.01), Max: bandJSON(d.Max, 0.01)})
	}
	for _, d := range r.Drains {
		j.Drains = append(j.Drains, DrainJSON{Pool: d.Pool, AtS: d.At.Seconds(), Label: d.Label,
			SafeAtS: bandJSON(d.SafeAt, 1), LastQueryS: bandJSON(d.LastQuery, 1), Never: d.Never})
	}
	for _, c := range r.Cost {
		j.Cost = append(j.Cost, CostJSON{Phase: c.Phase, Site: c.Site, AuthQPS: finite(c.AuthQPS), Entries: finite(c.Entries), UserQPS: finite(c.UserQPS),
			ECS: c.ECS, NoECS: c.NoECS.json(), Scoped: c.Scoped.json(), PerPrefix: c.PerPrefix.json()})
	}
	for _, e := range r.Notable {
		j.Notable = append(j.Notable, ExcursionJSON{BinS: e.Bin.Seconds(), Pool: e.Pool, Share: finite(e.Share),
			Configured: finite(e.Configured), Site: e.Site, SiteShare: finite(e.SiteShare), Runs: finite(e.Runs)})
	}
	return j
}
