package fleetnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
)

// Pools' loads (capacity feedback) are fleet-wide in a fleet: PUT
// /v1/load on any node writes them to the store (P/load/RECORD/POOL, no
// lease: the load's own time says how old it is, and every node ignores
// it once it is older than load.stale_after), and every node follows
// them into its feedback loop, so one feed reaches all nodes. A load the
// store does not take is pending on the node that took it and written
// when the store answers, unless it turned stale meanwhile.

// Load is one pool's load as the store holds it.
type Load struct {
	Record  string    `json:"record"`
	Pool    string    `json:"pool"`
	Current float64   `json:"current"`
	At      time.Time `json:"at"`
}

func loadPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/load/" }

func loadKey(prefix, record, pool string) string {
	return loadPrefix(prefix) + url.PathEscape(record) + "/" + url.PathEscape(pool)
}

// PutLoads writes loads to the store in one transaction. When the store
// does not take them within directWrite (or the node knows it is cut
// off), they are kept as pending, the latest per pool, and written by
// flushLoads when the store answers, unless they have turned stale by
// then (older than staleAfter: dropped, not written late, where every
// node would ignore them anyway); the error then wraps ErrPending. The
// caller has applied them on this node already.
func (m *Member) PutLoads(loads []Load, staleAfter time.Duration) error {
	kvs := make([]fleet.KV, 0, len(loads))
	for _, l := range loads {
		v, err := json.Marshal(l)
		if err != nil {
			return err
		}
		kvs = append(kvs, fleet.KV{Key: loadKey(m.prefix, l.Record, l.Pool), Value: v})
	}
	var cause error
	if m.storeDown() {
		cause = errors.New("the store does not answer")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), directWrite)
		_, _, cause = m.store.Txn(ctx, nil, kvs, nil)
		cancel()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, l := range loads {
		k := kvs[i].Key
		old, held := m.pendingLoads[k]
		switch {
		case held && old.At.After(l.At):
			// A newer load of the pool is pending: it goes, this one not.
		case cause == nil:
			delete(m.pendingLoads, k) // a newer load replaces a pending one
		default:
			m.pendingLoads[k] = pendingLoad{Load: l, Value: kvs[i].Value, Drop: l.At.Add(staleAfter)}
		}
	}
	if cause == nil {
		return nil
	}
	select {
	case m.loadKick <- struct{}{}:
	default:
	}
	return fmt.Errorf("%w: %v", ErrPending, cause)
}

// pendingLoad is a load the store has not taken yet, with when it turns
// stale.
type pendingLoad struct {
	Load
	Value []byte
	Drop  time.Time
}

// Bounds of flushLoads' backoff between failed writes.
const (
	loadRetryMin = 100 * time.Millisecond
	loadRetryMax = 5 * time.Second
)

// flushLoads writes the pending loads to the store whenever there are
// some, until ctx ends: at once when kicked (a load was left pending, or
// the store answers again), else after a backoff that doubles with each
// failed attempt from loadRetryMin to loadRetryMax. Each is written only
// if the store holds no newer load of its pool (compare-and-swap on the
// key as read), so a late write never replaces another node's newer
// value; one turned stale is dropped, counted and logged.
func (m *Member) flushLoads(ctx context.Context) {
	wait := loadRetryMin
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.loadKick:
			wait = loadRetryMin
		case <-timer.C:
		}
		n, err := m.writePendingLoads(ctx)
		switch {
		case n == 0:
			wait = loadRetryMax // nothing pending: idle until kicked
		case err != nil:
			wait = min(2*wait, loadRetryMax)
			m.log.Debug("fleet: pending loads not written yet", "count", n, "err", err, "retry_in", wait)
		default:
			wait = loadRetryMin // some left (more than one transaction, or a race): go on
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// writePendingLoads drops the pending loads that turned stale and
// writes up to fleet.MaxTxnOps of the others in one transaction; it
// returns how many are still pending and why the write failed.
func (m *Member) writePendingLoads(ctx context.Context) (int, error) {
	now := time.Now()
	m.mu.Lock()
	var items []pendingLoad
	for k, p := range m.pendingLoads {
		if !p.Drop.After(now) {
			delete(m.pendingLoads, k)
			m.loadsDropped.Add(1)
			m.log.Warn("fleet: a load put while the store was unreachable turned stale before the store took it; dropped, not written late",
				"record", p.Record, "pool", p.Pool, "load", p.Current, "at", p.At)
			continue
		}
		items = append(items, p)
	}
	m.mu.Unlock()
	if len(items) == 0 {
		return 0, nil
	}
	if m.storeDown() {
		return len(items), errors.New("the store does not answer")
	}
	sort.Slice(items, func(i, j int) bool { return items[i].At.Before(items[j].At) })
	items = items[:min(len(items), fleet.MaxTxnOps)]
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	kvs, _, err := m.store.Get(rctx, loadPrefix(m.prefix))
	cancel()
	if err != nil {
		return len(items), err
	}
	stored := make(map[string]fleet.KV, len(kvs))
	for _, kv := range kvs {
		stored[kv.Key] = kv
	}
	var cmps []fleet.Cmp
	var puts []fleet.KV
	var newer, written []pendingLoad
	for _, p := range items {
		k := loadKey(m.prefix, p.Record, p.Pool)
		kv, ok := stored[k]
		var held Load
		if ok && json.Unmarshal(kv.Value, &held) == nil && !held.At.Before(p.At) {
			newer = append(newer, p) // the store has a load of the pool as new: keep it
			continue
		}
		if ok {
			cmps = append(cmps, fleet.ModRevIs(k, kv.Rev))
		} else {
			cmps = append(cmps, fleet.Absent(k))
		}
		puts = append(puts, fleet.KV{Key: k, Value: p.Value})
		written = append(written, p)
	}
	var rev int64
	if len(puts) > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		var ok bool
		ok, rev, err = m.store.Txn(wctx, cmps, puts, nil)
		cancel()
		if err != nil {
			return len(items), err
		}
		if !ok {
			return len(items), nil // another node wrote meanwhile: read again
		}
	}
	m.mu.Lock()
	for _, p := range append(newer, written...) {
		k := loadKey(m.prefix, p.Record, p.Pool)
		if cur, ok := m.pendingLoads[k]; ok && cur.At.Equal(p.At) {
			delete(m.pendingLoads, k)
		}
	}
	left := len(m.pendingLoads)
	m.mu.Unlock()
	if len(written) > 0 {
		var names []string
		for _, p := range written {
			names = append(names, p.Record+"/"+p.Pool)
		}
		m.log.Info("fleet: loads put while the store was unreachable are written to it", "pools", strings.Join(names, " "), "revision", rev)
	}
	return left, nil
}

// PendingLoads describes the loads this node applies that the store has
// not taken yet, one line each ("fleet: load shop.example.com./a 140 at
// 2026-01-02T03:04:05Z").
func (m *Member) PendingLoads() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.pendingLoads))
	for _, p := range m.pendingLoads {
		out = append(out, fmt.Sprintf("fleet: load %s/%s %g at %s", p.Record, p.Pool, p.Current, p.At.UTC().Format(time.RFC3339)))
	}
	sort.Strings(out)
	return out
}

// FollowLoads calls apply with every load in the store, at once and at
// each change, until ctx ends (or Close). Values that do not read are
// skipped with a warning.
func (m *Member) FollowLoads(ctx context.Context, apply func([]Load)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.followView(ctx, loadPrefix(m.prefix), func(view map[string][]byte, _ int64) {
			out := make([]Load, 0, len(view))
			for key, v := range view {
				var l Load
				if err := json.Unmarshal(v, &l); err != nil || l.Record == "" || l.Pool == "" {
					m.log.Warn("fleet: a load in the store cannot be read", "key", key)
					continue
				}
				out = append(out, l)
			}
			apply(out)
		})
	}()
}
