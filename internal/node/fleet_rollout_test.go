package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
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
