package health

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

func TestApplyKeepsStopsStarts(t *testing.T) {
	t.Parallel()
	a, b := newWebServer(t, false), newWebServer(t, false)
	m := newManager(t)
	checks := map[string]Check{
		"a": {Type: "http", Port: a.port(t), Interval: iv, Timeout: to},
		"b": {Type: "http", Port: b.port(t), Interval: iv, Timeout: to},
	}
	ka, kb := Key{localhost, "a"}, Key{localhost, "b"}
	m.Apply(checks, []Key{ka})
	before := waitStatus(t, m, ka, Up, time.Second)
	if _, ok := m.Snapshot()[kb]; ok || b.requests.Load() != 0 {
		t.Fatal("b checked before being applied")
	}

	// Reapply with the same a, plus b, and a duplicate key: a keeps its state.
	m.Apply(checks, []Key{ka, kb, ka})
	after := m.Snapshot()[ka]
	if after.Status != Up || !after.Since.Equal(before.Since) {
		t.Errorf("reapply reset a: before %+v, after %+v", before, after)
	}
	waitStatus(t, m, kb, Up, time.Second)
	if len(m.Snapshot()) != 2 {
		t.Errorf("snapshot %v", m.Snapshot())
	}

	// A redefined check restarts a's checker but keeps its status.
	redef := map[string]Check{
		"a": {Type: "http", Port: a.port(t), Path: "/other", Interval: iv, Timeout: to},
		"b": checks["b"],
	}
	a.code.Store(500)
	m.Apply(redef, []Key{ka, kb})
	if s := m.Snapshot()[ka]; s.Status != Up || !s.Since.Equal(before.Since) {
		t.Errorf("redefinition reset a: %+v", s)
	}
	waitStatus(t, m, ka, Down, time.Second)
	a.code.Store(200)

	// Removing a stops its checker: no more requests once Apply returns.
	m.Apply(redef, []Key{kb})
	n := a.requests.Load()
	time.Sleep(4 * iv)
	if got := a.requests.Load(); got != n {
		t.Errorf("%d requests to a after it was removed", got-n)
	}
	if _, ok := m.Snapshot()[ka]; ok {
		t.Error("a still in snapshot")
	}
	if !m.Usable(ka) {
		t.Error("an unchecked key must be usable")
	}
	if b.requests.Load() == 0 || !m.Usable(kb) {
		t.Error("b not running")
	}
}

func TestApplySkipsUnknownAndInvalidChecks(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	m.Apply(map[string]Check{"bad": {Type: "tcp"}}, []Key{{localhost, "bad"}, {localhost, "missing"}})
	if s := m.Snapshot(); len(s) != 0 {
		t.Errorf("snapshot %v", s)
	}
}

func TestJitterSpreadsFirstRun(t *testing.T) {
	t.Parallel()
	m := NewManager(nil)
	defer m.Close()
	for range 100 {
		if d := m.jitter(time.Second); d < 0 || d >= time.Second {
			t.Fatalf("jitter %s outside [0, 1s)", d)
		}
	}
	// With a long interval and real jitter the first check waits.
	w := newWebServer(t, false)
	var delay atomic.Int64
	m.jitter = func(iv time.Duration) time.Duration { delay.Store(int64(iv)); return time.Hour }
	m.Apply(map[string]Check{"w": {Type: "http", Port: w.port(t), Interval: time.Second, Timeout: to}}, []Key{{localhost, "w"}})
	time.Sleep(2 * iv)
	if w.requests.Load() != 0 || time.Duration(delay.Load()) != time.Second {
		t.Errorf("first check not delayed by jitter: %d requests, jitter asked for %s", w.requests.Load(), time.Duration(delay.Load()))
	}
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	up, down := newWebServer(t, false), newWebServer(t, false)
	down.code.Store(503)
	other := netip.MustParseAddr("127.0.0.2") // not checked: only its override matters
	m := newManager(t)
	var calls atomic.Int64
	m.OnChange(func() { calls.Add(1) })
	checks := map[string]Check{
		"up":   {Type: "http", Port: up.port(t), Interval: iv, Timeout: to, Fall: 1},
		"down": {Type: "http", Port: down.port(t), Interval: iv, Timeout: to, Fall: 1},
	}
	kUp, kDown, kOther := Key{localhost, "up"}, Key{localhost, "down"}, Key{other, "up"}
	m.Apply(checks, []Key{kUp, kDown})
	waitStatus(t, m, kUp, Up, time.Second)
	waitStatus(t, m, kDown, Down, time.Second)

	set := func(o Override, exp time.Time) {
		t.Helper()
		n := calls.Load()
		m.SetOverride(localhost, o, exp)
		if calls.Load() == n {
			t.Errorf("SetOverride(%v) did not call OnChange", o)
		}
	}
	set(OverrideDown, time.Time{})
	if m.Usable(kUp) || m.Usable(kDown) || !m.Usable(kOther) {
		t.Error("down override: want both keys of 127.0.0.1 unusable, 127.0.0.2 untouched")
	}
	if s := m.Snapshot()[kUp]; s.Override != OverrideDown || s.Status != Up {
		t.Errorf("snapshot under override %+v", s)
	}
	set(OverrideDrain, time.Time{})
	if m.Usable(kUp) || m.Usable(kDown) {
		t.Error("drain override: want unusable")
	}
	set(OverrideUp, time.Time{})
	if !m.Usable(kUp) || !m.Usable(kDown) {
		t.Error("up override: want usable, even when down")
	}
	set(OverrideNone, time.Time{})
	if !m.Usable(kUp) || m.Usable(kDown) {
		t.Error("auto: want the checks' verdicts back")
	}
	if s := m.Snapshot()[kUp]; s.Override != OverrideNone {
		t.Errorf("override not cleared: %+v", s)
	}

	// Expiry: the override ends on its own and OnChange is called.
	exp := time.Now().Add(150 * time.Millisecond)
	set(OverrideUp, exp)
	if !m.Usable(kDown) {
		t.Error("up override with expiry not in force")
	}
	if s := m.Snapshot()[kDown]; s.Override != OverrideUp || !s.OverrideExpires.Equal(exp) {
		t.Errorf("snapshot %+v", s)
	}
	n := calls.Load()
	dnstest.WaitFor(t, time.Second, "override expired", func() bool { return !m.Usable(kDown) })
	if time.Now().Before(exp) {
		t.Error("override expired early")
	}
	dnstest.WaitFor(t, time.Second, "OnChange on expiry", func() bool { return calls.Load() > n })

	// An override already expired when set is no override.
	set(OverrideDown, time.Now().Add(-time.Second))
	if !m.Usable(kUp) {
		t.Error("expired override honoured")
	}
}

func TestOnChangeOnTransitions(t *testing.T) {
	t.Parallel()
	w := newWebServer(t, false)
	m := newManager(t)
	k := Key{localhost, "w"}
	seen := make(chan Status, 32)
	m.OnChange(func() {
		select {
		case seen <- m.Snapshot()[k].Status:
		default:
		}
	})
	m.Apply(map[string]Check{"w": {Type: "http", Port: w.port(t), Interval: iv, Timeout: to, Fall: 1, Rise: 1}}, []Key{k})
	want := func(s Status) {
		t.Helper()
		timeout := time.After(time.Second)
		for {
			select {
			case got := <-seen:
				if got == s {
					return
				}
			case <-timeout:
				t.Fatalf("no OnChange with status %v", s)
			}
		}
	}
	want(Up)
	w.code.Store(500)
	want(Down)
	w.code.Store(200)
	want(Up)
}

func TestSaveLoadState(t *testing.T) {
	t.Parallel()
	up, down := newWebServer(t, false), newWebServer(t, false)
	down.code.Store(503)
	checks := map[string]Check{
		"up":   {Type: "http", Port: up.port(t), Interval: iv, Timeout: to, Fall: 1},
		"down": {Type: "http", Port: down.port(t), Interval: iv, Timeout: to, Fall: 1, Rise: 3},
	}
	kUp, kDown := Key{localhost, "up"}, Key{localhost, "down"}
	drained := netip.MustParseAddr("2001:db8::1")
	path := filepath.Join(t.TempDir(), "health.json")

	m1 := newManager(t)
	m1.Apply(checks, []Key{kUp, kDown})
	waitStatus(t, m1, kUp, Up, time.Second)
	sDown := waitStatus(t, m1, kDown, Down, time.Second)
	m1.SetOverride(drained, OverrideDrain, time.Time{})
	m1.SetOverride(netip.MustParseAddr("192.0.2.1"), OverrideDown, time.Now().Add(-time.Minute)) // expired: not saved
	if err := m1.SaveState(path); err != nil {
		t.Fatal(err)
	}
	m1.Close()
	var f stateFile
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &f); err != nil || len(f.Targets) != 2 || len(f.Overrides) != 1 {
		t.Fatalf("saved %s (%v)", data, err)
	}

	// A new manager restores: the down target stays down until its first
	// real result, even though its server now answers 200.
	down.code.Store(200)
	m2 := newManager(t)
	if err := m2.LoadState(path); err != nil {
		t.Fatal(err)
	}
	if m2.Usable(Key{drained, "x"}) {
		t.Error("drain override not restored")
	}
	m2.jitter = func(time.Duration) time.Duration { return 3 * iv }
	m2.Apply(checks, []Key{kUp, kDown})
	s := m2.Snapshot()[kDown]
	if s.Status != Down || m2.Usable(kDown) || !s.Since.Equal(sDown.Since) {
		t.Errorf("restored down: %+v (saved since %v)", s, sDown.Since)
	}
	if s := m2.Snapshot()[kUp]; s.Status != Up {
		t.Errorf("restored up: %+v", s)
	}
	// The first success (not rise=3 of them) makes a restored Down up.
	s = waitStatus(t, m2, kDown, Up, time.Second)
	if s.Reason != "HTTP 200" {
		t.Errorf("reason %q", s.Reason)
	}

	// Missing file: not an error. Garbage: an error.
	if err := NewManager(nil).LoadState(filepath.Join(t.TempDir(), "none.json")); err != nil {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("{"), 0o644)
	if err := NewManager(nil).LoadState(bad); err == nil {
		t.Error("garbage state file accepted")
	}
}

func TestCloseStopsCheckers(t *testing.T) {
	t.Parallel()
	w := newWebServer(t, false)
	m := newManager(t)
	k := Key{localhost, "w"}
	m.Apply(map[string]Check{"w": {Type: "http", Port: w.port(t), Interval: iv, Timeout: to}}, []Key{k})
	waitStatus(t, m, k, Up, time.Second)
	m.Close()
	n := w.requests.Load()
	time.Sleep(3 * iv)
	if w.requests.Load() != n {
		t.Error("checks after Close")
	}
	if !m.Usable(k) {
		t.Error("state lost on Close")
	}
	m.Close() // idempotent
	m.Apply(map[string]Check{"w": {Type: "http", Port: w.port(t), Interval: iv, Timeout: to}}, []Key{k})
	time.Sleep(2 * iv)
	if w.requests.Load() != n {
		t.Error("Apply after Close started checks")
	}
}

// TestSetVerdict: an outside verdict decides Usable from the node's own
// status; overrides still win; Changed notifies.
func TestSetVerdict(t *testing.T) {
	m := NewManager(nil)
	k := Key{Addr: netip.MustParseAddr("192.0.2.1"), Check: "c"}
	notified := 0
	m.OnChange(func() { notified++ })
	down := true
	m.SetVerdict(func(key Key, own Status) Status {
		if key == k && down {
			return Down
		}
		return own
	})
	if m.Usable(k) {
		t.Error("the verdict says down, Usable says usable")
	}
	down = false
	m.Changed()
	if !m.Usable(k) || notified != 2 {
		t.Errorf("verdict up: usable %v, notified %d", m.Usable(k), notified)
	}
	down = true
	m.SetOverride(k.Addr, OverrideUp, time.Time{})
	if !m.Usable(k) {
		t.Error("an up override must win over the verdict")
	}
	m.SetVerdict(nil)
	m.SetOverride(k.Addr, OverrideNone, time.Time{})
	if !m.Usable(k) {
		t.Error("without a verdict an unchecked key is usable")
	}
}
