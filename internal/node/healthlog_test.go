package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/health"
)

// healthLogConfig is two steered records of two pools each; ttl is a's.
func healthLogConfig(ttl int) string {
	return fmt.Sprintf(`zones: [{ origin: example.com, file: example.com.zone }]
records:
  - { name: a.example.com, ttl: %d, pools: { p1: { address: 192.0.2.1 }, p2: { address: 192.0.2.2 } }, rules: [ { default: { pool: p1 } } ] }
  - { name: b.example.com, ttl: 60, pools: { p1: { address: 192.0.2.3 }, p2: { address: 192.0.2.4 } }, rules: [ { default: { pool: p1 } } ] }
`, ttl)
}

// TestHealthTransitionsAcrossReload checks the health wiring's memory of
// each pool's state (kept by record index since issue 31): a drained pool
// (the override's own line says it) keeps the time it changed state across a reload that
// renumbers nothing and one that builds another table, and a record
// failing open is said once and its recovery once.
func TestHealthTransitionsAcrossReload(t *testing.T) {
	t.Parallel()
	tn := startNode(t, map[string]string{"steer.yaml": healthLogConfig(60), "example.com.zone": zone("example.com", 1, "x")}, Options{})
	start, first, ok := tn.hc.poolSince("a.example.com.", "p1")
	if !ok || !first {
		t.Fatalf("a/p1 at the start: since %v first %v known %v, want a first sighting", start, first, ok)
	}
	time.Sleep(20 * time.Millisecond) // a later time for the change
	tn.hc.manager.SetPoolOverride("a.example.com.", "p1", health.OverrideDrain, time.Time{})
	dnstest.WaitFor(t, 5*time.Second, "the drain seen", func() bool {
		_, first, _ := tn.hc.poolSince("a.example.com.", "p1")
		return !first
	})
	since, first, ok := tn.hc.poolSince("a.example.com.", "p1")
	if !ok || first || !since.After(start) {
		t.Fatalf("a/p1 drained: since %v first %v known %v, want a change after %v", since, first, ok, start)
	}
	if s2, first2, ok2 := tn.hc.poolSince("b.example.com.", "p1"); !ok2 || !first2 || !s2.Equal(start) {
		t.Errorf("b/p1 (untouched): since %v first %v known %v, want the start %v", s2, first2, ok2, start)
	}
	if _, _, ok := tn.hc.poolSince("a.example.com.", "nope"); ok {
		t.Error("a pool the record does not have is known")
	}

	// Another table: a's TTL changes, so every record is renumbered
	// against a new table; the states carry over by name.
	writeFile(t, tn.dir, "steer.yaml", healthLogConfig(30))
	if _, err := tn.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s, f, ok := tn.hc.poolSince("a.example.com.", "p1"); !ok || f || !s.Equal(since) {
		t.Errorf("a/p1 after a reload: since %v first %v known %v, want %v kept", s, f, ok, since)
	}
	if s, f, ok := tn.hc.poolSince("a.example.com.", "p2"); !ok || !f || !s.Equal(start) {
		t.Errorf("a/p2 after a reload: since %v first %v known %v, want the start %v", s, f, ok, start)
	}

	// Both pools drained: the record fails open, said once; undrained,
	// its recovery is said once.
	tn.hc.manager.SetPoolOverride("a.example.com.", "p2", health.OverrideDrain, time.Time{})
	dnstest.WaitFor(t, 5*time.Second, "failing open logged", func() bool { return strings.Contains(tn.logs.String(), "failing open") })
	tn.hc.manager.SetPoolOverride("a.example.com.", "p2", health.OverrideNone, time.Time{})
	dnstest.WaitFor(t, 5*time.Second, "recovery logged", func() bool { return strings.Contains(tn.logs.String(), "usable pool again") })
	logs := tn.logs.String()
	for line, want := range map[string]int{"failing open": 1, "usable pool again": 1, "pool not in service": 0} {
		if n := strings.Count(logs, line); n != want {
			t.Errorf("%q logged %d times, want %d", line, n, want)
		}
	}
}
