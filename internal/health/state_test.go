package health

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// logBuf collects JSON log lines from any goroutine.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the decoded log lines whose message is msg.
func (b *logBuf) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// newLoggedManager is newManager with its log captured. The returned
// Manager is closed at the end of the test, before t.TempDir directories
// made earlier are removed.
func newLoggedManager(t *testing.T) (*Manager, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	m := NewManager(slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})))
	m.jitter = func(time.Duration) time.Duration { return 0 }
	t.Cleanup(m.Close)
	return m, lb
}

func readState(t *testing.T, path string) (stateFile, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return f, data
}

// noTemps fails if dir holds anything but the files named.
func noTemps(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
}

const rec = "shop.example.com."

func TestPoolOverridesSavedAndRestored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	m1, lb := newLoggedManager(t)
	m1.SetStateFile(path)
	var calls atomic.Int64
	m1.OnChange(func() { calls.Add(1) })

	exp := time.Now().Add(time.Hour).Round(0)
	m1.SetPoolOverride(rec, "fra", OverrideDrain, exp)
	m1.SetPoolOverride(rec, "ams", OverrideDown, time.Time{})
	m1.SetPoolOverride(rec, "old", OverrideDown, time.Now().Add(-time.Second)) // past: no override
	m1.SetPoolOverride(rec, "gone", OverrideUp, time.Time{})
	m1.SetPoolOverride(rec, "gone", OverrideNone, time.Time{})
	if n := calls.Load(); n != 5 {
		t.Errorf("OnChange called %d times for 5 SetPoolOverride calls", n)
	}
	if o, e, ok := m1.PoolOverride(rec, "fra"); !ok || o != OverrideDrain || !e.Equal(exp) {
		t.Errorf("PoolOverride fra = %v %v %v", o, e, ok)
	}
	for _, p := range []string{"old", "gone", "none"} {
		if o, _, ok := m1.PoolOverride(rec, p); ok {
			t.Errorf("PoolOverride %s = %v, want none", p, o)
		}
	}
	if _, _, ok := m1.PoolOverride("other.example.", "fra"); ok {
		t.Error("override of another record's pool")
	}

	// Saved without SaveState, sorted, expiry only where there is one.
	f, data := readState(t, path)
	want := []savedPool{
		{Record: rec, Pool: "ams", Override: "down"},
		{Record: rec, Pool: "fra", Override: "drain", Expires: exp.UTC()},
	}
	if f.Version != 2 || !reflect.DeepEqual(f.Pools, want) {
		t.Errorf("saved version %d pools %+v, want %+v\n%s", f.Version, f.Pools, want, data)
	}
	if strings.Count(string(data), `"expires"`) != 1 {
		t.Errorf("zero expiry written:\n%s", data)
	}
	noTemps(t, dir, "health.json")

	// One log line per change, with names.
	set := lb.lines(t, "pool override set")
	if len(set) != 3 || set[0]["record"] != rec || set[0]["pool"] != "fra" || set[0]["override"] != "drain" ||
		set[0]["expires"] == nil || set[1]["override"] != "down" || set[1]["expires"] != nil {
		t.Errorf("set log lines %v", set)
	}
	// The already-expired "old" changed nothing: no line.
	if cl := lb.lines(t, "pool override cleared"); len(cl) != 1 || cl[0]["pool"] != "gone" || cl[0]["override"] != "auto" {
		t.Errorf("cleared log lines %v", cl)
	}

	// A new Manager restores them with their expiries.
	m1.Close()
	m2, _ := newLoggedManager(t)
	if err := m2.LoadState(path); err != nil {
		t.Fatal(err)
	}
	if o, e, ok := m2.PoolOverride(rec, "fra"); !ok || o != OverrideDrain || !e.Equal(exp) {
		t.Errorf("restored fra = %v %v %v, want drain until %v", o, e, ok, exp)
	}
	got := m2.PoolOverrides()
	wantAll := []PoolOverrideState{
		{Record: rec, Pool: "ams", Override: OverrideDown},
		{Record: rec, Pool: "fra", Override: OverrideDrain, Expires: exp.UTC()},
	}
	if !reflect.DeepEqual(got, wantAll) {
		t.Errorf("PoolOverrides %+v, want %+v", got, wantAll)
	}
}

func TestPoolOverrideExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")

	// A file with one expired pool override, one due soon and one for long.
	soon := time.Now().Add(300 * time.Millisecond)
	later := time.Now().Add(time.Hour)
	f := stateFile{Version: 2, Saved: time.Now(), Pools: []savedPool{
		{Record: rec, Pool: "expired", Override: "drain", Expires: time.Now().Add(-time.Minute)},
		{Record: rec, Pool: "soon", Override: "down", Expires: soon},
		{Record: rec, Pool: "later", Override: "up", Expires: later},
	}}
	if err := writeState(path, f); err != nil {
		t.Fatal(err)
	}
	m, lb := newLoggedManager(t)
	changed := make(chan struct{}, 16)
	m.OnChange(func() { changed <- struct{}{} })
	if err := m.LoadState(path); err != nil {
		t.Fatal(err)
	}
	m.SetStateFile(path)
	<-changed // LoadState's own
	if _, _, ok := m.PoolOverride(rec, "expired"); ok {
		t.Error("expired pool override restored")
	}
	if o, e, ok := m.PoolOverride(rec, "soon"); !ok || o != OverrideDown || !e.Equal(soon) {
		t.Fatalf("soon = %v %v %v", o, e, ok)
	}
	select {
	case <-changed:
	case <-time.After(2 * time.Second):
		t.Fatal("no OnChange when the pool override expired")
	}
	if time.Now().Before(soon) {
		t.Error("expired early")
	}
	if o, _, ok := m.PoolOverride(rec, "soon"); ok {
		t.Errorf("soon still %v after its expiry", o)
	}
	saved, data := readState(t, path)
	if len(saved.Pools) != 1 || saved.Pools[0].Pool != "later" || !saved.Pools[0].Expires.Equal(later) {
		t.Errorf("file after expiry:\n%s", data)
	}
	if l := lb.lines(t, "pool override expired"); len(l) != 1 || l[0]["pool"] != "soon" || l[0]["override"] != "down" {
		t.Errorf("expiry log lines %v", l)
	}

	// A target override's expiry is saved too.
	a := netip.MustParseAddr("192.0.2.7")
	m.SetOverride(a, OverrideDrain, time.Now().Add(100*time.Millisecond))
	if saved, _ := readState(t, path); len(saved.Overrides) != 1 {
		t.Errorf("target override not saved: %+v", saved.Overrides)
	}
	dnstest.WaitFor(t, 2*time.Second, "target override expired in the file", func() bool {
		saved, _ := readState(t, path)
		return len(saved.Overrides) == 0
	})
	if _, _, ok := m.TargetOverride(a); ok {
		t.Error("TargetOverride after expiry")
	}
}

func TestLoadStateVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	v1 := write("v1.json", fmt.Sprintf(`{
  "version": 1,
  "saved": "2024-05-01T10:00:00Z",
  "targets": [{"addr": "127.0.0.1", "check": "w", "status": "down", "since": "2024-05-01T09:00:00Z", "reason": "HTTP 503"}],
  "overrides": [
    {"addr": "2001:db8::1", "override": "drain"},
    {"addr": "192.0.2.1", "override": "down", "expires": %q}
  ]
}`, exp.Format(time.RFC3339)))
	m := newManager(t)
	if err := m.LoadState(v1); err != nil {
		t.Fatalf("version 1: %v", err)
	}
	if o, _, ok := m.TargetOverride(netip.MustParseAddr("2001:db8::1")); !ok || o != OverrideDrain {
		t.Errorf("v1 drain override: %v %v", o, ok)
	}
	if o, e, ok := m.TargetOverride(netip.MustParseAddr("192.0.2.1")); !ok || o != OverrideDown || !e.Equal(exp) {
		t.Errorf("v1 down override: %v %v %v", o, e, ok)
	}
	if len(m.PoolOverrides()) != 0 {
		t.Error("pools from a v1 file")
	}
	if rs := m.restored[Key{localhost, "w"}]; rs.Status != Down || rs.Reason != "HTTP 503" {
		t.Errorf("v1 target: %+v", rs)
	}
	// Saving it again writes version 2, keeping the restored status of a
	// key not yet applied.
	out := filepath.Join(dir, "out.json")
	if err := m.SaveState(out); err != nil {
		t.Fatal(err)
	}
	if f, data := readState(t, out); f.Version != 2 || len(f.Targets) != 1 || len(f.Overrides) != 2 {
		t.Errorf("resaved:\n%s", data)
	}

	for name, body := range map[string]string{
		"v3.json":       `{"version": 3, "saved": "2024-05-01T10:00:00Z", "targets": []}`,
		"v0.json":       `{"targets": []}`,
		"unknown.json":  `{"version": 2, "saved": "2024-05-01T10:00:00Z", "targets": [], "extra": 1}`,
		"v1pools.json":  `{"version": 1, "saved": "2024-05-01T10:00:00Z", "targets": [], "pools": [{"record": "a.", "pool": "p", "override": "down"}]}`,
		"badpool.json":  `{"version": 2, "saved": "2024-05-01T10:00:00Z", "targets": [], "pools": [{"record": "a.", "pool": "p", "override": "sideways"}]}`,
		"poolfld.json":  `{"version": 2, "saved": "2024-05-01T10:00:00Z", "targets": [], "pools": [{"record": "a.", "pool": "p", "override": "down", "why": "x"}]}`,
		"trailing.json": `{"version": 2, "saved": "2024-05-01T10:00:00Z", "targets": []} {}`,
	} {
		p := write(name, body)
		m := newManager(t)
		err := m.LoadState(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming the file", name, err)
		}
		if len(m.PoolOverrides()) != 0 {
			t.Errorf("%s: restored pools from a bad file", name)
		}
	}
}

func TestConcurrentOverridesSaved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	m, lb := newLoggedManager(t)
	m.SetStateFile(path)
	// Saves pausing between taking the state and writing it would write
	// older state over newer if they were not serialised.
	var seed atomic.Uint64
	m.beforeWrite = func() {
		time.Sleep(time.Duration(rand.New(rand.NewPCG(seed.Add(1), 2)).IntN(500)) * time.Microsecond)
	}
	addrs := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::3")}
	pools := []string{"fra", "ams", "lhr", "nyc"}
	overrides := []Override{OverrideNone, OverrideUp, OverrideDown, OverrideDrain}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 40 {
				o := overrides[r.IntN(len(overrides))]
				var exp time.Time
				if r.IntN(2) == 0 {
					exp = time.Now().Add(time.Duration(1+r.IntN(100)) * time.Hour)
				}
				if i%2 == 0 {
					m.SetOverride(addrs[r.IntN(len(addrs))], o, exp)
				} else {
					m.SetPoolOverride(rec, pools[r.IntN(len(pools))], o, exp)
				}
				if i%10 == 0 {
					m.PoolOverrides()
					m.Snapshot()
				}
			}
		})
	}
	wg.Wait()

	f, data := readState(t, path)
	m.mu.RLock()
	want := m.stateLocked(time.Now())
	m.mu.RUnlock()
	f.Saved, want.Saved = time.Time{}, time.Time{}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("file is not the final state:\n%s\nwant %+v", data, want)
	}
	if len(f.Pools) != len(m.PoolOverrides()) {
		t.Errorf("file has %d pools, manager %d", len(f.Pools), len(m.PoolOverrides()))
	}
	noTemps(t, dir, "health.json")
	if l := lb.lines(t, "health state file not saved"); len(l) != 0 {
		t.Errorf("save failures: %v", l)
	}
}

// readOnlyDir makes dir unwritable, even for root (by chattr +i) where
// permissions are not enough, and restores it at the end of the test; it
// skips the test if neither works.
func readOnlyDir(t *testing.T, dir string) (restore func()) {
	t.Helper()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	restore = func() { os.Chmod(dir, 0o755) }
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err == nil {
		os.Remove(probe)
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			restore()
			t.Skipf("cannot make %s read-only as this user: %v %s", dir, err, out)
		}
		restore = func() { exec.Command("chattr", "-i", dir).Run(); os.Chmod(dir, 0o755) }
		if err := os.WriteFile(probe, nil, 0o644); err == nil {
			os.Remove(probe)
			restore()
			t.Skipf("cannot make %s read-only", dir)
		}
	}
	t.Cleanup(restore)
	return restore
}

func TestSaveFailureKeepsOldFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	m, lb := newLoggedManager(t)
	m.SetStateFile(path)
	for i := range 5 {
		m.SetPoolOverride(rec, fmt.Sprint("p", i), OverrideDrain, time.Time{})
	}
	noTemps(t, dir, "health.json")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	restore := readOnlyDir(t, dir)
	m.SetPoolOverride(rec, "fra", OverrideDown, time.Time{})
	m.SetOverride(localhost, OverrideDrain, time.Time{})
	m.SetPoolOverride(rec, "p0", OverrideNone, time.Time{})
	if o, _, ok := m.PoolOverride(rec, "fra"); !ok || o != OverrideDown {
		t.Error("a failed save lost the override in memory")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("state file changed by a failed save:\n%s", after)
	}
	failed := lb.lines(t, "health state file not saved")
	if len(failed) != 1 || failed[0]["file"] != path || failed[0]["level"] != "WARN" {
		t.Errorf("want one warning naming %s, got %v", path, failed)
	}
	noTemps(t, dir, "health.json")

	// Writable again: the next change saves, the recovery is logged, and
	// a new failure streak would be logged again.
	restore()
	m.SetPoolOverride(rec, "p1", OverrideNone, time.Time{})
	f, data := readState(t, path)
	if len(f.Pools) != 4 || len(f.Overrides) != 1 {
		t.Errorf("after recovery:\n%s", data)
	}
	if l := lb.lines(t, "health state file saved again"); len(l) != 1 {
		t.Errorf("recovery log lines %v", l)
	}
	noTemps(t, dir, "health.json")
}

func TestStatusSavesAndCloseSaves(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	w := newWebServer(t, false)
	w.code.Store(503)
	m, lb := newLoggedManager(t)
	m.statusSaveDelay = 50 * time.Millisecond
	m.SetStateFile(path)
	k := Key{localhost, "w"}
	m.Apply(map[string]Check{"w": {Type: "http", Port: w.port(t), Interval: iv, Timeout: to, Fall: 1, Rise: 1}}, []Key{k})
	waitStatus(t, m, k, Down, time.Second)
	saved := func(status string) func() bool {
		return func() bool {
			f, err := os.ReadFile(path)
			return err == nil && strings.Contains(string(f), `"status": "`+status+`"`)
		}
	}
	dnstest.WaitFor(t, 2*time.Second, "down saved", saved("down"))

	// Status changes are logged by name, once per transition.
	w.code.Store(200)
	waitStatus(t, m, k, Up, time.Second)
	dnstest.WaitFor(t, 2*time.Second, "up saved", saved("up"))
	down, up := lb.lines(t, "target down"), lb.lines(t, "target up")
	if len(down) != 1 || down[0]["key"] != k.String() || down[0]["from"] != "unknown" || down[0]["to"] != "down" ||
		down[0]["reason"] != "HTTP 503" || down[0]["level"] != "WARN" {
		t.Errorf("down log lines %v", down)
	}
	if len(up) != 1 || up[0]["from"] != "down" || up[0]["to"] != "up" || up[0]["level"] != "INFO" {
		t.Errorf("up log lines %v", up)
	}
	if l := lb.lines(t, "target override set"); len(l) != 0 {
		t.Errorf("spurious override lines %v", l)
	}
	m.SetOverride(localhost, OverrideDrain, time.Time{})
	m.SetOverride(localhost, OverrideDrain, time.Time{}) // no change: no line
	if l := lb.lines(t, "target override set"); len(l) != 1 || l[0]["override"] != "drain" || l[0]["addr"] != "127.0.0.1" {
		t.Errorf("override log lines %v", l)
	}

	// Close saves the final state, and nothing is written after it.
	m.Close()
	f, data := readState(t, path)
	if len(f.Targets) != 1 || f.Targets[0].Status != "up" || len(f.Overrides) != 1 {
		t.Errorf("after Close:\n%s", data)
	}
	st, _ := os.Stat(path)
	m.SetPoolOverride(rec, "fra", OverrideDown, time.Time{})
	time.Sleep(3 * m.statusSaveDelay)
	if st2, _ := os.Stat(path); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("state file written after Close")
	}
	if _, _, ok := m.PoolOverride(rec, "fra"); ok {
		t.Error("SetPoolOverride after Close took effect")
	}
	noTemps(t, dir, "health.json")
}

func TestStatusSavesCoalescedUntilClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	w := newWebServer(t, false)
	m, _ := newLoggedManager(t)
	m.statusSaveDelay = time.Hour
	m.SetStateFile(path)
	k := Key{localhost, "w"}
	m.Apply(map[string]Check{"w": {Type: "http", Port: w.port(t), Interval: iv, Timeout: to}}, []Key{k})
	waitStatus(t, m, k, Up, time.Second)
	time.Sleep(2 * iv)
	if _, err := os.Stat(path); err == nil {
		t.Error("status change saved at once, not coalesced")
	}
	m.Close()
	f, data := readState(t, path)
	if len(f.Targets) != 1 || f.Targets[0].Status != "up" {
		t.Errorf("after Close:\n%s", data)
	}
}

func TestSaveFailureAtRenameLeavesNoTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	if err := os.Mkdir(path, 0o755); err != nil { // a file cannot be renamed over it
		t.Fatal(err)
	}
	m, lb := newLoggedManager(t)
	m.SetStateFile(path)
	m.SetPoolOverride(rec, "fra", OverrideDrain, time.Time{})
	m.SetPoolOverride(rec, "ams", OverrideDrain, time.Time{})
	if err := m.SaveState(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("SaveState over a directory: %v", err)
	}
	if l := lb.lines(t, "health state file not saved"); len(l) != 1 {
		t.Errorf("want one warning, got %v", l)
	}
	noTemps(t, dir, "health.json")
	if ents, _ := os.ReadDir(path); len(ents) != 0 {
		t.Errorf("wrote into the directory: %v", ents)
	}
}

func TestSlowSaveNeverWritesOlderState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "health.json")
	m, _ := newLoggedManager(t)
	m.SetStateFile(path)
	// The first save stalls after taking its state until the second
	// change's SetPoolOverride has returned (or 200ms, if that waits for
	// the first save, as it should).
	inHook, aDone, bDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	m.beforeWrite = func() {
		if first.CompareAndSwap(false, true) {
			close(inHook)
			select {
			case <-bDone:
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	go func() { m.SetPoolOverride(rec, "fra", OverrideDown, time.Time{}); close(aDone) }()
	<-inHook
	go func() { m.SetPoolOverride(rec, "ams", OverrideDrain, time.Time{}); close(bDone) }()
	<-aDone
	<-bDone
	if f, data := readState(t, path); len(f.Pools) != 2 {
		t.Errorf("older state written over newer:\n%s", data)
	}
}
