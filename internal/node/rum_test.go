package node

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// rumCfg is latencyCfg on the small city database with a beacon
// listener; weight and extra go into the rum section.
func rumCfg(t *testing.T, weight string) string {
	t.Helper()
	city, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	return "geo: { databases: [" + city + "] }\n" + latencyCfg +
		`rum: { listen: "127.0.0.1:0", token_file: rumtoken, allow_origins: ["https://www.example.com"], interval: 50ms, min_samples: 3, weight: ` + weight + " }\n"
}

// beacon posts body to the node's beacon listener.
func (n *testNode) beacon(method, token, origin, body string) (int, http.Header, string) {
	n.t.Helper()
	req, err := http.NewRequest(method, "http://"+n.RUMAddr()+"/v1/beacons", strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// The beacon listener over real HTTP: CORS preflight, the token (read
// again at a reload), a bad batch rejected whole with 400 naming its
// lines, a good one aggregated per /24 and fed into the latency map, and
// the client's full address nowhere: not in the store, the status or
// the logs.
func TestRUMListener(t *testing.T) {
	t.Parallel()
	n := startNode(t, map[string]string{
		"steer.yaml": rumCfg(t, "0.7"), "token": "tok", "rumtoken": "beacon-key", "example.com.zone": zone("example.com", 1, "x"),
		"feed.json": `{}`,
	}, Options{})
	code, h, _ := n.beacon("OPTIONS", "", "https://www.example.com", "")
	if code != 204 || h.Get("Access-Control-Allow-Origin") != "https://www.example.com" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", code, h)
	}
	if code, h, _ := n.beacon("OPTIONS", "", "https://evil.example", ""); code != 403 || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from an origin not allowed: %d %v", code, h)
	}
	good := `{"client":"192.0.2.77","site":"fra","rtt_ms":30}` + "\n" + `{"client":"192.0.2.78","site":"fra","rtt_ms":32}` + "\n" +
		`{"client":"192.0.2.79","site":"fra","rtt_ms":31}` + "\n" + `{"client":"192.0.2.77","site":"bom","rtt_ms":190}` + "\n" +
		`{"client":"192.0.2.77","site":"bom","rtt_ms":200}` + "\n" + `{"client":"192.0.2.77","site":"bom","rtt_ms":210}` + "\n"
	for _, tok := range []string{"", "wrong"} {
		if code, _, body := n.beacon("POST", tok, "", good); code != 401 {
			t.Errorf("token %q: %d %s, want 401", tok, code, body)
		}
	}
	bad := `{"client":"192.0.2.77","site":"fra","rtt_ms":30}` + "\n" + `{"client":"192.0.2.77","site":"sin","rtt_ms":30}` + "\n" +
		`{"client":"192.0.2.77","site":"fra","rtt_ms":-1}` + "\n" + `{"client":"192.0.2.77","site":"fra"`
	code, _, body := n.beacon("POST", "beacon-key", "https://www.example.com", bad)
	for _, want := range []string{"3 bad beacons, nothing applied", `line 2: unknown site \"sin\"`, "line 3: rtt_ms -1 is not > 0", "line 4: malformed beacon"} {
		if code != 400 || !strings.Contains(body, want) {
			t.Errorf("bad batch: %d %s, want 400 naming %q", code, body, want)
		}
	}
	if code, _, body := n.beacon("POST", "beacon-key", "", strings.Repeat(good, 1<<20/len(good)+1)); code != 413 || !strings.Contains(body, "exceeds the limit") {
		t.Errorf("a batch over 1 MiB: %d %.200s, want 413", code, body)
	}
	if code, _, _ := n.beacon("POST", "beacon-key", "https://evil.example", good); code != 403 {
		t.Errorf("a post from an origin not allowed: %d, want 403", code)
	}
	if _, b := n.call("GET", "/v1/latency", "tok", ""); !strings.Contains(b, `"accepted": 0`) {
		t.Errorf("a rejected batch was applied: %s", b)
	}
	if code, h, body := n.beacon("POST", "beacon-key", "https://www.example.com", good); code != 200 || !strings.Contains(body, `"accepted":6`) ||
		h.Get("Access-Control-Allow-Origin") != "https://www.example.com" {
		t.Fatalf("good batch: %d %s %v", code, body, h)
	}
	status := func() string { _, b := n.call("GET", "/v1/latency", "tok", ""); return b }
	dnstest.WaitFor(t, 3*time.Second, "a RUM round feeds the map", func() bool { return strings.Contains(status(), `"values": 2`) })
	_, ex := n.call("GET", "/v1/explain?name=shop.example.com&ecs=192.0.2.0/24", "tok", "")
	if !strings.Contains(ex, `"current": "fra"`) || !strings.Contains(ex, "rum:192.0.2.0/24") {
		t.Errorf("explain does not choose fra from the RUM values:\n%s", ex)
	}
	st := status()
	if !strings.Contains(st, `"share": 1`) || !strings.Contains(st, `"cells": 2`) {
		t.Errorf("status does not show RUM's share and cells:\n%s", st)
	}
	// The admin API is not on the beacon listener, nor beacons on it.
	if code, _, _ := n.beacon("GET", "beacon-key", "", ""); code != 405 {
		t.Errorf("GET on the beacon path: %d, want 405", code)
	}
	if code, _ := callAPI(t, n.RUMAddr(), "GET", "/v1/status", "tok", ""); code != 404 {
		t.Errorf("admin path on the beacon listener: %d, want 404", code)
	}
	// The token is read again at a reload.
	writeFile(t, n.dir, "rumtoken", "new-key")
	if code, body := n.call("POST", "/v1/reload", "tok", ""); code/100 != 2 {
		t.Fatalf("reload: %d %s", code, body)
	}
	if code, _, _ := n.beacon("POST", "beacon-key", "", good); code != 401 {
		t.Errorf("old token after the reload: %d, want 401", code)
	}
	if code, _, body := n.beacon("POST", "new-key", "", good); code != 200 {
		t.Errorf("new token after the reload: %d %s", code, body)
	}
	for _, a := range n.rum.store.Snapshot() {
		if a.Block.String() != "192.0.2.0/24" {
			t.Errorf("stored block %v, want only 192.0.2.0/24", a.Block)
		}
	}
	for what, s := range map[string]string{"status": status(), "explain": ex, "logs": n.logs.String()} {
		for _, addr := range []string{"192.0.2.77", "192.0.2.78", "192.0.2.79"} {
			if strings.Contains(s, addr) {
				t.Errorf("%s shows the full client address %s", what, addr)
			}
		}
	}
}

// RUM's weight decides between the probes' choice and the users': the
// probes (a latency file) say bom 50 ms, fra 80 ms; users say bom 90,
// fra 40. At weight 0.1 the blend is bom 54, fra 76: bom. At 0.7 it is
// bom 78, fra 52: fra.
func TestRUMWeightChangesChoice(t *testing.T) {
	t.Parallel()
	at := time.Now().UTC().Format(time.RFC3339)
	cfg := strings.Replace(rumCfg(t, "0.1"), "health: { feed_file: feed.json }", "health: { feed_file: feed.json }\nlatency: { files: [probes.csv] }", 1)
	n := startNode(t, map[string]string{
		"steer.yaml": cfg, "token": "tok", "rumtoken": "k", "example.com.zone": zone("example.com", 1, "x"), "feed.json": `{}`,
		"probes.csv": "192.0.2.0/24,bom,50,5," + at + "\n192.0.2.0/24,fra,80,5," + at + "\n",
	}, Options{})
	var batch strings.Builder
	for range 5 {
		batch.WriteString(`{"client":"192.0.2.9","site":"bom","rtt_ms":90}` + "\n" + `{"client":"192.0.2.9","site":"fra","rtt_ms":40}` + "\n")
	}
	if code, _, body := n.beacon("POST", "k", "", batch.String()); code != 200 {
		t.Fatalf("beacons: %d %s", code, body)
	}
	chosen := func() string {
		_, b := n.call("GET", "/v1/explain?name=shop.example.com&ecs=192.0.2.0/24", "tok", "")
		for _, s := range []string{"bom", "fra"} {
			if strings.Contains(b, `"current": "`+s+`"`) && strings.Contains(b, `"rum_key": "rum:192.0.2.0/24"`) {
				return s
			}
		}
		return ""
	}
	dnstest.WaitFor(t, 3*time.Second, "weight 0.1 keeps the probes' choice, bom", func() bool { return chosen() == "bom" })
	writeFile(t, n.dir, "steer.yaml", strings.Replace(cfg, "weight: 0.1", "weight: 0.7", 1))
	if code, body := n.call("POST", "/v1/reload", "tok", ""); code/100 != 2 {
		t.Fatalf("reload: %d %s", code, body)
	}
	dnstest.WaitFor(t, 3*time.Second, "weight 0.7 takes the users' choice, fra", func() bool { return chosen() == "fra" })
}
