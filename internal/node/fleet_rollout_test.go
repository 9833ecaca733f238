package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/fleetnode"
)

// badBundle passes no node's configuration load (two zones with one
// origin), as a push that skipped steer check would.
func badBundle(serial int) fleet.Bundle {
	b := fleetBundle(serial, "bad")
	b.Files["steer.yaml"] = []byte("identity: pushed\nzones:\n  - origin: example.com\n    file: zones/missing.zone\n  - origin: example.com\n    file: zones/example.com.zone\n")
	return b
}

// TestFleetRestartAfterBadPush: a node restarted after a push it could not
// apply serves the bundle it applied before, with the store up and with
// the store down, and its status says which bundle it serves and why not
// the newest.
func TestFleetRestartAfterBadPush(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	ctx := context.Background()
	rev, _, err := fleet.Publish(ctx, s, "/steer/v1", fleetBundle(1, "good"), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "fra-1")}, Options{})
	waitTXT(t, n, "good")
	badRev, _, err := fleet.Publish(ctx, s, "/steer/v1", badBundle(2), rev)
	if err != nil {
		t.Fatal(err)
	}
	dnstest.WaitFor(t, 5*time.Second, "the error reported", func() bool {
		st := statusOf(t, s, "fra-1")
		return st.Error != "" && st.ErrorRev == badRev
	})

	// Restarted with the store up: the newest bundle fails, the kept one
	// serves, and the status says so.
	n.Shutdown(ctx)
	up := startNodeIn(t, n.dir, Options{})
	if got := up.txt("gen.example.com"); got != "good" {
		t.Fatalf("restarted after a bad push (store up): %q, want the bundle applied before", got)
	}
	dnstest.WaitFor(t, 5*time.Second, "the status after the restart", func() bool {
		st := statusOf(t, s, "fra-1")
		return st.Serial == 1 && st.Rev == rev && st.ErrorRev == badRev && strings.Contains(st.Error, "example.com")
	})
	if !strings.Contains(up.logs.String(), "serving the bundle last applied") {
		t.Error("the log does not say the bundle last applied is served")
	}
	// Reloads (the follower's first view) do not change that.
	if got := up.txt("gen.example.com"); got != "good" {
		t.Fatalf("after the first view: %q", got)
	}

	// Restarted with the store down: the same.
	up.Shutdown(ctx)
	c.Member(0).Stop()
	down := startNodeIn(t, n.dir, Options{})
	if got := down.txt("gen.example.com"); got != "good" {
		t.Fatalf("restarted after a bad push (store down): %q, want the bundle applied before", got)
	}
}

// TestFleetCanary: a canary bundle is served by the node it names only;
// promoted, every node serves it (the canary node without a reload);
// rolled back, every node serves the previous bundle again. Each node's
// status names the digest of what it serves.
func TestFleetCanary(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	ctx := context.Background()
	one, two := fleetBundle(1, "one"), fleetBundle(2, "two")
	rev, _, err := fleet.Publish(ctx, s, "/steer/v1", one, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "a")}, Options{})
	b := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "b")}, Options{})
	if _, _, err := fleet.PublishCanary(ctx, s, "/steer/v1", two, []string{"a"}, rev); err != nil {
		t.Fatal(err)
	}
	waitTXT(t, a, "two")
	dnstest.WaitFor(t, 3*time.Second, "a reports the canary", func() bool {
		st := statusOf(t, s, "a")
		return st.Canary && st.Serial == 2 && st.Digest == fleet.Digest(two.Files)
	})
	if got := b.txt("gen.example.com"); got != "one" {
		t.Errorf("b serves %q during a's canary", got)
	}
	if st := statusOf(t, s, "b"); st.Canary || st.Digest != fleet.Digest(one.Files) {
		t.Errorf("b's status during the canary: %+v", st)
	}
	// The reload's line is logged after its answers change (and after
	// what follows the swap): counted before it, the canary's own reload
	// looked like one on the promotion in a suite run.
	dnstest.WaitFor(t, 3*time.Second, "a logs the canary's reload", func() bool {
		return strings.Contains(a.logs.String(), `changed="zone example.com. serial 1 -> 2"`)
	})
	reloads := strings.Count(a.logs.String(), "msg=reloaded")
	if _, err := fleet.Promote(ctx, s, "/steer/v1"); err != nil {
		t.Fatal(err)
	}
	waitTXT(t, b, "two")
	dnstest.WaitFor(t, 3*time.Second, "a reports the promoted bundle", func() bool {
		st := statusOf(t, s, "a")
		return !st.Canary && st.Serial == 2 && st.Digest == fleet.Digest(two.Files)
	})
	if n := strings.Count(a.logs.String(), "msg=reloaded"); n != reloads {
		t.Errorf("the canary node reloaded %d times on the promotion of what it serves", n-reloads)
	}
	if _, _, err := fleet.Rollback(ctx, s, "/steer/v1"); err != nil {
		t.Fatal(err)
	}
	waitTXT(t, a, "one")
	waitTXT(t, b, "one")
	dnstest.WaitFor(t, 3*time.Second, "b reports the rolled back bundle", func() bool {
		st := statusOf(t, s, "b")
		return st.Serial == 1 && st.Digest == fleet.Digest(one.Files)
	})
}

// TestFleetDuplicateName: a node whose name a live node holds does not
// start, and says which; the same node restarted after a crash (its
// status still held by its old lease) takes its own key over at once.
func TestFleetDuplicateName(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", fleetBundle(1, "one"), 0); err != nil {
		t.Fatal(err)
	}
	first := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "fra-1")}, Options{Version: "v-first"})
	dir := t.TempDir()
	writeFile(t, dir, "steer.yaml", fleetLocal(c.Endpoints(), "fra-1"))
	n, err := New(Options{ConfigPath: filepath.Join(dir, "steer.yaml"), Listen: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = n.Start(context.Background())
	if err == nil {
		n.Shutdown(context.Background())
		t.Fatal("a second node named fra-1 started")
	}
	if !errors.Is(err, fleetnode.ErrDuplicate) || !strings.Contains(err.Error(), `node "fra-1"`) || !strings.Contains(err.Error(), "version v-first") {
		t.Errorf("the error: %v", err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if got := first.txt("gen.example.com"); got != "one" {
		t.Errorf("the first node serves %q", got)
	}
	if st := statusOf(t, s, "fra-1"); st.Version != "v-first" {
		t.Errorf("the status key is now %+v", st)
	}

	// A crash: the status stays under the old lease until its TTL. The
	// restarted node knows that lease (the state directory) and goes on.
	ctx := context.Background()
	kvs, _, err := s.Get(ctx, fleet.StatusKey("/steer/v1", "fra-1"))
	if err != nil || len(kvs) != 1 {
		t.Fatal(kvs, err)
	}
	l, err := s.Grant(ctx, time.Minute) // a lease that outlives the test: the "crashed" holder
	if err != nil {
		t.Fatal(err)
	}
	first.Shutdown(ctx)
	if _, _, err := s.Txn(ctx, nil, []fleet.KV{{Key: kvs[0].Key, Value: kvs[0].Value, Lease: l.ID()}}, nil); err != nil {
		t.Fatal(err)
	}
	writeFile(t, first.dir, filepath.Join("steer-state", "fleet", fleetnode.LeaseFile), strconv.FormatInt(l.ID(), 16)+"\n")
	start = time.Now()
	again := startNodeIn(t, first.dir, Options{Version: "v-again"})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the restart took %v", d)
	}
	dnstest.WaitFor(t, 3*time.Second, "the restarted node's status", func() bool { return statusOf(t, s, "fra-1").Version == "v-again" })
	_ = again
}

// TestFleetDrainWhileCut: a drain set through the API of a node cut off
// from the store applies on that node at once, is answered 202 "pending:
// fleet" and listed in its status, survives a restart of the node while
// the store is still unreachable, and reaches the other nodes when the
// link heals (within a second, measured and logged; the test allows two
// for a loaded machine).
func TestFleetDrainWhileCut(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	cfg := `identity: pushed
zones:
  - origin: example.com
    file: zones/example.com.zone
records:
  - name: shop.example.com
    ttl: 5
    pools:
      primary:   { address: 192.0.2.1 }
      secondary: { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, secondary] }
`
	b := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "zones/example.com.zone": []byte(zone("example.com", 1, "x"))}}
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", b, 0); err != nil {
		t.Fatal(err)
	}
	br := etcdtest.NewBridge(t, c.Member(0).Addr())
	cut := startNode(t, map[string]string{"steer.yaml": fleetLocal([]string{"http://" + br.Addr()}, "cut")}, Options{})
	others := []*testNode{
		startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "b")}, Options{}),
		startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "c")}, Options{}),
	}
	for _, n := range append([]*testNode{cut}, others...) {
		if got := n.a("shop.example.com"); got != "192.0.2.1" {
			t.Fatalf("before the drain: %s", got)
		}
	}
	br.Cut()
	h := api.NewHandler(&backend{n: cut.Node}, api.Options{})
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/records/shop.example.com/pools/primary/state", strings.NewReader(`{"state":"drain"}`)))
	took := time.Since(start)
	var ans struct{ Applied, Pending, Reason string }
	json.Unmarshal(rec.Body.Bytes(), &ans)
	if rec.Code != 202 || ans.Pending != "fleet" || ans.Applied != "this node" {
		t.Fatalf("the drain through the cut node's API: %d %s", rec.Code, rec.Body.String())
	}
	t.Logf("answered %d in %v: %+v", rec.Code, took.Round(time.Millisecond), ans)
	if got := cut.a("shop.example.com"); got != "192.0.2.2" {
		t.Errorf("the cut node serves %s right after the drain", got)
	}
	if p := cut.Status().Pending; len(p) != 1 || !strings.Contains(p[0], "fleet: pool shop.example.com./primary drain") {
		t.Errorf("the cut node's status lists as pending: %q", p)
	}
	for _, n := range others {
		if got := n.a("shop.example.com"); got != "192.0.2.1" {
			t.Errorf("a node on the store serves %s before the drain reached the store", got)
		}
	}
	// Restarted while still cut off: the drain is kept.
	cut.Shutdown(context.Background())
	cut = startNodeIn(t, cut.dir, Options{})
	if got := cut.a("shop.example.com"); got != "192.0.2.2" {
		t.Errorf("restarted while cut off, the node serves %s", got)
	}
	br.Heal()
	br.Drop()
	healed := time.Now()
	for _, n := range others {
		dnstest.WaitFor(t, 2*time.Second, "the drain on the other nodes", func() bool { return n.a("shop.example.com") == "192.0.2.2" })
	}
	t.Logf("the drain reached the other nodes %v after the link healed", time.Since(healed).Round(time.Millisecond))
	dnstest.WaitFor(t, 3*time.Second, "nothing pending", func() bool { return len(cut.Status().Pending) == 0 })
	if got := cut.a("shop.example.com"); got != "192.0.2.2" {
		t.Errorf("after the flush the cut node serves %s", got)
	}
}
