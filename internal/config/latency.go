package config

import (
	"fmt"
	"math"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/latency"
)

// Latency configures the latency map that by: latency steers with (see
// package latency).
type Latency struct {
	// Files are measurement files (CSV "key,site,rtt_ms,samples,measured_at",
	// or a JSON array when the name ends in .json), relative to the
	// configuration file. They are watched: each version applied is one
	// update.
	Files []string `yaml:"files"`
	// HalfLife is the smoothing half-life; 0 replaces each value with the
	// newest measurement.
	HalfLife Duration `yaml:"half_life"`
	// MaxAge is how old a measurement may be before it is stale and
	// ignored (0: never).
	MaxAge Duration `yaml:"max_age"`
	// SwitchMargin is the relative improvement a new best site needs
	// before a network's choice moves (default 0.2).
	SwitchMargin *float64 `yaml:"switch_margin"`
	// SwitchRounds is how many consecutive updates the improvement must
	// hold (default 3).
	SwitchRounds int `yaml:"switch_rounds"`
	// Estimate sets the distance-based estimate for keys with no
	// measurement.
	Estimate LatencyEstimate `yaml:"estimate"`
}

// LatencyEstimate is the built-in RTT estimate: 2 × distance / KmPerMs +
// OverheadMs.
type LatencyEstimate struct {
	KmPerMs    float64  `yaml:"km_per_ms"`
	OverheadMs *float64 `yaml:"overhead_ms"`
}

// LatencyOptions returns the latency settings with the defaults of
// package latency filled in where the file leaves them out (an explicit
// overhead_ms: 0 stays 0).
func (l *Latency) LatencyOptions() latency.Options {
	o := latency.Options{HalfLife: time.Duration(l.HalfLife), MaxAge: time.Duration(l.MaxAge),
		SwitchRounds: l.SwitchRounds, KmPerMs: l.Estimate.KmPerMs, OverheadMs: latency.DefaultOverheadMs}
	if l.SwitchMargin != nil {
		o.SwitchMargin = *l.SwitchMargin
	}
	if l.Estimate.OverheadMs != nil {
		o.OverheadMs = *l.Estimate.OverheadMs
	}
	return o.WithDefaults()
}

func (c *Config) checkLatency(probs *diag.Problems) {
	l, f := &c.Latency, c.File
	if l.HalfLife < 0 {
		probs.Add(f, c.Line("latency.half_life"), "latency.half_life: must not be negative")
	}
	if l.MaxAge < 0 {
		probs.Add(f, c.Line("latency.max_age"), "latency.max_age: must not be negative")
	}
	if m := l.SwitchMargin; m != nil && (math.IsNaN(*m) || *m <= 0 || *m >= 1) {
		probs.Add(f, c.Line("latency.switch_margin"), "latency.switch_margin: %v is not in (0, 1) (0.2 means the new site must be 20%% faster)", *m)
	}
	if l.SwitchRounds < 0 {
		probs.Add(f, c.Line("latency.switch_rounds"), "latency.switch_rounds: %d must be at least 1", l.SwitchRounds)
	}
	if k := l.Estimate.KmPerMs; k < 0 || math.IsNaN(k) || math.IsInf(k, 0) {
		probs.Add(f, c.Line("latency.estimate.km_per_ms"), "latency.estimate.km_per_ms: %v must be positive", k)
	}
	if o := l.Estimate.OverheadMs; o != nil && (*o < 0 || math.IsNaN(*o) || math.IsInf(*o, 0)) {
		probs.Add(f, c.Line("latency.estimate.overhead_ms"), "latency.estimate.overhead_ms: %v must not be negative", *o)
	}
	seen := map[string]bool{}
	for i, p := range l.Files {
		at := fmt.Sprintf("latency.files[%d]", i)
		if p == "" {
			probs.Add(f, c.Line(at), "latency.files: an entry is empty")
		}
		if seen[p] {
			probs.Add(f, c.Line(at), "latency.files: %q is listed twice", p)
		}
		seen[p] = true
	}
}
