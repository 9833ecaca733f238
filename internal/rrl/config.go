package rrl

import (
	"errors"
	"fmt"
	"net/netip"
)

// Config is the rate limiter's configuration. Rates are responses per
// second; the zero Config is not valid (see [Defaults] and
// [Config.Validate]). The yaml tags are the keys of the configuration
// file's rrl section, which decodes into this type (internal/config fills
// the keys left out from Defaults); Window and Exempt, which the file
// writes as a duration and as addresses or prefixes, it decodes itself.
type Config struct {
	// ResponsesPerSecond is R, the rate of identical responses (same key)
	// each bucket earns per second; 0 turns per-key limiting off.
	// 0..1,000,000.
	ResponsesPerSecond int `yaml:"responses_per_second"`
	// Window is how many seconds of history a bucket's balance covers, in
	// seconds, 1..3600 (BIND's window): a balance ranges over
	// [−Window×rate, +rate], so after a flood that drove a bucket to its
	// floor it takes Window seconds of silence before it answers again.
	Window int `yaml:"-"`
	// Slip is how often a limited response is slipped instead of dropped:
	// every Slip-th limited response, starting with the first; 0 never,
	// 1 always. 0..10 (BIND).
	Slip int `yaml:"slip"`
	// IPv4Prefix and IPv6Prefix are how many leading bits of the source
	// address identify one client block: 1..32 and 1..128.
	IPv4Prefix int `yaml:"ipv4_prefix"`
	IPv6Prefix int `yaml:"ipv6_prefix"`
	// ECSAware puts the ECS scope block of the answer in the key.
	ECSAware bool `yaml:"ecs_aware"`
	// AllPerSecond is the aggregate rate per source prefix, ignoring ECS,
	// name, type and class; a response over it is always dropped, never
	// slipped (BIND's all-per-second). 0 turns it off. 0..1,000,000, and
	// not below ResponsesPerSecond.
	AllPerSecond int `yaml:"all_per_second"`
	// Exempt lists source prefixes that are never limited.
	Exempt []netip.Prefix `yaml:"-"`
	// LogOnly decides and counts as usual but never slips or drops:
	// Decide returns LogSlip or LogDrop instead.
	LogOnly bool `yaml:"log_only"`
	// TableSize is the number of buckets in the table, rounded up to a
	// power of two; 0 means DefaultTableSize. 256..16,777,216. The table
	// is allocated once, by New, and never grows.
	TableSize int `yaml:"table_size"`
}

// Table size limits and default.
const (
	// DefaultTableSize is 2^18 entries of 24 bytes: 6 MiB.
	DefaultTableSize = 1 << 18
	// MinTableSize is the smallest table: one set of 4 entries per shard.
	MinTableSize = 256
	// MaxTableSize is the largest table: 2^24 entries, 384 MiB.
	MaxTableSize = 1 << 24

	maxRate   = 1_000_000
	maxWindow = 3600
	maxSlip   = 10
)

// Defaults returns a configuration no legitimate resolver reaches, from the
// figures in the abuse notes (§2.2): the seed's resolver site sends 500 q/s
// in total and, for 5,000 client /24s and a 60 s TTL, up to 83 q/s for one
// name and type from one address, each with a different ECS /24.
//
//   - ResponsesPerSecond 20, Window 15, Slip 2: BIND's suggested rate and
//     its default window and slip. With ECS-aware keys a resolver asks each
//     (name, type, scope block) about once per TTL, 1/60 q/s for a 60 s
//     TTL, so 20/s is three orders of magnitude above legitimate use; even
//     several independent caches behind one /24 asking for a name that is
//     not steered (one shared bucket) stay far below it.
//   - IPv4Prefix 24, IPv6Prefix 56: BIND's blocks.
//   - ECSAware true: without it the seed's resolver (83 q/s for one key)
//     would be limited at any per-key rate below 83.
//   - AllPerSecond 1000: the aggregate must sit above a busy ECS resolver's
//     total rate: twice the seed site's 500 q/s over every name, 12× its
//     83 q/s for one name, and 50× R (BIND asks for at least 4× the other
//     rates). It is what bounds a flood that varies ECS.
//   - TableSize 2^18 (24 B each, 6 MiB): a bucket only holds information
//     while its balance is below full, and a bucket used once is full
//     again after 1/R s (50 ms), so even a 20,000 q/s flood of distinct
//     keys from one source needs only about 1,000 live buckets, within the
//     4,096 of the source's shard (a source's buckets all live in one of 64
//     shards); the whole table leaves room for hundreds of sources being
//     limited at once (BIND's default table is 20,000 entries, Knot's
//     393,241, NSD's 1,000,000).
func Defaults() Config {
	return Config{
		ResponsesPerSecond: 20,
		Window:             15,
		Slip:               2,
		IPv4Prefix:         24,
		IPv6Prefix:         56,
		ECSAware:           true,
		AllPerSecond:       1000,
		TableSize:          DefaultTableSize,
	}
}

// Validate returns an error naming every field out of range, nil when the
// configuration is usable.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, v any, rng string) {
		errs = append(errs, fmt.Errorf("rrl: %s %v out of range %s", field, v, rng))
	}
	if c.ResponsesPerSecond < 0 || c.ResponsesPerSecond > maxRate {
		bad("ResponsesPerSecond", c.ResponsesPerSecond, "0..1000000")
	}
	if c.Window < 1 || c.Window > maxWindow {
		bad("Window", c.Window, "1..3600 seconds")
	}
	if c.Slip < 0 || c.Slip > maxSlip {
		bad("Slip", c.Slip, "0..10")
	}
	if c.IPv4Prefix < 1 || c.IPv4Prefix > 32 {
		bad("IPv4Prefix", c.IPv4Prefix, "1..32")
	}
	if c.IPv6Prefix < 1 || c.IPv6Prefix > 128 {
		bad("IPv6Prefix", c.IPv6Prefix, "1..128")
	}
	if c.AllPerSecond < 0 || c.AllPerSecond > maxRate {
		bad("AllPerSecond", c.AllPerSecond, "0..1000000")
	} else if c.AllPerSecond != 0 && c.AllPerSecond < c.ResponsesPerSecond {
		bad("AllPerSecond", c.AllPerSecond, fmt.Sprintf("0 (off) or %d (ResponsesPerSecond)..1000000", c.ResponsesPerSecond))
	}
	if c.TableSize != 0 && (c.TableSize < MinTableSize || c.TableSize > MaxTableSize) {
		bad("TableSize", c.TableSize, "0 (default) or 256..16777216")
	}
	for i, p := range c.Exempt {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("rrl: Exempt[%d] %v is not a valid prefix", i, p))
		}
	}
	return errors.Join(errs...)
}
