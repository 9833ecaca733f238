package node

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
)

// healthWiring connects the health manager (checks, target and pool
// overrides, the state file) to the snapshots the server answers from,
// and logs each pool transition once.
type healthWiring struct {
	manager *health.Manager
	current func() *snapshot.Snapshot // the snapshot being served
	met     *metrics.Metrics
	log     *slog.Logger

	// mu is held while health is set on a table: by refresh on the
	// served one, and by hold across a swap, so a change of health
	// lands on the old table before the swap or on the new one after.
	mu        sync.Mutex
	stateFile string
	last      map[string]seenRecord // record -> its pools' states last logged
	allDown   map[string]bool       // records last seen failing open (only those)
	gen       uint32                // setLocked calls, for last (wrapping is harmless: compared for equality)

	// onCheck, when set, receives every check's resulting status (the
	// fleet publishes them).
	onCheck atomic.Pointer[func(health.Key, health.Status)]
	// filter, when set, chooses the keys this node checks itself (a
	// fleet spreads the probes); snap is the snapshot last prepared.
	filter atomic.Pointer[func([]health.Key) []health.Key]
	snap   atomic.Pointer[snapshot.Snapshot]
	// afterRefresh, when set, is called after the served table's health
	// was recomputed (zone transfers re-export steered names).
	afterRefresh atomic.Pointer[func()]
}

// reapply runs the checks the filter chooses now, on the last snapshot.
func (h *healthWiring) reapply() {
	if snap := h.snap.Load(); snap != nil {
		h.manager.Apply(snap.HealthChecks, h.keys(snap))
	}
}

func (h *healthWiring) keys(snap *snapshot.Snapshot) []health.Key {
	keys := snap.HealthKeys()
	if f := h.filter.Load(); f != nil {
		keys = (*f)(keys)
	}
	return keys
}

func newHealth(log *slog.Logger, current func() *snapshot.Snapshot, met *metrics.Metrics, reg prometheus.Registerer) *healthWiring {
	h := &healthWiring{manager: health.NewManager(log), current: current, met: met, log: log,
		last: map[string]seenRecord{}, allDown: map[string]bool{}}
	h.manager.OnChange(h.refresh)
	h.manager.OnResult(func(k health.Key, took time.Duration, pass bool, from, to health.Status) {
		log.Debug("health check", "target", k.Addr.String(), "check", k.Check, "pass", pass, "status", to.String(),
			"took", took.Round(time.Microsecond))
		if f := h.onCheck.Load(); f != nil {
			(*f)(k, to)
		}
	})
	if err := h.manager.RegisterMetrics(reg); err != nil {
		panic(err) // registered once per node, in a registry of its own
	}
	return h
}

// seenRecord is the pools of a steered record as last logged, in the
// record's order then, and the setLocked call that saw it last. One entry
// a record (not one a pool), updated in place while its pools stay.
type seenRecord struct {
	pools []poolSeen
	gen   uint32
}

// find returns the pool named name.
func (s seenRecord) find(name string) (poolSeen, bool) {
	for _, p := range s.pools {
		if p.pool == name {
			return p, true
		}
	}
	return poolSeen{}, false
}

// poolSeen is a pool's state as last logged. There is one per pool of
// every steered record, so it is kept small: the state as its index in
// poolStates and the time as Unix nanoseconds.
type poolSeen struct {
	pool, why string
	// since is when the state was first seen (the dashboard shows it),
	// in Unix nanoseconds; first is set while that was the pool's first
	// sighting.
	since int64
	state uint8 // in poolStates
	ovr   bool  // set by the operator
	first bool
}

// poolStates are the words policy.Live.PoolState says, by poolSeen.state.
var poolStates = [...]string{"up", "down", "drain", "disabled"}

func poolStateCode(state string) uint8 {
	for i, s := range poolStates {
		if s == state {
			return uint8(i)
		}
	}
	panic("node: unknown pool state " + state)
}

// setStateFile makes the manager keep its state (target statuses, target
// and pool overrides with their expiries) in f ("" keeps none), restoring
// it the first time a file is named.
func (h *healthWiring) setStateFile(f string) {
	h.mu.Lock()
	same := f == h.stateFile
	h.stateFile = f
	h.mu.Unlock()
	if same {
		return
	}
	if f != "" {
		if err := h.manager.LoadState(f); err != nil {
			h.log.Error("health state file not restored; starting without its overrides", "file", f, "err", err)
		}
	}
	h.manager.SetStateFile(f)
}

func (h *healthWiring) close() { h.manager.Close() }

// poolSince returns when pool of record came to its state as this node
// saw it, and whether that was its first sighting (the node's start or
// the reload that added it) rather than a change.
func (h *healthWiring) poolSince(record, pool string) (since time.Time, first, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.last[record].find(pool)
	if !ok {
		return time.Time{}, false, false
	}
	return time.Unix(0, s.since), s.first, true
}

// poolOverride is the operator's state for a pool, as policy takes it.
func (h *healthWiring) poolOverride(record, pool string) policy.PoolOverride {
	o, _, ok := h.manager.PoolOverride(record, pool)
	if !ok {
		return policy.PoolAuto
	}
	switch o {
	case health.OverrideUp:
		return policy.PoolUp
	case health.OverrideDrain:
		return policy.PoolDrain
	}
	return policy.PoolDown
}

func (h *healthWiring) usable(a netip.Addr, check string) bool {
	return h.manager.Usable(health.Key{Addr: a, Check: check})
}

// refresh recomputes the served snapshot's usable pools and addresses and
// logs what changed (the manager's OnChange).
func (h *healthWiring) refresh() {
	h.mu.Lock()
	if s := h.current(); s != nil && s.Policies != nil {
		h.setLocked(s.Live)
	}
	h.mu.Unlock()
	if f := h.afterRefresh.Load(); f != nil {
		(*f)()
	}
}

// hold gives t the current health and keeps every change of health
// waiting until release is called: the swap serving t runs between, so
// t gets the health once and no change is lost.
func (h *healthWiring) hold(t *policy.Live) (release func()) {
	h.mu.Lock()
	if t != nil {
		h.setLocked(t)
	}
	return h.mu.Unlock
}

// setLocked sets the health on t and logs one line per pool whose state
// changed since the last call (record, pool, from, to, reason) and one
// per record that starts or stops failing open (no usable pool:
// answering with all); the caller holds h.mu.
func (h *healthWiring) setLocked(t *policy.Live) {
	t.SetHealth(h.usable, h.poolOverride)
	h.gen++
	now := time.Now().UnixNano()
	for _, r := range t.Table().Records {
		all := true
		old := h.last[r.Name]
		seen := old.pools // updated in place while the record's pools are the same
		if len(seen) != len(r.Pools) {
			seen = nil
		}
		for j, p := range r.Pools {
			if seen != nil && seen[j].pool != p.Name {
				seen = nil
			}
		}
		if seen == nil {
			seen = make([]poolSeen, len(r.Pools))
		}
		for j, p := range r.Pools {
			state, why, ovr := t.PoolState(r, p)
			if state == "up" {
				all = false
			}
			cur := poolSeen{pool: p.Name, state: poolStateCode(state), why: why, ovr: ovr, since: now, first: true}
			prev, ok := old.find(p.Name)
			if ok && prev.state == cur.state {
				cur.since, cur.first = prev.since, prev.first
			} else if ok {
				cur.first = false
			}
			seen[j] = cur
			prev.since, prev.first = cur.since, cur.first // compared without them
			switch {
			case !ok:
				if state != "up" {
					h.log.Warn("pool not in service", "record", r.Name, "pool", p.Name, "state", state, "reason", why)
				}
			case prev == cur:
			case ovr, prev.ovr && state == "up":
				// The health manager's override line already said it.
			default:
				lvl := slog.LevelInfo
				if state != "up" {
					lvl = slog.LevelWarn
				}
				h.log.Log(context.Background(), lvl, "pool "+state, "record", r.Name, "pool", p.Name, "from", poolStates[prev.state], "to", state, "reason", why)
			}
		}
		h.last[r.Name] = seenRecord{pools: seen, gen: h.gen}
		all = all && len(r.Pools) > 0 && r.Enabled != 0
		if all != h.allDown[r.Name] {
			if all {
				h.log.Error("record has no usable pool: failing open", "record", r.Name, "when_all_down", r.WhenAllDown)
			} else {
				h.log.Info("record has a usable pool again", "record", r.Name)
			}
		}
		if all {
			h.allDown[r.Name] = true
		} else {
			delete(h.allDown, r.Name)
		}
	}
	for k, v := range h.last {
		if v.gen != h.gen {
			delete(h.last, k) // a record no table has any more
		}
	}
}

// prepare starts and stops checkers for snap's pools (keeping the state
// of targets that stay) before snap is swapped in (see hold).
func (h *healthWiring) prepare(snap *snapshot.Snapshot) {
	h.snap.Store(snap)
	h.manager.SetTargetLabels(snap.Config != nil && snap.Config.Metrics.TargetLabels)
	h.manager.Apply(snap.HealthChecks, h.keys(snap))
	if snap.Policies == nil {
		return
	}
	h.met.SetRecords(snap.MetricRecords())
}
