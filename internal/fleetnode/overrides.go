package fleetnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
)

// Operator overrides are fleet-wide in a fleet: the admin API of any node
// writes them to the store (P/overrides/target/ADDR and
// P/overrides/pool/RECORD/POOL, no lease: they outlive the node that set
// them), and every node follows them into its health manager. An override
// set to auto is deleted.

type storedOverride struct {
	State   string    `json:"state"`
	Expires time.Time `json:"expires,omitzero"`
}

func overridesPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/overrides/" }

func targetOverrideKey(prefix string, a netip.Addr) string {
	return overridesPrefix(prefix) + "target/" + a.String()
}

func poolOverrideKey(prefix, record, pool string) string {
	return overridesPrefix(prefix) + "pool/" + url.PathEscape(record) + "/" + url.PathEscape(pool)
}

// SetTargetOverride writes (or, for auto, deletes) an override of target
// address a for the fleet; every node (this one too) applies it as it
// follows the store.
func (m *Member) SetTargetOverride(a netip.Addr, o health.Override, expires time.Time) error {
	return m.setOverride(targetOverrideKey(m.prefix, a), o, expires)
}

// SetPoolOverride writes (or, for auto, deletes) an override of record's
// pool for the fleet.
func (m *Member) SetPoolOverride(record, pool string, o health.Override, expires time.Time) error {
	return m.setOverride(poolOverrideKey(m.prefix, record, pool), o, expires)
}

// setOverride writes (or, for auto, deletes) an override for the fleet.
// When the store does not take it within directWrite (the node is cut
// off, or the store lost its quorum), the override is kept as pending:
// on disk (PendingFile), over the store's view of this node, and written
// to the store as soon as it answers; the error then wraps ErrPending (the caller applies the
// override on this node itself, before calling).
func (m *Member) setOverride(key string, o health.Override, expires time.Time) error {
	var value []byte
	if o != health.OverrideNone {
		value, _ = json.Marshal(storedOverride{State: o.String(), Expires: expires})
	}
	var cause error
	if m.storeDown() {
		// Known cut off: no need to wait for a write to time out.
		cause = errors.New("the store does not answer")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), directWrite)
		var rev int64
		rev, cause = m.writeOverride(ctx, key, value)
		cancel()
		if cause == nil {
			// Kept over the view until it reaches rev, as SetOverrides
			// does: a view read before the write does not undo what the
			// caller applied, and the view that takes it over clears it
			// if the key is gone by then (followOverrides).
			m.mu.Lock()
			// (An older pending value of the key, not written yet, is
			// replaced: it must not be written after this one.)
			if cur, ok := m.pending[key]; !ok || cur.Written < rev {
				m.pending[key] = pendingOverride{Value: value, SetAt: time.Now(), Expires: expires, Written: rev}
			}
			m.mu.Unlock()
			m.savePending()
			return nil
		}
	}
	m.mu.Lock()
	m.pending[key] = pendingOverride{Value: value, SetAt: time.Now(), Expires: expires}
	m.mu.Unlock()
	m.savePending()
	select {
	case m.flushKick <- struct{}{}:
	default:
	}
	return fmt.Errorf("%w: %v", ErrPending, cause)
}

// directWrite bounds the API's wait for the store before an override is
// answered as pending (a write to a healthy store takes milliseconds; a
// loaded one may take a second or more).
const directWrite = 3 * time.Second

// ErrPending says an override is applied on this node only, for now: the
// store did not take it, and it is written there when it answers.
var ErrPending = errors.New("not written to the fleet's store yet")

func (m *Member) writeOverride(ctx context.Context, key string, value []byte) (int64, error) {
	var rev int64
	var err error
	if value == nil {
		_, rev, err = m.store.Txn(ctx, nil, []fleet.KV{m.guardPut()}, []string{key})
	} else {
		_, rev, err = m.store.Txn(ctx, nil, []fleet.KV{{Key: key, Value: value}, m.guardPut()}, nil)
	}
	return rev, err
}

// written marks the pending override of key, if it is still the one set
// at setAt (nil: any), as taken by the store at rev: it stays over the
// view until the view has reached rev, so the view read before the write
// never undoes it.
func (m *Member) written(key string, setAt *time.Time, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.pending[key]; ok && (setAt == nil || cur.SetAt.Equal(*setAt)) {
		cur.Written = rev
		m.pending[key] = cur
	}
}

// storeDown says the node's last status write failed: it is cut off.
func (m *Member) storeDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failing
}

// pendingOverride is an override the store has not taken yet; Value nil
// deletes the key (auto).
type pendingOverride struct {
	Value   json.RawMessage `json:"value,omitempty"`
	SetAt   time.Time       `json:"set_at"`
	Expires time.Time       `json:"expires,omitzero"`
	// Written is the revision at which the store took it (0: not yet).
	Written int64 `json:"-"`
}

// waiting counts the overrides the store has not taken (m.mu held).
func (m *Member) waiting() int {
	n := 0
	for _, po := range m.pending {
		if po.Written == 0 {
			n++
		}
	}
	return n
}

// PendingFile holds the pending overrides, by key, in the state
// directory's fleet directory.
const PendingFile = "pending-overrides.json"

func (m *Member) savePending() {
	f := stateFile(m.stateDir, PendingFile)
	if f == "" {
		return
	}
	m.mu.Lock()
	keep := map[string]pendingOverride{}
	for k, po := range m.pending {
		if po.Written == 0 {
			keep[k] = po
		}
	}
	data, err := json.Marshal(keep)
	m.mu.Unlock()
	if err == nil {
		tmp := f + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, f)
		}
	}
	if err != nil {
		m.log.Warn("fleet: the pending overrides could not be kept on disk", "file", f, "err", err)
	}
}

// loadPending reads the overrides left pending by a previous run.
func (m *Member) loadPending() {
	m.pending = map[string]pendingOverride{}
	f := stateFile(m.stateDir, PendingFile)
	if f == "" {
		return
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return
	}
	if err := json.Unmarshal(data, &m.pending); err != nil {
		m.log.Warn("fleet: the pending overrides kept on disk cannot be read", "file", f, "err", err)
		m.pending = map[string]pendingOverride{}
		return
	}
	if len(m.pending) > 0 {
		m.log.Info("fleet: overrides set while the store was unreachable are pending", "count", len(m.pending))
	}
}

// Pending describes the overrides this node applies that the store has
// not taken yet, one line each ("fleet: pool shop.example.com./primary
// drain").
func (m *Member) Pending() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := overridesPrefix(m.prefix)
	var out []string
	for key, po := range m.pending {
		if po.Written != 0 {
			continue
		}
		state := "auto"
		var so storedOverride
		if po.Value != nil && json.Unmarshal(po.Value, &so) == nil {
			state = so.State
		}
		rest := strings.TrimPrefix(key, p)
		if r, err := url.PathUnescape(rest); err == nil {
			rest = r
		}
		out = append(out, "fleet: "+strings.Replace(rest, "/", " ", 1)+" "+state)
	}
	sort.Strings(out)
	return out
}

// flushPending writes the pending overrides to the store, oldest first,
// whenever there are some: every 100 ms and when kicked (the store
// answers again), until ctx ends.
// An override whose expiry has passed is dropped.
func (m *Member) flushPending(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.flushKick:
		}
		m.mu.Lock()
		type item struct {
			key string
			po  pendingOverride
		}
		var items []item
		for k, po := range m.pending {
			if po.Written == 0 {
				items = append(items, item{k, po})
			}
		}
		m.mu.Unlock()
		if len(items) == 0 {
			continue
		}
		sort.Slice(items, func(i, j int) bool {
			if !items[i].po.SetAt.Equal(items[j].po.SetAt) {
				return items[i].po.SetAt.Before(items[j].po.SetAt)
			}
			return items[i].key < items[j].key
		})
		done := 0
		// The overrides of one batch (SetOverrides: one SetAt) go in one
		// transaction, as they would have when it was set.
		for len(items) > 0 {
			n := 1
			for n < len(items) && items[n].po.SetAt.Equal(items[0].po.SetAt) {
				n++
			}
			batch := items[:n]
			items = items[n:]
			var puts []fleet.KV
			var dels, keys []string
			for _, it := range batch {
				if exp := it.po.Expires; !exp.IsZero() && !exp.After(time.Now()) {
					m.mu.Lock()
					if cur, ok := m.pending[it.key]; ok && cur.SetAt.Equal(it.po.SetAt) {
						delete(m.pending, it.key) // expired while pending
					}
					m.mu.Unlock()
					done++
					continue
				}
				keys = append(keys, it.key)
				if it.po.Value == nil {
					dels = append(dels, it.key)
				} else {
					puts = append(puts, fleet.KV{Key: it.key, Value: it.po.Value})
				}
			}
			if len(keys) == 0 {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			_, rev, err := m.store.Txn(wctx, nil, append(puts, m.guardPut()), dels)
			cancel()
			if err != nil {
				break
			}
			setAt := batch[0].po.SetAt
			for _, k := range keys {
				m.written(k, &setAt, rev)
			}
			done += len(keys)
			m.log.Info("fleet: overrides set while the store was unreachable are written to it", "keys", strings.Join(keys, " "), "revision", rev)
		}
		if done > 0 {
			m.savePending()
			m.report()
		}
	}
}

// withPending is view, complete up to rev, with the pending overrides
// over it (view itself when there are none); those the store took at or
// before rev are no longer pending, and taken lists their keys: the view
// decides them from now on, even if it never showed them (another node
// may have cleared one before this node's watch saw it set).
func (m *Member) withPending(view map[string][]byte, rev int64) (_ map[string][]byte, taken []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, po := range m.pending {
		if po.Written != 0 && po.Written <= rev {
			delete(m.pending, k) // the view has it now
			taken = append(taken, k)
		}
	}
	if len(m.pending) == 0 {
		return view, taken
	}
	out := make(map[string][]byte, len(view)+len(m.pending))
	for k, v := range view {
		out[k] = v
	}
	for k, po := range m.pending {
		if po.Value == nil {
			delete(out, k)
		} else {
			out[k] = po.Value
		}
	}
	return out, taken
}

// followOverrides keeps the health manager's overrides equal to the
// fleet's, with this node's pending ones over them, until ctx ends.
func (m *Member) followOverrides(ctx context.Context, hm *health.Manager) {
	f := overrideFollower{m: m, hm: hm, applied: map[string]bool{}}
	// The pending ones apply at once, before the store answers.
	f.apply(map[string][]byte{}, 0)
	m.followView(ctx, overridesPrefix(m.prefix), f.apply)
}

// overrideFollower applies the store's view of the overrides, with this
// node's pending ones over it, to hm.
type overrideFollower struct {
	m  *Member
	hm *health.Manager
	// applied holds the keys the last view set on hm: a key gone from
	// the next view is cleared.
	applied map[string]bool
}

func (f *overrideFollower) apply(view map[string][]byte, rev int64) {
	m, hm, p := f.m, f.hm, overridesPrefix(f.m.prefix)
	view, taken := m.withPending(view, rev)
	// What this node wrote itself is on hm whether or not a view showed
	// it (its own write and another node's clear of the key can reach
	// the watch together): it is cleared, as an applied key, if the view
	// that took it over lacks it.
	for _, k := range taken {
		f.applied[k] = true
	}
	seen := map[string]bool{}
	for key, v := range view {
		var so storedOverride
		if json.Unmarshal(v, &so) != nil {
			m.log.Warn("fleet: an override in the store cannot be read", "key", key)
			continue
		}
		o, err := health.ParseOverride(so.State)
		if err != nil {
			m.log.Warn("fleet: an override in the store cannot be read", "key", key, "err", err)
			continue
		}
		if m.applyOverride(hm, strings.TrimPrefix(key, p), o, so.Expires) {
			seen[key] = true
		}
	}
	for key := range f.applied {
		if !seen[key] {
			m.applyOverride(hm, strings.TrimPrefix(key, p), health.OverrideNone, time.Time{})
		}
	}
	f.applied = seen
}

// applyOverride sets one override named by its key below P/overrides/.
func (m *Member) applyOverride(hm *health.Manager, rest string, o health.Override, expires time.Time) bool {
	a, record, pool, ok := parseOverrideKey(rest)
	switch {
	case !ok:
		if kind, _, _ := strings.Cut(rest, "/"); kind != "target" && kind != "pool" {
			m.log.Warn("fleet: an unknown key among the overrides", "key", rest)
		}
		return false
	case a.IsValid():
		// (One not set is OverrideNone: clearing it again is no change.)
		if cur, exp, _ := hm.TargetOverride(a); cur != o || !exp.Equal(expires) {
			hm.SetOverride(a, o, expires)
		}
	default:
		if cur, exp, _ := hm.PoolOverride(record, pool); cur != o || !exp.Equal(expires) {
			hm.SetPoolOverride(record, pool, o, expires)
		}
	}
	return true
}

// parseOverrideKey reads a key below P/overrides/: target/ADDR (a
// valid) or pool/RECORD/POOL.
func parseOverrideKey(rest string) (a netip.Addr, record, pool string, ok bool) {
	kind, name, _ := strings.Cut(rest, "/")
	switch kind {
	case "target":
		a, err := netip.ParseAddr(name)
		return a, "", "", err == nil
	case "pool":
		r, p, ok := strings.Cut(name, "/")
		if !ok {
			return netip.Addr{}, "", "", false
		}
		record, err1 := url.PathUnescape(r)
		pool, err2 := url.PathUnescape(p)
		return netip.Addr{}, record, pool, err1 == nil && err2 == nil
	}
	return netip.Addr{}, "", "", false
}
