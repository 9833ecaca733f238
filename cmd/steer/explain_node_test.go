package main

import (
	"strings"
	"testing"
)

// --node asks a running node of a fleet; offline there is none to ask.
func TestExplainNodeNeedsARunningNode(t *testing.T) {
	code, out, errOut := runCapture("explain", "--offline", "--node", "n3", "www.example.com")
	if code != 1 || out != "" || !strings.Contains(errOut, "--node n3: only a running node of the fleet") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
