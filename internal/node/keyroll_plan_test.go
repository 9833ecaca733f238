//go:build !race

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/keyroll"
)

// A key plan that cannot be read stops the node from starting, with an
// error naming the file: never a zone served unsigned, or signed by keys
// the plan does not say. (Not under -race: writeKey's file is not.)
func TestCorruptKeyPlanRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kskBase, _ := writeKey(t, dir, "example.com", true)
	zskBase, _ := writeKey(t, dir, "example.com", false)
	writeFile(t, dir, "example.com.zone", zone("example.com", 1, "x"))
	writeFile(t, dir, "steer.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
zones:
  - origin: example.com
    file: example.com.zone
    dnssec: { keys: [%s, %s], zsk_lifetime: 30d }
`, kskBase, zskBase))
	plan := keyroll.File(filepath.Join(dir, "steer-state"), "example.com")
	if err := os.MkdirAll(filepath.Dir(plan), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"truncated":  `{"version": 1, "zone": "example.com.", "keys": [`,
		"other zone": `{"version": 1, "zone": "example.org.", "keys": []}`,
		"version":    `{"version": 9, "zone": "example.com.", "keys": []}`,
	} {
		if err := os.WriteFile(plan, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		n, err := New(Options{ConfigPath: filepath.Join(dir, "steer.yaml")})
		if err == nil {
			n.Shutdown(t.Context())
			t.Fatalf("%s: the node started", name)
		}
		if !strings.Contains(err.Error(), plan) {
			t.Errorf("%s: the error does not name %s: %v", name, plan, err)
		}
	}
	// Without the file the node starts a plan from the configured keys
	// and keeps it, 0600.
	if err := os.Remove(plan); err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{ConfigPath: filepath.Join(dir, "steer.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown(t.Context())
	if st, err := os.Stat(plan); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("plan %s: %v %v", plan, st, err)
	}
}
