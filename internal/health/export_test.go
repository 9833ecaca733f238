package health

import (
	"cmp"
	"slices"
	"time"
)

// Tests save the state on demand and list the pool overrides; a running
// Manager saves to its SetStateFile path on every change, and reports
// overrides through PoolOverride.

// SaveState writes the last known status of every key with a known status
// (including statuses restored by LoadState for keys not yet applied), and
// the active target and pool overrides, to path as JSON, atomically: a
// temporary file in the same directory, synced, then renamed over it.
func (m *Manager) SaveState(path string) error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	m.mu.RLock()
	f := m.stateLocked(time.Now())
	m.mu.RUnlock()
	return writeState(path, f)
}

// PoolOverrides lists the active pool overrides, sorted by record and pool.
func (m *Manager) PoolOverrides() []PoolOverrideState {
	now := time.Now()
	m.mu.RLock()
	out := make([]PoolOverrideState, 0, len(m.pools))
	for k, ov := range m.pools {
		if ov.active(now) {
			out = append(out, PoolOverrideState{Record: k[0], Pool: k[1], Override: ov.o, Expires: ov.expires})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b PoolOverrideState) int {
		return cmp.Or(cmp.Compare(a.Record, b.Record), cmp.Compare(a.Pool, b.Pool))
	})
	return out
}
