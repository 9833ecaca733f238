package anycast

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// Announcer is what the controller drives: the BGP speaker, or a fake in
// the controller's unit tests.
type Announcer interface {
	Announce(prepend int) error
	Withdraw() error
}

// Options configures a Controller.
type Options struct {
	// Standby: peered but not announced until ControlAnnounce.
	Standby bool
	// Prepend is how many copies of the local AS to originate while
	// overloaded; QPSAbove is the query rate that means overloaded (0: off).
	Prepend  int
	QPSAbove float64
	// Conditions returns the conditions the controller does not own
	// ("config", "geo", "health"), in the order their failures should be
	// reported. It is called on every evaluation.
	Conditions func() []Condition
	// SelfCheck, when set, is one more condition, "self_check", placed
	// after the first of Conditions (the configuration).
	SelfCheck *SelfCheck
	// Queries returns the number of DNS queries answered so far.
	Queries func() uint64
	// Every is how often the conditions are evaluated (default 200ms).
	Every time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// State is the controller's view, for the admin API and metrics.
type State struct {
	Mode       string // "active" or "standby"
	Control    Control
	Announced  bool
	Prepend    int // copies of the local AS originated (0: none)
	Reason     string
	Detail     string
	Since      time.Time // of the last transition (or the start)
	Conditions []Condition
	QPS        float64
	Overloaded bool
	// Transitions counts changes of what is announced, by reason.
	Transitions map[string]uint64
}

// Controller decides from its inputs whether the prefixes are announced
// and drives the Announcer to match, logging and counting every change.
type Controller struct {
	o   Options
	ann Announcer
	log *slog.Logger

	poke chan struct{}

	mu          sync.Mutex
	control     Control
	announced   bool
	prepend     int
	reason      string
	detail      string
	since       time.Time
	conds       []Condition
	ov          overload
	transitions map[string]uint64
	stopped     bool // after Shutdown: nothing is announced again
}

// NewController returns a controller driving ann; nothing is announced
// until Run evaluates the inputs.
func NewController(ann Announcer, o Options) *Controller {
	if o.Every <= 0 {
		o.Every = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{o: o, ann: ann, log: o.Log, poke: make(chan struct{}, 1),
		reason: "starting", detail: "not evaluated yet", since: o.Now(),
		transitions: map[string]uint64{}}
	c.ov.threshold = o.QPSAbove
	return c
}

// Poke asks for an evaluation now rather than at the next tick.
func (c *Controller) Poke() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Run evaluates the inputs every Options.Every (and when poked) until ctx
// ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.o.Every)
	defer t.Stop()
	for {
		c.Evaluate()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.poke:
		}
	}
}

// SetControl sets the operator's control and evaluates at once.
func (c *Controller) SetControl(ctl Control) {
	c.mu.Lock()
	old := c.control
	c.control = ctl
	c.mu.Unlock()
	if old != ctl {
		c.log.Info("anycast: operator control", "control", ctl.String(), "was", old.String())
	}
	c.Evaluate()
}

// conditions gathers every condition, the self-check second.
func (c *Controller) conditions() []Condition {
	var ext []Condition
	if c.o.Conditions != nil {
		ext = c.o.Conditions()
	}
	if c.o.SelfCheck == nil {
		return ext
	}
	ok, why := c.o.SelfCheck.State()
	sc := Condition{Name: "self_check", OK: ok, Detail: why}
	if len(ext) == 0 {
		return []Condition{sc}
	}
	out := append([]Condition{ext[0], sc}, ext[1:]...)
	return out
}

// Evaluate reads the inputs once and announces, re-announces or
// withdraws as Decide says.
func (c *Controller) Evaluate() {
	conds := c.conditions()
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.o.Queries != nil {
		c.ov.sample(now, c.o.Queries())
	}
	c.conds = conds
	if c.stopped {
		return
	}
	d := Decide(c.o.Standby, c.control, conds, c.ov.on, c.o.Prepend)
	if d.Announce == c.announced && (!d.Announce || d.Prepend == c.prepend) {
		// Nothing to change on the wire; keep the reason current while
		// withdrawn (e.g. standby, then a failing check).
		if !c.announced {
			c.reason, c.detail = d.Reason, d.Detail
		}
		if c.announced && d.Reason != c.reason {
			c.reason, c.detail = d.Reason, d.Detail
		}
		return
	}
	c.apply(d, now)
}

// apply puts d on the wire; called with c.mu held. A failure is logged
// and retried at the next evaluation.
func (c *Controller) apply(d Decision, now time.Time) {
	var err error
	action := "withdrawn"
	if d.Announce {
		action = "announced"
		if d.Prepend > 0 {
			action = "announced with prepended AS path"
		} else if c.announced {
			action = "announced without prepending"
		}
		err = c.ann.Announce(d.Prepend)
	} else {
		err = c.ann.Withdraw()
	}
	if err != nil {
		c.log.Error("anycast: BGP update failed; retrying", "want", action, "reason", d.Reason, "err", err)
		return
	}
	took := now.Sub(c.since)
	c.announced, c.prepend = d.Announce, d.Prepend
	c.reason, c.detail, c.since = d.Reason, d.Detail, now
	c.transitions[d.Reason]++
	lv := slog.LevelInfo
	if !d.Announce && d.Reason != ReasonStandby && d.Reason != ReasonShutdown {
		lv = slog.LevelWarn
	}
	c.log.Log(context.Background(), lv, "anycast: prefixes "+action, "reason", d.Reason, "detail", d.Detail,
		"prepend", d.Prepend, "qps", int(c.ov.rate), "previous_state_lasted", took.Round(time.Millisecond))
}

// Shutdown withdraws the prefixes for good (reason "shutdown") and reports
// whether they had been announced. Later evaluations change nothing.
func (c *Controller) Shutdown() (wasAnnounced bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	was := c.announced
	if !was {
		c.reason, c.detail = ReasonShutdown, "shutting down"
		return false, nil
	}
	if err := c.ann.Withdraw(); err != nil {
		return true, err
	}
	now := c.o.Now()
	c.announced, c.prepend = false, 0
	c.reason, c.detail, c.since = ReasonShutdown, "shutting down: withdrawn before the DNS listeners close", now
	c.transitions[ReasonShutdown]++
	c.log.Info("anycast: prefixes withdrawn", "reason", ReasonShutdown)
	return true, nil
}

// State returns the controller's current view.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	mode := "active"
	if c.o.Standby {
		mode = "standby"
	}
	return State{
		Mode: mode, Control: c.control, Announced: c.announced, Prepend: c.prepend,
		Reason: c.reason, Detail: c.detail, Since: c.since,
		Conditions: append([]Condition(nil), c.conds...),
		QPS:        c.ov.rate, Overloaded: c.ov.on,
		Transitions: maps.Clone(c.transitions),
	}
}
