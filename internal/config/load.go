package config

import (
	"fmt"
	"math"

	"github.com/steer-dns/steer/internal/diag"
)

// Capacity is a pool's capacity in the unit of its load feed (requests
// per second, connections, a 0-100 score): above Target the pool sheds
// networks to the next candidate of their rule, above Max it takes no new
// ones (default: no max).
type Capacity struct {
	Target float64  `yaml:"target"`
	Max    *float64 `yaml:"max"`
}

// LoadFeed configures capacity feedback: where pools' loads come from and
// how the loop is damped (see policy/capacity.go).
type LoadFeed struct {
	// Files are load files (JSON, the shape of PUT /v1/load), relative to
	// the configuration file. They are watched: each version applied is
	// one step of the loop.
	Files []string `yaml:"files"`
	// MaxShift is the largest share of a pool's answers one step moves
	// (default 0.25).
	MaxShift float64 `yaml:"max_shift"`
	// LowWater is the share of the target below which shed networks
	// come back (default 0.85).
	LowWater float64 `yaml:"low_water"`
	// StaleAfter is how old a load may be before it is ignored and the
	// pool gets its networks back (default 1m).
	StaleAfter Duration `yaml:"stale_after"`
}

func (c *Config) checkLoad(probs *diag.Problems) {
	l, f := &c.Load, c.File
	if m := l.MaxShift; math.IsNaN(m) || m < 0 || m > 1 {
		probs.Add(f, c.Line("load.max_shift"), "load.max_shift: %v is not in (0, 1] (0.25 moves at most a quarter of a pool's answers per step)", m)
	}
	if w := l.LowWater; math.IsNaN(w) || w < 0 || w >= 1 {
		probs.Add(f, c.Line("load.low_water"), "load.low_water: %v is not in (0, 1) (0.85: networks come back below 85 %% of the target)", w)
	}
	if l.StaleAfter < 0 {
		probs.Add(f, c.Line("load.stale_after"), "load.stale_after: must not be negative")
	}
	seen := map[string]bool{}
	for i, p := range l.Files {
		at := fmt.Sprintf("load.files[%d]", i)
		if p == "" {
			probs.Add(f, c.Line(at), "load.files: an entry is empty")
		}
		if seen[p] {
			probs.Add(f, c.Line(at), "load.files: %q is listed twice", p)
		}
		seen[p] = true
	}
}
