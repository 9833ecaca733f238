package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
)

// fleetBundle is a pushed configuration serving example.com with gen TXT.
func fleetBundle(serial int, txt string) fleet.Bundle {
	return fleet.Bundle{Files: map[string][]byte{
		"steer.yaml":             []byte("identity: pushed\nzones:\n  - origin: example.com\n    file: zones/example.com.zone\n"),
		"zones/example.com.zone": []byte(zone("example.com", serial, txt)),
	}}
}

func fleetLocal(endpoints []string, node string) string {
	return fmt.Sprintf("fleet:\n  node: %s\n  region: eu\n  etcd:\n    endpoints: [%s]\n    dial_timeout: 1s\n  lease_ttl: 2s\n",
		node, strings.Join(endpoints, ", "))
}

func waitTXT(t *testing.T, n *testNode, want string) time.Duration {
	t.Helper()
	start := time.Now()
	dnstest.WaitFor(t, 5*time.Second, "gen.example.com TXT "+want, func() bool { return n.txt("gen.example.com") == want })
	return time.Since(start)
}

func statusOf(t *testing.T, s fleet.Store, node string) fleet.Status {
	t.Helper()
	sts, err := fleet.ReadStatuses(context.Background(), s, "/steer/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Node == node {
			return st
		}
	}
	return fleet.Status{}
}

// TestFleetConfig runs two nodes whose local files hold only the fleet
// section: each serves the published bundle, applies a new one within a
// second or two, reports the serial it serves under its lease, keeps the
// old bundle and reports the error when a new one cannot be applied, and,
// restarted while the store is down, serves the bundle it kept on disk.
func TestFleetConfig(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	ctx := context.Background()
	rev, _, err := fleet.Publish(ctx, s, "/steer/v1", fleetBundle(1, "one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*testNode
	for _, name := range []string{"fra-1", "bom-1"} {
		nodes = append(nodes, startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), name)}, Options{}))
	}
	for _, n := range nodes {
		if got := n.txt("gen.example.com"); got != "one" {
			t.Fatalf("%s serves %q, want the published one", n.dir, got)
		}
	}
	dnstest.WaitFor(t, 3*time.Second, "both nodes report serial 1", func() bool {
		return statusOf(t, s, "fra-1").Serial == 1 && statusOf(t, s, "bom-1").Serial == 1
	})
	if st := statusOf(t, s, "fra-1"); st.Region != "eu" || st.Rev != rev || st.Error != "" {
		t.Errorf("status: %+v", st)
	}

	// A new bundle reaches both nodes.
	rev, _, err = fleet.Publish(ctx, s, "/steer/v1", fleetBundle(2, "two"), rev)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		t.Logf("applied in %v", waitTXT(t, n, "two"))
	}
	// One that does not load: the nodes keep serving "two" and say why.
	bad := fleetBundle(3, "three")
	// (two zones with one origin: a configuration error)
	bad.Files["steer.yaml"] = []byte("identity: pushed\nzones:\n  - origin: example.com\n    file: zones/missing.zone\n  - origin: example.com\n    file: zones/example.com.zone\n")
	badRev, _, err := fleet.Publish(ctx, s, "/steer/v1", bad, rev)
	if err != nil {
		t.Fatal(err)
	}
	dnstest.WaitFor(t, 5*time.Second, "the error reported", func() bool {
		st := statusOf(t, s, "bom-1")
		return st.Error != "" && st.ErrorRev == badRev && st.Serial == 2
	})
	for _, n := range nodes {
		if got := n.txt("gen.example.com"); got != "two" {
			t.Errorf("after a bad bundle the node serves %q, want the last good one", got)
		}
	}
	t.Logf("error reported: %s", statusOf(t, s, "bom-1").Error)
	// A good one again.
	if _, _, err := fleet.Publish(ctx, s, "/steer/v1", fleetBundle(4, "four"), badRev); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitTXT(t, n, "four")
	}
	dnstest.WaitFor(t, 2*time.Second, "the serial in the metrics", func() bool {
		body := scrape(t, nodes[1])
		return strings.Contains(body, "steer_fleet_config_serial 4") && strings.Contains(body, "steer_fleet_config_apply_failing 0") &&
			strings.Contains(body, "steer_fleet_view_age_seconds")
	})

	// Shut a node down: its status goes with its lease, at once.
	first := nodes[0]
	first.Shutdown(ctx)
	dnstest.WaitFor(t, 3*time.Second, "fra-1's status gone", func() bool { return statusOf(t, s, "fra-1").Node == "" })

	// Restart it with the store down: it serves the bundle kept on disk.
	c.Member(0).Stop()
	again := startNodeIn(t, first.dir, Options{})
	if got := again.txt("gen.example.com"); got != "four" {
		t.Errorf("restarted without the store: %q, want the kept bundle", got)
	}
	if !strings.Contains(again.logs.String(), "starting from the last bundle kept on disk") {
		t.Errorf("the log does not say the kept bundle is served")
	}
}

// TestFleetPublishedNode: a node serves a bundle as steer fleet push
// publishes it (the configuration, every zone it names and the cookie
// secret), accepts cookies minted with the pushed secret, and reports the
// serial it serves and its version under its lease. (steer fleet push and
// status themselves are tested in cmd/steer.)
func TestFleetPublishedNode(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	b := fleet.Bundle{Files: map[string][]byte{
		fleet.ConfigName:                           []byte("identity: pushed\ncookies: { secret_file: cookie.key }\nzones:\n  - origin: example.com\n    file: zones/example.com.zone\n"),
		fleet.BundleName("cookie.key"):             []byte(secretA + "\n"),
		fleet.BundleName("zones/example.com.zone"): []byte(zone("example.com", 7, "pushed")),
	}}
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", b, 0); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "ams-1")}, Options{Version: "v-test"})
	if got := n.txt("gen.example.com"); got != "pushed" {
		t.Errorf("the node serves %q", got)
	}
	// The pushed secret is the node's: a cookie minted with it is valid.
	sa, _ := cookie.ParseSecret(secretA)
	if g := n.srv.Handler().Guard(); g == nil || g.Cookies == nil {
		t.Error("no cookies on the fleet node")
	} else if ck := cookie.NewJar(sa, nil).Mint(nil, [8]byte{1}, n.dns.Addr(), time.Now()); g.Cookies.Check(ck, n.dns.Addr(), time.Now()).Status != cookie.Valid {
		t.Error("the node does not accept cookies minted with the pushed secret")
	}
	dnstest.WaitFor(t, 3*time.Second, "ams-1 reports serial 1 and its version", func() bool {
		st := statusOf(t, s, "ams-1")
		return st.Serial == 1 && st.Version == "v-test"
	})
}

// fakeObserver publishes one observation of target under its own lease,
// refreshed every interval, as another node of the fleet would.
type fakeObserver struct {
	lease fleet.Lease
	stop  chan struct{}
	done  chan struct{}
}

func newFakeObserver(t *testing.T, s fleet.Store, target, node string, up bool, region ...string) *fakeObserver {
	t.Helper()
	l, err := s.Grant(context.Background(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeObserver{lease: l, stop: make(chan struct{}), done: make(chan struct{})}
	put := func() {
		// What a node publishes for one target (internal/fleetnode).
		o := struct {
			Up        bool          `json:"up"`
			CheckedAt time.Time     `json:"checked_at"`
			Interval  time.Duration `json:"interval"`
			Region    string        `json:"region,omitempty"`
		}{Up: up, CheckedAt: time.Now(), Interval: 100 * time.Millisecond}
		if len(region) > 0 {
			o.Region = region[0]
		}
		data, _ := json.Marshal(o)
		l.Put(context.Background(), "/steer/v1/obs/"+target+"/"+node, data)
	}
	put()
	go func() {
		defer close(f.done)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tk.C:
				put()
			}
		}
	}()
	t.Cleanup(f.leave)
	return f
}

// leave is the observer's node going away: its lease (and observation) go.
func (f *fakeObserver) leave() {
	select {
	case <-f.stop:
		return
	default:
	}
	close(f.stop)
	<-f.done
	f.lease.Close(context.Background())
}

// TestFleetHealthQuorum runs a node whose own checker sees the target up,
// beside other observers written to the store: a minority seeing it down
// never flips it (fail-open, more than 18 % up keeps it up); more than
// 82 % down takes it down after hold_down although the node itself sees it
// up; observers that leave drop out of the count (the node's own view
// decides below min_observers); and cut from the store the node goes back
// to its own checks after view_grace, and to the fleet's verdict when the
// link heals.
func TestFleetHealthQuorum(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	target := startTCPTarget(t)
	publishHealthBundle(t, s, target)
	bridge := etcdtest.NewBridge(t, strings.TrimPrefix(c.Endpoints()[0], "http://"))
	local := fmt.Sprintf(`fleet:
  node: self
  etcd: { endpoints: ["http://%s"], dial_timeout: 1s }
  lease_ttl: 2s
  view_grace: 2s
  health_quorum: { healthy_above: 0.18, min_observers: 3, hold_down: 300ms }
`, bridge.Addr())
	n := startNode(t, map[string]string{"steer.yaml": local}, Options{})
	const key = "127.0.0.1/t"
	answers := func(want string, within time.Duration, what string) {
		t.Helper()
		dnstest.WaitFor(t, within, what+": shop answers "+want, func() bool { return n.a("shop.example.com") == want })
	}
	answers("127.0.0.1", 3*time.Second, "alone")
	dnstest.WaitFor(t, 3*time.Second, "the node's own observation published", func() bool {
		kvs, _, err := s.Get(context.Background(), "/steer/v1/obs/"+key+"/self")
		return err == nil && len(kvs) == 1
	})

	var down []*fakeObserver
	for i := range 3 {
		down = append(down, newFakeObserver(t, s, key, fmt.Sprintf("down-%d", i), false))
	}
	// 1 up of 4 live = 25 % > 18 %: stays up, however long.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := n.a("shop.example.com"); got != "127.0.0.1" {
			t.Fatalf("3 of 4 observers down flipped the target: %s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// 1 up of 6 = 16.7 %: down, though the node's own check says up.
	for i := 3; i < 5; i++ {
		down = append(down, newFakeObserver(t, s, key, fmt.Sprintf("down-%d", i), false))
	}
	start := time.Now()
	answers("192.0.2.2", 10*time.Second, "5 of 6 down")
	t.Logf("5 of 6 observers down: withdrawn after %v (hold_down 300ms)", time.Since(start).Round(10*time.Millisecond))
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Errorf("withdrawn after %v, before hold_down", el)
	}
	// They leave (their leases go): 1 live < min_observers: own view, up.
	for _, f := range down {
		f.leave()
	}
	answers("127.0.0.1", 10*time.Second, "the observers left")

	// Down again by quorum, then cut from the store: after view_grace the
	// node's own check decides; healed, the fleet's verdict is back.
	down = down[:0]
	for i := range 5 {
		down = append(down, newFakeObserver(t, s, key, fmt.Sprintf("again-%d", i), false))
	}
	answers("192.0.2.2", 10*time.Second, "5 of 6 down again")
	bridge.Cut()
	cut := time.Now()
	answers("127.0.0.1", 5*time.Second, "cut from the store past view_grace")
	t.Logf("cut from the store: own checks after %v (view_grace 2s)", time.Since(cut).Round(10*time.Millisecond))
	if el := time.Since(cut); el < 1500*time.Millisecond {
		t.Errorf("own checks after %v, before view_grace", el)
	}
	if body := scrape(t, n); !strings.Contains(body, "steer_fleet_health_own_view 1") {
		t.Errorf("metrics do not say the node decides by its own checks:\n%s", grepLines(body, "steer_fleet"))
	}
	bridge.Heal()
	healed := time.Now()
	answers("192.0.2.2", 5*time.Second, "healed")
	t.Logf("healed: the fleet's verdict back after %v", time.Since(healed).Round(10*time.Millisecond))
}

// startTCPTarget is a TCP health-check target on a free loopback port.
func startTCPTarget(t *testing.T) int {
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

// TestFleetOverrides: a drain set through one node's admin API is in
// effect on every node within a second, outlives the node that set it,
// and auto clears it everywhere.
func TestFleetOverrides(t *testing.T) {
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
	var nodes []*testNode
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), name)}, Options{}))
	}
	for _, n := range nodes {
		if got := n.a("shop.example.com"); got != "192.0.2.1" {
			t.Fatalf("before the drain: %s", got)
		}
	}
	be := &backend{n: nodes[0].Node}
	start := time.Now()
	if err := be.SetPoolState("shop.example.com", "primary", "drain", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		dnstest.WaitFor(t, time.Second, "the drain on every node", func() bool { return n.a("shop.example.com") == "192.0.2.2" })
	}
	t.Logf("pool drain in effect on all 3 nodes after %v", time.Since(start).Round(time.Millisecond))
	if err := be.SetTargetState(netip.MustParseAddr("192.0.2.2"), "down", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	dnstest.WaitFor(t, time.Second, "the target override on node c", func() bool {
		o, _, ok := nodes[2].hc.manager.TargetOverride(netip.MustParseAddr("192.0.2.2"))
		return ok && o == health.OverrideDown
	})
	// The node that set them goes; they stay. Auto from another node clears them.
	nodes[0].Shutdown(context.Background())
	other := &backend{n: nodes[1].Node}
	if err := other.SetTargetState(netip.MustParseAddr("192.0.2.2"), "auto", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := other.SetPoolState("shop.example.com", "primary", "auto", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[1:] {
		dnstest.WaitFor(t, time.Second, "the drain cleared", func() bool { return n.a("shop.example.com") == "192.0.2.1" })
	}
}

// scrape returns the node's /metrics text.
func scrape(t *testing.T, n *testNode) string {
	t.Helper()
	rec := httptest.NewRecorder()
	n.met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFleetHealthViewSurvivesRestart: a node that saw a target down by the
// fleet's quorum, restarted while the store is unreachable, answers from
// the view it kept on disk, not from its own checks.
func TestFleetHealthViewSurvivesRestart(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	target := startTCPTarget(t)
	publishHealthBundle(t, s, target)
	local := fmt.Sprintf("fleet:\n  node: self\n  etcd: { endpoints: [%s], dial_timeout: 1s }\n  lease_ttl: 2s\n  view_grace: 30s\n  health_quorum: { min_observers: 3, hold_down: 200ms }\n", c.Endpoints()[0])
	n := startNode(t, map[string]string{"steer.yaml": local}, Options{})
	for i := range 5 {
		newFakeObserver(t, s, "127.0.0.1/t", fmt.Sprintf("down-%d", i), false)
	}
	dnstest.WaitFor(t, 3*time.Second, "down by quorum", func() bool { return n.a("shop.example.com") == "192.0.2.2" })
	// The view is written at most every 2 s: wait until the one on disk
	// holds every observer's verdict.
	viewFile := filepath.Join(n.dir, "steer-state", "fleet", "health-view.json")
	dnstest.WaitFor(t, 5*time.Second, "the health view on disk", func() bool {
		data, err := os.ReadFile(viewFile)
		if err != nil {
			return false
		}
		var v struct {
			Obs map[string]map[string]json.RawMessage `json:"observations"`
		}
		if json.Unmarshal(data, &v) != nil {
			return false
		}
		for i := range 5 {
			if _, ok := v.Obs["127.0.0.1/t"][fmt.Sprintf("down-%d", i)]; !ok {
				return false
			}
		}
		return true
	})
	n.Shutdown(context.Background())
	c.Member(0).Stop()
	again := startNodeIn(t, n.dir, Options{})
	if got := again.a("shop.example.com"); got != "192.0.2.2" {
		t.Errorf("restarted without the store: %s, want the fleet's verdict kept on disk", got)
	}
	if !strings.Contains(again.logs.String(), "starting from the health view kept on disk") {
		t.Error("the log does not say the kept health view is used")
	}
}

// TestFleetRegionalVerdict: with health_quorum.regional, a node answers by
// its own region's observers; without, by the whole fleet's.
func TestFleetRegionalVerdict(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	for _, regional := range []bool{true, false} {
		c, s := fleetStore(t)
		// Nothing listens on the target's port: this node sees it down.
		port := dnstest.FreePort(t)
		publishHealthBundle(t, s, port)
		local := fmt.Sprintf("fleet:\n  node: self\n  region: eu\n  etcd: { endpoints: [%s], dial_timeout: 1s }\n  lease_ttl: 2s\n  health_quorum: { min_observers: 3, hold_down: 200ms, regional: %v }\n", c.Endpoints()[0], regional)
		n := startNode(t, map[string]string{"steer.yaml": local}, Options{})
		for i := range 2 {
			newFakeObserver(t, s, "127.0.0.1/t", fmt.Sprintf("eu-%d", i), false, "eu")
		}
		for i := range 3 {
			newFakeObserver(t, s, "127.0.0.1/t", fmt.Sprintf("us-%d", i), true, "us")
		}
		// Fleet: 3 of 6 up (50 %): up. EU: 0 of 3 up: down.
		want := "127.0.0.1"
		if regional {
			want = "192.0.2.2"
		}
		dnstest.WaitFor(t, 3*time.Second, fmt.Sprintf("regional %v answers %s", regional, want), func() bool { return n.a("shop.example.com") == want })
		time.Sleep(500 * time.Millisecond)
		if got := n.a("shop.example.com"); got != want {
			t.Errorf("regional %v: %s, want %s", regional, got, want)
		}
	}
}

// publishHealthBundle publishes a configuration whose shop.example.com
// fails over from 127.0.0.1 (checked over TCP on port every 100 ms) to
// 192.0.2.2.
func publishHealthBundle(t *testing.T, s fleet.Store, port int) {
	t.Helper()
	b := failoverBundle(fmt.Sprintf("{ type: tcp, port: %d, interval: 100ms, timeout: 80ms, rise: 1, fall: 1 }", port), 1, "x")
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", b, 0); err != nil {
		t.Fatal(err)
	}
}

// failoverBundle is a configuration whose shop.example.com fails over
// from 127.0.0.1, checked by health check t (check is its definition), to
// 192.0.2.2, with a zone of serial and gen TXT txt.
func failoverBundle(check string, serial int, txt string) fleet.Bundle {
	cfg := `identity: pushed
zones:
  - origin: example.com
    file: zones/example.com.zone
health_checks:
  t: ` + check + `
records:
  - name: shop.example.com
    ttl: 5
    pools:
      primary:   { address: 127.0.0.1, health_check: t }
      secondary: { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, secondary] }
`
	return fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "zones/example.com.zone": []byte(zone("example.com", serial, txt))}}
}

// fleetStore starts one embedded etcd member and opens the store on it
// (closed when the test ends).
func fleetStore(t *testing.T) (*etcdtest.Cluster, fleet.Store) {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{})
	s, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: c.Endpoints(), RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

// setPoolState sets a pool's override through the node's API backend. On
// a loaded machine the embedded store may miss a lease keep-alive and
// take a moment to answer again; the override is then applied on the node
// and pending for the fleet (written when the store answers), which is
// what the API reports as 202, not a failure: the callers' waits see the
// outcome either way.
func setPoolState(t *testing.T, n *Node, record, pool, state string) {
	t.Helper()
	err := (&backend{n: n}).SetPoolState(record, pool, state, time.Time{})
	var pending *api.PendingError
	switch {
	case errors.As(err, &pending):
		t.Logf("%s %s %s: pending for the fleet: %v", record, pool, state, err)
	case err != nil:
		t.Fatal(err)
	}
}
