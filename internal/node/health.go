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
	// seen is the states of the pools of table (the one setLocked last
	// set) as last logged: record r's pools from seen[off[r]], in its
	// order. Slices by record index, not a map by name: 36 bytes a
	// three-pool record, not 240 (issue 31).
	table   *policy.Table
	off     []int32
	seen    []poolSeen
	allDown map[string]bool // records last seen failing open (only those)

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
		allDown: map[string]bool{}}
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

// poolSeen is a pool's state as last logged. There is one per pool of
// every steered record, so it is kept small: the state as its index in
// poolStates and the time as Unix nanoseconds.
type poolSeen struct {
	why string
	// since is when the state was first seen (the dashboard shows it),
	// in Unix nanoseconds; first is set while that was the pool's first
	// sighting.
	since int64
	state uint8 // in poolStates
	ovr   bool  // set by the operator
	first bool
	known bool // seen at all
}

// seenOf returns the state last logged of pool (by name) of the record
// named record in the table last set, if any; the caller holds h.mu.
func (h *healthWiring) seenOf(record, pool string) (poolSeen, bool) {
	r := h.table.Get(record)
	if r == nil || r.Index+1 >= len(h.off) {
		return poolSeen{}, false
	}
	for j, p := range r.Pools {
		if p.Name == pool {
			s := h.seen[int(h.off[r.Index])+j]
			return s, s.known
		}
	}
	return poolSeen{}, false
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
	s, ok := h.seenOf(record, pool)
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
	now := time.Now().UnixNano()
	tab := t.Table()
	prevTab, prevOff, prevSeen := h.table, h.off, h.seen
	if tab != prevTab {
		// Another table (a reload): its own slices, each record's states
		// taken from the record of the same name (its pools by name).
		n := 0
		for _, r := range tab.Records {
			n += len(r.Pools)
		}
		h.table, h.off, h.seen = tab, make([]int32, len(tab.Records)+1), make([]poolSeen, n)
		n = 0
		for i, r := range tab.Records {
			h.off[i] = int32(n)
			n += len(r.Pools)
		}
		h.off[len(tab.Records)] = int32(n)
	}
	for i, r := range tab.Records {
		all := true
		seen := h.seen[h.off[i]:h.off[i+1]]
		var old *policy.Record // the previous table's record, when another
		if tab != prevTab {
			if o := prevTab.Get(r.Name); o != nil && o.Index+1 < len(prevOff) {
				old = o
			}
		}
		for j, p := range r.Pools {
			state, why, ovr := t.PoolState(r, p)
			if state == "up" {
				all = false
			}
			cur := poolSeen{state: poolStateCode(state), why: why, ovr: ovr, since: now, first: true, known: true}
			prev := seen[j]
			if old != nil {
				prev = poolSeen{}
				for k, op := range old.Pools {
					if op.Name == p.Name {
						prev = prevSeen[int(prevOff[old.Index])+k]
						break
					}
				}
			}
			ok := prev.known
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
	for name := range h.allDown {
		if tab.Get(name) == nil {
			delete(h.allDown, name) // a record no table has any more
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
