package simulate

import (
	"time"
)

// Scenario is a scenario file as written: a population of clients and
// resolvers and a timeline of events. Every element keeps its line for
// errors (file:line). See examples/simulate/ for annotated files.
type Scenario struct {
	// File is the scenario's path (for errors and for resolving the
	// paths it names: config events, latency maps).
	File string `yaml:"-" json:"-"`
	// Duration of the simulated time and width of an output bin
	// (default 1m).
	Duration Duration `yaml:"duration" json:"duration"`
	Bin      Duration `yaml:"bin" json:"bin,omitempty"`
	// Seed and Runs: run i is seeded Seed+i (defaults 1 and 20; the
	// command's --seed and --runs override them).
	Seed *uint64 `yaml:"seed" json:"seed,omitempty"`
	Runs int     `yaml:"runs" json:"runs,omitempty"`
	// Record is the steered name the users ask for; Type A (default)
	// or AAAA.
	Record string `yaml:"record" json:"record"`
	Type   string `yaml:"type" json:"type,omitempty"`
	// TTLOverride, when set, replaces the record's TTL (what-if).
	TTLOverride *Duration `yaml:"ttl_override" json:"ttl_override,omitempty"`
	// Start is the simulated clock's origin (RFC 3339; default
	// 2026-01-01T00:00:00Z): diurnal profiles read its time of day.
	Start string `yaml:"start" json:"start,omitempty"`
	// Clients are the client groups.
	Clients []ClientGroup `yaml:"clients" json:"clients"`
	// Resolvers are the resolver sites.
	Resolvers []ResolverSite `yaml:"resolvers" json:"resolvers"`
	// TTLViolators applies to every site that does not set its own.
	TTLViolators *Violators `yaml:"ttl_violators" json:"ttl_violators,omitempty"`
	// Events are the timeline, in any order (sorted by at).
	Events []Event `yaml:"events" json:"events,omitempty"`
	// Capacity, when set, predicts capacity feedback: the load feed of
	// the record's capacity pools and the shedding it causes, interval
	// by interval (capacity.go).
	Capacity *CapacitySpec `yaml:"capacity" json:"capacity,omitempty"`
	Line     int           `yaml:"-" json:"-"`
	// keys are the lines of the top-level keys (for Compile's errors).
	keys map[string]int
}

// ClientGroup is a set of client subnets with a query rate.
type ClientGroup struct {
	Name string `yaml:"name" json:"name"`
	// Prefixes are the group's networks, cut into subnets of the ECS
	// source length (/24, /56); Subnets, when set, caps how many are
	// taken (evenly spread over the prefixes).
	Prefixes []string `yaml:"prefixes" json:"prefixes,omitempty"`
	// FromGeoDB draws the subnets from the configuration's geo databases
	// by country instead.
	FromGeoDB *FromGeoDB `yaml:"from_geodb" json:"from_geodb,omitempty"`
	Subnets   int        `yaml:"subnets" json:"subnets,omitempty"`
	// Zipf, when > 0, weights the group's subnets by rank^-Zipf (a few
	// busy subnets, many quiet ones); 0 weights them equally.
	Zipf float64 `yaml:"zipf" json:"zipf,omitempty"`
	// Rate is the group's user queries per second (the peak with a
	// diurnal profile).
	Rate float64 `yaml:"rate" json:"rate"`
	// Diurnal, when set, makes the rate follow the day.
	Diurnal *DiurnalSpec `yaml:"diurnal" json:"diurnal,omitempty"`
	Line    int          `yaml:"-" json:"-"`
}

// FromGeoDB draws client subnets from the geo databases.
type FromGeoDB struct {
	Countries []string `yaml:"countries" json:"countries"`
	// Subnets is how many /24s to draw (default 1,000): IPv4 only, from
	// the databases' networks of /24 or wider, at random (seeded by the
	// scenario's seed), without repeats.
	Subnets int `yaml:"subnets" json:"subnets,omitempty"`
	// Zipf weights them by rank^-Zipf (default 1.0).
	Zipf *float64 `yaml:"zipf" json:"zipf,omitempty"`
	Line int      `yaml:"-" json:"-"`
}

// DiurnalSpec is a daily profile: the rate falls to Trough × rate, 12
// hours from Peak (time of day, UTC, such as "18:00").
type DiurnalSpec struct {
	Trough float64 `yaml:"trough" json:"trough"`
	Peak   string  `yaml:"peak" json:"peak"`
	Line   int     `yaml:"-" json:"-"`
}

// ResolverSite is one operator's resolvers, which behave alike.
type ResolverSite struct {
	Name string `yaml:"name" json:"name"`
	// Share is the part of each client group's queries the site carries
	// (the shares of the sites serving a group sum to 1); Shares sets it
	// per group by name instead; Groups limits the site to some groups.
	Share  *float64           `yaml:"share" json:"share,omitempty"`
	Shares map[string]float64 `yaml:"shares" json:"shares,omitempty"`
	Groups []string           `yaml:"groups" json:"groups,omitempty"`
	// Count is the number of independent resolvers (default 1); the
	// site's subnets are divided among them.
	Count int `yaml:"count" json:"count,omitempty"`
	// Caches is the number of independent cache instances per resolver
	// (default 1); each query goes to one at random.
	Caches int `yaml:"caches" json:"caches,omitempty"`
	// Address is the source address (or a prefix the resolvers'
	// addresses are taken from) steer sees; default: an address in the
	// first subnet each resolver serves (an ISP's resolver near its
	// users).
	Address string `yaml:"address" json:"address,omitempty"`
	// ECS: false or absent sends none; true sends /24 and /56 and honours
	// the scope; or the detailed form.
	ECS *ECSSpec `yaml:"ecs" json:"ecs,omitempty"`
	// TTL clamps: min and max TTL the cache keeps an answer for.
	TTL *TTLClamp `yaml:"ttl" json:"ttl,omitempty"`
	// TTLViolators overrides the scenario's.
	TTLViolators *Violators `yaml:"ttl_violators" json:"ttl_violators,omitempty"`
	Line         int        `yaml:"-" json:"-"`
}

// ECSSpec is how a site sends ECS. In YAML it is false, true, or a map.
type ECSSpec struct {
	Enabled     bool  `yaml:"-" json:"enabled"`
	V4          int   `yaml:"v4" json:"v4,omitempty"`
	V6          int   `yaml:"v6" json:"v6,omitempty"`
	HonorsScope *bool `yaml:"honors_scope" json:"honors_scope,omitempty"`
	Line        int   `yaml:"-" json:"-"`
}

// TTLClamp bounds the TTL a cache keeps.
type TTLClamp struct {
	Min  Duration `yaml:"min" json:"min,omitempty"`
	Max  Duration `yaml:"max" json:"max,omitempty"`
	Line int      `yaml:"-" json:"-"`
}

// Violators is the share of resolvers that stretch TTLs (8.74 % of
// 8,524 resolvers in Bhowmick et al., PAM 2023) and how long they keep an
// answer.
type Violators struct {
	Fraction float64  `yaml:"fraction" json:"fraction"`
	ExtendTo Duration `yaml:"extend_to" json:"extend_to"`
	Line     int      `yaml:"-" json:"-"`
}

// Event is one change at a time. Exactly one of the actions is set.
// Pools are named "pool" (of the scenario's record) or "record/pool".
type Event struct {
	At Duration `yaml:"at" json:"at"`
	// SetWeights sets split weights: pool → weight, in every split of
	// the record (or of the shared policy it uses) that has the pool.
	SetWeights map[string]int `yaml:"set_weights" json:"set_weights,omitempty"`
	// Drain and Undrain set and clear the operator's drain of a pool.
	Drain   string `yaml:"drain" json:"drain,omitempty"`
	Undrain string `yaml:"undrain" json:"undrain,omitempty"`
	// Fail and Recover make every address of a pool fail (or pass) its
	// health checks.
	Fail    string `yaml:"fail" json:"fail,omitempty"`
	Recover string `yaml:"recover" json:"recover,omitempty"`
	// Config switches to another configuration file (relative to the
	// scenario file), as a reload would.
	Config string `yaml:"config" json:"config,omitempty"`
	// Load changes the load feed of capacity pools from this time on
	// (pool → load; null: the feed stops reporting the pool, whose load
	// then turns stale). It needs a capacity section.
	Load map[string]*float64 `yaml:"load" json:"load,omitempty"`
	Line int                 `yaml:"-" json:"-"`
}

// CapacitySpec is the load feed a capacity prediction runs with.
type CapacitySpec struct {
	// Interval is the feed's interval: one step of the feedback loop
	// (policy.Live.SetLoad) at the end of each (default 10s).
	Interval Duration `yaml:"interval" json:"interval,omitempty"`
	// Intervals is how many intervals to predict (default: as many as
	// the duration holds).
	Intervals int `yaml:"intervals" json:"intervals,omitempty"`
	// Model is how the fed load moves: "fixed" (default) reports the
	// given load every interval, whatever is shed; "proportional" takes
	// the given load as the pool's load when it answers all of its
	// traffic and reports it scaled by the user queries the pool
	// answered in the interval against those of the first interval (no
	// network shed yet).
	Model string `yaml:"model" json:"model,omitempty"`
	// Load is the pools' loads (pool or record/pool → load in the unit
	// of the pool's capacity) from the start.
	Load map[string]float64 `yaml:"load" json:"load,omitempty"`
	// LoadFile is a load file in the format the node reads
	// (load.files, PUT /v1/load), relative to the scenario file; its
	// loads join Load (its timestamps are not used: each interval
	// reports the value afresh).
	LoadFile string `yaml:"load_file" json:"load_file,omitempty"`
	Line     int    `yaml:"-" json:"-"`
}

// Duration is a time.Duration written as "90s", "2h" or "1h30m" (and,
// beyond Go's units, "1d").
type Duration time.Duration
