package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/etcdtest"
)

// TestFleetCLI pushes a configuration with steer fleet push, refuses one
// that fails steer check, and lists the published serial with steer
// fleet status.
func TestFleetCLI(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("zones/example.com.zone", "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 1 2 3 4 60\n@ NS ns1\nns1 A 192.0.2.53\n")
	good := write("steer.yaml", "zones:\n  - origin: example.com\n    file: zones/example.com.zone\n")
	bad := write("bad.yaml", "zones:\n  - origin: example.com\n    file: zones/missing.zone\n")
	ep := strings.Join(c.Endpoints(), ",")
	var out, errb bytes.Buffer
	if rc := run([]string{"fleet", "push", "--config", bad, "--etcd", ep}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "nothing was pushed") {
		t.Errorf("push of a failing config: rc %d, %s", rc, errb.String())
	}
	out.Reset()
	errb.Reset()
	if rc := run([]string{"fleet", "push", "--config", good, "--etcd", ep}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "serial 1") {
		t.Fatalf("push: rc %d, %s%s", rc, out.String(), errb.String())
	}
	out.Reset()
	if rc := run([]string{"fleet", "status", "--etcd", ep}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "published: serial 1") {
		t.Errorf("status: rc %d, %s%s", rc, out.String(), errb.String())
	}
	if rc := run([]string{"fleet", "bogus"}, &out, &errb); rc != 2 {
		t.Errorf("an unknown fleet subcommand: rc %d", rc)
	}
}
