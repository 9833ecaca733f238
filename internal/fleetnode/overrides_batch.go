package fleetnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
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
	if len(ws) == 0 {
		return nil
	}
	keys := make([]string, len(ws))
	values := make([][]byte, len(ws))
	var puts []fleet.KV
	var dels []string
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
	var cause error
	if m.storeDown() {
		cause = errors.New("the store does not answer")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), directWrite)
		var rev int64
		_, rev, cause = m.store.Txn(ctx, nil, puts, dels)
		cancel()
		if cause == nil {
			for _, k := range keys {
				m.written(k, nil, rev)
			}
			m.savePending()
			return nil
		}
	}
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
