package latency

import (
	"fmt"
	"math"
	"sync"
)

// Hysteresis remembers, per network key, the site currently chosen and
// keeps it unless it becomes unusable or another site is better by at least
// SwitchMargin for SwitchRounds consecutive updates. It is safe for
// concurrent use. A caller that keeps its networks' states itself (package
// policy keeps one per group of records that evaluate alike) applies the
// same rule to them with Step.
type Hysteresis struct {
	o  Options
	mu sync.Mutex
	st map[string]*Choice
}

// Choice is one network's anti-flap state. The zero Choice is a network
// never chosen for; Step keeps it up to date.
type Choice struct {
	set      bool   // a site has been chosen
	current  string // the site chosen
	basis    string // where current's RTT came from when last evaluated: a map key, or "estimated"
	pending  string // the challenger being counted, "" when none
	rounds   int    // consecutive updates pending has been better
	counted  uint64 // the last update counted for pending
	lastSeen uint64 // the last update Step was called at
}

// Same reports whether c and o would choose alike from now on: the same
// site, evidence and challenger count (when each was last evaluated does
// not matter).
func (c *Choice) Same(o *Choice) bool {
	return c.set == o.set && c.current == o.current && c.basis == o.basis && c.pending == o.pending &&
		c.rounds == o.rounds && (c.pending == "" || c.counted == o.counted)
}

// NewHysteresis returns an empty Hysteresis.
func NewHysteresis(o Options) *Hysteresis {
	return &Hysteresis{o: o.WithDefaults(), st: make(map[string]*Choice)}
}

// Choose returns the site for network among rtts and why. Sites for which
// usable returns false are never chosen (usable nil means all are usable);
// an RTT with Source "none" counts as infinitely far. update is the Store's
// update counter (Store.Updates): several calls within one update count as
// one round.
//
// With no current choice, or when the current site is unusable or absent
// from rtts, it switches at once to the best usable site. Otherwise it keeps
// the current site unless the best usable site has Ms <= current*(1-
// SwitchMargin) at SwitchRounds consecutive updates at which Choose was
// called (a round in which the condition fails, or a different challenger
// appears, restarts the count). When the current site's RTT comes from a
// different place than at the last call (its measurement turned stale and
// a less specific key or the estimate stands in, or a more specific key
// now measures it), the network chooses afresh: margin and rounds compare
// like with like. It returns "" when no site is usable.
func (h *Hysteresis) Choose(network string, rtts []RTT, usable func(site string) bool, update uint64) (site string, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.st[network]
	if c == nil {
		c = &Choice{}
	}
	site = h.step(c, rtts, usable, update, &why)
	if c.set {
		h.st[network] = c
	}
	return site, why
}

// Step is Choose for the network whose state is c, which it updates; the
// caller serialises calls for one Choice. It does not say why (Choose
// does) and does not allocate.
func (h *Hysteresis) Step(c *Choice, rtts []RTT, usable func(site string) bool, update uint64) string {
	return h.step(c, rtts, usable, update, nil)
}

// step applies the rule to c; why, when not nil, is set to the reason.
func (h *Hysteresis) step(c *Choice, rtts []RTT, usable func(site string) bool, update uint64, why *string) string {
	say := func(s string) {
		if why != nil {
			*why = s
		}
	}
	ok := func(s string) bool { return usable == nil || usable(s) }
	best, bestMs := -1, math.Inf(1)
	cur, curMs := -1, math.Inf(1)
	c.lastSeen = update
	for i, r := range rtts {
		if !ok(r.Site) {
			continue
		}
		ms := r.Ms
		if r.Source == SourceNone || r.Source == "" {
			ms = math.Inf(1)
		}
		if best < 0 || ms < bestMs {
			best, bestMs = i, ms
		}
		if c.set && r.Site == c.current {
			cur, curMs = i, ms
		}
	}
	if best < 0 {
		c.pending, c.rounds = "", 0
		say("no usable site")
		return ""
	}
	if !c.set {
		*c = Choice{set: true, current: rtts[best].Site, basis: basis(&rtts[best]), lastSeen: update}
		say("initial choice: best usable")
		return c.current
	}
	if cur < 0 {
		prev := c.current
		c.current, c.basis, c.pending, c.rounds = rtts[best].Site, basis(&rtts[best]), "", 0
		if why != nil {
			*why = fmt.Sprintf("switched at once: %s unusable", prev)
		}
		return c.current
	}
	if b := basis(&rtts[cur]); b != c.basis {
		// The evidence for the current choice changed kind: its value
		// turned stale, or a more specific key measured it. Margin and
		// rounds compare like with like, so choose afresh.
		prev, was := c.current, c.basis
		c.current, c.basis, c.pending, c.rounds = rtts[best].Site, basis(&rtts[best]), "", 0
		if why != nil {
			*why = fmt.Sprintf("re-chosen: %s's RTT now comes from %s (was %s)", prev, b, was)
		}
		return c.current
	}
	if best == cur || math.IsInf(bestMs, 1) || !(bestMs <= curMs*(1-h.o.SwitchMargin)) {
		c.pending, c.rounds = "", 0
		say("kept: no site better by the switch margin")
		return c.current
	}
	challenger := rtts[best].Site
	if c.pending != challenger {
		c.pending, c.rounds, c.counted = challenger, 1, update
	} else if update != c.counted {
		c.rounds++
		c.counted = update
	}
	if c.rounds >= h.o.SwitchRounds {
		prev := c.current
		c.current, c.basis, c.pending, c.rounds = challenger, basis(&rtts[best]), "", 0
		if why != nil {
			*why = fmt.Sprintf("switched from %s: %s better by %.0f%% for %d updates",
				prev, challenger, 100*(1-bestMs/curMs), h.o.SwitchRounds)
		}
		return c.current
	}
	if why != nil {
		*why = fmt.Sprintf("kept: %s better by %.0f%% for %d/%d updates",
			challenger, 100*(1-bestMs/curMs), c.rounds, h.o.SwitchRounds)
	}
	return c.current
}

// basis names where r came from: its map key, or its source when it was
// not measured.
func basis(r *RTT) string {
	if r.Source == SourceMeasured {
		return r.Key
	}
	return r.Source
}

// State describes one network's anti-flap state.
type State struct {
	Current string `json:"current"`
	// Pending is the challenger being counted ("" when none) and Rounds
	// how many consecutive updates it has been better by the margin.
	Pending string `json:"pending,omitempty"`
	Rounds  int    `json:"rounds,omitempty"`
	// Needed is SwitchRounds.
	Needed int `json:"needed"`
}

// State returns network's state, if it has one.
func (h *Hysteresis) State(network string) (State, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.StateOf(h.st[network])
}

// StateOf describes c (nil: no state), as State does for a network key.
func (h *Hysteresis) StateOf(c *Choice) (State, bool) {
	if c == nil || !c.set {
		return State{Needed: h.o.SwitchRounds}, false
	}
	return State{Current: c.current, Pending: c.pending, Rounds: c.rounds, Needed: h.o.SwitchRounds}, true
}

// Options returns the options in force, defaults filled in.
func (h *Hysteresis) Options() Options { return h.o }

// Prune forgets networks Choose has not been called for since update
// before, and returns how many it forgot.
func (h *Hysteresis) Prune(before uint64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for k, c := range h.st {
		if c.lastSeen < before {
			delete(h.st, k)
			n++
		}
	}
	return n
}

// Len returns how many networks are remembered.
func (h *Hysteresis) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.st)
}
