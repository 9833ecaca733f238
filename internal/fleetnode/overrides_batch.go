package fleetnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
)

// OverrideWrite is one override of a batch (SetOverrides): of target
// address Target when it is valid, else of Record's Pool.
type OverrideWrite struct {
	Target       netip.Addr
	Record, Pool string
	Override     health.Override
	Expires      time.Time
}

// SetOverrides writes a batch of overrides for the fleet in one store
// transaction: every node sees all of them or none. When the store does
// not take it within directWrite, each is kept as pending, as one
// override is (setOverride), and written when the store answers; the
// error then wraps ErrPending.
func (m *Member) SetOverrides(ws []OverrideWrite) error {
	_, err := m.setOverrides(ws, nil)
	return err
}

// SetOverridesIf writes a batch as SetOverrides does, but only if no
// override of the fleet changed after revision rev (that of the
// OverridesView the caller checked the batch against): ok is false, and
// nothing is written, when one did; the caller reads the view again and
// checks again. Two nodes checking batches against the same view cannot
// both write: a safety rule each keeps alone is kept by the two. When the
// store does not answer, the batch is pending as with SetOverrides
// (ok true, an error wrapping ErrPending): written later whatever
// changed meanwhile.
func (m *Member) SetOverridesIf(ws []OverrideWrite, rev int64) (ok bool, err error) {
	p := overridesPrefix(m.prefix)
	return m.setOverrides(ws, []fleet.Cmp{fleet.UnchangedSince(p, rev), fleet.ModRevAtMost(overridesGuardKey(m.prefix), rev)})
}

// PendOverrides keeps a batch as pending without trying the store (the
// caller just failed to read it: cause), as SetOverrides does when the
// store does not take it; the error wraps ErrPending.
func (m *Member) PendOverrides(ws []OverrideWrite, cause error) error {
	keys, values, _, _ := m.overrideKVs(ws)
	return m.pend(ws, keys, values, cause)
}

// overrideKVs returns the keys and values of ws, and the puts and deletes
// that write them.
func (m *Member) overrideKVs(ws []OverrideWrite) (keys []string, values [][]byte, puts []fleet.KV, dels []string) {
	keys = make([]string, len(ws))
	values = make([][]byte, len(ws))
	for i, w := range ws {
		if w.Target.IsValid() {
			keys[i] = targetOverrideKey(m.prefix, w.Target)
		} else {
			keys[i] = poolOverrideKey(m.prefix, w.Record, w.Pool)
		}
		if w.Override != health.OverrideNone {
			values[i], _ = json.Marshal(storedOverride{State: w.Override.String(), Expires: w.Expires})
			puts = append(puts, fleet.KV{Key: keys[i], Value: values[i]})
		} else {
			dels = append(dels, keys[i])
		}
	}
	return keys, values, puts, dels
}

func (m *Member) setOverrides(ws []OverrideWrite, cmps []fleet.Cmp) (bool, error) {
	if len(ws) == 0 {
		return true, nil
	}
	keys, values, puts, dels := m.overrideKVs(ws)
	var cause error
	if m.storeDown() {
		cause = errors.New("the store does not answer")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), directWrite)
		ok, rev, err := m.store.Txn(ctx, cmps, append(puts, m.guardPut()), dels)
		cancel()
		switch {
		case err == nil && !ok:
			m.conflicts.Add(1)
			return false, nil
		case err == nil:
			// Kept over the view until it reaches rev, so that a view read
			// before the write does not undo what the caller applies now
			// (and an older pending value of a key is not written after).
			now := time.Now()
			m.mu.Lock()
			for i, k := range keys {
				m.pending[k] = pendingOverride{Value: values[i], SetAt: now, Expires: ws[i].Expires, Written: rev}
			}
			m.mu.Unlock()
			m.savePending()
			return true, nil
		}
		cause = err
	}
	return true, m.pend(ws, keys, values, cause)
}

// pend keeps ws (at keys, values) as pending and wakes their writer.
func (m *Member) pend(ws []OverrideWrite, keys []string, values [][]byte, cause error) error {
	now := time.Now()
	m.mu.Lock()
	for i, k := range keys {
		m.pending[k] = pendingOverride{Value: values[i], SetAt: now, Expires: ws[i].Expires}
	}
	m.mu.Unlock()
	m.savePending()
	select {
	case m.flushKick <- struct{}{}:
	default:
	}
	return fmt.Errorf("%w: %v", ErrPending, cause)
}

// overridesGuardKey is put by every write of the overrides (beside
// their prefix, so no follower sees it): a conditional write
// (SetOverridesIf) compares it to see the deletions after its view,
// which a compare over the prefix does not see.
func overridesGuardKey(prefix string) string {
	return strings.TrimSuffix(prefix, "/") + "/overrides-changed"
}

func (m *Member) guardPut() fleet.KV {
	return fleet.KV{Key: overridesGuardKey(m.prefix), Value: []byte(m.local.Fleet.Node)}
}

// OverridesView is the fleet's overrides as this node goes by them: the
// store's, read at Rev, with this node's pending ones (not yet taken by
// the store) over them. Expired ones are left out.
type OverridesView struct {
	Rev     int64
	Targets map[netip.Addr]health.Override
	Pools   map[[2]string]health.Override
}

// ReadOverrides reads the fleet's overrides from the store (a
// linearizable read: every write acknowledged before is in it). It fails
// at once when the node is known cut off.
func (m *Member) ReadOverrides(ctx context.Context) (OverridesView, error) {
	if m.storeDown() {
		return OverridesView{}, errors.New("the store does not answer")
	}
	p := overridesPrefix(m.prefix)
	kvs, rev, err := m.store.Get(ctx, p)
	if err != nil {
		return OverridesView{}, err
	}
	view := make(map[string][]byte, len(kvs))
	for _, kv := range kvs {
		view[kv.Key] = kv.Value
	}
	m.mu.Lock()
	for k, po := range m.pending {
		switch {
		case po.Written != 0:
		case po.Value == nil:
			delete(view, k)
		default:
			view[k] = po.Value
		}
	}
	m.mu.Unlock()
	v := OverridesView{Rev: rev, Targets: map[netip.Addr]health.Override{}, Pools: map[[2]string]health.Override{}}
	now := time.Now()
	for key, value := range view {
		var so storedOverride
		if json.Unmarshal(value, &so) != nil {
			continue
		}
		o, err := health.ParseOverride(so.State)
		if err != nil || o == health.OverrideNone || (!so.Expires.IsZero() && !so.Expires.After(now)) {
			continue
		}
		a, record, pool, ok := parseOverrideKey(strings.TrimPrefix(key, p))
		switch {
		case !ok:
		case a.IsValid():
			v.Targets[a] = o
		default:
			v.Pools[[2]string{record, pool}] = o
		}
	}
	return v, nil
}
