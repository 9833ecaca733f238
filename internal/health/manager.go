package health

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Key identifies one checker: a target address with a check template.
// Several records or pools sharing a target and check share one checker.
type Key struct {
	Addr  netip.Addr
	Check string // the check template's name
}

// String returns "addr/check".
func (k Key) String() string { return k.Addr.String() + "/" + k.Check }

// Status is a target's health as checked.
type Status uint8

// Statuses. Unknown (no result yet) is treated as up by callers, so a
// restart never blanks answers.
const (
	Unknown Status = iota
	Up
	Down
)

// String returns "unknown", "up" or "down".
func (s Status) String() string {
	switch s {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return "unknown"
}

// Override is an external state set on a target address, overriding the
// checks of all its keys.
type Override uint8

// Overrides. OverrideNone ("auto") lets the checks decide; OverrideUp forces
// usable; OverrideDown and OverrideDrain both force unusable (drain marks a
// planned removal, down a known failure; State reports which).
const (
	OverrideNone Override = iota
	OverrideUp
	OverrideDown
	OverrideDrain
)

// String returns "auto", "up", "down" or "drain", as ParseOverride takes.
func (o Override) String() string {
	switch o {
	case OverrideUp:
		return "up"
	case OverrideDown:
		return "down"
	case OverrideDrain:
		return "drain"
	}
	return "auto"
}

// ParseOverride parses "up", "down", "drain" or "auto" (also "" and "none",
// which clear an override).
func ParseOverride(s string) (Override, error) {
	switch s {
	case "up":
		return OverrideUp, nil
	case "down":
		return OverrideDown, nil
	case "drain":
		return OverrideDrain, nil
	case "auto", "none", "":
		return OverrideNone, nil
	}
	return OverrideNone, fmt.Errorf("unknown override %q (want up, down, drain or auto)", s)
}

// ParseExpires reads an override's expiry, the one rule of the admin API
// and the feed file: a positive Go duration ("30m") from ref, or an
// RFC 3339 time after ref; empty is no expiry (the zero time). ref is when
// the operator asked: the request's time, or the feed file's modification
// time (so a feed read again after a restart keeps its expiries, and an
// entry that has expired since is simply over). A time that was already
// past at ref is refused, as a mistake, rather than taken as over.
func ParseExpires(s string, ref time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("bad expires %q: the duration must be positive", s)
		}
		return ref.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad expires %q: want a duration (30m) or an RFC 3339 time", s)
	}
	if !t.After(ref) {
		return time.Time{}, fmt.Errorf("bad expires %q: the time is in the past", s)
	}
	return t, nil
}

// State is what is known of one Key.
type State struct {
	Status          Status
	Since           time.Time     // when Status last changed (or was restored)
	Reason          string        // the last check's result, e.g. "HTTP 503"
	LastLatency     time.Duration // how long the last check took
	LastCheck       time.Time     // when the last check started; zero before the first
	Override        Override      // the address's active override, if any
	OverrideExpires time.Time     // zero: no expiry
}

// usable applies an active override to a status.
func usable(s Status, o Override) bool {
	switch o {
	case OverrideUp:
		return true
	case OverrideDown, OverrideDrain:
		return false
	}
	return s != Down
}

// machine is the rise/fall state machine of one Key.
type machine struct {
	status      Status
	provisional bool // status restored by LoadState, no real result yet
	ok, bad     int  // consecutive successes and failures
}

// step records one result; it reports whether the status changed.
func (m *machine) step(pass bool, rise, fall int) bool {
	old := m.status
	if pass {
		m.bad = 0
		m.ok++
		if m.status == Unknown || m.provisional || m.ok >= rise {
			m.status = Up
		}
	} else {
		m.ok = 0
		m.bad++
		if m.bad >= fall {
			m.status = Down
		}
	}
	m.provisional = false
	return m.status != old
}

type checker struct {
	key    Key
	check  Check // with defaults
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// Guarded by Manager.mu.
	m     machine
	state State
}

type override struct {
	o       Override
	expires time.Time
	timer   *time.Timer
}

func (o *override) active(now time.Time) bool {
	return o != nil && o.o != OverrideNone && (o.expires.IsZero() || now.Before(o.expires))
}

// Manager runs the checkers and answers whether targets are usable. Its
// methods are safe for concurrent use.
type Manager struct {
	log     *slog.Logger
	applyMu sync.Mutex // serialises Apply and Close

	mu        sync.RWMutex
	checkers  map[Key]*checker
	overrides map[netip.Addr]*override
	pools     map[[2]string]*override // by record and pool
	restored  map[Key]State           // from LoadState, for keys without a result yet
	onChange  []func()
	verdict   func(k Key, own Status) Status // SetVerdict; nil: own status
	seed      func(k Key) Status             // SetSeed; nil: new checkers start Unknown
	dial      DialFunc                       // SetDialer; nil: a net.Dialer
	onResult  func(k Key, took time.Duration, pass bool, from, to Status)
	met       *metricSet // metrics.go
	closed    bool
	stateFile string      // saved on every change; "" for none
	saveTimer *time.Timer // a pending coalesced save of status changes

	// saveMu serialises saves: each takes its snapshot under it, so a
	// later save never writes older state.
	saveMu      sync.Mutex
	saveFailing bool // the last save to stateFile failed (and was logged)

	// statusSaveDelay coalesces the saves of status changes; tests pin it.
	statusSaveDelay time.Duration
	// beforeWrite, if set, is called by saves between taking the state and
	// writing it; tests use it to widen races.
	beforeWrite func()

	// jitter returns the delay before a checker's first run; tests pin it.
	jitter func(interval time.Duration) time.Duration
}

// SetDialer makes the TCP and HTTP(S) probes of checkers started after it
// connect through dial (tests route each node's probes through its own
// proxy); nil goes back to a plain net.Dialer.
func (m *Manager) SetDialer(dial DialFunc) {
	m.mu.Lock()
	m.dial = dial
	m.mu.Unlock()
}

// NewManager returns a Manager with no checks; log may be nil.
func NewManager(log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		log:       log,
		checkers:  map[Key]*checker{},
		overrides: map[netip.Addr]*override{},
		pools:     map[[2]string]*override{},
		restored:  map[Key]State{},
		met:       newMetricSet(),

		statusSaveDelay: time.Second,
		jitter: func(iv time.Duration) time.Duration {
			return time.Duration(rand.Int64N(int64(iv)))
		},
	}
}

// Apply sets the checks and the targets to check: it starts checkers for new
// keys, stops removed ones (they have stopped when Apply returns) and keeps
// the state of unchanged ones, so a reload never resets state. A key whose
// check definition changed is restarted with the new definition but keeps
// its status and rise/fall counts. Keys naming a missing or invalid check are logged and skipped.
// New checkers make their first check at a random offset within the
// interval, so checks spread out.
func (m *Manager) Apply(checks map[string]Check, keys []Key) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if m.isClosed() {
		return
	}
	defs := make(map[string]Check, len(checks))
	for name, c := range checks {
		if c.Name == "" {
			c.Name = name
		}
		if err := c.Validate(); err != nil {
			m.log.Error("health check invalid, not run", "check", name, "err", err)
			continue
		}
		defs[name] = c.WithDefaults()
	}
	want := make(map[Key]Check, len(keys))
	for _, k := range keys {
		c, ok := defs[k.Check]
		if !ok {
			if _, named := checks[k.Check]; !named {
				m.log.Error("health check unknown, target not checked", "check", k.Check, "addr", k.Addr)
			}
			continue
		}
		want[k] = c
	}

	var stop, start []*checker
	m.mu.Lock()
	for k, c := range m.checkers {
		if nc, ok := want[k]; !ok || !nc.equal(c.check) {
			stop = append(stop, c)
			delete(m.checkers, k)
			if ok { // redefined: keep the status
				nc := m.newChecker(k, nc)
				nc.m = c.m
				nc.state = c.state
				m.checkers[k] = nc
				start = append(start, nc)
			}
		}
	}
	for k, c := range want {
		if _, ok := m.checkers[k]; ok {
			continue
		}
		nc := m.newChecker(k, c)
		if rs, ok := m.restored[k]; ok {
			m.restore(nc, rs)
		} else if m.seed != nil {
			m.seedChecker(nc, m.seed(k))
		}
		m.checkers[k] = nc
		start = append(start, nc)
	}
	m.restored = map[Key]State{}
	m.mu.Unlock()

	for _, c := range stop {
		c.cancel()
	}
	for _, c := range stop {
		<-c.done
	}
	for _, c := range start {
		go m.run(c)
	}
	if len(stop) > 0 || len(start) > 0 {
		m.log.Info("health checks applied", "targets", len(want), "started", len(start), "stopped", len(stop))
		m.saveSoon()
		m.notify()
	}
}

func (m *Manager) newChecker(k Key, c Check) *checker {
	ctx, cancel := context.WithCancel(context.Background())
	return &checker{key: k, check: c, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// restore makes a restored state provisional on c. Called with m.mu held.
func (m *Manager) restore(c *checker, rs State) {
	if rs.Status == Unknown {
		return
	}
	c.m.status = rs.Status
	c.m.provisional = true
	c.state.Status = rs.Status
	c.state.Since = rs.Since
	c.state.Reason = "restored: " + strings.TrimPrefix(rs.Reason, "restored: ")
}

// SetSeed makes f choose the status a new checker starts from (one with
// no restored state): a fleet node that falls back to its own checks
// starts those of the targets it never probed from the fleet's last
// verdict. A checker seeded Up or Down is not provisional: it leaves that
// status only after rise passes or fall failures, as if it had held it
// (Unknown starts as usual). f is called with the Manager's lock held: it
// must not call the Manager. nil stops seeding.
func (m *Manager) SetSeed(f func(k Key) Status) {
	m.mu.Lock()
	m.seed = f
	m.mu.Unlock()
}

// seedChecker starts c from status s. Called with m.mu held.
func (m *Manager) seedChecker(c *checker, s Status) {
	if s == Unknown {
		return
	}
	c.m.status = s
	c.state.Status = s
	c.state.Since = time.Now()
	c.state.Reason = "seeded from the fleet's verdict: " + s.String() + " until this node's own checks confirm or refute it"
}

func (m *Manager) isClosed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.closed
}

// run is a checker's goroutine.
func (m *Manager) run(c *checker) {
	defer close(c.done)
	ctx := c.ctx
	m.mu.RLock()
	dial := m.dial
	m.mu.RUnlock()
	probe := newProber(c.check, c.key.Addr, dial)
	first := time.NewTimer(m.jitter(c.check.Interval))
	select {
	case <-ctx.Done():
		first.Stop()
		return
	case <-first.C:
	}
	tick := time.NewTicker(c.check.Interval)
	defer tick.Stop()
	for {
		m.once(ctx, c, probe)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// once runs one check and records its result.
func (m *Manager) once(ctx context.Context, c *checker, probe prober) {
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, c.check.Timeout)
	pass, reason := probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return // stopped mid-check: the result means nothing
	}
	lat := time.Since(start)
	m.mu.Lock()
	if m.checkers[c.key] != c {
		m.mu.Unlock()
		return
	}
	old := c.m.status
	changed := c.m.step(pass, c.check.Rise, c.check.Fall)
	now := time.Now()
	c.state.Status = c.m.status
	c.state.Reason = reason
	c.state.LastLatency = lat
	c.state.LastCheck = start
	if changed {
		c.state.Since = now
	}
	status := c.m.status
	onResult := m.onResult
	m.mu.Unlock()
	m.met.observe(lat, pass, old, status)
	if onResult != nil {
		onResult(c.key, lat, pass, old, status)
	}
	if changed {
		lvl := slog.LevelInfo
		if status == Down {
			lvl = slog.LevelWarn
		}
		m.log.Log(context.Background(), lvl, "target "+status.String(), "key", c.key.String(),
			"from", old.String(), "to", status.String(), "reason", reason)
		m.saveSoon()
		m.notify()
	}
}
