package quorum

import (
	"slices"
	"sync"
	"time"
)

// Tracker holds the quorum state of many targets, keyed by a target key the
// caller chooses (the fleet layer's key of a checked target, e.g. its
// address and check name). It is safe for concurrent use.
type Tracker struct {
	cfg     Config
	mu      sync.Mutex
	targets map[string]*Target
}

// NewTracker returns an empty Tracker under cfg, or cfg's Validate error.
func NewTracker(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{cfg: cfg, targets: map[string]*Target{}}, nil
}

// Config returns the Tracker's Config.
func (t *Tracker) Config() Config { return t.cfg }

// Update runs Target.Update for the target with this key, adding it on
// first sight.
func (t *Tracker) Update(key string, obs []Observation, own Verdict, now time.Time) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	tg := t.targets[key]
	if tg == nil {
		tg = &Target{cfg: t.cfg}
		t.targets[key] = tg
	}
	return tg.Update(obs, own, now)
}

// Result returns the last global result of the target with this key, and
// whether the Tracker has it.
func (t *Tracker) Result(key string) (Result, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tg := t.targets[key]
	if tg == nil {
		return Result{}, false
	}
	return tg.Result(), true
}

// Region returns Target.Region of the target with this key, and whether
// the Tracker has it.
func (t *Tracker) Region(key, region string) (Result, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tg := t.targets[key]
	if tg == nil {
		return Result{}, false
	}
	return tg.Region(region), true
}

// Forget drops the state of the target with this key (it left the
// configuration); seen again, it starts afresh and its first verdict is
// adopted at once.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	delete(t.targets, key)
	t.mu.Unlock()
}

// Keys returns the keys of every target held, sorted.
func (t *Tracker) Keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.targets))
	for k := range t.targets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
