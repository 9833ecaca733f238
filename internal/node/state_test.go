package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateDirUnwritable: a state directory that cannot be made fails New
// with the directory named at state_dir's line (under a regular file, so
// that it fails for root too), before anything listens.
func TestStateDirUnwritable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "file", "not a directory\n")
	writeFile(t, dir, "steer.yaml", "listen: [\"127.0.0.1:0\"]\nstate_dir: file/sub\n")
	cf := filepath.Join(dir, "steer.yaml")
	_, err := New(Options{ConfigPath: cf})
	want := cf + ":2: state directory " + filepath.Join(dir, "file", "sub") + " cannot be created"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: %v, want %q", err, want)
	}
}

// TestStateDirDefault: a node with no state_dir keeps its state in
// steer-state beside its file: the health state of an operator's drain
// (health.json), written before the API answers, and the last good zone
// copies (zones/), without health.state_file.
func TestStateDirDefault(t *testing.T) {
	n := startNode(t, map[string]string{
		"steer.yaml": `api: { listen: "127.0.0.1:0" }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
    rules:
      - default: { failover: [a, b] }
`,
		"example.com.zone": "$ORIGIN example.com.\n$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.53\n",
	}, Options{})
	state := filepath.Join(n.dir, "steer-state")
	if code, body := n.call("PUT", "/v1/targets/192.0.2.1/state", "", `{"state":"drain"}`); code != 204 {
		t.Fatalf("drain: %d %s", code, body)
	}
	if b, err := os.ReadFile(filepath.Join(state, "health.json")); err != nil || !strings.Contains(string(b), "192.0.2.1") {
		t.Errorf("health.json after a drain: %v %s", err, b)
	}
	if ents, err := os.ReadDir(filepath.Join(state, "zones")); err != nil || len(ents) != 1 {
		t.Errorf("zones/: %v %v", ents, err)
	}
	// Restarted: the drain is still there.
	n.Shutdown(t.Context())
	again := startNodeIn(t, n.dir, Options{})
	if got := again.a("shop.example.com"); got != "192.0.2.2" {
		t.Errorf("after a restart: %s, want b (a drained, kept in health.json)", got)
	}
}
