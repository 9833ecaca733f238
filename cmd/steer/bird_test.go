package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// The route collector's and the speaker's loopback addresses: BIRD matches
// its neighbour by source address, so steer binds birdSpeaker.
const (
	birdAddr    = "127.0.53.1"
	birdSpeaker = "127.0.53.2"
	birdAS      = 64510
)

// bird is a BIRD 2 process acting as a passive eBGP route collector on
// loopback, as the README's anycast section describes a peer.
type bird struct {
	dir    string
	port   int
	socket string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan struct{}
}

// startBird starts BIRD on birdAddr and a free port with a session to
// birdSpeaker in AS localAS, with a TCP MD5 password when password is set. Learned next hops resolve through a private
// IGP table routed to "lo", or BIRD would call the routes unreachable.
func startBird(t *testing.T, localAS int, password string) *bird {
	t.Helper()
	dnstest.NeedTool(t, "bird")
	dnstest.NeedTool(t, "birdc")
	b := &bird{dir: t.TempDir(), done: make(chan struct{})}
	b.port = freeTCPPort(t, birdAddr)
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
`, birdAddr, b.port, birdAS, birdSpeaker, localAS, pw)
	cf := filepath.Join(b.dir, "bird.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command("bird", "-f", "-c", cf, "-s", b.socket, "-P", filepath.Join(b.dir, "pid"))
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
	waitFor(t, 10*time.Second, func() bool {
		_, err := b.birdc("show protocols")
		return err == nil
	}, b.log)
	return b
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *bird) log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "bird log:\n" + b.out.String()
}

func (b *bird) birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.socket}, args...)...).CombinedOutput()
	return string(out), err
}

// routes returns BIRD's view of the routes learned from the speaker:
// prefix → AS path, from "show route all".
func (b *bird) routes(t *testing.T) map[string]string {
	t.Helper()
	out, err := b.birdc("show", "route", "all", "protocol", "steer")
	if err != nil {
		t.Fatalf("birdc: %v\n%s", err, out)
	}
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

// routesString is routes for failure messages.
func (b *bird) routesString(t *testing.T) func() string {
	return func() string {
		out, _ := b.birdc("show", "route", "all")
		proto, _ := b.birdc("show", "protocols", "all", "steer")
		return "birdc show route all:\n" + out + "\n" + proto
	}
}

// freeTCPPort returns a TCP port free on addr.
func freeTCPPort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Skipf("cannot bind %s: %v", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
