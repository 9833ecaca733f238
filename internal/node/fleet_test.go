package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
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
	waitFor(t, 5*time.Second, "gen.example.com TXT "+want, func() bool { return n.txt("gen.example.com") == want })
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
	c := etcdtest.Start(t, etcdtest.Options{})
	s, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: c.Endpoints(), RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	waitFor(t, 3*time.Second, "both nodes report serial 1", func() bool {
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
	waitFor(t, 5*time.Second, "the error reported", func() bool {
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

	// Shut a node down: its status goes with its lease, at once.
	first := nodes[0]
	first.Shutdown(ctx)
	waitFor(t, 3*time.Second, "fra-1's status gone", func() bool { return statusOf(t, s, "fra-1").Node == "" })

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

// TestFleetPushAndStatus pushes a configuration with its zones as steer
// fleet push does: a configuration that fails steer check is refused with
// nothing written; a good one is published with every zone it names and
// served by a node, which fleet status lists.
func TestFleetPushAndStatus(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	dir := t.TempDir()
	writeFile(t, dir, "steer.yaml", "identity: pushed\ncookies: { secret_file: cookie.key }\nzones:\n  - origin: example.com\n    file: zones/example.com.zone\n")
	writeFile(t, dir, "cookie.key", secretA+"\n")
	writeFile(t, dir, "zones/example.com.zone", zone("example.com", 7, "pushed"))
	writeFile(t, dir, "bad.yaml", "identity: pushed\nzones:\n  - origin: example.com\n    file: zones/nope.zone\n")
	o := FleetOptions{Endpoints: c.Endpoints(), Timeout: 3 * time.Second}
	if _, err := FleetPush(dir+"/bad.yaml", o); err == nil || !strings.Contains(err.Error(), "nothing was pushed") {
		t.Fatalf("a config failing steer check: %v", err)
	}
	st, err := FleetStatus(o)
	if err != nil || st.Published.Rev != 0 {
		t.Fatalf("after the refused push: %+v %v", st, err)
	}
	res, err := FleetPush(dir+"/steer.yaml", o)
	if err != nil || res.Serial != 1 || len(res.Files) != 3 {
		t.Fatalf("push: %+v %v", res, err)
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
	var text string
	waitFor(t, 3*time.Second, "fleet status lists ams-1", func() bool {
		st, err := FleetStatus(o)
		if err != nil {
			return false
		}
		text = st.Text(time.Now())
		return len(st.Nodes) == 1 && st.Nodes[0].Serial == 1 && st.Nodes[0].Version == "v-test"
	})
	if !strings.Contains(text, "published: serial 1") || !strings.Contains(text, "ams-1") {
		t.Errorf("status text:\n%s", text)
	}
	t.Logf("\n%s", text)
	// The store down: push fails loudly.
	c.Member(0).Stop()
	o.Timeout = time.Second
	if _, err := FleetPush(dir+"/steer.yaml", o); err == nil {
		t.Error("push with the store down succeeded")
	} else {
		t.Logf("push with the store down: %v", err)
	}
}
