package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
)

// viewBundle checks 127.0.0.1 on port (shop.example.com's primary) and
// steers geo.example.com by country, unknown clients by the node's.
func viewBundle(t *testing.T, port string) fleet.Bundle {
	// The small test database (a node-local file: an absolute path).
	db, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-country-flat.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := `identity: pushed
geo: { databases: [` + db + `] }
ecs: { unknown_client: node }
zones:
  - origin: example.com
    file: zones/example.com.zone
health_checks:
  t: { type: http, port: ` + port + `, path: /healthz, interval: 200ms, timeout: 150ms, rise: 1, fall: 2 }
records:
  - name: shop.example.com
    ttl: 5
    pools:
      primary:   { address: 127.0.0.1, health_check: t }
      secondary: { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, secondary] }
  - name: geo.example.com
    ttl: 5
    pools:
      india: { address: 203.0.113.10 }
      other: { address: 192.0.2.30 }
    rules:
      - match: { country: IN }
        pool: india
      - default: { pool: other }
  - name: region.example.com
    ttl: 5
    pools:
      one: { address: 198.51.100.1 }
      zero: { address: 198.51.100.2 }
    rules:
      - match: { node_region: r1 }
        pool: one
      - default: { pool: zero }
`
	return fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "zones/example.com.zone": []byte(zone("example.com", 1, "x"))}}
}

// get asks h for path and decodes a 200's body into v; it returns the
// status and the body.
func get(t *testing.T, h http.Handler, path string, v any) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code == 200 && v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s: %v in %s", path, err, rec.Body)
		}
	}
	return rec.Code, rec.Body.String()
}

// TestFleetView runs three nodes on one etcd: node 2's GET /v1/fleet
// shows all three with their digests, view ages, health modes and
// locations, and the checked target with each observer's verdict, which
// follow the target when it stops; explain with node= answers as another
// node of the fleet would (its country steering an unknown client).
func TestFleetView(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	t.Cleanup(site.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(site.URL, "http://"))
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", viewBundle(t, port), 0); err != nil {
		t.Fatal(err)
	}
	idents := []string{
		"{ country: DE, location: { lat: 50.11, lon: 8.68 } }",
		"{ country: DE }",
		"{ country: IN, location: { lat: 19.07, lon: 72.88 } }",
	}
	var nodes []*testNode
	for i, id := range idents {
		local := fmt.Sprintf(`node: %s
fleet:
  node: n%d
  region: r%d
  etcd: { endpoints: [%s], dial_timeout: 1s }
  lease_ttl: 2s
  health_quorum: { min_observers: 3, hold_down: 300ms }
`, id, i+1, i%2, strings.Join(c.Endpoints(), ", "))
		nodes = append(nodes, startNode(t, map[string]string{"steer.yaml": local}, Options{}))
	}
	h := api.NewHandler(&backend{n: nodes[1].Node}, api.Options{})
	const target = "127.0.0.1/t"
	var v api.FleetView
	observers := func(state string) bool {
		for _, tg := range v.Targets {
			if tg.Target != target || tg.Verdict != state || len(tg.Observers) != 3 {
				continue
			}
			for _, o := range tg.Observers {
				if o.State != state || o.Stale {
					return false
				}
			}
			return true
		}
		return false
	}
	dnstest.WaitFor(t, 8*time.Second, "node 2 sees three nodes serving the bundle and three observers seeing the target up", func() bool {
		if code, body := get(t, h, "/v1/fleet", &v); code != 200 {
			t.Fatalf("GET /v1/fleet: %d %s", code, body)
		}
		if len(v.Nodes) != 3 {
			return false
		}
		for _, n := range v.Nodes {
			if n.Digest == "" || n.HealthMode != "quorum" {
				return false
			}
		}
		return observers("up")
	})
	if v.Node != "n2" || v.Prefix != "/steer/v1" {
		t.Errorf("node %q prefix %q", v.Node, v.Prefix)
	}
	for i, n := range v.Nodes {
		if want := fmt.Sprintf("n%d", i+1); n.Name != want || n.Self != (i == 1) || n.Serial != 1 || n.ViewAge == "-" || n.ViewAt.IsZero() || n.Error != "" {
			t.Errorf("node %d: %+v", i, n)
		}
		if n.Digest != v.Nodes[0].Digest {
			t.Errorf("%s serves %s, %s serves %s", n.Name, n.Digest, v.Nodes[0].Name, v.Nodes[0].Digest)
		}
	}
	if l := v.Nodes[2].Location; l == nil || l.Lat != 19.07 || l.Lon != 72.88 {
		t.Errorf("n3's location %+v", l)
	}
	if l := v.Nodes[1].Location; l == nil || l.Lat == 0 {
		t.Errorf("n2's location (its country's centroid): %+v", l)
	}
	pts := (&backend{n: nodes[1].Node}).fleetNodes()
	if len(pts) != 3 || pts[0].Kind != "node" || pts[0].Label != "n1" || pts[0].State != "up" {
		t.Errorf("map points %+v", pts)
	}
	var ov api.Overview
	if code, body := get(t, h, "/v1/overview", &ov); code != 200 {
		t.Fatalf("GET /v1/overview: %d %s", code, body)
	}
	var onMap []string
	for _, p := range ov.Map {
		if p.Kind == "node" {
			onMap = append(onMap, p.Label)
		}
	}
	if strings.Join(onMap, ",") != "n1,n2,n3" {
		t.Errorf("the overview's map has the nodes %q, want the fleet's three", onMap)
	}
	t.Logf("up: %+v", v.Targets)

	// The target stops: every observer, and the fleet's verdict, say down.
	site.Close()
	dnstest.WaitFor(t, 5*time.Second, "three observers seeing the target down", func() bool {
		get(t, h, "/v1/fleet", &v)
		return observers("down")
	})
	for _, tg := range v.Targets {
		if tg.Target == target && (tg.Reason == "" || tg.Since == nil) {
			t.Errorf("target %+v: no reason or since", tg)
		}
	}
	t.Logf("down: %+v", v.Targets)
	dnstest.WaitFor(t, 3*time.Second, "node 2 answers the secondary", func() bool { return nodes[1].a("shop.example.com") == "192.0.2.2" })

	// Explain as another node: an unknown client (no ECS, a resolver
	// the databases do not place) is steered by the answering node's
	// country.
	answer := func(query string) string {
		var rep struct {
			Answer []string
			Notes  []string
			Input  struct {
				SteeredBy string `json:"steered_by"`
			}
		}
		code, body := get(t, h, "/v1/explain?name=geo.example.com&"+query, &rep)
		if code != 200 {
			t.Fatalf("explain %s: %d %s", query, code, body)
		}
		t.Logf("explain %s: %v, steered by %s, notes %q", query, rep.Answer, rep.Input.SteeredBy, rep.Notes)
		return strings.Join(rep.Answer, "; ")
	}
	if a := answer("from=127.0.0.1"); !strings.Contains(a, "192.0.2.30") {
		t.Errorf("node 2 (DE) explains %s", a)
	}
	if a := answer("from=127.0.0.1&node=n3"); !strings.Contains(a, "203.0.113.10") {
		t.Errorf("as node 3 (IN): %s", a)
	}
	if a := answer("from=127.0.0.1&node=n1"); !strings.Contains(a, "192.0.2.30") {
		t.Errorf("as node 1 (DE): %s", a)
	}
	if a := answer("from=127.0.0.1&node=n2"); !strings.Contains(a, "192.0.2.30") {
		t.Errorf("as node 2 itself: %s", a)
	}
	// Rules on the node's region are decided for the node asked about.
	for node, want := range map[string]string{"": "198.51.100.1", "n1": "198.51.100.2", "n2": "198.51.100.1", "n3": "198.51.100.2"} {
		var rep struct{ Answer []string }
		if code, body := get(t, h, "/v1/explain?name=region.example.com&node="+node, &rep); code != 200 || len(rep.Answer) != 1 || !strings.Contains(rep.Answer[0], want) {
			t.Errorf("region.example.com as node %q: %d %s, want %s", node, code, body, want)
		}
	}
	// Health is this node's view: shop's primary is down as node 3.
	var rep struct{ Answer []string }
	if code, body := get(t, h, "/v1/explain?name=shop.example.com&node=n3", &rep); code != 200 || len(rep.Answer) != 1 || !strings.Contains(rep.Answer[0], "192.0.2.2") {
		t.Errorf("shop as node 3: %d %s", code, body)
	}
	for _, bad := range []string{"nope", "n4"} {
		code, body := get(t, h, "/v1/explain?name=geo.example.com&node="+bad, nil)
		if code != 400 || !strings.Contains(body, `\"`+bad+`\"`) {
			t.Errorf("node=%s: %d %s", bad, code, body)
		}
	}
	if code, body := get(t, h, "/v1/explain?name=geo.example.com&node=a%20b", nil); code != 400 || !strings.Contains(body, "node") {
		t.Errorf("node=a b: %d %s", code, body)
	}
}

// Off a fleet, GET /v1/fleet is 404 and explain with node= is 400.
func TestFleetViewOffFleet(t *testing.T) {
	t.Parallel()
	n := startNode(t, map[string]string{
		"steer.yaml":       "zones:\n  - origin: example.com\n    file: example.com.zone\n",
		"example.com.zone": zone("example.com", 1, "x"),
	}, Options{})
	h := api.NewHandler(&backend{n: n.Node}, api.Options{})
	if code, body := get(t, h, "/v1/fleet", nil); code != 404 {
		t.Errorf("GET /v1/fleet off a fleet: %d %s", code, body)
	}
	if code, body := get(t, h, "/v1/explain?name=gen.example.com&type=TXT&node=n1", nil); code != 400 || !strings.Contains(body, "no fleet") {
		t.Errorf("explain node= off a fleet: %d %s", code, body)
	}
	if code, body := get(t, h, "/v1/explain?name=gen.example.com&type=TXT", nil); code != 200 {
		t.Errorf("explain: %d %s", code, body)
	}
	if pts := (&backend{n: n.Node}).fleetNodes(); pts != nil {
		t.Errorf("map points off a fleet: %+v", pts)
	}
}
