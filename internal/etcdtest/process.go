package etcdtest

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// Process is one etcd server run as its own process from the etcd binary
// (Debian's etcd-server), as operators run it: process-level tests use it
// where an embedded member would share the test's address space. It
// listens on loopback ports picked at start and keeps its data directory
// across Stop and Start.
type Process struct {
	t                  testing.TB
	dir                string
	client, peer, name string
	cmd                *exec.Cmd
	done               chan struct{}
	logs               dnstest.LockedBuffer
}

// StartProcess runs a one-member etcd from the etcd binary (the test
// skips when it is not installed, or fails under STEER_REQUIRE_TOOLS) and
// waits for it to serve. extra are more etcd flags. It is stopped at the
// test's cleanup.
func StartProcess(t testing.TB, extra ...string) *Process {
	t.Helper()
	dnstest.NeedTool(t, "etcd")
	ports := dnstest.FreePorts(t, 2)
	p := &Process{t: t, dir: filepath.Join(t.TempDir(), "etcd"), name: "steer-test",
		client: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), peer: fmt.Sprintf("http://127.0.0.1:%d", ports[1])}
	p.start(extra)
	t.Cleanup(p.Stop)
	return p
}

// Endpoint is the client URL.
func (p *Process) Endpoint() string { return p.client }

// Logs is what the process wrote.
func (p *Process) Logs() string { return p.logs.String() }

func (p *Process) start(extra []string) {
	p.t.Helper()
	args := append([]string{"--name", p.name, "--data-dir", p.dir,
		"--listen-client-urls", p.client, "--advertise-client-urls", p.client,
		"--listen-peer-urls", p.peer, "--initial-advertise-peer-urls", p.peer,
		"--initial-cluster", p.name + "=" + p.peer, "--log-level", "warn"}, extra...)
	p.cmd = exec.Command("etcd", args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("etcd: %v", err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(p.cmd, p.done)
	deadline := time.Now().Add(ReadyTimeout)
	cl := &http.Client{Timeout: time.Second}
	for {
		resp, err := cl.Get(p.client + "/health")
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if strings.Contains(b.String(), `"health":"true"`) {
				return
			}
		}
		select {
		case <-p.done:
			p.t.Fatalf("etcd exited at start:\n%s", p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			p.t.Fatalf("etcd did not become healthy within %v:\n%s", ReadyTimeout, p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the process (SIGTERM by PID, then SIGKILL after 10 s) and
// waits for it to exit. Stopping a stopped process does nothing.
func (p *Process) Stop() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// Start runs the process again on the same ports and data directory, and
// waits for it to serve.
func (p *Process) Start(extra ...string) {
	p.t.Helper()
	if p.cmd != nil {
		return
	}
	p.start(extra)
}
