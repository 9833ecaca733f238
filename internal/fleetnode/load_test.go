package fleetnode

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestPendingLoads: loads put while the member is cut off from the store
// are pending, the latest per pool (an older one does not replace it);
// one that turns stale while pending is dropped, counted and logged, not
// written late; when the store answers again the others are written,
// except where another node wrote a newer load of the pool meanwhile
// (it stays).
func TestPendingLoads(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	bridge := etcdtest.NewBridge(t, c.Member(0).Addr())
	defs, keys := rigKeys(rigTarget(t), "t")
	a := startRigNode(t, rigOptions{endpoints: []string{"http://" + bridge.Addr()}, leaseTTL: "2s"}, "a", "eu", defs, keys, true)
	s := openStore(t, c.Endpoints())
	stored := func() map[string]Load {
		kvs, _, err := s.Get(context.Background(), loadPrefix("/steer/v1"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Load{}
		for _, kv := range kvs {
			var l Load
			if err := json.Unmarshal(kv.Value, &l); err != nil {
				t.Fatal(err)
			}
			out[l.Record+"/"+l.Pool] = l
		}
		return out
	}
	now := time.Now().Truncate(time.Millisecond)
	if err := a.m.PutLoads([]Load{{Record: "r.", Pool: "p", Current: 1, At: now.Add(-time.Second)}}, time.Hour); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 5*time.Second, "the member's status in the store", func() bool {
		kvs, _, err := s.Get(context.Background(), fleet.StatusKey("/steer/v1", "a"))
		return err == nil && len(kvs) == 1
	}, a.logs.String)
	bridge.Cut()
	// Known cut off (its status write failed), PutLoads does not wait for
	// the write's timeout: wait for that (up to 5 s on a loaded machine,
	// then go on anyway: each put then takes 3 s).
	cutAt := time.Now()
	for time.Since(cutAt) < 5*time.Second && !a.m.storeDown() {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("known cut off after %v: %v", time.Since(cutAt).Round(time.Millisecond), a.m.storeDown())
	put := func(l Load, stale time.Duration) {
		t.Helper()
		if err := a.m.PutLoads([]Load{l}, stale); !errors.Is(err, ErrPending) {
			t.Fatalf("cut off: %v, want ErrPending", err)
		}
	}
	put(Load{Record: "r.", Pool: "p", Current: 140, At: now}, time.Hour)
	put(Load{Record: "r.", Pool: "p", Current: 99, At: now.Add(-time.Millisecond)}, time.Hour) // older: ignored
	put(Load{Record: "r.", Pool: "q", Current: 50, At: now}, time.Hour)
	put(Load{Record: "r.", Pool: "old", Current: 70, At: now.Add(-900 * time.Millisecond)}, time.Second)
	if p := strings.Join(a.m.PendingLoads(), "; "); !strings.Contains(p, "load r./p 140 at") || !strings.Contains(p, "load r./q 50") || strings.Contains(p, " 99 ") {
		t.Fatalf("pending: %s", p)
	}
	// Another node writes a newer load of q meanwhile.
	newer, _ := json.Marshal(Load{Record: "r.", Pool: "q", Current: 60, At: now.Add(time.Millisecond)})
	if _, _, err := s.Txn(context.Background(), nil, []fleet.KV{{Key: loadKey("/steer/v1", "r.", "q"), Value: newer}}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the stale pending load dropped", func() bool { return a.m.loadsDropped.Load() == 1 }, a.logs.String)
	if !strings.Contains(a.logs.String(), "turned stale before the store took it") || len(a.m.PendingLoads()) != 2 {
		t.Fatalf("after the drop: pending %q; logs:\n%s", a.m.PendingLoads(), a.logs.String())
	}

	bridge.Heal()
	healed := time.Now()
	waitFor(t, 5*time.Second, "the pending loads written", func() bool { return len(a.m.PendingLoads()) == 0 }, a.logs.String)
	t.Logf("pending loads written %v after the link healed", time.Since(healed).Round(time.Millisecond))
	got := stored()
	if got["r./p"].Current != 140 || !got["r./p"].At.Equal(now) {
		t.Errorf("pool p in the store: %+v, want 140 at %v", got["r./p"], now)
	}
	if got["r./q"].Current != 60 {
		t.Errorf("pool q in the store: %+v, want the newer 60 another node wrote", got["r./q"])
	}
	if l, ok := got["r./old"]; ok {
		t.Errorf("the stale load was written late: %+v", l)
	}
}
