package health

import (
	"net/netip"
	"time"
)

// PoolOverrideState is an active operator override of one pool of one
// steered record.
type PoolOverrideState struct {
	Record   string // the record's name, as given to SetPoolOverride
	Pool     string
	Override Override  // up, down or drain
	Expires  time.Time // zero: no expiry
}

// SetOverride sets an external state for a target address, applying to all
// its checks: OverrideUp, OverrideDown, OverrideDrain, or OverrideNone
// ("auto") to clear it. A non-zero expires ends the override then (and
// OnChange functions are called); an expiry already past clears it. With a
// state file (SetStateFile) the change is saved before SetOverride returns.
// It does nothing after Close.
func (m *Manager) SetOverride(addr netip.Addr, o Override, expires time.Time) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	o, expires, changed := setOverride(m.overrides, addr, o, expires, func(ov *override) { m.expire(addr, ov) })
	m.mu.Unlock()
	if changed {
		m.log.Info(overrideMsg("target", o), overrideAttrs(o, expires, "addr", addr.String())...)
		m.persist()
	}
	m.notify()
}

// TargetOverride returns the active (unexpired) override of a target
// address, if any.
func (m *Manager) TargetOverride(addr netip.Addr) (o Override, expires time.Time, ok bool) {
	now := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if ov := m.overrides[addr]; ov.active(now) {
		return ov.o, ov.expires, true
	}
	return OverrideNone, time.Time{}, false
}

// expire removes ov if it is still addr's override.
func (m *Manager) expire(addr netip.Addr, ov *override) {
	m.mu.Lock()
	cur := !m.closed && m.overrides[addr] == ov
	if cur {
		delete(m.overrides, addr)
	}
	m.mu.Unlock()
	if cur {
		m.log.Info("target override expired", overrideAttrs(ov.o, ov.expires, "addr", addr.String())...)
		m.persist()
		m.notify()
	}
}

// SetPoolOverride sets an operator state for one pool of one record:
// OverrideUp, OverrideDown, OverrideDrain, or OverrideNone ("auto") to clear
// it. Like SetOverride, a non-zero expires ends it then (and OnChange
// functions are called), an expiry already past clears it, a state file is
// saved before it returns, and it does nothing after Close. The Manager
// does not interpret record or pool; callers should pass canonical names.
func (m *Manager) SetPoolOverride(record, pool string, o Override, expires time.Time) {
	k := [2]string{record, pool}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	o, expires, changed := setOverride(m.pools, k, o, expires, func(ov *override) { m.expirePool(k, ov) })
	m.mu.Unlock()
	if changed {
		m.log.Info(overrideMsg("pool", o), overrideAttrs(o, expires, "record", record, "pool", pool)...)
		m.persist()
	}
	m.notify()
}

// PoolOverride returns the active (unexpired) override of a record's pool,
// if any.
func (m *Manager) PoolOverride(record, pool string) (o Override, expires time.Time, ok bool) {
	now := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if ov := m.pools[[2]string{record, pool}]; ov.active(now) {
		return ov.o, ov.expires, true
	}
	return OverrideNone, time.Time{}, false
}

// expirePool removes ov if it is still k's override.
func (m *Manager) expirePool(k [2]string, ov *override) {
	m.mu.Lock()
	cur := !m.closed && m.pools[k] == ov
	if cur {
		delete(m.pools, k)
	}
	m.mu.Unlock()
	if cur {
		m.log.Info("pool override expired", overrideAttrs(ov.o, ov.expires, "record", k[0], "pool", k[1])...)
		m.persist()
		m.notify()
	}
}

// setOverride replaces k's override in mp with o until expires (OverrideNone,
// or an expiry already past, clears it), arming a timer calling onExpire.
// It returns the override in force and whether anything changed: setting
// the same override and expiry again, or clearing none, changes nothing.
// Called with m.mu held.
func setOverride[K comparable](mp map[K]*override, k K, o Override, expires time.Time, onExpire func(*override)) (Override, time.Time, bool) {
	if o == OverrideNone || (!expires.IsZero() && !time.Now().Before(expires)) {
		o, expires = OverrideNone, time.Time{}
	}
	old := mp[k]
	if old == nil && o == OverrideNone {
		return o, expires, false
	}
	if old != nil && old.o == o && old.expires.Equal(expires) {
		return o, expires, false
	}
	if old != nil && old.timer != nil {
		old.timer.Stop()
	}
	delete(mp, k)
	if o != OverrideNone {
		ov := &override{o: o, expires: expires}
		if !expires.IsZero() {
			ov.timer = time.AfterFunc(time.Until(expires), func() { onExpire(ov) })
		}
		mp[k] = ov
	}
	return o, expires, true
}

func overrideMsg(what string, o Override) string {
	if o == OverrideNone {
		return what + " override cleared"
	}
	return what + " override set"
}

// overrideAttrs returns the log attributes of an override change: ids, then
// the override's name and its expiry if any.
func overrideAttrs(o Override, expires time.Time, ids ...any) []any {
	attrs := append(ids, "override", o.String())
	if !expires.IsZero() {
		attrs = append(attrs, "expires", expires)
	}
	return attrs
}

// UsableIf reports whether k would be usable were addr's target override
// o (OverrideNone: none) instead of the one in force: the status Usable
// goes by (the fleet's verdict when one is set) under o. A safety rule
// asks it before an override is applied.
func (m *Manager) UsableIf(k Key, o Override) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := Unknown
	if c := m.checkers[k]; c != nil {
		s = c.m.status
	}
	if f := m.verdict; f != nil {
		s = f(k, s)
	}
	return usable(s, o)
}
