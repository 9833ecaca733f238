package health

import "time"

// State returns the state of one key being checked, with the active
// override of its address (as Snapshot has it), without copying every
// key's: false when k is not being checked.
func (m *Manager) State(k Key) (State, bool) {
	now := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.checkers[k]
	if c == nil {
		return State{}, false
	}
	s := c.state
	if o := m.overrides[k.Addr]; o.active(now) {
		s.Override, s.OverrideExpires = o.o, o.expires
	}
	return s, true
}
