package fleetnode

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/health"
)

// TestOwnOverrideClearedBeforeSeen: this node drains a pool (the single
// write of the pool state API, then the batch write of POST
// /v1/overrides) and another node clears it before this node's watch
// showed it set (both changes reach the watch in one response): the view
// that takes the write over, read from the store without the key, clears
// the drain on this node. A view read before the write does not undo it.
// (Before, the node went on draining the pool while every other node did
// not, until it restarted.)
func TestOwnOverrideClearedBeforeSeen(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	dir := t.TempDir()
	cfg, err := config.Parse(nil, filepath.Join(dir, "steer.yaml"), []byte(fleetLocal(c.Endpoints(), "a")))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	m, err := Open(Options{Log: log, Local: cfg, Version: "test", Reload: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	s := openStore(t, c.Endpoints())
	hm := health.NewManager(log)
	t.Cleanup(hm.Close)
	f := overrideFollower{m: m, hm: hm, applied: map[string]bool{}}
	const record = "shop.example.com."
	key := poolOverrideKey(m.prefix, record, "b")
	view := func() (map[string][]byte, int64) {
		kvs, rev, err := s.Get(context.Background(), overridesPrefix(m.prefix))
		if err != nil {
			t.Fatal(err)
		}
		v := map[string][]byte{}
		for _, kv := range kvs {
			v[kv.Key] = kv.Value
		}
		return v, rev
	}
	drained := func() bool {
		o, _, ok := hm.PoolOverride(record, "b")
		return ok && o == health.OverrideDrain
	}
	write := func(how string) {
		t.Helper()
		// The API applies it here, then writes it for the fleet.
		hm.SetPoolOverride(record, "b", health.OverrideDrain, time.Time{})
		if how == "single" {
			err = m.SetPoolOverride(record, "b", health.OverrideDrain, time.Time{})
		} else {
			err = m.SetOverrides([]OverrideWrite{{Record: record, Pool: "b", Override: health.OverrideDrain}})
		}
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
	}
	clearByAnother := func() {
		t.Helper()
		if _, _, err := s.Txn(context.Background(), nil, nil, []string{key}); err != nil {
			t.Fatal(err)
		}
	}
	for _, how := range []string{"single", "batch"} {
		write(how)
		clearByAnother()
		f.apply(view())
		if drained() {
			t.Fatalf("%s: the drain another node cleared stays on this node", how)
		}

		before, beforeRev := view()
		write(how)
		f.apply(before, beforeRev)
		if !drained() {
			t.Fatalf("%s: a view read before the write undid it", how)
		}
		clearByAnother()
		f.apply(view())
		if drained() {
			t.Fatalf("%s: the drain another node cleared stays on this node (after a view with it)", how)
		}
	}
}
