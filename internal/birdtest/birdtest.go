// Package birdtest runs BIRD 2 as a real BGP peer for tests: a passive
// eBGP route collector on a loopback address, queried with birdc. It owns
// the BIRD configuration that makes that work on one machine without root
// (multihop, a private IGP table so learned next hops resolve, short error
// wait times) and parsing BIRD's view of the learned routes.
package birdtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// The collector's and the speaker's loopback addresses and the
// collector's AS. BIRD matches its neighbour by source address, so the
// speaker must bind Speaker.
const (
	Addr    = "127.0.53.1"
	Speaker = "127.0.53.2"
	AS      = 64510
)

// BIRD is a running BIRD 2 process.
type BIRD struct {
	// Port is the TCP port BIRD listens on at Addr.
	Port   int
	socket string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan struct{}
}

// Start starts BIRD on Addr and a free port with one session, "steer", to
// Speaker in AS peerAS, with a TCP MD5 password when password is set.
// Learned next hops resolve through a private IGP table routed to "lo"
// (otherwise BIRD calls the routes unreachable). The test is skipped when
// bird or birdc is missing, unless STEER_REQUIRE_TOOLS=1, where it fails.
// The process is killed when the test ends.
func Start(t testing.TB, peerAS int, password string) *BIRD {
	t.Helper()
	dnstest.NeedTool(t, "bird")
	dnstest.NeedTool(t, "birdc")
	b := &BIRD{done: make(chan struct{})}
	b.Port = dnstest.FreePort(t, Addr)
	dir := t.TempDir()
	// The control socket path must be short (sun_path is 108 bytes).
	sockDir, err := os.MkdirTemp("", "bird")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	b.socket = filepath.Join(sockDir, "s")
	pw := ""
	if password != "" {
		pw = fmt.Sprintf("\n\tpassword %q;", password) // TCP MD5 (RFC 2385)
	}
	conf := fmt.Sprintf(`log stderr all;
timeformat log iso long ms;
timeformat route iso long ms;
router id 192.0.2.254;
ipv4 table igp4;
ipv6 table igp6;
protocol device {}
protocol static igpv4 { ipv4 { table igp4; }; route 0.0.0.0/0 via "lo"; }
protocol static igpv6 { ipv6 { table igp6; }; route ::/0 via "lo"; }
protocol bgp steer {
	local %s port %d as %d;
	neighbor %s as %d;
	passive on;
	strict bind on;
	multihop;
	error wait time 1, 5;
	debug { states, routes };%s
	ipv4 { import all; export none; igp table igp4; };
	ipv6 { import all; export none; igp table igp6; };
}
`, Addr, b.Port, AS, Speaker, peerAS, pw)
	cf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command("bird", "-f", "-c", cf, "-s", b.socket, "-P", filepath.Join(dir, "pid"))
	b.cmd.Stdout = &lockedWriter{mu: &b.mu, w: &b.out}
	b.cmd.Stderr = b.cmd.Stdout
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		<-b.done
	})
	end := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.birdc("show", "protocols"); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("BIRD did not start\n%s", b.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

// Write implements io.Writer.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Log returns BIRD's own log so far.
func (b *BIRD) Log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "bird log:\n" + b.out.String()
}

func (b *BIRD) birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.socket}, args...)...).CombinedOutput()
	return string(out), err
}

// Routes returns BIRD's view of the routes learned from the speaker, from
// "birdc show route all protocol steer": prefix → AS path.
func (b *BIRD) Routes(t testing.TB) map[string]string {
	t.Helper()
	out, err := b.birdc("show", "route", "all", "protocol", "steer")
	if err != nil {
		t.Fatalf("birdc: %v\n%s", err, out)
	}
	return parseRoutes(out)
}

func parseRoutes(out string) map[string]string {
	routes := map[string]string{}
	prefix := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " ") && strings.Contains(f[0], "/") {
			prefix = f[0]
			routes[prefix] = ""
			continue
		}
		if prefix != "" && f[0] == "BGP.as_path:" {
			routes[prefix] = strings.Join(f[1:], " ")
		}
	}
	return routes
}

// Dump returns every route and the session's state, for failure messages.
func (b *BIRD) Dump() string {
	out, _ := b.birdc("show", "route", "all")
	proto, _ := b.birdc("show", "protocols", "all", "steer")
	return "birdc show route all:\n" + out + "\n" + proto
}
