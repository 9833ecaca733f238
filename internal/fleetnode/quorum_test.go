package fleetnode

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/quorum"
)

// checkObservedBy is the name of a check (of 127.0.0.1) whose target
// before's observers (k of them) include node and after's do not.
func checkObservedBy(t *testing.T, node string, before, after []quorum.Node, k int) string {
	t.Helper()
	for i := range 1000 {
		c := fmt.Sprintf("t%d", i)
		name := targetName(health.Key{Addr: netip.MustParseAddr("127.0.0.1"), Check: c})
		if slices.Contains(quorum.Observers(name, before, k), node) && !slices.Contains(quorum.Observers(name, after, k), node) {
			return c
		}
	}
	t.Fatalf("no check name moves %s out of the observers", node)
	return ""
}

func nodesNamed(region string, names ...string) []quorum.Node {
	var out []quorum.Node
	for _, n := range names {
		out = append(out, quorum.Node{Name: n, Region: region})
	}
	return out
}

// TestSkewedObserverCannotKeepTargetUp: an observer whose clock runs 60 s
// ahead sees a target up that the other observers see down; 1 of 4 up
// (25 % > 18 %) keeps it up. A node joins and takes that observer's place
// among the target's observers: the target must go down within a few
// seconds on every node. (Judged by the observer's CheckedAt + 3
// intervals, its last "up" stayed live for the 60 s of skew, and 1 of 5 =
// 20 % kept the target up for a minute.) Real members, real TCP checks,
// real embedded etcd; only the skewed member's clock is a hook.
func TestSkewedObserverCannotKeepTargetUp(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s := openStore(t, c.Endpoints())
	port := rigTarget(t)
	const k = 4
	check := checkObservedBy(t, "skewed", nodesNamed("eu", "a", "b", "c", "d", "skewed"), nodesNamed("eu", "a", "b", "c", "d", "skewed", "e"), k)
	defs, keys := rigKeys(port, check)
	key := keys[0]
	o := rigOptions{endpoints: c.Endpoints(), observers: k}
	var nodes []*rigNode
	for _, name := range []string{"a", "b", "c", "d"} {
		nodes = append(nodes, startRigNode(t, o, name, "eu", defs, keys, false))
	}
	skewed := o
	skewed.now = func() time.Time { return time.Now().Add(60 * time.Second) }
	nodes = append(nodes, startRigNode(t, skewed, "skewed", "eu", defs, keys, true))

	waitFor(t, 10*time.Second, "the target up by the quorum of 4 observers, 1 of them up", func() bool {
		for _, n := range nodes {
			r, ok := n.result(key)
			if !ok || r.Source != quorum.SourceQuorum || r.Live != k || r.LiveUp != 1 || r.Verdict != quorum.Up || !n.hm.Usable(key) {
				return false
			}
		}
		return true
	})
	if obs := observersInStore(t, s, key); !obs["skewed"] || len(obs) != k {
		t.Fatalf("observations in the store: %v, want %d with the skewed node's", obs, k)
	}

	joined := time.Now()
	nodes = append(nodes, startRigNode(t, o, "e", "eu", defs, keys, false))
	waitFor(t, 6*time.Second, "the target down on every node once the skewed observer is no longer one", func() bool {
		for _, n := range nodes {
			if n.hm.Usable(key) {
				return false
			}
		}
		return true
	}, func() string {
		var b strings.Builder
		for _, n := range nodes {
			r, _ := n.result(key)
			fmt.Fprintf(&b, "%s: %s\n", n.name, r)
		}
		return b.String()
	})
	t.Logf("the skewed observer replaced: down on all 6 nodes after %v (hold_down 300ms; its clock is 60s ahead)", time.Since(joined).Round(10*time.Millisecond))
	if obs := observersInStore(t, s, key); obs["skewed"] {
		t.Errorf("the skewed node's observation is still in the store: %v", obs)
	}
}

// TestOwnChecksStartFromTheFleetsVerdict: a node that was not one of a
// target's observers, cut from the store past view_grace, decides by its
// own checks, but treats that target as the fleet last saw it (down)
// until its own checker has passed rise times, never as up by default
// (its own checks reach the target: it is down for the others only).
func TestOwnChecksStartFromTheFleetsVerdict(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	bridge := etcdtest.NewBridge(t, c.Member(0).Addr())
	port := rigTarget(t)
	const k, rise = 3, 4
	names := []string{"a", "b", "c", "d"}
	var check string
	for i := range 1000 {
		check = fmt.Sprintf("t%d", i)
		name := targetName(health.Key{Addr: netip.MustParseAddr("127.0.0.1"), Check: check})
		if !slices.Contains(quorum.Observers(name, nodesNamed("eu", names...), k), "a") {
			break
		}
	}
	defs, keys := rigKeys(port, check)
	key := keys[0]
	o := rigOptions{endpoints: c.Endpoints(), observers: k, rise: rise, viewGrace: "1s"}
	cut := o
	cut.endpoints = []string{"http://" + bridge.Addr()}
	a := startRigNode(t, cut, "a", "eu", defs, keys, true)
	for _, name := range names[1:] {
		startRigNode(t, o, name, "eu", defs, keys, false)
	}
	waitFor(t, 10*time.Second, "the target down on a by the quorum of b, c and d", func() bool {
		r, ok := a.result(key)
		return ok && r.Source == quorum.SourceQuorum && r.Live == 3 && r.Verdict == quorum.Down && !a.hm.Usable(key)
	})
	if _, probed := a.hm.Snapshot()[key]; probed {
		t.Fatal("a checks the target itself: it should not be one of its observers")
	}

	// Counted before the cut: a checks nothing while it follows the
	// fleet, and its first own check can land before the wait below
	// sees it stale (read after, that check went uncounted and a rise
	// of 4 looked like 3).
	start := a.results.Load()
	bridge.Cut()
	waitFor(t, 5*time.Second, "a back on its own checks", func() bool { return !a.fresh() })
	// From here a's checker of the target runs; it reaches the target.
	var passes int64
	waitFor(t, 5*time.Second, "a's own checks bring the target up", func() bool {
		if a.hm.Usable(key) {
			passes = a.results.Load() - start
			return true
		}
		return false
	})
	if passes < rise {
		t.Errorf("the target was up on a after %d of its own checks, want at least rise = %d (it was down for the fleet)", passes, rise)
	}
	// The transition is logged just after it takes effect.
	waitFor(t, 2*time.Second, "a's checker to log the target from down (the fleet's verdict) to up", func() bool {
		return strings.Contains(a.logs.String(), "from=down to=up")
	}, a.logs.String)
	t.Logf("cut from the store: the target stayed down on a until %d of its own checks passed (rise %d)", passes, rise)
}

// TestRegionalObservers: 10 nodes in 3 regions with regional: true give
// every target at least min_observers observers in every region, on the
// path a node takes (mine, from its live members), where the default k
// of 5 gave a region at most 2. Too few nodes in a region is said at
// once, naming the region.
func TestRegionalObservers(t *testing.T) {
	var keys []health.Key
	for i := range 200 {
		keys = append(keys, health.Key{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), Check: "h"})
	}
	for _, c := range []struct {
		sizes map[string]int
		short string
	}{
		{map[string]int{"eu": 4, "us": 3, "ap": 3}, ""},
		{map[string]int{"eu": 5, "us": 3, "ap": 2}, "ap (2 nodes)"},
		{map[string]int{"eu": 6, "us": 6, "ap": 6}, ""},
	} {
		members := map[string]string{}
		for region, n := range c.sizes {
			for i := range n {
				members[fmt.Sprintf("%s-%d", region, i)] = region
			}
		}
		q := quorum.Defaults()
		q.Regional = true
		perRegion := map[string]map[string]int{} // target → region → observers
		var logs []string
		for name, region := range members {
			buf := &syncBuffer{}
			m := &Member{log: slog.New(slog.NewTextHandler(buf, nil)), local: &config.Config{Fleet: &config.Fleet{Node: name, Region: region}}}
			tr, err := quorum.NewTracker(q)
			if err != nil {
				t.Fatal(err)
			}
			fh := &quorumHealth{m: m, cfg: q, tracker: tr, own: map[string]ownResult{}, members: members, fresh: true, kick: make(chan struct{}, 1)}
			for _, k := range fh.mine(keys) {
				if perRegion[targetName(k)] == nil {
					perRegion[targetName(k)] = map[string]int{}
				}
				perRegion[targetName(k)][region]++
			}
			logs = append(logs, buf.String())
		}
		total := 0
		for _, k := range keys {
			for region, n := range c.sizes {
				total += perRegion[targetName(k)][region]
				want := min(n, q.MinObservers)
				if got := perRegion[targetName(k)][region]; got < want {
					t.Errorf("%v: %s has %d observers in %s, want at least %d", c.sizes, targetName(k), got, region, want)
				}
			}
		}
		t.Logf("%v: %.1f observers per target", c.sizes, float64(total)/float64(len(keys)))
		for _, l := range logs {
			if c.short == "" && strings.Contains(l, "cannot have min_observers") {
				t.Errorf("%v: a region said short:\n%s", c.sizes, l)
			}
			if c.short != "" && (!strings.Contains(l, "cannot have min_observers") || !strings.Contains(l, c.short)) {
				t.Errorf("%v: the node does not say that %s is short:\n%s", c.sizes, c.short, l)
			}
		}
	}
}

// TestStoreSizeWarning: past half of fleet.etcd.quota_backend_bytes (here
// 1 MiB), the node says so in its log, its status in the store and its
// metrics, with the sizes etcd's Status call reports.
func TestStoreSizeWarning(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s := openStore(t, c.Endpoints())
	defs, keys := rigKeys(rigTarget(t), "t")
	n := startRigNode(t, rigOptions{endpoints: c.Endpoints(), quota: 1 << 20, sizeEvery: 100 * time.Millisecond}, "a", "eu", defs, keys, true)
	scrape := func() string {
		reg := prometheus.NewRegistry()
		if err := n.m.RegisterMetrics(reg); err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				fmt.Fprintf(&b, "%s %g\n", mf.GetName(), m.GetGauge().GetValue())
			}
		}
		return b.String()
	}
	waitFor(t, 5*time.Second, "the database size read", func() bool {
		return strings.Contains(scrape(), "steer_fleet_store_quota_bytes 1.048576e+06") && !strings.Contains(scrape(), "steer_fleet_store_db_bytes 0\n")
	})
	if strings.Contains(scrape(), "steer_fleet_store_warning 1") {
		t.Fatalf("a warning before the database grew:\n%s", scrape())
	}
	// 600 KiB of values: past half the quota.
	big := strings.Repeat("x", 100<<10)
	for i := range 6 {
		if _, _, err := s.Txn(context.Background(), nil, []fleet.KV{{Key: fmt.Sprintf("/filler/%d", i), Value: []byte(big)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "the warning in the node's status", func() bool {
		sts, err := fleet.ReadStatuses(context.Background(), s, fleetPrefix)
		return err == nil && len(sts) == 1 && strings.Contains(sts[0].Warning, "of 1.0 MiB quota")
	})
	if !strings.Contains(scrape(), "steer_fleet_store_warning 1") {
		t.Errorf("the metrics do not say so:\n%s", scrape())
	}
	if !strings.Contains(n.logs.String(), "the store's database passes half its quota") {
		t.Errorf("the log does not say so:\n%s", n.logs.String())
	}
	sts, _ := fleet.ReadStatuses(context.Background(), s, fleetPrefix)
	t.Logf("status warning: %s", sts[0].Warning)
}

// TestKeptViewHasTheRefreshes: the health view kept on disk for a restart
// without the store dates each observation by its observer's last
// refresh, not by when it was last written (only when it changed, maybe
// an hour ago): restarted, the node counts it as it did.
func TestKeptViewHasTheRefreshes(t *testing.T) {
	dir := t.TempDir()
	m := &Member{log: slog.New(slog.DiscardHandler), stateDir: dir, local: &config.Config{Fleet: &config.Fleet{Node: "a", Region: "eu", LeaseTTL: config.Duration(3 * time.Second), ViewGrace: config.Duration(time.Minute)}}}
	if err := os.MkdirAll(filepath.Dir(stateFile(dir, HealthView)), 0o750); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	written := now.Add(-time.Hour)
	fh := &quorumHealth{m: m, refresh: time.Second, viewAt: now, heard: map[string]time.Time{"b": now},
		obs: map[string]map[string]quorum.Observation{"127.0.0.1/t": {"b": {Node: "b", Region: "eu", Up: true, HeardAt: written, Refresh: time.Second}}}}
	fh.saveView(now)
	again := &quorumHealth{m: m, grace: time.Minute}
	again.loadView()
	o := again.obs["127.0.0.1/t"]["b"]
	if !o.HeardAt.Equal(now) {
		t.Errorf("kept with HeardAt %v, want its observer's last refresh %v", o.HeardAt, now)
	}
}

// TestKeptViewOfAnEarlierVersion: a view kept by an earlier version
// (CheckedAt and Interval) is read, its times taken as HeardAt and
// Refresh.
func TestKeptViewOfAnEarlierVersion(t *testing.T) {
	dir := t.TempDir()
	m := &Member{log: slog.New(slog.DiscardHandler), stateDir: dir, local: &config.Config{Fleet: &config.Fleet{Node: "a"}}}
	file := stateFile(dir, HealthView)
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	old := fmt.Sprintf(`{"view_at":%q,"observations":{"127.0.0.1/t":{"b":{"Node":"b","Region":"eu","Up":true,"CheckedAt":%q,"Interval":5000000000}}}}`,
		at.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
	if err := os.WriteFile(file, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	fh := &quorumHealth{m: m, grace: time.Minute}
	fh.loadView()
	o := fh.obs["127.0.0.1/t"]["b"]
	if !o.HeardAt.Equal(at) || o.Refresh != 5*time.Second || !o.Up || o.Region != "eu" || !fh.viewAt.Equal(at) {
		t.Errorf("read %+v (view at %v), want heard at %v, refresh 5s, up, eu", o, fh.viewAt, at)
	}
}
