// Package simulate predicts what users see after a change: it runs steer's
// own compiled policy and decision step (policy.Live.Decide) against a
// population of resolvers with caches, TTLs and ECS behaviour, over a
// timeline of health, weight and configuration events, many times with
// different seeds, and reports per time bin the share of user queries per
// pool with Monte-Carlo bands, the deviation from the configured weights,
// when a drain becomes safe, and what the population costs the
// authoritative and the resolvers' caches.
//
// The model is one event per cache fill, not per query: when a cache
// entry expires, the next query for it arrives after an exponential time
// (a Poisson process at the entry's rate) and is a miss; the miss is
// decided by the real policy code at that simulated time; the entry then
// lives its TTL (clamped, or stretched by a TTL violator), and the user
// queries inside that life are counted per output bin. Cost grows with
// misses, not with user queries.
//
// The parts, in the order data flows:
//
//	scenario.go   the scenario file (YAML) with file:line errors
//	compile.go    Compile: a scenario against a configuration → *Model
//	engine.go     Run: *Model → *Result (Monte Carlo over seeds)
//	output.go     Write: *Result → CSV, JSON, PNG and SVG charts in a directory
//	summary.go    Summary: *Result → the one-page text explanation
//	fromlog.go    FromLog: a query log → a scenario population
package simulate

import (
	"net/netip"
	"time"

	"github.com/steer-dns/steer/internal/policy"
)

// Model is a scenario compiled against a configuration: everything the
// engine needs, resolved to indices, with no names left to look up.
type Model struct {
	// Start is the simulated clock's origin (the Unix time Decide is
	// given at offset 0); diurnal profiles read its time of day.
	Start time.Time
	// Duration is how long the simulated time runs; Bin is the width of
	// an output time bin (Duration is a whole number of bins).
	Duration, Bin time.Duration
	// Runs is the number of Monte-Carlo runs; run i is seeded Seed+i.
	Runs int
	Seed uint64
	// Qtype is what the users ask (A or AAAA).
	Qtype uint16
	// Record is the steered name the users ask for (canonical, with the
	// final dot); every phase's table has it.
	Record string
	// Groups are the client groups; Subnets the client subnets, each in
	// one group; Sites the resolver sites; Resolvers the resolver
	// instances, each in one site, each serving some subnets.
	Groups    []Group
	Subnets   []Subnet
	Sites     []Site
	Resolvers []Resolver
	// Phases are the policy states in time order: Phases[0] starts at 0,
	// each following one at its event's time. Entries filled before a
	// phase starts keep their answer until they expire.
	Phases []Phase
	// Drains are the drained pools the result reports "safe at" for.
	Drains []Drain
	// Capacity, when set, is the load feed a capacity prediction runs
	// with (capacity.go); Run adds its prediction to the result.
	Capacity *CapacityFeed
}

// Group is a client group: a share of the users and how their query
// rate moves over the day.
type Group struct {
	Name string
	// Rate is the group's user queries per second (at the diurnal peak
	// when Diurnal is set).
	Rate float64
	// Diurnal, when set, scales Rate by a cosine over the day between
	// Trough (a fraction of Rate, 0..1) and 1 at Peak (time of day, UTC).
	Diurnal *Diurnal
}

// Diurnal is a daily rate profile.
type Diurnal struct {
	Trough float64
	Peak   time.Duration
}

// Subnet is one client subnet: the users behind one ECS source prefix.
type Subnet struct {
	Group int
	// Prefix is the client's subnet at the ECS source length (a /24 or
	// /56 as resolvers send it, before the resolver site's own source
	// length is applied).
	Prefix netip.Prefix
	// Weight is the subnet's share of its group's rate (the group's
	// weights sum to 1).
	Weight float64
	// Country is the subnet's country in the geo database ("" unknown):
	// the summary names countries.
	Country string
}

// Site is a resolver site: one operator's resolvers, which behave alike.
type Site struct {
	Name string
	// ECS: whether the site sends EDNS Client Subnet, with which source
	// prefix lengths, and whether its cache honours the returned scope
	// (false: it caches per source prefix, ignoring the scope).
	ECS         bool
	SourceV4    int
	SourceV6    int
	HonorsScope bool
	// MinTTL and MaxTTL clamp the TTL the cache keeps an answer for (0:
	// no clamp).
	MinTTL, MaxTTL time.Duration
	// Violators is the probability that one of the site's resolvers
	// stretches TTLs (drawn per resolver and run); a violator keeps an
	// answer for ExtendTo when that is longer than the TTL.
	Violators float64
	ExtendTo  time.Duration
	Line      int
}

// Resolver is one resolver instance of a site.
type Resolver struct {
	Site int
	// Addr is the source address steer sees for its queries.
	Addr netip.Addr
	// Caches is the number of independent cache instances behind it;
	// each query goes to one of them at random. 0 is no cache at all,
	// every user query reaching steer (a load generator asking steer
	// directly): the capacity prediction takes it, Run refuses it.
	Caches int
	// Subnets are the client subnets it serves and Share, per subnet,
	// the part of that subnet's rate it carries (a subnet's shares over
	// all resolvers sum to 1).
	Subnets []int32
	Share   []float64
}

// Phase is the policy from a time on: a compiled table and its live
// state (health and overrides set as the timeline says by then).
type Phase struct {
	At time.Duration
	// Label says what started the phase ("start", "drain frankfurt",
	// "weights canary=5 stable=95", "config second.yaml").
	Label string
	Table *policy.Table
	Live  *policy.Live
	// Record is the asked record in this phase's table.
	Record *policy.Record
	// Line is the event's line in the scenario file (0 for the start).
	Line int
	// health sets a live state of Table to the phase's health and
	// overrides (a capacity prediction's own live states); nil: none.
	health func(*policy.Live)
}

// Drain is a pool drained (or failed) by an event.
type Drain struct {
	Pool  string
	At    time.Duration
	Label string
}

// Band is a statistic over the runs: its 5th, 50th and 95th percentiles
// and the mean.
type Band struct {
	P5, P50, P95, Mean float64
}

// Result is what a simulation predicts.
type Result struct {
	Record string
	// Pools are the record's pool names (the union over phases), the
	// order of every per-pool slice below.
	Pools []string
	// Sites are the resolver site names, the order of the per-site slices.
	Sites []string
	Bin   time.Duration
	Runs  int
	Seed  uint64
	// Bins are the time bins in order.
	Bins []Bin
	// Deviation is, over the bins, the absolute difference between the observed and the configured share
	// (percentage points), per pool: median, p95 and max over bins and
	// runs, each with its band over runs.
	Deviation []Deviation
	// Drains say, per drained pool, when ≤ 1 % of the user queries still
	// reach it ("safe at", after the drain) and when the last one did.
	Drains []DrainResult
	// Cost is the authoritative and cache cost per phase and site.
	Cost []Cost
	// Phases are the phases' labels and times, for charts and summary.
	Phases []PhaseInfo
	// Notable are the largest excursions found (for the summary): the
	// bins where a pool's share was furthest from its configured share,
	// with the resolver site that caused most of it.
	Notable []Excursion
	// Elapsed is how long the simulation took (wall time).
	Elapsed time.Duration
	// Capacity is the capacity prediction (nil without a load feed).
	Capacity *CapacityResult
}

// Bin is one output time bin.
type Bin struct {
	Start time.Duration
	// Share, per pool: the share of user queries answered with the pool,
	// over the runs (fractions 0..1).
	Share []Band
	// Configured, per pool: the share steer's own decisions give the
	// pool in this bin with no cache at all (every user query decided
	// afresh, weighted by the users' rates): the configured split as the
	// users would see it without caches. Deviation is measured from it.
	Configured []float64
	// SiteShare[site][pool]: the share of the site's user queries that
	// went to the pool (mean over runs).
	SiteShare [][]float64
	// Queries is the user queries per second and AuthQPS the misses (the
	// queries steer answers) per second, mean over runs; AuthQPSBand
	// their band.
	Queries     float64
	AuthQPS     float64
	AuthQPSBand Band
	// Entries is the mean number of live cache entries in the bin.
	Entries float64
}

// Deviation is one pool's deviation from its configured share (its
// bands in percentage points; ConfiguredMean, the pool's mean
// configured share over the bins, a fraction 0..1 like Bin.Configured).
type Deviation struct {
	Pool           string
	Median, P95    Band
	Max            Band
	ConfiguredMean float64
}

// DrainResult is the prediction for one drain.
type DrainResult struct {
	Pool  string
	At    time.Duration
	Label string
	// SafeAt is the time after the drain from which every bin has ≤ 1 %
	// of user queries reaching the pool; LastQuery the time after the
	// drain of the last user query answered with it. Both over runs, in
	// seconds after the drain (SafeAt over the runs that became safe);
	// Never counts the runs where it was not safe before the end (or
	// before a later phase gave the pool a configured share again).
	SafeAt, LastQuery Band
	Never             int
}

// Cost is the cost of one resolver site in one phase.
type Cost struct {
	Phase string
	Site  string
	// AuthQPS is the mean misses per second the site sends steer;
	// Entries the mean number of cache entries it holds; UserQPS the
	// user queries it answers.
	AuthQPS, Entries, UserQPS float64
	// ECS says how the site sends ECS as simulated ("none", "/24 /56,
	// honours scope", "/24 /56, per source prefix").
	ECS string
	// The ECS cache-cost calculator: what the same users would cost
	// through the same resolvers and caches if the site sent no ECS, if
	// it sent ECS and cached per the scopes steer returns, and if it
	// cached per ECS source prefix ignoring them (the site's source
	// lengths, /24 and /56 when it sends none). Analytic, stationary,
	// at the phase's mean rates, without TTL violators: per cache entry
	// of rate λ and life L, λ/(1+λL) misses per second and a live entry
	// λL/(1+λL) of the time.
	NoECS, Scoped, PerPrefix CostCase
}

// CostCase is one case of the ECS cache-cost calculator.
type CostCase struct {
	AuthQPS, Entries float64
}

// PhaseInfo is a phase's label and start.
type PhaseInfo struct {
	At    time.Duration
	Label string
}

// Excursion is a bin where a pool's share was far from its configured
// share, and the site most responsible.
type Excursion struct {
	Bin        time.Duration
	Pool       string
	Share      float64 // the share in the run and bin where it peaked
	Configured float64
	// Site is the resolver site whose cached answer carried most of the
	// excess, SiteShare its share of the users in that bin (0..1).
	Site      string
	SiteShare float64
	// Runs is the fraction of runs with an excursion at least half this
	// large somewhere.
	Runs float64
}
