package packaging

import (
	"testing"

	"github.com/steer-dns/steer/internal/node"
)

// TestStarterConfig: the packaged /etc/steer/steer.yaml passes steer check
// without warnings (the package test checks it installed, where it runs).
func TestStarterConfig(t *testing.T) {
	_, warns, err := node.Check("etc/steer.yaml")
	for _, w := range warns {
		t.Errorf("warning: %s", w)
	}
	if err != nil {
		t.Fatal(err)
	}
}
