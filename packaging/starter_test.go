package packaging

import (
	"os"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/node"
)

// TestStarterConfig: the packaged /etc/steer/steer.yaml passes steer check
// without warnings (the package test checks it installed, where it runs),
// and keeps the node's state in /var/lib/steer, the unit's
// StateDirectory (made by systemd, owned by the steer user) and working
// directory.
func TestStarterConfig(t *testing.T) {
	r, err := node.CheckFile("etc/steer.yaml")
	for _, w := range r.Warnings {
		t.Errorf("warning: %s", w)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.StateDir != "/var/lib/steer" {
		t.Errorf("the packaged configuration keeps its state in %q, want /var/lib/steer", r.StateDir)
	}
	unit, err := os.ReadFile("systemd/steer.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nStateDirectory=steer\n", "\nWorkingDirectory=/var/lib/steer\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("steer.service lacks %q", strings.TrimSpace(want))
		}
	}
}
