// Package quorum owns the rule that turns many nodes' observations of a
// target into one verdict. It knows nothing of etcd or DNS: the fleet layer
// hands it the live observations it reads from its watch (an observation
// whose node's lease expired is simply absent) and this node's own checker
// state, and gets back the verdict to publish, where it came from and why.
//
// # The rule
//
// For one target, at time now:
//
//   - An observation is live when HeardAt ≥ now − Stale×Refresh. HeardAt
//     is when the node deciding last had word of it (the observation, or
//     its observer's refresh, arrived through its watch), on the deciding
//     node's own clock, and Refresh how often the observer refreshes it:
//     no time read from another node's clock is compared with this one's,
//     so an observer whose clock runs ahead cannot make its observations
//     outlive it. Older ones are stale: their node has stopped refreshing,
//     so they neither vote up nor down. Observations whose node died are
//     absent (the lease took them), so absence never votes down: it only
//     shrinks the denominator.
//   - With at least MinObservers live observations, the verdict is the
//     quorum's: up iff more than HealthyAbove (default 18 %) of the live
//     observers see the target up. This is fail-open, like Route 53's
//     health checks: a target stays up while more than 18 % of its
//     observers can reach it, so observers cut off from it by their own
//     network cannot take it down; it goes down only when more than 82 %
//     see it down. With the default 5 observers (see Observers) that means
//     all of them: one up of five is 20 % > 18 %.
//   - With fewer live observations the quorum has no say and the node's own
//     checker decides (Unknown, no result yet, counts as up, as in
//     internal/health). Result.Source and Result.Reason say which.
//   - Hold-down: the verdict computed from the inputs must hold
//     continuously for HoldDown before the published verdict flips, in both
//     directions; the first verdict (no history) is published at once.
//     Recovery is held down too, on purpose: the fail-open rule makes up
//     the easy direction (one observer of five that sees it up suffices), so
//     a target that flaps while recovering would otherwise pull traffic
//     back and forth, and every node's checker already needs Rise
//     successes before it reports up at all. An operator who wants traffic
//     back at once sets an up override.
//
// # Regional verdicts
//
// With Config.Regional, each region (Observation.Region) also gets a
// verdict, asked with Target.Region: a region with at least MinObservers
// live observers of its own is judged by the same fraction rule over its
// observers alone (so a region whose nodes cannot reach a site steers its
// own users around it, as Cloudflare's regional health does, while the rest
// of the fleet keeps using it); a region with fewer falls back to the
// global verdict computed from all live observers (itself falling back to
// the node's own view below MinObservers). Each region has its own
// hold-down; a region first seen after the target's first Update starts
// from the target's published verdict, so a region cannot skip the
// hold-down by appearing. Without Regional, Region returns the global
// result.
//
// # What is not here
//
// Operator overrides (up, down, drain, with expiry; fleet-wide keys in the
// store) are applied above this verdict, by internal/health, in the same
// place they win over a node's own checker status today: the quorum only
// computes observed health, and the fleet layer feeds its verdict to
// internal/health where a target's status goes. What to do when the store
// itself is unreachable (keep the last view for view_grace, then the own
// checkers) is the fleet layer's too.
package quorum

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Verdict is a target's health as a checker, the quorum or the published
// fleet view sees it. The values match internal/health's Status.
type Verdict uint8

// Verdicts. Unknown (no result yet) counts as up.
const (
	Unknown Verdict = iota
	Up
	Down
)

// String returns "unknown", "up" or "down".
func (v Verdict) String() string {
	switch v {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return "unknown"
}

// Observation is one node's latest check result of one target, as that node
// publishes it under its lease.
type Observation struct {
	Node   string // the observing node's name, unique in the fleet
	Region string // the observing node's region (regional verdicts)
	Up     bool   // its checker's status: true for up, false for down
	// HeardAt is when the deciding node last heard of this observation or
	// of its observer's refresh, on the deciding node's own clock (never
	// a time the observer read from its clock).
	HeardAt time.Time
	// Refresh is how often the observer refreshes its observations; ≤ 0
	// is never live.
	Refresh time.Duration
}

// Defaults, as Defaults returns them.
const (
	DefaultHealthyAbove = 0.18
	DefaultMinObservers = 3
	DefaultHoldDown     = 10 * time.Second
	DefaultStale        = 3
)

// Limits Validate enforces.
const (
	MaxMinObservers = 1000
	MaxHoldDown     = time.Hour
	MaxStale        = 100
)

// Config is the quorum rule of a fleet (fleet.health_quorum in the config,
// which decodes into it by its yaml tags and fills the keys left out from
// Defaults; hold_down, written as a duration, it decodes itself; Stale is
// not a key).
// Start from Defaults and change fields: the zero Config is invalid
// (MinObservers and Stale must be at least 1), so a forgotten Defaults is
// caught by Validate rather than silently meaning "no hold-down".
type Config struct {
	// HealthyAbove is the fraction of live observers that must see a target
	// up, strictly exceeded, for it to be up; in [0, 1). Default 0.18.
	HealthyAbove float64 `yaml:"healthy_above"`
	// MinObservers is the fewest live observers for which the quorum
	// decides; below it the node's own checker does. At least 1; default 3.
	MinObservers int `yaml:"min_observers"`
	// HoldDown is how long a newly computed verdict must hold before the
	// published one flips (both directions); 0 flips at once. Default 10s.
	HoldDown time.Duration `yaml:"-"`
	// Regional enables per-region verdicts (see the package comment).
	Regional bool `yaml:"regional"`
	// Stale is how many of its observer's refresh periods an observation
	// stays live after its HeardAt. At least 1; default 3.
	Stale int `yaml:"-"`
}

// Defaults returns the default Config: healthy above 18 %, at least 3
// observers, a 10 s hold-down, global verdicts only, stale after 3
// intervals.
func Defaults() Config {
	return Config{
		HealthyAbove: DefaultHealthyAbove,
		MinObservers: DefaultMinObservers,
		HoldDown:     DefaultHoldDown,
		Stale:        DefaultStale,
	}
}

// Validate reports every field out of range, naming the field as the config
// spells it and its range.
func (c Config) Validate() error {
	var errs []error
	if math.IsNaN(c.HealthyAbove) || c.HealthyAbove < 0 || c.HealthyAbove >= 1 {
		errs = append(errs, fmt.Errorf("healthy_above %v: must be at least 0 and below 1 (default %v)", c.HealthyAbove, DefaultHealthyAbove))
	}
	if c.MinObservers < 1 || c.MinObservers > MaxMinObservers {
		errs = append(errs, fmt.Errorf("min_observers %d: must be from 1 to %d (default %d)", c.MinObservers, MaxMinObservers, DefaultMinObservers))
	}
	if c.HoldDown < 0 || c.HoldDown > MaxHoldDown {
		errs = append(errs, fmt.Errorf("hold_down %v: must be from 0s to %v (default %v)", c.HoldDown, MaxHoldDown, DefaultHoldDown))
	}
	if c.Stale < 1 || c.Stale > MaxStale {
		errs = append(errs, fmt.Errorf("stale %d: must be from 1 to %d intervals (default %d)", c.Stale, MaxStale, DefaultStale))
	}
	return errors.Join(errs...)
}

// upByFraction is the quorum rule: up iff up/live > healthyAbove. live > 0.
func upByFraction(up, live int, healthyAbove float64) Verdict {
	if float64(up)/float64(live) > healthyAbove {
		return Up
	}
	return Down
}
