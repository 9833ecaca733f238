package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/rum"
)

// Defaults of the rum section.
const (
	DefaultRUMWeight     = 0.7
	DefaultRUMMinSamples = 10
	DefaultRUMInterval   = 30 * time.Second
	DefaultRUMQuantile   = "p50"
	// DefaultRUMMaxConnections is enough for a CDN's edge relaying
	// beacons over kept-alive connections.
	DefaultRUMMaxConnections = 1024
)

// MaxConnectionsOr returns max_connections with its default.
func (r *RUM) MaxConnectionsOr() int {
	if r.MaxConnections <= 0 {
		return DefaultRUMMaxConnections
	}
	return r.MaxConnections
}

// RUM configures real-user measurements: a beacon listener of its own
// (browsers post to it through a CDN; it never serves the admin API) and
// how the aggregates feed the latency map (see package rum).
type RUM struct {
	// Listen is the beacon listener's host:port (HTTP).
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token every batch must carry (relative
	// to the configuration file; read again at each reload).
	TokenFile string `yaml:"token_file"`
	// AllowOrigins are the web origins whose pages may post beacons
	// (CORS); "*" allows any.
	AllowOrigins []string `yaml:"allow_origins"`
	// TrustedProxies are networks (CIDR) of proxies whose
	// X-Forwarded-For names a beacon's relay address.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Weight is RUM's weight against probe measurements where a network
	// has both for a site (default 0.7).
	Weight *float64 `yaml:"weight"`
	// MinSamples is the decayed beacon count below which a cell does not
	// feed the latency map (default 10).
	MinSamples *float64 `yaml:"min_samples"`
	// Quantile is the statistic fed: p50 (default) or p75.
	Quantile string `yaml:"quantile"`
	// Interval is how often changed cells feed the latency map, each
	// round one update for anti-flap (default 30s).
	Interval Duration `yaml:"interval"`
	// MaxBlocks is the memory budget in network blocks (default
	// rum.DefaultMaxBlocks).
	MaxBlocks int `yaml:"max_blocks"`
	// HalfLife is how fast old beacons lose weight in the aggregates
	// (default rum.DefaultHalfLife).
	HalfLife Duration `yaml:"half_life"`
	// MaxRTT, MaxSkew and MaxAge bound a beacon's RTT, how far its time
	// may be in the future, and how old it may be.
	MaxRTT  Duration `yaml:"max_rtt"`
	MaxSkew Duration `yaml:"max_skew"`
	MaxAge  Duration `yaml:"max_age"`
	// MaxBatchBytes and MaxBatchBeacons bound one batch.
	MaxBatchBytes   int64 `yaml:"max_batch_bytes"`
	MaxBatchBeacons int   `yaml:"max_batch_beacons"`
	// MaxConnections caps the listener's open connections (default
	// DefaultRUMMaxConnections); more wait in the listen backlog.
	MaxConnections int `yaml:"max_connections"`

	// Token is the token of TokenFile, read at each load.
	Token Secret `yaml:"-"`
	// Proxies are TrustedProxies parsed.
	Proxies []netip.Prefix `yaml:"-"`
}

// WeightOr returns the weight with its default.
func (r *RUM) WeightOr() float64 {
	if r.Weight == nil {
		return DefaultRUMWeight
	}
	return *r.Weight
}

// MinSamplesOr returns min_samples with its default.
func (r *RUM) MinSamplesOr() float64 {
	if r.MinSamples == nil {
		return DefaultRUMMinSamples
	}
	return *r.MinSamples
}

// IntervalOr returns the interval with its default.
func (r *RUM) IntervalOr() time.Duration {
	if r.Interval <= 0 {
		return DefaultRUMInterval
	}
	return time.Duration(r.Interval)
}

// QuantileOr returns the quantile fed with its default.
func (r *RUM) QuantileOr() string {
	if r.Quantile == "" {
		return DefaultRUMQuantile
	}
	return r.Quantile
}

// StoreOptions are the options of the RUM store.
func (r *RUM) StoreOptions() rum.Options {
	return rum.Options{MaxBlocks: r.MaxBlocks, HalfLife: time.Duration(r.HalfLife)}
}

// Limits are the intake's limits (but its sites, which the records give).
func (r *RUM) Limits() rum.Limits {
	return rum.Limits{MaxRTT: time.Duration(r.MaxRTT), MaxSkew: time.Duration(r.MaxSkew), MaxAge: time.Duration(r.MaxAge),
		MaxBytes: r.MaxBatchBytes, MaxBeacons: r.MaxBatchBeacons}.WithDefaults()
}

func (c *Config) checkRUM(probs *diag.Problems) {
	r, f := c.RUM, c.File
	if r == nil {
		return
	}
	bad := func(key, format string, args ...any) {
		ln := c.Line("rum." + key)
		if ln == 0 {
			ln = c.Line("rum")
		}
		probs.Add(f, ln, "rum.%s: %s", key, fmt.Sprintf(format, args...))
	}
	if r.Listen == "" {
		bad("listen", "the beacon listener's host:port is needed")
	} else if _, port, err := net.SplitHostPort(r.Listen); err != nil {
		bad("listen", "%q is not host:port", r.Listen)
	} else if r.Listen == c.API.Listen && port != "0" {
		bad("listen", "%q is api.listen: beacons get a listener of their own", r.Listen)
	}
	if r.TokenFile == "" {
		bad("token_file", "a token file is needed (beacons must carry its bearer token)")
	}
	r.Proxies = r.Proxies[:0]
	for i, s := range r.TrustedProxies {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, err2 := netip.ParseAddr(s); err2 == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			} else {
				bad(fmt.Sprintf("trusted_proxies[%d]", i), "%q is not a CIDR prefix or an address", s)
				continue
			}
		}
		r.Proxies = append(r.Proxies, p.Masked())
	}
	for i, o := range r.AllowOrigins {
		if o == "" {
			bad(fmt.Sprintf("allow_origins[%d]", i), "an entry is empty")
		}
	}
	if w := r.Weight; w != nil && (math.IsNaN(*w) || *w < 0 || *w > 1) {
		bad("weight", "%v is not between 0 and 1 (RUM's share of a blended RTT)", *w)
	}
	if m := r.MinSamples; m != nil && (math.IsNaN(*m) || *m < 0) {
		bad("min_samples", "%v must not be negative", *m)
	}
	if q := r.Quantile; q != "" && q != "p50" && q != "p75" {
		bad("quantile", "%q is not p50 or p75", q)
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"interval", r.Interval}, {"half_life", r.HalfLife}, {"max_rtt", r.MaxRTT}, {"max_skew", r.MaxSkew}, {"max_age", r.MaxAge}} {
		if d.v < 0 {
			bad(d.key, "must not be negative")
		}
	}
	if r.MaxBlocks < 0 {
		bad("max_blocks", "%d must not be negative", r.MaxBlocks)
	}
	if r.MaxBatchBytes < 0 {
		bad("max_batch_bytes", "%d must not be negative", r.MaxBatchBytes)
	}
	if r.MaxConnections < 0 {
		bad("max_connections", "%d must not be negative", r.MaxConnections)
	}
	if r.MaxBatchBeacons < 0 {
		bad("max_batch_beacons", "%d must not be negative", r.MaxBatchBeacons)
	}
}
