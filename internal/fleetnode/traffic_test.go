package fleetnode

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/traffic"
)

// trafficNode is a member sharing a traffic recorder, as a node runs it.
type trafficNode struct {
	m    *Member
	r    *traffic.Recorder
	stop func()
	logs *syncBuffer
}

func startTrafficNode(t *testing.T, endpoints []string, name string, every time.Duration) *trafficNode {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse(nil, filepath.Join(dir, "steer.yaml"), []byte(fleetLocal(endpoints, name)))
	if err != nil {
		t.Fatal(err)
	}
	n := &trafficNode{r: traffic.New(), logs: &syncBuffer{}}
	n.r.SetRecords([]traffic.Record{
		{Name: "shop.example.com.", Pools: []string{"mumbai", "frankfurt"}, Rules: 2},
		{Name: "api.example.com.", Pools: []string{"primary"}, Rules: 1},
	})
	log := slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if n.m, err = Open(Options{Log: log, Local: cfg, Version: "test", Reload: func(string) {}}); err != nil {
		t.Fatal(err)
	}
	n.m.ShareTraffic(n.r)
	n.m.traffic.every = every
	ctx, cancel := context.WithCancel(context.Background())
	n.m.Start(ctx)
	stopped := false
	n.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			n.m.Close()
		}
	}
	t.Cleanup(n.stop)
	return n
}

// answer counts n answers of shop.example.com. from pool by rule, then
// samples.
func (n *trafficNode) answer(pool, rule, count int) {
	d := policy.Decision{Pools: 1 << pool, Rule: rule, Scope: 24}
	for range count {
		n.r.Answered(0, &d, 4)
	}
	n.r.Sample(time.Now())
}

// shop is the sum the node's 5m window has of shop.example.com.
func (n *trafficNode) shop() (nodes int, c traffic.Counts) {
	w := n.r.Window(5 * time.Minute)
	c, _ = w.Record("shop.example.com.")
	return w.Nodes, c
}

// TestFleetTrafficSum: two members on one etcd publish their windows
// under their leases; each one's window sums both, and a member that
// stops (its lease revoked) drops out of the sum. A new bundle applied
// publishes at once.
func TestFleetTrafficSum(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	a := startTrafficNode(t, c.Endpoints(), "a", 100*time.Millisecond)
	b := startTrafficNode(t, c.Endpoints(), "b", time.Hour) // publishes at start and on a new bundle only
	a.answer(0, 0, 3)
	b.answer(1, 1, 5)
	waitFor(t, 10*time.Second, "a sums a's 3 answers and b's 5", func() bool {
		nodes, c := a.shop()
		return nodes == 2 && c.Answers == 8 && c.Pools["mumbai"] == 3 && c.Pools["frankfurt"] == 5 && fmt.Sprint(c.Rules) == "[3 5]"
	}, a.logs.String)
	waitFor(t, 10*time.Second, "b sums them too", func() bool {
		nodes, c := b.shop()
		return nodes == 2 && c.Answers == 8
	}, b.logs.String)

	s := openStore(t, c.Endpoints())
	kvs, _, err := s.Get(context.Background(), trafficPrefix(fleetPrefix))
	if err != nil || len(kvs) != 2 {
		t.Fatalf("the store holds %d traffic entries (%v), want a's and b's", len(kvs), err)
	}
	for _, kv := range kvs {
		if kv.Lease == 0 {
			t.Errorf("%s is written without a lease", kv.Key)
		}
		p, err := traffic.DecodePublished(kv.Value)
		if err != nil || len(kv.Value) > traffic.MaxPublished || len(p.Windows) != 2 {
			t.Errorf("%s: %d bytes, %v", kv.Key, len(kv.Value), err)
		}
	}

	// b serves a new bundle: it publishes at once, not in an hour.
	b.answer(0, 0, 4)
	b.m.Applied(fleet.Bundle{}, nil)
	waitFor(t, 10*time.Second, "a sums b's answers after b's new bundle", func() bool {
		nodes, c := a.shop()
		return nodes == 2 && c.Answers == 12
	}, a.logs.String, b.logs.String)

	b.stop()
	waitFor(t, 10*time.Second, "b gone: a sums its own alone", func() bool {
		nodes, c := a.shop()
		return nodes == 1 && c.Answers == 3
	}, a.logs.String)
}
