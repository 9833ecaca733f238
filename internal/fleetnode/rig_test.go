package fleetnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/quorum"
)

// A rig is fleet members as a node runs them (Open, ShareHealth, Start),
// each with its own health manager running real TCP checks of real
// targets on loopback, on a real embedded etcd (internal/etcdtest). What
// each member's probes can reach is its own: a member that cannot reach
// the targets sees them down.

// rigOptions shape the members of a rig.
type rigOptions struct {
	endpoints []string // etcd client URLs (through a bridge, for one to cut)
	leaseTTL  string   // default 3s
	viewGrace string   // default 60s
	observers int      // health_quorum.observers (0: default)
	regional  bool
	holdDown  string        // default 300ms
	rise      int           // default 1
	fall      int           // default 3
	timeout   time.Duration // per check; default 100ms, the interval
	now       func() time.Time
	quota     int64         // fleet.etcd.quota_backend_bytes (0: default)
	sizeEvery time.Duration // how often the store's size is read (0: a minute)
}

type rigNode struct {
	name, region string
	m            *Member
	hm           *health.Manager
	keys         []health.Key
	reach        atomic.Bool  // whether its probes reach the targets
	results      atomic.Int64 // check results, every key
	changes      atomic.Int64 // results that changed a key's status
	logs         *syncBuffer
	stop         func()
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rigTarget is a TCP health-check target on a free loopback port.
func rigTarget(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// rigKeys are the keys of checks named checks, all of one target
// (127.0.0.1) listening on port.
func rigKeys(port int, checks ...string) (map[string]health.Check, []health.Key) {
	defs := map[string]health.Check{}
	var keys []health.Key
	for _, c := range checks {
		// Patient enough that a loaded machine does not flap them.
		defs[c] = health.Check{Type: "tcp", Port: port, Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, Rise: 1, Fall: 3}
		keys = append(keys, health.Key{Addr: netip.MustParseAddr("127.0.0.1"), Check: c})
	}
	return defs, keys
}

// startRigNode starts member name in region, checking keys (defined by
// defs) itself when Probes chooses them; reach says whether its probes
// reach the targets. It stops at the test's end (or with stop).
func startRigNode(t *testing.T, o rigOptions, name, region string, defs map[string]health.Check, keys []health.Key, reach bool) *rigNode {
	t.Helper()
	or := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	eps := make([]string, len(o.endpoints))
	for i, e := range o.endpoints {
		eps[i] = fmt.Sprintf("%q", e)
	}
	local := fmt.Sprintf(`fleet:
  node: %s
  region: %s
  etcd: { endpoints: [%s], dial_timeout: 1s, quota_backend_bytes: %d }
  lease_ttl: %s
  view_grace: %s
  health_quorum: { min_observers: 3, hold_down: %s, observers: %d, regional: %t }
`, name, region, strings.Join(eps, ", "), o.quota, or(o.leaseTTL, "3s"), or(o.viewGrace, "60s"), or(o.holdDown, "300ms"), o.observers, o.regional)
	dir := t.TempDir()
	cfg, err := config.Parse(nil, filepath.Join(dir, "steer.yaml"), []byte(local))
	if err != nil {
		t.Fatal(err)
	}
	n := &rigNode{name: name, region: region, keys: keys, logs: &syncBuffer{}}
	n.reach.Store(reach)
	own := make(map[string]health.Check, len(defs))
	for name, c := range defs {
		if o.rise > 0 {
			c.Rise = o.rise
		}
		if o.fall > 0 {
			c.Fall = o.fall
		}
		if o.timeout > 0 {
			c.Timeout = o.timeout
		}
		own[name] = c
	}
	defs = own
	log := slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n.m, err = Open(Options{Log: log, Local: cfg, Version: "test", Reload: func(string) {}, Now: o.now})
	if err != nil {
		t.Fatal(err)
	}
	n.hm = health.NewManager(log)
	n.hm.SetDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !n.reach.Load() {
			return nil, errors.New("unreachable from " + name)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	})
	reapply := func() { n.hm.Apply(defs, n.m.Probes(keys)) }
	if err := n.m.ShareHealth(Health{Manager: n.hm, Interval: func(string) time.Duration { return 100 * time.Millisecond }, Reapply: reapply}); err != nil {
		t.Fatal(err)
	}
	n.hm.OnResult(func(k health.Key, _ time.Duration, _ bool, from, to health.Status) {
		n.results.Add(1)
		if from != to {
			n.changes.Add(1)
		}
		n.m.Observed(k, to)
	})
	n.m.sizeEvery = o.sizeEvery
	ctx, cancel := context.WithCancel(context.Background())
	n.m.Start(ctx)
	reapply()
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			n.m.Close()
			n.hm.Close()
		})
	}
	t.Cleanup(n.stop)
	return n
}

// result is the member's quorum result of k (its region's in regional
// mode).
func (n *rigNode) result(k health.Key) (quorum.Result, bool) {
	if n.m.health.cfg.Regional {
		return n.m.health.tracker.Region(targetName(k), n.region)
	}
	return n.m.health.tracker.Result(targetName(k))
}

// fresh reports whether the member decides by the fleet's quorum.
func (n *rigNode) fresh() bool {
	fh := n.m.health
	fh.mu.Lock()
	defer fh.mu.Unlock()
	return fh.fresh
}

// observers counts the observations of k in the store, by node.
func observersInStore(t *testing.T, s fleet.Store, k health.Key) map[string]bool {
	t.Helper()
	p := obsPrefix(fleetPrefix) + targetName(k) + "/"
	kvs, _, err := s.Get(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, kv := range kvs {
		out[strings.TrimPrefix(kv.Key, p)] = true
	}
	return out
}

const fleetPrefix = config.DefaultFleetPrefix

// openStore opens a client of the cluster for the test itself.
func openStore(t *testing.T, endpoints []string) fleet.Store {
	t.Helper()
	s, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: endpoints, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitFor is dnstest.WaitFor.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool, logs ...func() string) {
	t.Helper()
	dnstest.WaitFor(t, within, what, cond, logs...)
}
