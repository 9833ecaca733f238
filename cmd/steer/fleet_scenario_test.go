package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
)

// fleetRecord is the pushed configuration of the production scenario: one
// zone and one steered name failing over a → b → c; version tells pushes
// apart (it is the zone's serial and gen's TXT).
func fleetRecord(version int, extra string) string {
	return fmt.Sprintf(`zones:
  - { origin: example.com, file: example.com.zone }
records:
  - name: shop.example.com
    ttl: 1
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
      c: { address: 192.0.2.3 }
    rules:
      - default: { failover: [a, b, c] }
%s# version %d
`, extra, version)
}

// scenarioNode is one steer serve process of the scenario, with its own
// local file: listen, api, state_dir and the fleet section.
type scenarioNode struct {
	name, file, dns, api string
	p                    *process
}

func (n *scenarioNode) answer(t *testing.T) string {
	r, err := query(n.dns, "shop.example.com.", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Sprintf("no answer (%v %v)", r, err)
	}
	return r.Answer[0].(*dns.A).A.String()
}

func (n *scenarioNode) txt(t *testing.T) string {
	r, err := query(n.dns, "gen.example.com.", dns.TypeTXT)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Sprintf("no answer (%v %v)", r, err)
	}
	return r.Answer[0].(*dns.TXT).Txt[0]
}

// TestFleetProductionScenario is issue 25's acceptance, with Debian's
// etcd server and three steer serve processes on loopback, each with its
// own listen, api and state_dir: a push; a drain through node 2's API
// reaches all three within a second; with etcd stopped the nodes keep
// answering, a drain through node 1 applies there at once and reaches
// the others within a second of etcd's return; a push the nodes cannot
// apply, then all three restarted with etcd stopped, and each answers the
// last good bundle; a canary push to n1 and its rollback.
func TestFleetProductionScenario(t *testing.T) {
	t.Parallel() // waits on processes and peers: overlaps the other such tests
	etcd := etcdtest.StartProcess(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ep := etcd.Endpoint()
	push := func(version int, extra string, args ...string) (int, string) {
		write("push/example.com.zone", zoneText(version, fmt.Sprintf("v%d", version)))
		cfg := write("push/steer.yaml", fleetRecord(version, extra))
		var out, errb bytes.Buffer
		rc := run(append([]string{"fleet", "push", "--config", cfg, "--etcd", ep}, args...), &out, &errb)
		return rc, out.String() + errb.String()
	}
	fleetCmd := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		rc := run(append([]string{"fleet"}, append(args, "--etcd", ep)...), &out, &errb)
		return rc, out.String() + errb.String()
	}
	if rc, out := push(1, ""); rc != 0 {
		t.Fatalf("push: %d %s", rc, out)
	}
	write("token", "s3cret\n")
	var nodes []*scenarioNode
	for i := 1; i <= 3; i++ {
		ports := dnstest.FreePorts(t, 2)
		n := &scenarioNode{name: fmt.Sprintf("n%d", i), dns: fmt.Sprintf("127.0.0.1:%d", ports[0]), api: fmt.Sprintf("127.0.0.1:%d", ports[1])}
		n.file = write(n.name+"/steer.yaml", fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: ../token }
state_dir: state
fleet:
  node: %s
  etcd: { endpoints: [%s], dial_timeout: 1s }
  lease_ttl: 2s
`, n.dns, n.api, n.name, ep))
		n.p = startSteer(t, n.file)
		nodes = append(nodes, n)
	}
	all := func(what string, within time.Duration, want func(n *scenarioNode) string, value string, ns ...*scenarioNode) time.Duration {
		t.Helper()
		if ns == nil {
			ns = nodes
		}
		start := time.Now()
		var last []string
		dnstest.WaitFor(t, within, what, func() bool {
			last = last[:0]
			ok := true
			for _, n := range ns {
				got := want(n)
				last = append(last, n.name+"="+got)
				ok = ok && got == value
			}
			return ok
		}, func() string { return strings.Join(last, " ") })
		return time.Since(start)
	}
	answer := func(n *scenarioNode) string { return n.answer(t) }
	txt := func(n *scenarioNode) string { return n.txt(t) }
	all("every node to serve the first push", 10*time.Second, txt, "v1")
	all("every node to answer pool a", time.Second, answer, "192.0.2.1")

	// Each node keeps its own API after the push.
	for _, n := range nodes {
		if code, body := apiCall(t, n.api, "s3cret", "GET", "/v1/status", "", ""); code != 200 {
			t.Fatalf("%s: its own API after the push: %d %s\n%s", n.name, code, body, n.p.log())
		}
	}

	// A drain through node 2 reaches all three within a second.
	if code, body := apiCall(t, nodes[1].api, "s3cret", "PUT", "/v1/records/shop.example.com./pools/a/state", "", `{"state":"drain"}`); code/100 != 2 {
		t.Fatalf("drain through n2: %d %s", code, body)
	}
	took := all("the drain of a through n2 to reach every node", time.Second, answer, "192.0.2.2")
	t.Logf("drain through n2 reached all three in %v", took.Round(time.Millisecond))

	// etcd stopped: the nodes keep answering; a drain through node 1
	// applies there at once and waits for the store.
	etcd.Stop()
	all("every node to keep answering with etcd stopped", time.Second, answer, "192.0.2.2")
	code, body := apiCall(t, nodes[0].api, "s3cret", "PUT", "/v1/records/shop.example.com./pools/b/state", "", `{"state":"drain"}`)
	if code/100 != 2 || !strings.Contains(body, "pending") {
		t.Fatalf("drain through n1 with etcd stopped: %d %s, want 200 saying it is pending for the fleet", code, body)
	}
	if got := nodes[0].answer(t); got != "192.0.2.3" {
		t.Fatalf("n1 right after its offline drain answers %s, want 192.0.2.3", got)
	}
	if code, body := apiCall(t, nodes[0].api, "s3cret", "GET", "/v1/status", "", ""); code != 200 || !strings.Contains(body, "pending") {
		t.Errorf("n1's status does not show the pending drain: %d %s", code, body)
	}
	for _, n := range nodes[1:] {
		if got := n.answer(t); got != "192.0.2.2" {
			t.Errorf("%s answers %s before etcd returns, want 192.0.2.2 still", n.name, got)
		}
	}
	etcd.Start()
	took = all("n1's offline drain to reach the others after etcd returns", time.Second, answer, "192.0.2.3", nodes[1:]...)
	t.Logf("n1's offline drain reached n2 and n3 %v after etcd returned", took.Round(time.Millisecond))

	// A push the nodes cannot apply: they keep serving v2, and so they do
	// after a restart with etcd stopped.
	if rc, out := push(2, ""); rc != 0 {
		t.Fatalf("push v2: %d %s", rc, out)
	}
	all("every node to serve v2", 5*time.Second, txt, "v2")
	// The bundle the nodes cannot apply names a geo database no node has,
	// as a push would from a host that has it (steer fleet push checks the
	// node-local files on the pushing host), published as that push would.
	store, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: []string{ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := fleet.ReadBundle(ctx, store, "/steer/v1")
	if err != nil {
		t.Fatal(err)
	}
	bad := fleet.Bundle{Files: maps.Clone(cur.Files)}
	bad.Files[fleet.ConfigName] = []byte(fleetRecord(3, "geo: { databases: [/nonexistent/steer-test/GeoIP2-City.mmdb] }\n"))
	if _, _, err := fleet.Publish(ctx, store, "/steer/v1", bad, cur.Rev); err != nil {
		t.Fatalf("publishing the bundle the nodes cannot apply: %v", err)
	}
	dnstest.WaitFor(t, 5*time.Second, "fleet status to show every node rejecting push 3", func() bool {
		_, out := fleetCmd("status")
		return strings.Count(out, "GeoIP2-City.mmdb") >= 3
	}, func() string { _, out := fleetCmd("status"); return out })
	all("every node to keep serving v2 after the bad push", time.Second, txt, "v2")
	etcd.Stop()
	for _, n := range nodes {
		n.p.stop(t)
		n.p = startSteer(t, n.file)
	}
	all("every node restarted with etcd stopped to serve the last good bundle", 5*time.Second, txt, "v2")
	all("every node restarted to keep the drains", time.Second, answer, "192.0.2.3")

	// The operator rolls the bad push back: v2 is the fleet's bundle again
	// and no node reports an error. Then a canary: n1 takes v4, the
	// others keep v2; rollback takes n1 back.
	etcd.Start()
	if rc, out := fleetCmd("rollback"); rc != 0 {
		t.Fatalf("fleet rollback of the bad push: %d %s", rc, out)
	}
	dnstest.WaitFor(t, 5*time.Second, "fleet status to show no node rejecting a bundle", func() bool {
		_, out := fleetCmd("status")
		return !strings.Contains(out, "GeoIP2-City.mmdb")
	}, func() string { _, out := fleetCmd("status"); return out })
	if rc, out := push(4, "", "--canary", "n1"); rc != 0 {
		t.Fatalf("push --canary n1: %d %s", rc, out)
	}
	all("the canary n1 to serve v4", 5*time.Second, txt, "v4", nodes[0])
	all("n2 and n3 to stay on v2 during the canary", time.Second, txt, "v2", nodes[1:]...)
	if rc, out := fleetCmd("rollback"); rc != 0 {
		t.Fatalf("fleet rollback: %d %s", rc, out)
	}
	all("every node to serve v2 after the rollback", 5*time.Second, txt, "v2")
	if rc, out := fleetCmd("status"); rc != 0 || strings.Count(out, "\n") < 3 {
		t.Errorf("fleet status: %d %s", rc, out)
	}
}
