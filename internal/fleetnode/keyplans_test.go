package fleetnode

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestKeyPlansDriver: three members share key plans on one etcd. One
// drives; only the driver's Step writes, and only on the plan it stepped
// from; an operator's Change goes through any node, on the plan it read;
// every member sees every plan. A driver that stops hands over at once
// (its lease is revoked); one that dies (its store closed, the lease left
// to expire) hands over within the lease TTL; the new driver steps the
// plan the store holds.
func TestKeyPlansDriver(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	type member struct {
		k       *KeyPlans
		store   fleet.Store
		cancel  context.CancelFunc
		m       *Member
		changes atomic.Int64
	}
	start := func(name string) *member {
		store, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: c.Endpoints(), RequestTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		mb := &member{store: store}
		mb.m = &Member{store: store, prefix: "/steer/v1", log: slog.New(slog.DiscardHandler), resync: make(chan struct{}),
			local: &config.Config{Fleet: &config.Fleet{Node: name, LeaseTTL: config.Duration(2 * time.Second)}}}
		mb.k = mb.m.ShareKeyPlans(func() { mb.changes.Add(1) })
		ctx, cancel := context.WithCancel(context.Background())
		mb.cancel = func() { cancel(); mb.m.wg.Wait() }
		t.Cleanup(mb.cancel)
		mb.k.SetNeeded(true)
		mb.k.start(ctx)
		return mb
	}
	n1 := start("n1")
	dnstest.WaitFor(t, 5*time.Second, "n1 to drive", func() bool { _, self := n1.k.Driver(); return self })
	n2, n3 := start("n2"), start("n3")
	for _, n := range []*member{n2, n3} {
		dnstest.WaitFor(t, 5*time.Second, "the others to see n1 drive", func() bool {
			d, self := n.k.Driver()
			return d == "n1" && !self && n.k.Loaded()
		})
	}
	const origin = "example.com."
	if ok, _, err := n2.k.Step(origin, []byte("p1"), 0); !errors.Is(err, ErrNotDriver) || ok {
		t.Fatalf("a step by a node that does not drive: %v %v", ok, err)
	}
	ok, rev1, err := n1.k.Step(origin, []byte("p1"), 0)
	if err != nil || !ok {
		t.Fatalf("the driver's first step: %v %v", ok, err)
	}
	if ok, _, err := n1.k.Step(origin, []byte("p1bis"), 0); err != nil || ok {
		t.Fatalf("a step from no plan when the store has one: %v %v", ok, err)
	}
	for _, n := range []*member{n2, n3} {
		dnstest.WaitFor(t, 5*time.Second, "every node to see p1", func() bool {
			d, r, ok := n.k.Plan(origin)
			return ok && r == rev1 && string(d) == "p1"
		})
	}
	ok, rev2, err := n3.k.Change(origin, []byte("p2"), rev1)
	if err != nil || !ok {
		t.Fatalf("an operator's change on n3: %v %v", ok, err)
	}
	if ok, _, err := n1.k.Step(origin, []byte("p3"), rev1); err != nil || ok {
		t.Fatalf("the driver stepping a plan the store no longer holds: %v %v", ok, err)
	}
	dnstest.WaitFor(t, 5*time.Second, "n1 to see p2", func() bool { _, r, _ := n1.k.Plan(origin); return r == rev2 })

	// n1 stops: its lease is revoked, and n2 or n3 drives within a second.
	stopped := time.Now()
	n1.cancel()
	var next, other *member
	dnstest.WaitFor(t, 2*time.Second, "another node to drive after n1 stopped", func() bool {
		for _, n := range [][2]*member{{n2, n3}, {n3, n2}} {
			if _, self := n[0].k.Driver(); self {
				next, other = n[0], n[1]
				return true
			}
		}
		return false
	})
	t.Logf("handover after a stop: %v", time.Since(stopped).Round(time.Millisecond))
	ok, rev3, err := next.k.Step(origin, []byte("p3"), rev2)
	if err != nil || !ok {
		t.Fatalf("the new driver's step on the store's plan: %v %v", ok, err)
	}
	// The new driver dies: its keep-alive stops, the lease expires
	// within the TTL, and the last node drives.
	died := time.Now()
	next.store.Close()
	dnstest.WaitFor(t, 6*time.Second, "the last node to drive after the driver died", func() bool { _, self := other.k.Driver(); return self })
	t.Logf("handover after a death: %v (lease TTL 2s)", time.Since(died).Round(time.Millisecond))
	if d, r, ok := other.k.Plan(origin); !ok || r != rev3 || string(d) != "p3" {
		t.Fatalf("the last node's view: %q at %d, want p3 at %d", d, r, rev3)
	}
	if ok, _, err := other.k.Step(origin, []byte("p4"), rev3); err != nil || !ok {
		t.Fatalf("the last driver's step: %v %v", ok, err)
	}
	if other.changes.Load() == 0 {
		t.Error("changed was never called")
	}
}

// TestKeyPlansLeaseOnlyWhenNeeded: a member whose node serves no zone
// with a plan to step follows the plans but holds no lease for the
// leader key; it campaigns once SetNeeded says a zone needs a driver,
// and gives the key back (its lease revoked) when none does any more.
func TestKeyPlansLeaseOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	store, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: c.Endpoints(), RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m := &Member{store: store, prefix: "/steer/v1", log: slog.New(slog.DiscardHandler), resync: make(chan struct{}),
		local: &config.Config{Fleet: &config.Fleet{Node: "n1", LeaseTTL: config.Duration(2 * time.Second)}}}
	k := m.ShareKeyPlans(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.wg.Wait() }()
	k.start(ctx)
	leader := func() (string, int64) {
		kvs, _, err := store.Get(context.Background(), leaderKey("/steer/v1"))
		if err != nil || len(kvs) != 1 {
			return "", 0
		}
		return string(kvs[0].Value), kvs[0].Lease
	}
	dnstest.WaitFor(t, 5*time.Second, "the member to read the plans", k.Loaded)
	time.Sleep(300 * time.Millisecond) // a campaign takes the key within milliseconds
	if node, lease := leader(); node != "" || lease != 0 {
		t.Fatalf("not needed, the leader key is held by %q under lease %x", node, lease)
	}
	k.SetNeeded(true)
	dnstest.WaitFor(t, 5*time.Second, "the member to drive once needed", func() bool {
		node, lease := leader()
		_, self := k.Driver()
		return node == "n1" && lease != 0 && self
	})
	k.SetNeeded(false)
	dnstest.WaitFor(t, 5*time.Second, "the leader key to go with the lease when no longer needed", func() bool {
		node, _ := leader()
		_, self := k.Driver()
		return node == "" && !self
	})
}
