package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
)

// safetyConfig serves shop.example.com from three pools (a, b, c at
// 127.0.0.2-4), each checked over HTTP on port, split evenly, under
// safety: { min_usable: 2 } (line 15); enabled lists each pool's enabled.
func safetyConfig(port int, enabled ...string) string {
	en := []string{"true", "true", "true"}
	copy(en, enabled)
	return fmt.Sprintf(`api: { listen: "127.0.0.1:0" }
geo: { databases: [%s] }
zones:
  - origin: example.com
    file: example.com.zone
health_checks:
  web: { type: http, port: %d, path: /healthz, interval: 100ms, timeout: 100ms, rise: 1, fall: 1 }
records:
  - name: shop.example.com
    ttl: 1
    pools:
      a: { address: 127.0.0.2, health_check: web, enabled: %s }
      b: { address: 127.0.0.3, health_check: web, enabled: %s }
      c: { address: 127.0.0.4, health_check: web, enabled: %s }
    safety: { min_usable: 2 }
    rules:
      - default: { split: [ { pool: a, weight: 1 }, { pool: b, weight: 1 }, { pool: c, weight: 1 } ] }
`, smallGeo, port, en[0], en[1], en[2])
}

// smallGeo is a small country database: these records steer by no
// place, and compiling against it takes a fraction of the embedded one.
var smallGeo, _ = filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-country-flat.mmdb"))

// startSafetyNode runs the three HTTP targets and a node on
// safetyConfig, and waits until every pool is up by its checks.
func startSafetyNode(t *testing.T) *testNode {
	t.Helper()
	first := startTarget(t, "127.0.0.2", 0)
	port := first.ln.Addr().(*net.TCPAddr).Port
	startTarget(t, "127.0.0.3", port)
	startTarget(t, "127.0.0.4", port)
	n := startNode(t, map[string]string{"steer.yaml": safetyConfig(port), "example.com.zone": dashZone}, Options{})
	dnstest.WaitFor(t, 5*time.Second, "all three pools up by their checks", func() bool {
		st := n.Status()
		up := 0
		for _, p := range st.Records[0].Pools {
			if p.State == "up" && p.Targets[0].State == "up" {
				up++
			}
		}
		return up == 3
	})
	return n
}

func decodeResult(t *testing.T, body string) api.OverrideResult {
	t.Helper()
	var r api.OverrideResult
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return r
}

// TestSafetyRuleDrains: under min_usable: 2 on a three-pool record, a
// dry run of a drain reports the pools left and the share of the
// answers really given that would move, per destination; the first
// drain applies, the second is refused with 409 naming the rule, where
// it is declared and what would remain, and force applies it, logged
// with the caller's address.
func TestSafetyRuleDrains(t *testing.T) {
	t.Parallel() // waits on health checks
	n := startSafetyNode(t)
	got := map[string]int{}
	for range 60 {
		got[n.a("shop.example.com")]++
	}
	n.Traffic().Sample(time.Now())

	code, body := n.call("PUT", "/v1/records/shop.example.com/pools/b/state?dry_run=1", "", `{"state":"drain"}`)
	if code != 200 {
		t.Fatalf("dry run: %d %s", code, body)
	}
	r := decodeResult(t, body)
	if r.Applied || len(r.Records) != 1 || strings.Join(r.Records[0].UsableAfter, ",") != "a,c" || r.Refused != "" {
		t.Fatalf("dry run result: %s", body)
	}
	e := r.Records[0]
	wantMove := float64(got["127.0.0.3"]) / 60
	if e.Answers != 60 || abs(e.Moving-wantMove) > 1e-3 {
		t.Errorf("dry run: %d answers, moving %v; the node answered 60, %d of them b (%v)", e.Answers, e.Moving, got["127.0.0.3"], wantMove)
	}
	// The split's other two pools take b's answers evenly.
	if abs(e.MovingTo["a"]-wantMove/2) > 1e-3 || abs(e.MovingTo["c"]-wantMove/2) > 1e-3 {
		t.Errorf("dry run destinations %v, want half of %v to a and to c", e.MovingTo, wantMove)
	}
	if _, o, ok := n.hc.manager.PoolOverride("shop.example.com.", "b"); ok {
		t.Fatalf("the dry run applied an override: %v", o)
	}

	if code, body := n.call("PUT", "/v1/records/shop.example.com/pools/a/state", "", `{"state":"drain"}`); code != 204 {
		t.Fatalf("first drain: %d %s", code, body)
	}
	code, body = n.call("PUT", "/v1/records/shop.example.com/pools/b/state", "", `{"state":"drain"}`)
	for _, want := range []string{"min_usable 2", "record rule at", "steer.yaml:15", "shop.example.com.", "only 1 usable pool(s) would remain (c", "force: true"} {
		if code != 409 || !strings.Contains(body, want) {
			t.Fatalf("second drain: %d %s; want 409 saying %q", code, body, want)
		}
	}
	if got := n.a("shop.example.com"); got == "127.0.0.2" {
		t.Fatalf("drained a still answered")
	}
	code, body = n.call("PUT", "/v1/records/shop.example.com/pools/b/state", "", `{"state":"drain","force":true}`)
	if code != 200 || len(decodeResult(t, body).Forced) != 1 {
		t.Fatalf("forced drain: %d %s", code, body)
	}
	dnstest.WaitFor(t, time.Second, "the forced drain in effect", func() bool { return n.a("shop.example.com") == "127.0.0.4" })
	if log := n.logs.String(); !strings.Contains(log, "safety rule overridden by force") || !strings.Contains(log, "caller=127.0.0.1:") {
		t.Errorf("the forced drain is not logged with the caller's address:\n%s", grepLines(log, "safety"))
	}
	// A target drain of the last pool is refused the same way.
	if code, body := n.call("PUT", "/v1/targets/127.0.0.4/state", "", `{"state":"down"}`); code != 409 || !strings.Contains(body, "min_usable 2") {
		t.Fatalf("down of the last target: %d %s", code, body)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestSafetyBatch: POST /v1/overrides applies all or none: a third item
// naming no pool, or one that breaks the rule with the first two,
// leaves nothing applied; a good batch applies every item.
func TestSafetyBatch(t *testing.T) {
	t.Parallel()
	n := startSafetyNode(t)
	none := func(when string) {
		t.Helper()
		for _, p := range []string{"a", "b", "c"} {
			if o, _, ok := n.hc.manager.PoolOverride("shop.example.com.", p); ok {
				t.Fatalf("%s: pool %s has override %v", when, p, o)
			}
		}
	}
	code, body := n.call("POST", "/v1/overrides", "", `{"overrides":[
		{"record":"shop.example.com","pool":"a","state":"up"},
		{"record":"shop.example.com","pool":"b","state":"drain"},
		{"record":"shop.example.com","pool":"zz","state":"drain"}]}`)
	if code != 404 || !strings.Contains(body, "item 3") || !strings.Contains(body, "no pool zz") {
		t.Fatalf("batch with an unknown pool: %d %s", code, body)
	}
	none("after a batch whose third item names no pool")
	code, body = n.call("POST", "/v1/overrides", "", `{"overrides":[
		{"record":"shop.example.com","pool":"a","state":"up"},
		{"target":"127.0.0.2","record":"shop.example.com","pool":"b","state":"drain"}]}`)
	if code != 400 || !strings.Contains(body, "overrides item 2: give target, or record and pool, not both") {
		t.Fatalf("batch with a malformed second item: %d %s", code, body)
	}
	none("after a batch with a malformed item")
	code, body = n.call("POST", "/v1/overrides", "", `{"overrides":[
		{"record":"shop.example.com","pool":"a","state":"up"},
		{"record":"shop.example.com","pool":"b","state":"drain"},
		{"target":"127.0.0.4","state":"down"}]}`)
	if code != 409 || !strings.Contains(body, "min_usable 2") {
		t.Fatalf("batch breaking the rule: %d %s", code, body)
	}
	none("after a batch refused by the rule")
	code, body = n.call("POST", "/v1/overrides", "", `{"overrides":[
		{"record":"shop.example.com","pool":"a","state":"up"},
		{"record":"shop.example.com","pool":"b","state":"drain"},
		{"target":"127.0.0.9","state":"down"}]}`)
	if code != 404 || !strings.Contains(body, "item 3") {
		t.Fatalf("batch with an unknown target: %d %s", code, body)
	}
	none("after a batch whose third target is unknown")
	code, body = n.call("POST", "/v1/overrides", "", `{"overrides":[
		{"record":"shop.example.com","pool":"a","state":"up"},
		{"record":"shop.example.com","pool":"b","state":"drain"},
		{"record":"shop.example.com","pool":"c","state":"up","expires":"1h"}]}`)
	if code != 200 || !decodeResult(t, body).Applied {
		t.Fatalf("good batch: %d %s", code, body)
	}
	for p, want := range map[string]string{"a": "up", "b": "drain", "c": "up"} {
		if o, _, ok := n.hc.manager.PoolOverride("shop.example.com.", p); !ok || o.String() != want {
			t.Errorf("after the batch pool %s has %v, want %s", p, o, want)
		}
	}
}

// TestSafetyReload: with pool c drained, a reload disabling pool a
// would leave only b: it is refused with the rule (the old configuration
// keeps serving a); forced, it applies. A reload disabling two pools is
// refused by the configuration's own check, forced or not.
func TestSafetyReload(t *testing.T) {
	t.Parallel()
	n := startSafetyNode(t)
	port := n.srv.Handler().Snapshot().Config.HealthChecks["web"].Port
	writeFile(t, n.dir, "steer.yaml", safetyConfig(port, "false", "true", "false"))
	code, body := n.call("POST", "/v1/reload?force=1", "", "")
	if code != 422 || !strings.Contains(body, "cannot be met even with every pool up: it has 1 enabled pools (b)") {
		t.Fatalf("reload disabling two pools: %d %s", code, body)
	}
	if code, body := n.call("PUT", "/v1/records/shop.example.com/pools/c/state", "", `{"state":"drain"}`); code != 204 {
		t.Fatalf("drain of c: %d %s", code, body)
	}
	writeFile(t, n.dir, "steer.yaml", safetyConfig(port, "false"))
	code, body = n.call("POST", "/v1/reload", "", "")
	if code != 422 || !strings.Contains(body, "min_usable 2") || !strings.Contains(body, "would remain (b;") {
		t.Fatalf("reload disabling a with c drained: %d %s", code, body)
	}
	if st := n.Status(); st.Records[0].Pools[0].State != "up" {
		t.Fatalf("the refused reload changed what is served: %+v", st.Records[0].Pools[0])
	}
	code, body = n.call("POST", "/v1/reload?force=1", "", "")
	if code != 200 {
		t.Fatalf("forced reload: %d %s", code, body)
	}
	if st := n.Status(); st.Records[0].Pools[0].State != "disabled" {
		t.Fatalf("the forced reload did not apply: %+v", st.Records[0].Pools[0])
	}
	if !strings.Contains(n.logs.String(), "reload: safety rule overridden by force") {
		t.Errorf("the forced reload is not logged")
	}
}

// safetyFleet publishes a three-pool record under min_usable: 2 to an
// embedded store and starts two nodes of the fleet on it.
func safetyFleet(t *testing.T) (n1, n2 *testNode) {
	c, s := fleetStore(t)
	cfg := `identity: pushed
api: { listen: "127.0.0.1:0" }
geo: { databases: [` + smallGeo + `] }
zones:
  - origin: example.com
    file: zones/example.com.zone
records:
  - name: shop.example.com
    ttl: 5
    safety: { min_usable: 2 }
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
      c: { address: 192.0.2.3 }
    rules:
      - default: { failover: [a, b, c] }
`
	b := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "zones/example.com.zone": []byte(zone("example.com", 1, "x"))}}
	// A loaded machine may keep the embedded store from answering in
	// time: retry (a publish that went through answers ErrConflict).
	dnstest.WaitFor(t, 15*time.Second, "the bundle published", func() bool {
		_, _, err := fleet.Publish(context.Background(), s, "/steer/v1", b, 0)
		return err == nil || errors.Is(err, fleet.ErrConflict)
	})
	n1 = startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "n1")}, Options{})
	n2 = startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "n2")}, Options{})
	return n1, n2
}

// TestSafetyFleetBatch: a batch through one node's API is one store
// transaction both nodes follow within a second; the rule is then
// checked against the fleet's view on the other node.
func TestSafetyFleetBatch(t *testing.T) {
	t.Parallel() // waits on the store and its peers
	n1, n2 := safetyFleet(t)
	start := time.Now()
	code, body := n1.call("POST", "/v1/overrides", "", `{"overrides":[
		{"record":"shop.example.com","pool":"a","state":"drain"},
		{"record":"shop.example.com","pool":"b","state":"up"},
		{"target":"192.0.2.3","state":"up","expires":"1h"}]}`)
	if code != 200 {
		t.Fatalf("batch through n1: %d %s", code, body)
	}
	dnstest.WaitFor(t, 5*time.Second, "all three overrides on n2", func() bool {
		hm := n2.hc.manager
		oa, _, okA := hm.PoolOverride("shop.example.com.", "a")
		ob, _, okB := hm.PoolOverride("shop.example.com.", "b")
		oc, _, okC := hm.TargetOverride(netip.MustParseAddr("192.0.2.3"))
		return okA && okB && okC && oa == health.OverrideDrain && ob == health.OverrideUp && oc == health.OverrideUp
	})
	t.Logf("the batch reached n2 in %v", time.Since(start).Round(time.Millisecond))
	// The manager holds the overrides before the health refresh has
	// put them into the snapshot the query path reads: wait for that
	// too, as for any override reaching a node.
	var got string
	dnstest.WaitFor(t, 5*time.Second, "n2 answering b after the batch", func() bool {
		got = n2.a("shop.example.com")
		return got == "192.0.2.2"
	}, func() string { return "n2 answers " + got + ", want b (192.0.2.2)" })
	code, body = n2.call("PUT", "/v1/records/shop.example.com/pools/b/state", "", `{"state":"down"}`)
	if code != 409 || !strings.Contains(body, "only 1 usable pool(s) would remain (c") {
		t.Fatalf("down of b through n2 with a drained by n1: %d %s", code, body)
	}
}

// TestSafetyFleetRace: two nodes take, at the same moment, a drain each
// that keeps min_usable: 2 alone (a on n1, b on n2) and together breaks
// it. The fleet's rule holds: in every round exactly one is applied and
// the other refused with 409 naming the rule and what would remain, and
// neither node ends with both drained. Before the write was conditional
// on the fleet's overrides, each node checked against its own view and
// both went through.
func TestSafetyFleetRace(t *testing.T) {
	t.Parallel() // waits on the store and its peers
	n1, n2 := safetyFleet(t)
	nodes := []*testNode{n1, n2}
	pools := []string{"a", "b"}
	drained := func(n *testNode, pool string) bool {
		o, _, ok := n.hc.manager.PoolOverride("shop.example.com.", pool)
		return ok && o == health.OverrideDrain
	}
	const rounds = 6
	for round := range rounds {
		// Both nodes start the round with no override.
		code, body := n1.call("POST", "/v1/overrides", "", `{"overrides":[
			{"record":"shop.example.com","pool":"a","state":"auto"},
			{"record":"shop.example.com","pool":"b","state":"auto"}]}`)
		if code != 200 {
			t.Fatalf("round %d: clearing: %d %s", round, code, body)
		}
		for _, n := range nodes {
			dnstest.WaitFor(t, 5*time.Second, "no override on either node", func() bool {
				return !drained(n, "a") && !drained(n, "b")
			})
		}
		var wg sync.WaitGroup
		codes, bodies := make([]int, 2), make([]string, 2)
		barrier := make(chan struct{})
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-barrier
				codes[i], bodies[i] = callAPI(t, n.APIAddr(), "PUT", "/v1/records/shop.example.com/pools/"+pools[(i+round)%2]+"/state", "", `{"state":"drain"}`)
			}()
		}
		close(barrier)
		wg.Wait()
		won, lost := -1, -1
		for i, c := range codes {
			switch c {
			case 204:
				won = i
			case 409:
				lost = i
			default:
				t.Fatalf("round %d: node %d answered %d %s", round, i+1, c, bodies[i])
			}
		}
		if won < 0 || lost < 0 {
			t.Fatalf("round %d: answers %v (%q), want one 204 and one 409", round, codes, bodies)
		}
		if b := bodies[lost]; !strings.Contains(b, "min_usable 2") || !strings.Contains(b, "only 1 usable pool(s) would remain (c") {
			t.Errorf("round %d: the refusal does not name the rule and what would remain: %s", round, b)
		}
		// The winner's drain reaches both nodes; the loser's on neither.
		win, lose := pools[(won+round)%2], pools[(lost+round)%2]
		for _, n := range nodes {
			dnstest.WaitFor(t, 5*time.Second, "the applied drain on both nodes", func() bool { return drained(n, win) })
			if drained(n, lose) {
				t.Fatalf("round %d: %s drained too on a node: the rule is broken", round, lose)
			}
		}
	}
}
