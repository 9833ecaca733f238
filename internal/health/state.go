package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Snapshot returns a copy of the state of every key being checked, with the
// active override of its address.
func (m *Manager) Snapshot() map[Key]State {
	now := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[Key]State, len(m.checkers))
	for k, c := range m.checkers {
		s := c.state
		if o := m.overrides[k.Addr]; o.active(now) {
			s.Override, s.OverrideExpires = o.o, o.expires
		}
		out[k] = s
	}
	return out
}

// Usable reports whether k may be answered: its status is Up or Unknown
// (including keys not being checked), unless an unexpired override of its
// address says otherwise (up forces usable, down and drain force unusable).
func (m *Manager) Usable(k Key) bool {
	now := time.Now()
	m.mu.RLock()
	defer m.mu.RUnlock()
	var o Override
	if ov := m.overrides[k.Addr]; ov.active(now) {
		o = ov.o
	}
	s := Unknown
	if c := m.checkers[k]; c != nil {
		s = c.m.status
	}
	return usable(s, o)
}

// SetOverride sets an external state for a target address, applying to all
// its checks: OverrideUp, OverrideDown, OverrideDrain, or OverrideNone
// ("auto") to clear it. A non-zero expires ends the override then (and
// OnChange functions are called); an expiry already past clears it.
func (m *Manager) SetOverride(addr netip.Addr, o Override, expires time.Time) {
	m.mu.Lock()
	if old := m.overrides[addr]; old != nil && old.timer != nil {
		old.timer.Stop()
	}
	delete(m.overrides, addr)
	if o != OverrideNone && (expires.IsZero() || time.Now().Before(expires)) && !m.closed {
		ov := &override{o: o, expires: expires}
		if !expires.IsZero() {
			ov.timer = time.AfterFunc(time.Until(expires), func() { m.expire(addr, ov) })
		}
		m.overrides[addr] = ov
	}
	m.mu.Unlock()
	m.log.Info("health override set", "addr", addr, "override", o, "expires", expires)
	m.notify()
}

// expire removes ov if it is still addr's override.
func (m *Manager) expire(addr netip.Addr, ov *override) {
	m.mu.Lock()
	cur := m.overrides[addr] == ov
	if cur {
		delete(m.overrides, addr)
	}
	m.mu.Unlock()
	if cur {
		m.log.Info("health override expired", "addr", addr, "override", ov.o)
		m.notify()
	}
}

// OnResult sets a function called after every check with its duration,
// whether it passed, and the status before and after (metrics). It is
// called without locks held and must be safe for concurrent use.
func (m *Manager) OnResult(f func(k Key, took time.Duration, pass bool, from, to Status)) {
	m.mu.Lock()
	m.onResult = f
	m.mu.Unlock()
}

// OnChange registers f, called after any Usable result may have changed:
// status transitions, overrides set or expired, Apply starting or stopping
// checkers. f is called without locks held, from the goroutine that made
// the change (a checker, a timer, or the caller of SetOverride or Apply),
// possibly concurrently, so it must be safe for concurrent use and quick.
func (m *Manager) OnChange(f func()) {
	m.mu.Lock()
	m.onChange = append(m.onChange, f)
	m.mu.Unlock()
}

func (m *Manager) notify() {
	m.mu.RLock()
	fns := m.onChange
	m.mu.RUnlock()
	for _, f := range fns {
		f()
	}
}

// Close stops every checker and override timer and waits for the checkers
// to end. The Manager keeps answering Usable and Snapshot from its last
// state; Apply and SetOverride do nothing after Close.
func (m *Manager) Close() {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	cs := make([]*checker, 0, len(m.checkers))
	for _, c := range m.checkers {
		cs = append(cs, c)
	}
	for _, o := range m.overrides {
		if o.timer != nil {
			o.timer.Stop()
		}
	}
	m.mu.Unlock()
	for _, c := range cs {
		c.cancel()
	}
	for _, c := range cs {
		<-c.done
	}
}

// stateFile is the JSON layout of SaveState.
type stateFile struct {
	Version   int             `json:"version"`
	Saved     time.Time       `json:"saved"`
	Targets   []savedTarget   `json:"targets"`
	Overrides []savedOverride `json:"overrides,omitempty"`
}

type savedTarget struct {
	Addr   netip.Addr `json:"addr"`
	Check  string     `json:"check"`
	Status string     `json:"status"`
	Since  time.Time  `json:"since"`
	Reason string     `json:"reason,omitempty"`
}

type savedOverride struct {
	Addr     netip.Addr `json:"addr"`
	Override string     `json:"override"`
	Expires  time.Time  `json:"expires,omitzero"`
}

// SaveState writes the last known status of every key with a known status,
// and the active overrides, to path as JSON (atomically: a temporary file
// renamed over it).
func (m *Manager) SaveState(path string) error {
	now := time.Now()
	f := stateFile{Version: 1, Saved: now.UTC()}
	m.mu.RLock()
	for k, c := range m.checkers {
		if c.m.status == Unknown {
			continue
		}
		f.Targets = append(f.Targets, savedTarget{
			Addr: k.Addr, Check: k.Check, Status: c.m.status.String(),
			Since: c.state.Since.UTC(), Reason: c.state.Reason,
		})
	}
	for a, o := range m.overrides {
		if o.active(now) {
			so := savedOverride{Addr: a, Override: o.o.String()}
			if !o.expires.IsZero() {
				so.Expires = o.expires.UTC()
			}
			f.Overrides = append(f.Overrides, so)
		}
	}
	m.mu.RUnlock()
	sort.Slice(f.Targets, func(i, j int) bool {
		a, b := f.Targets[i], f.Targets[j]
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c < 0
		}
		return a.Check < b.Check
	})
	sort.Slice(f.Overrides, func(i, j int) bool { return f.Overrides[i].Addr.Less(f.Overrides[j].Addr) })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("health state: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("health state: %w", err)
	}
	return nil
}

// LoadState restores statuses and overrides saved by SaveState. A missing
// file is not an error (first start). Restored statuses apply to the keys of
// the next Apply (or to keys already applied with no result yet) until their
// first real result; expired overrides are dropped.
func (m *Manager) LoadState(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("health state: %w", err)
	}
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("health state %s: %w", path, err)
	}
	if f.Version != 1 {
		return fmt.Errorf("health state %s: unknown version %d", path, f.Version)
	}
	m.mu.Lock()
	for _, t := range f.Targets {
		var s Status
		switch t.Status {
		case "up":
			s = Up
		case "down":
			s = Down
		default:
			continue
		}
		k := Key{Addr: t.Addr, Check: t.Check}
		rs := State{Status: s, Since: t.Since, Reason: t.Reason}
		if c := m.checkers[k]; c != nil {
			if c.m.status == Unknown && c.state.LastCheck.IsZero() {
				m.restore(c, rs)
			}
			continue
		}
		m.restored[k] = rs
	}
	m.mu.Unlock()
	for _, so := range f.Overrides {
		o, err := ParseOverride(so.Override)
		if err != nil || o == OverrideNone {
			continue
		}
		if !so.Expires.IsZero() && !time.Now().Before(so.Expires) {
			continue
		}
		m.SetOverride(so.Addr, o, so.Expires)
	}
	m.notify()
	return nil
}
