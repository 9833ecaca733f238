package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
)

// TestFleetCLI pushes a configuration with steer fleet push (with every
// zone it names and its cookie secret), refuses one that fails steer check
// with nothing written, lists the published serial and a node serving it
// with steer fleet status, and fails loudly with the store down.
func TestFleetCLI(t *testing.T) {
	t.Parallel() // waits on processes and peers: overlaps the other such tests
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
	write("zones/example.com.zone", zoneText(1, "pushed"))
	write("cookie.key", "8c1f4a0e2d7b93c65e0a17f2b4d8c391\n")
	good := write("steer.yaml", "cookies: { secret_file: cookie.key }\nzones:\n  - origin: example.com\n    file: zones/example.com.zone\n")
	bad := write("bad.yaml", "zones:\n  - origin: example.com\n    file: zones/missing.zone\n")
	ep := strings.Join(c.Endpoints(), ",")
	var out, errb bytes.Buffer
	if rc := run([]string{"fleet", "push", "--config", bad, "--etcd", ep}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "nothing was pushed") {
		t.Errorf("push of a failing config: rc %d, %s", rc, errb.String())
	}
	out.Reset()
	errb.Reset()
	if rc := run([]string{"fleet", "status", "--etcd", ep}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "published: nothing yet") {
		t.Errorf("status after the refused push: rc %d, %s%s", rc, out.String(), errb.String())
	}
	out.Reset()
	if rc := run([]string{"fleet", "push", "--config", good, "--etcd", ep}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "serial 1 at revision") || !strings.Contains(out.String(), "3 files") {
		t.Fatalf("push: rc %d, %s%s", rc, out.String(), errb.String())
	}
	// A node whose local file holds only the fleet section serves it.
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	local := write("node/steer.yaml", fmt.Sprintf("listen: [%q]\nfleet:\n  node: ams-1\n  etcd: { endpoints: [%s], dial_timeout: 1s }\n  lease_ttl: 2s\n", addr, ep))
	startSteer(t, local)
	if r, err := query(addr, "gen.example.com.", dns.TypeTXT); err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != "pushed" {
		t.Errorf("the node does not serve the pushed zone: %v %v", r, err)
	}
	dnstest.WaitFor(t, 5*time.Second, "fleet status to list ams-1 serving serial 1", func() bool {
		out.Reset()
		if run([]string{"fleet", "status", "--etcd", ep}, &out, &errb) != 0 {
			return false
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "ams-1" && f[2] == "1" {
				return true
			}
		}
		return false
	}, out.String)
	if !strings.Contains(out.String(), "published: serial 1") {
		t.Errorf("status:\n%s", out.String())
	}
	if rc := run([]string{"fleet", "bogus"}, &out, &errb); rc != 2 {
		t.Errorf("an unknown fleet subcommand: rc %d", rc)
	}
	// A canary: refused for a node the fleet does not have, applied to
	// the named node, promoted, rolled back.
	write("zones/example.com.zone", zoneText(2, "canary"))
	out.Reset()
	errb.Reset()
	if rc := run([]string{"fleet", "push", "--config", good, "--etcd", ep, "--canary", "ams-1,nope"}, &out, &errb); rc != 1 ||
		!strings.Contains(errb.String(), "no node of the fleet is named nope (running: ams-1)") {
		t.Errorf("canary on an unknown node: rc %d, %s", rc, errb.String())
	}
	if rc := run([]string{"fleet", "push", "--config", good, "--etcd", ep, "--canary", "ams-1"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "canary on ams-1; the other nodes keep serial 1") {
		t.Fatalf("canary push: rc %d, %s%s", rc, out.String(), errb.String())
	}
	txt := func() string {
		r, err := query(addr, "gen.example.com.", dns.TypeTXT)
		if err != nil || len(r.Answer) != 1 {
			return fmt.Sprint(r, err)
		}
		return r.Answer[0].(*dns.TXT).Txt[0]
	}
	dnstest.WaitFor(t, 5*time.Second, "the canary served", func() bool { return txt() == "canary" })
	dnstest.WaitFor(t, 5*time.Second, "fleet status to show the canary", func() bool {
		out.Reset()
		run([]string{"fleet", "status", "--etcd", ep}, &out, &errb)
		return strings.Contains(out.String(), "canary:    serial 2") && strings.Contains(out.String(), "2 (canary)")
	}, out.String)
	t.Logf("status during the canary:\n%s", out.String())
	out.Reset()
	if rc := run([]string{"fleet", "promote", "--etcd", ep}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "promoted serial 2") {
		t.Fatalf("promote: rc %d, %s%s", rc, out.String(), errb.String())
	}
	out.Reset()
	if rc := run([]string{"fleet", "rollback", "--etcd", ep}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "rolled back from serial 2") {
		t.Fatalf("rollback: rc %d, %s%s", rc, out.String(), errb.String())
	}
	dnstest.WaitFor(t, 5*time.Second, "the rolled back bundle served", func() bool { return txt() == "pushed" })
	errb.Reset()
	if rc := run([]string{"fleet", "rollback", "--etcd", ep}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "no previous bundle is kept") {
		t.Errorf("a second rollback: rc %d, %s", rc, errb.String())
	}
	// The store down: push fails loudly.
	c.Member(0).Stop()
	errb.Reset()
	if rc := run([]string{"fleet", "push", "--config", good, "--etcd", ep, "--timeout", "1s"}, &out, &errb); rc != 1 {
		t.Errorf("push with the store down: rc %d, %s", rc, errb.String())
	}
}
