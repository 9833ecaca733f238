package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

const latencyCfg = `listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
zones:
  - { origin: example.com, file: example.com.zone }
health: { feed_file: feed.json }
records:
  - name: shop.example.com
    ttl: 1
    pools:
      bom: { address: 203.0.113.10, location: { lat: 19.08, lon: 72.88 } }
      fra: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
    rules:
      - default: { by: latency }
`

// Every typo in an operational input gets a 4xx naming it and changes
// nothing: unknown target, record, pool; a feed naming unknown pools or
// targets; latency entries with an unknown site or key or a future time.
func TestBadOperationalInputs(t *testing.T) {
	n := startNode(t, map[string]string{
		"steer.yaml": latencyCfg, "token": "tok", "example.com.zone": zone("example.com", 1, "x"),
		"feed.json": `{"pools": {"shop.example.com/fra": {"state": "drain"}}}`,
	}, Options{})
	status := func() string { _, b := n.call("GET", "/v1/status", "tok", ""); return b }
	dnstest.WaitFor(t, 3*time.Second, "the feed drains fra", func() bool { return strings.Contains(status(), `"drain"`) })
	before := status()
	for _, c := range []struct{ method, path, body, want string }{
		{"PUT", "/v1/targets/192.0.2.99/state", `{"state":"down"}`, "192.0.2.99 is no address of any pool"},
		{"PUT", "/v1/records/nosuch.example.com/pools/fra/state", `{"state":"down"}`, "nosuch.example.com is not a steered record"},
		{"PUT", "/v1/records/shop.example.com/pools/sin/state", `{"state":"down"}`, "has no pool sin"},
	} {
		code, body := n.call(c.method, c.path, "tok", c.body)
		if code != 404 || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want 404 naming %q", c.method, c.path, code, body, c.want)
		}
	}
	now := time.Now().UTC()
	for _, c := range []struct{ body, want string }{
		{`[{"key":"IN","site":"sin","rtt_ms":20,"samples":5,"measured_at":"` + now.Format(time.RFC3339) + `"}]`, `sin\" is not a site of any latency-steered record (known: bom, fra)`},
		{`[{"key":"XX","site":"bom","rtt_ms":20,"samples":5,"measured_at":"` + now.Format(time.RFC3339) + `"}]`, `XX`},
		{`[{"key":"IN","site":"bom","rtt_ms":20,"samples":5,"measured_at":"2030-01-01T00:00:00Z"}]`, "in the future"},
		{`[{"key":"IN","site":"bom","rtt_ms":20,"samples":5,"measured_at":"` + now.Add(2*time.Minute).Format(time.RFC3339) + `"}]`, "in the future"},
	} {
		code, body := n.call("POST", "/v1/latency", "tok", c.body)
		if code != 400 || !strings.Contains(body, c.want) || !strings.Contains(body, "[0]") {
			t.Errorf("push %s: %d %s, want 400 naming entry [0] and %q", c.body, code, body, c.want)
		}
	}
	if _, b := n.call("GET", "/v1/latency", "tok", ""); !strings.Contains(b, `"values": 0`) {
		t.Errorf("a rejected push changed the map: %s", b)
	}
	// A good push is applied.
	good := `[{"key":"IN","site":"bom","rtt_ms":20,"samples":5,"measured_at":"` + now.Format(time.RFC3339) + `"}]`
	if code, body := n.call("POST", "/v1/latency", "tok", good); code != 200 || !strings.Contains(body, `"applied": 1`) {
		t.Fatalf("a good push: %d %s", code, body)
	}
	// A feed naming an unknown pool and target is rejected whole; the
	// previous feed stays.
	writeFile(t, n.dir, "feed.json", `{"pools": {"shop.example.com/sin": {"state": "down"}, "shop.example.com/bom": {"state": "drain"}},
 "targets": {"192.0.2.99": {"state": "down"}}}`)
	dnstest.WaitFor(t, 3*time.Second, "the bad feed is rejected", func() bool {
		return strings.Contains(n.logs.String(), "health feed rejected")
	})
	log := n.logs.String()
	for _, want := range []string{"feed.json", `pools[\"shop.example.com/sin\"]: record shop.example.com. has no pool sin`, `targets[\"192.0.2.99\"]: no pool of the served records has this address`} {
		if !strings.Contains(log, want) {
			t.Errorf("the rejection does not name %q:\n%s", want, log)
		}
	}
	if got := status(); got != before && !strings.Contains(got, `"drain"`) || strings.Count(got, `"drain"`) != 1 {
		t.Errorf("a rejected feed changed state:\n%s", got)
	}
	if got := n.a("shop.example.com"); got != "203.0.113.10" {
		t.Errorf("answer %s: fra is still drained, bom still answers", got)
	}
}

// A changed geo database recompiles the policies only: a zone edit nobody
// signalled stays unserved until an explicit reload.
func TestGeoChangeLeavesZoneEditsPending(t *testing.T) {
	geoFile := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "geo", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var geoReloads = make(chan Result, 16)
	n := startNode(t, map[string]string{
		"steer.yaml": `listen: ["127.0.0.1:0"]
zones:
  - { origin: example.com, file: example.com.zone }
geo: { databases: [geo.mmdb] }
records:
  - name: shop.example.com
    ttl: 60
    pools:
      india: { address: 203.0.113.10 }
      other: { address: 192.0.2.30 }
    rules:
      - match: { country: IN }
        pool: india
      - default: { pool: other }
`,
		"example.com.zone": zone("example.com", 1, "old"), "geo.mmdb": geoFile("larkbook-country-flat.mmdb"),
	}, Options{AfterReload: func(r Result) {
		if strings.Contains(r.Trigger, "geo") {
			geoReloads <- r
		}
	}})
	writeFile(t, n.dir, "example.com.zone", zone("example.com", 2, "pending"))
	writeFile(t, n.dir, "geo.mmdb", geoFile("larkbook-asn.mmdb"))
	select {
	case r := <-geoReloads:
		if !r.Applied {
			t.Fatalf("geo reload rejected: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no geo reload after the database changed")
	}
	if got := n.txt("gen.example.com"); got != "old" {
		t.Fatalf("after a geo-only change the zone edit is served (%q): zones change only on an explicit reload", got)
	}
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := n.txt("gen.example.com"); got != "pending" {
		t.Fatalf("after the reload: %q", got)
	}
}

// One broken zone of three at start: the others answer, it answers
// SERVFAIL, /readyz and status say degraded; fixed and reloaded, all
// three serve. With a state file, its last good copy serves instead.
func TestZonesFailAlone(t *testing.T) {
	cfg := `listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
health: { state_file: state/health.json }
zones:
  - { origin: a.example, file: a.zone }
  - { origin: b.example, file: b.zone }
  - { origin: c.example, file: c.zone }
`
	dir := t.TempDir()
	for name, body := range map[string]string{"steer.yaml": cfg, "token": "tok",
		"a.zone": zone("a.example", 1, "a1"), "b.zone": "this is not a zone\n", "c.zone": zone("c.example", 1, "c1")} {
		writeFile(t, dir, name, body)
	}
	os.MkdirAll(filepath.Join(dir, "state"), 0o755)
	n := startNodeIn(t, dir, Options{})
	if a, c := n.txt("gen.a.example"), n.txt("gen.c.example"); a != "a1" || c != "c1" {
		t.Fatalf("the good zones answer %q, %q", a, c)
	}
	if got := n.txt("gen.b.example"); got != "SERVFAIL" {
		t.Fatalf("the broken zone answers %q, want SERVFAIL", got)
	}
	if got := n.txt("b.example"); got != "SERVFAIL" {
		t.Fatalf("the broken zone's apex answers %q, want SERVFAIL", got)
	}
	if code, body := n.call("GET", "/readyz", "", ""); code != 200 || !strings.Contains(body, "degraded") || !strings.Contains(body, "b.example") {
		t.Fatalf("/readyz: %d %q, want ready but degraded naming b.example", code, body)
	}
	if !strings.Contains(n.logs.String(), "level=ERROR msg=\"zone failed to load\" zone=b.example.") {
		t.Fatalf("the failure is not logged at error level:\n%s", n.logs)
	}
	if _, body := n.call("GET", "/metrics", "", ""); !strings.Contains(body, "steer_zones_degraded 1") {
		t.Fatalf("metrics do not count the degraded zone")
	}
	writeFile(t, dir, "b.zone", zone("b.example", 1, "b1"))
	res, err := n.Reload(context.Background())
	if err != nil || len(res.Warnings) != 0 {
		t.Fatalf("reload after the fix: %v %+v", err, res)
	}
	if got := n.txt("gen.b.example"); got != "b1" {
		t.Fatalf("after the fix: %q", got)
	}
	if code, body := n.call("GET", "/readyz", "", ""); code != 200 || strings.Contains(body, "degraded") {
		t.Fatalf("/readyz after the fix: %d %q", code, body)
	}
	// Broken again on reload: the previous copy keeps serving.
	writeFile(t, dir, "b.zone", "broken again\n")
	if res, err := n.Reload(context.Background()); err != nil || len(res.Warnings) == 0 {
		t.Fatalf("a broken zone must not reject the reload, and must be reported: %v %+v", err, res)
	}
	if got := n.txt("gen.b.example"); got != "b1" {
		t.Fatalf("a zone broken on reload serves %q, want its previous copy", got)
	}
	// Restart with it still broken: the copy kept beside the state file.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	n.Shutdown(ctx)
	cancel()
	n2 := startNodeIn(t, dir, Options{})
	if got := n2.txt("gen.b.example"); got != "b1" {
		t.Fatalf("after a restart the broken zone serves %q, want its last good copy", got)
	}
	if _, body := n2.call("GET", "/v1/status", "tok", ""); !strings.Contains(body, "last good copy") {
		t.Fatalf("status does not say the zone serves its last good copy:\n%s", body)
	}
}

// steer check fails on a token file that is missing or empty and on an
// unset token variable, and warns about an open API off loopback.
func TestCheckTokens(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "example.com.zone", zone("example.com", 1, "x"))
	write := func(api string) string {
		p := filepath.Join(dir, "steer.yaml")
		writeFile(t, dir, "steer.yaml", `listen: ["127.0.0.1:5353"]
api: `+api+`
zones:
  - { origin: example.com, file: example.com.zone }
`)
		return p
	}
	writeFile(t, dir, "empty", "  \n")
	os.Unsetenv("STEER_TEST_UNSET_TOKEN")
	for _, c := range []struct{ api, want string }{
		{`{ listen: "127.0.0.1:8053", token_file: missing }`, "api.token_file"},
		{`{ listen: "127.0.0.1:8053", token_file: empty }`, "is empty"},
		{`{ listen: "127.0.0.1:8053", token_env: STEER_TEST_UNSET_TOKEN }`, "$STEER_TEST_UNSET_TOKEN is unset or empty"},
	} {
		_, _, err := Check(write(c.api))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "steer.yaml:2") {
			t.Errorf("check with api %s: %v, want an error at steer.yaml:2 naming %q", c.api, err, c.want)
		}
		if _, err := New(Options{ConfigPath: write(c.api)}); err == nil {
			t.Errorf("serve accepts api %s", c.api)
		}
	}
	_, warns, err := Check(write(`{ listen: "0.0.0.0:8053" }`))
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0], "not a loopback address and no token") {
		t.Errorf("an open API off loopback: %v %q, want one warning", err, warns)
	}
	if _, warns, err := Check(write(`{ listen: "127.0.0.1:8053" }`)); err != nil || len(warns) != 0 {
		t.Errorf("an open API on loopback: %v %q, want no warning", err, warns)
	}
}

func TestRefuseReason(t *testing.T) {
	for _, c := range []struct {
		listen, token string
		refused       bool
	}{
		{"127.0.0.1:8053", "", false}, {"[::1]:8053", "", false}, {"localhost:8053", "", false},
		{"0.0.0.0:8053", "", true}, {"[::]:8053", "", true}, {"192.0.2.1:8053", "", true}, {"api.example:8053", "", true},
		{":8053", "", true}, {"0.0.0.0:8053", "tok", false},
	} {
		cfg := apiCfg(c.listen)
		if got := refuseReason(cfg, c.token) != ""; got != c.refused {
			t.Errorf("listen %s token %q: refused %v, want %v", c.listen, c.token, got, c.refused)
		}
	}
}
