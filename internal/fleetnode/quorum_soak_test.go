//go:build !race

package fleetnode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/quorum"
)

// These tests wait seconds of wall time (a view_grace, a measuring
// window): they run beside the plain stage, not under -race.

// TestSkewedObserverCannotDefeatTheFreeze: cut from the store, a node
// keeps the fleet's view as it was (no observer goes stale, no hold-down
// runs out) until view_grace, however far ahead some observer's clock
// runs. The target is up for the quorum (3 of 5 see it up, one of them
// 60 s ahead); the cut-off node itself sees it down. (Keyed on the newest
// CheckedAt of any observer, the freeze did not start while the skewed
// observer's time was ahead: the others went stale, the node was left
// with 2 live observers < min_observers, and its own "down" withdrew the
// target long before view_grace.)
func TestSkewedObserverCannotDefeatTheFreeze(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	bridge := etcdtest.NewBridge(t, c.Member(0).Addr())
	port := rigTarget(t)
	defs, keys := rigKeys(port, "t")
	key := keys[0]
	const grace = 6 * time.Second
	o := rigOptions{endpoints: c.Endpoints(), observers: 5, viewGrace: grace.String()}
	cut := o
	cut.endpoints = []string{"http://" + bridge.Addr()}
	a := startRigNode(t, cut, "a", "eu", defs, keys, false)
	startRigNode(t, o, "b", "eu", defs, keys, true)
	startRigNode(t, o, "c", "eu", defs, keys, true)
	startRigNode(t, o, "d", "eu", defs, keys, false)
	skewed := o
	skewed.now = func() time.Time { return time.Now().Add(60 * time.Second) }
	startRigNode(t, skewed, "skewed", "eu", defs, keys, true)
	waitFor(t, 10*time.Second, "up on a by the quorum: 3 of 5 up", func() bool {
		r, ok := a.result(key)
		return ok && r.Source == quorum.SourceQuorum && r.Live == 5 && r.LiveUp == 3 && a.hm.Usable(key)
	})
	bridge.Cut()
	at := time.Now()
	for time.Since(at) < grace-time.Second {
		if !a.hm.Usable(key) {
			r, _ := a.result(key)
			t.Fatalf("cut from the store, a withdrew the target after %v, before view_grace %v: %s", time.Since(at).Round(10*time.Millisecond), grace, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "a on its own checks after view_grace: down", func() bool { return !a.hm.Usable(key) })
	t.Logf("cut from the store: the fleet's verdict held, then a's own checks after %v (view_grace %v)", time.Since(at).Round(10*time.Millisecond), grace)
}

// TestFleetRevisionGrowth measures what a fleet with stable health costs
// etcd: nodes × targets checked every 100 ms, each target by 5 observers,
// lease_ttl 3 s. Over the window, the store's revision must grow by at
// most targets × observers × changes (none: health is stable) plus one
// refresh per lease_ttl/3 per node. Publishing every check result cost
// targets × observers / interval revisions a second (here 1,000/s).
// STEER_FLEET_SOAK=10m (any duration) runs the window for that long
// (bench/fleet-soak.sh); the default is 10 s (ten refresh periods).
func TestFleetRevisionGrowth(t *testing.T) {
	t.Parallel()
	window := 10 * time.Second
	if v := os.Getenv("STEER_FLEET_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("STEER_FLEET_SOAK=%q: %v", v, err)
		}
		window = d
	}
	const nodes, targets, observers, ttl = 6, 20, 5, 3 * time.Second
	c := etcdtest.Start(t, etcdtest.Options{})
	s := openStore(t, c.Endpoints())
	port := rigTarget(t)
	var checks []string
	for i := range targets {
		checks = append(checks, fmt.Sprintf("t%d", i))
	}
	defs, keys := rigKeys(port, checks...)
	// A loaded machine must not flap the targets: patient checks.
	o := rigOptions{endpoints: c.Endpoints(), observers: observers, leaseTTL: ttl.String(), fall: 5}
	var rig []*rigNode
	for i := range nodes {
		rig = append(rig, startRigNode(t, o, fmt.Sprintf("n%d", i), "eu", defs, keys, true))
	}
	waitFor(t, 15*time.Second, "every target's observers published and every node deciding by the quorum", func() bool {
		for _, k := range keys {
			if len(observersInStore(t, s, k)) != observers {
				return false
			}
			for _, n := range rig {
				if r, ok := n.result(k); !ok || r.Source != quorum.SourceQuorum || r.Live != observers {
					return false
				}
			}
		}
		return true
	})
	results := func() (n, changes int64) {
		for _, x := range rig {
			n += x.results.Load()
			changes += x.changes.Load()
		}
		return n, changes
	}
	res0, ch0 := results()
	rev0, start := c.Rev(), time.Now()
	// What the revisions were spent on, by the kind of key written.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kinds := map[string]int{}
	var kindsMu sync.Mutex
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for resp := range s.Watch(ctx, fleetPrefix+"/", rev0+1) {
			kindsMu.Lock()
			for _, e := range resp.Events {
				kind, _, _ := strings.Cut(strings.TrimPrefix(e.KV.Key, fleetPrefix+"/"), "/")
				kinds[kind+" "+e.Kind.String()]++
			}
			kindsMu.Unlock()
		}
	}()
	time.Sleep(window)
	rev1, took := c.Rev(), time.Since(start)
	res1, ch1 := results()
	time.Sleep(200 * time.Millisecond) // the watch catches up
	cancel()
	<-watched
	kindsMu.Lock()
	fmt.Fprintf(os.Stdout, "keys written: %v\n", kinds)
	kindsMu.Unlock()
	// Each observer's change of a target's status is one write at most
	// (stable health: none, unless the machine is so loaded that a check
	// times out fall times in a row).
	changes := ch1 - ch0
	refreshes := int64(nodes) * (int64(took/(ttl/3)) + 1)
	bound := changes + refreshes
	growth := rev1 - rev0
	fmt.Fprintf(os.Stdout, "fleet revision growth over %v: %d nodes, %d targets × %d observers checked every 100ms, lease_ttl %v: "+
		"%d revisions for %d check results (bound: %d observer changes + %d refreshes, one per lease_ttl/3 per node = %d; publishing every result: %d)\n",
		took.Round(time.Second), nodes, targets, observers, ttl, growth, res1-res0, changes, refreshes, bound, res1-res0)
	if growth > bound {
		t.Errorf("the revision grew by %d over %v, more than %d", growth, took.Round(time.Second), bound)
	}
	if changes > 0 {
		t.Logf("health was not stable: %d status changes of the observers' checkers (a loaded machine)", changes)
	}
}
