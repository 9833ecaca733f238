package main

import (
	"log/slog"

	"github.com/miekg/dns"
	"net/netip"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
)

// healthWiring connects the health checker to the snapshots the server
// answers from.
type healthWiring struct {
	manager *health.Manager
	srv     *dnsserver.Server

	mu    sync.Mutex
	pools map[[2]string]poolState // operator overrides by record and pool

	metrics *metrics.Metrics
	// stateFile keeps target states and overrides across restarts.
	stateFile string
	saveMu    sync.Mutex
	log       *slog.Logger
}

// save writes the health state file, if one is configured.
func (h *healthWiring) save() {
	if h.stateFile == "" {
		return
	}
	h.saveMu.Lock()
	defer h.saveMu.Unlock()
	if err := h.manager.SaveState(h.stateFile); err != nil {
		h.log.Warn("health state file not saved", "file", h.stateFile, "err", err)
	}
}

// counts tallies the checked targets by status, for the metrics gauge.
func (h *healthWiring) counts() (up, down, unknown int) {
	for _, s := range h.manager.Snapshot() {
		switch s.Status {
		case health.Up:
			up++
		case health.Down:
			down++
		default:
			unknown++
		}
	}
	return
}

// reloaded counts a reload attempt.
func (h *healthWiring) reloaded(ok bool) {
	if h.metrics != nil {
		h.metrics.Reload(ok)
	}
}

type poolState struct {
	o       health.Override // up, down or drain
	expires time.Time
}

func newHealth(log *slog.Logger, srv *dnsserver.Server) *healthWiring {
	h := &healthWiring{manager: health.NewManager(log), srv: srv, pools: map[[2]string]poolState{}, log: log}
	h.manager.OnChange(func() {
		h.refresh()
		h.save()
	})
	return h
}

// refresh recomputes the current snapshot's usable pools and addresses.
func (h *healthWiring) refresh() {
	if s := h.srv.Handler().Snapshot(); s.Policies != nil {
		s.Policies.SetHealth(h.usable, h.poolOverride)
	}
}

// poolOverride is the operator's state for a pool, if any and unexpired.
func (h *healthWiring) poolOverride(record, pool string) policy.PoolOverride {
	st, ok := h.poolState(record, pool)
	if !ok {
		return policy.PoolAuto
	}
	if st.o == health.OverrideUp {
		return policy.PoolUp
	}
	return policy.PoolDown
}

func (h *healthWiring) poolState(record, pool string) (poolState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.pools[[2]string{record, pool}]
	if ok && !st.expires.IsZero() && time.Now().After(st.expires) {
		delete(h.pools, [2]string{record, pool})
		return poolState{}, false
	}
	return st, ok
}

// setPool sets (or with OverrideNone, "auto", clears) an operator override for a pool,
// and recomputes answers now and again when it expires.
func (h *healthWiring) setPool(record, pool string, o health.Override, expires time.Time) {
	h.mu.Lock()
	k := [2]string{record, pool}
	if o == health.OverrideNone {
		delete(h.pools, k)
	} else {
		h.pools[k] = poolState{o, expires}
	}
	h.mu.Unlock()
	h.refresh()
	if !expires.IsZero() {
		time.AfterFunc(time.Until(expires)+10*time.Millisecond, h.refresh)
	}
}

func (h *healthWiring) usable(a netip.Addr, check string) bool {
	return h.manager.Usable(health.Key{Addr: a, Check: check})
}

// prepare starts and stops checkers for snap's pools (keeping the state
// of targets that stay) and gives snap the current health before it is
// swapped in.
func (h *healthWiring) prepare(snap *snapshot.Snapshot) {
	h.manager.Apply(snap.HealthChecks, snap.HealthKeys())
	if snap.Policies != nil && h.metrics != nil {
		var names []string
		var pools [][]string
		for _, r := range snap.Policies.Records {
			names = append(names, r.Name)
			var ps []string
			for _, p := range r.Pools {
				ps = append(ps, p.Name)
			}
			pools = append(pools, ps)
		}
		var rules []int
		for _, r := range snap.Policies.Records {
			rules = append(rules, len(r.Rules))
		}
		h.metrics.SetRecords(names, pools, rules)
		snap.Policies.Observe = h.metrics.Steered
		snap.Policies.Decided = h.metrics.Decision
	}
	if snap.Policies != nil {
		snap.Policies.SetHealth(h.usable, h.poolOverride)
	}
}

// wireMetrics connects health results and the current snapshot's state to
// the metrics read at scrape time.
func (h *healthWiring) wireMetrics(m *metrics.Metrics) {
	h.manager.OnResult(func(_ health.Key, took time.Duration, pass bool, from, to health.Status) {
		m.CheckDone(took, pass)
		if from != to {
			m.Transition(to.String())
		}
	})
	m.SetHealthDetail(func() ([]metrics.TargetState, []metrics.PoolState) {
		snap := h.srv.Handler().Snapshot()
		if snap.Policies == nil {
			return nil, nil
		}
		var ts []metrics.TargetState
		var ps []metrics.PoolState
		t := snap.Policies
		for _, r := range t.Records {
			up := t.Up(r, dns.TypeA) | t.Up(r, dns.TypeAAAA)
			for _, p := range r.Pools {
				ps = append(ps, metrics.PoolState{Record: r.Name, Pool: p.Name, Up: up&(1<<p.Index) != 0})
				if p.Check == "" {
					continue
				}
				for _, a := range p.Addrs() {
					ts = append(ts, metrics.TargetState{Record: r.Name, Pool: p.Name, Address: a.String(), Check: p.Check,
						Up: h.usable(a, p.Check)})
				}
			}
		}
		return ts, ps
	})
	m.SetGeo(func() map[string]time.Time {
		snap := h.srv.Handler().Snapshot()
		out := map[string]time.Time{}
		if snap.Geo != nil {
			for _, d := range snap.Geo.DBs {
				out[d.Name] = d.Built
			}
		}
		return out
	})
}
