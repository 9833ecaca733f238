package node

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A reload that builds a new table evaluates its latency choices with the
// health it goes live with: a pool that is down and faster does not get
// an anti-flap round counted for it by the reload (it was evaluated as if
// every pool were up, before the health was set).
func TestLatencyReloadSeesHealth(t *testing.T) {
	city, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := "geo: { databases: [" + city + "] }\n" + latencyCfg // small: quick to compile
	n := startNode(t, map[string]string{
		"steer.yaml": cfg, "token": "tok", "example.com.zone": zone("example.com", 1, "x"), "feed.json": `{}`,
	}, Options{})
	if code, body := n.call("PUT", "/v1/records/shop.example.com/pools/fra/state", "tok", `{"state":"down"}`); code/100 != 2 {
		t.Fatalf("fra down: %d %s", code, body)
	}
	at := time.Now().UTC().Format(time.RFC3339)
	push := `[{"key":"192.0.2.0/24","site":"bom","rtt_ms":100,"samples":5,"measured_at":"` + at + `"},` +
		`{"key":"192.0.2.0/24","site":"fra","rtt_ms":50,"samples":5,"measured_at":"` + at + `"}]`
	if code, body := n.call("POST", "/v1/latency", "tok", push); code/100 != 2 {
		t.Fatalf("push: %d %s", code, body)
	}
	explain := func() string {
		_, b := n.call("GET", "/v1/explain?name=shop.example.com&ecs=192.0.2.0/24", "tok", "")
		return b
	}
	if b := explain(); !strings.Contains(b, `"current": "bom"`) || strings.Contains(b, `"pending"`) {
		t.Fatalf("fra down: want bom chosen and nothing pending:\n%s", b)
	}
	// A new table (another TTL), the same update and the same health.
	writeFile(t, n.dir, "steer.yaml", strings.Replace(cfg, "ttl: 1", "ttl: 2", 1))
	if code, body := n.call("POST", "/v1/reload", "tok", ""); code/100 != 2 {
		t.Fatalf("reload: %d %s", code, body)
	}
	if b := explain(); !strings.Contains(b, `"current": "bom"`) || strings.Contains(b, `"pending"`) {
		t.Fatalf("after the reload fra (down) must not be pending:\n%s", b)
	}
}
