package health

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
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
	if f := m.verdict; f != nil {
		s = f(k, s)
	}
	return usable(s, o)
}

// SetVerdict makes f decide the status Usable goes by, from the key and
// this node's own status (a fleet's quorum of many nodes' observations);
// nil goes back to the node's own. Overrides still win over it. f is
// called with the Manager's read lock held: it must not call the Manager.
// Call Changed when f's answers change.
func (m *Manager) SetVerdict(f func(k Key, own Status) Status) {
	m.mu.Lock()
	m.verdict = f
	m.mu.Unlock()
	m.notify()
}

// Changed tells the Manager's OnChange functions that usability changed
// outside it (the verdict function's answers).
func (m *Manager) Changed() { m.notify() }

// OnResult sets a function called after every check with its duration,
// whether it passed, and the status before and after (metrics). It is
// called without locks held and must be safe for concurrent use.
func (m *Manager) OnResult(f func(k Key, took time.Duration, pass bool, from, to Status)) {
	m.mu.Lock()
	m.onResult = f
	m.mu.Unlock()
}

// OnChange registers f, called after any Usable result or pool override may
// have changed: status transitions, target or pool overrides set or
// expired, LoadState, Apply starting or stopping checkers. f is called
// without locks held, from the goroutine that made the change (a checker, a
// timer, or the caller of SetOverride, SetPoolOverride, LoadState or Apply),
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

// Close stops every checker and timer, waits for the checkers to end and,
// with a state file, saves the final state. The Manager keeps answering
// Usable, Snapshot and the override queries from its last state; Apply,
// SetOverride and SetPoolOverride do nothing after Close.
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
	for _, o := range m.pools {
		if o.timer != nil {
			o.timer.Stop()
		}
	}
	if m.saveTimer != nil {
		m.saveTimer.Stop()
		m.saveTimer = nil
	}
	m.mu.Unlock()
	for _, c := range cs {
		c.cancel()
	}
	for _, c := range cs {
		<-c.done
	}
	m.save(true)
}

// stateVersion is the version the state file is written in. Version 1 had
// no pools.
const stateVersion = 2

// stateFile is the JSON layout of the state file.
type stateFile struct {
	Version   int             `json:"version"`
	Saved     time.Time       `json:"saved"`
	Targets   []savedTarget   `json:"targets"`
	Overrides []savedOverride `json:"overrides,omitempty"`
	Pools     []savedPool     `json:"pools,omitempty"` // since version 2
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

type savedPool struct {
	Record   string    `json:"record"`
	Pool     string    `json:"pool"`
	Override string    `json:"override"`
	Expires  time.Time `json:"expires,omitzero"`
}

// SetStateFile makes the Manager save its state to path as JSON, atomically,
// after every override change (target or pool: set, cleared or expired),
// before the call making it returns; status changes are saved too,
// coalesced to at most one save per second; Close saves once more. A
// failing save is logged once until a save succeeds again. "" stops saving.
// Call LoadState first: a change before it would overwrite the file unread.
func (m *Manager) SetStateFile(path string) {
	m.mu.Lock()
	m.stateFile = path
	m.mu.Unlock()
}

// persist saves the state file, if any, now.
func (m *Manager) persist() { m.save(false) }

// saveSoon saves the state file, if any, after statusSaveDelay, coalescing
// the changes made meanwhile.
func (m *Manager) saveSoon() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stateFile == "" || m.closed || m.saveTimer != nil {
		return
	}
	m.saveTimer = time.AfterFunc(m.statusSaveDelay, func() {
		m.mu.Lock()
		m.saveTimer = nil
		m.mu.Unlock()
		m.persist()
	})
}

// save writes the state file, if one is set, unless the Manager is closed
// (final: the save of Close). Failures are logged once per streak.
func (m *Manager) save(final bool) {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	m.mu.RLock()
	path := m.stateFile
	if path == "" || (m.closed && !final) {
		m.mu.RUnlock()
		return
	}
	f := m.stateLocked(time.Now())
	hook := m.beforeWrite
	m.mu.RUnlock()
	if hook != nil {
		hook()
	}
	if err := writeState(path, f); err != nil {
		if !m.saveFailing {
			m.log.Warn("health state file not saved", "file", path, "err", err)
		}
		m.saveFailing = true
		return
	}
	if m.saveFailing {
		m.log.Info("health state file saved again", "file", path)
		m.saveFailing = false
	}
}

// stateLocked returns the state to save, sorted. Called with m.mu held.
func (m *Manager) stateLocked(now time.Time) stateFile {
	f := stateFile{Version: stateVersion, Saved: now.UTC(), Targets: []savedTarget{}}
	for k, c := range m.checkers {
		if c.m.status == Unknown {
			continue
		}
		f.Targets = append(f.Targets, savedTarget{
			Addr: k.Addr, Check: k.Check, Status: c.m.status.String(),
			Since: c.state.Since.UTC(), Reason: c.state.Reason,
		})
	}
	for k, rs := range m.restored {
		if _, ok := m.checkers[k]; ok || rs.Status == Unknown {
			continue
		}
		f.Targets = append(f.Targets, savedTarget{
			Addr: k.Addr, Check: k.Check, Status: rs.Status.String(), Since: rs.Since.UTC(), Reason: rs.Reason,
		})
	}
	for a, o := range m.overrides {
		if o.active(now) {
			f.Overrides = append(f.Overrides, savedOverride{Addr: a, Override: o.o.String(), Expires: utc(o.expires)})
		}
	}
	for k, o := range m.pools {
		if o.active(now) {
			f.Pools = append(f.Pools, savedPool{Record: k[0], Pool: k[1], Override: o.o.String(), Expires: utc(o.expires)})
		}
	}
	slices.SortFunc(f.Targets, func(a, b savedTarget) int {
		return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Check, b.Check))
	})
	slices.SortFunc(f.Overrides, func(a, b savedOverride) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(f.Pools, func(a, b savedPool) int {
		return cmp.Or(cmp.Compare(a.Record, b.Record), cmp.Compare(a.Pool, b.Pool))
	})
	return f
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// writeState writes f to path atomically.
func writeState(path string, f stateFile) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("health state %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("health state %s: %w", path, err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("health state %s: %w", path, err)
	}
	// Make the rename itself durable; not every system can sync a directory.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// LoadState restores statuses and target and pool overrides saved by the
// Manager to its state file (version 1 or 2). A missing file is not an
// error (first start); an unreadable one, unknown fields or an unknown
// version are, naming the file, and restore nothing. Restored statuses
// apply to the keys of the next Apply (or to keys already applied with no
// result yet) until their first real result; expired overrides are
// dropped, the others expire when due.
func (m *Manager) LoadState(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("health state: %w", err)
	}
	var f stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("health state %s: %w", path, err)
	}
	if dec.More() {
		return fmt.Errorf("health state %s: data after the state", path)
	}
	switch {
	case f.Version != 1 && f.Version != 2:
		return fmt.Errorf("health state %s: unknown version %d", path, f.Version)
	case f.Version == 1 && len(f.Pools) > 0:
		return fmt.Errorf("health state %s: pools in a version 1 file", path)
	}
	type restoredOverride struct {
		o       Override
		expires time.Time
	}
	overrides := map[netip.Addr]restoredOverride{}
	for i, so := range f.Overrides {
		o, err := ParseOverride(so.Override)
		if err != nil || !so.Addr.IsValid() {
			return fmt.Errorf("health state %s: overrides[%d]: %v", path, i, cmp.Or(err, errors.New("no address")))
		}
		overrides[so.Addr] = restoredOverride{o, so.Expires}
	}
	pools := map[[2]string]restoredOverride{}
	for i, sp := range f.Pools {
		o, err := ParseOverride(sp.Override)
		if err != nil || sp.Record == "" || sp.Pool == "" {
			return fmt.Errorf("health state %s: pools[%d]: %v", path, i, cmp.Or(err, errors.New("record and pool required")))
		}
		pools[[2]string{sp.Record, sp.Pool}] = restoredOverride{o, sp.Expires}
	}

	nt, no, np := 0, 0, 0
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
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
		nt++
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
	for a, ro := range overrides {
		if o, _, _ := setOverride(m.overrides, a, ro.o, ro.expires, func(ov *override) { m.expire(a, ov) }); o != OverrideNone {
			no++
		}
	}
	for k, ro := range pools {
		if o, _, _ := setOverride(m.pools, k, ro.o, ro.expires, func(ov *override) { m.expirePool(k, ov) }); o != OverrideNone {
			np++
		}
	}
	m.mu.Unlock()
	m.log.Info("health state restored", "file", path, "version", f.Version, "targets", nt,
		"overrides", no, "pools", np, "dropped", len(overrides)+len(pools)-no-np)
	m.persist()
	m.notify()
	return nil
}
