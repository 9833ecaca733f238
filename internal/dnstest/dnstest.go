// Package dnstest starts steer servers for tests: in process on free
// loopback ports, from a configuration written to a temporary directory,
// and offers the real clients tests query them with (miekg/dns and kdig).
package dnstest

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Server is a running in-process steer.
type Server struct {
	*dnsserver.Server
	// Dir holds the configuration and the files it names.
	Dir string
	// ConfigPath is the configuration file.
	ConfigPath string
	// V4 and V6 are the loopback addresses it listens on (UDP and TCP share
	// each port). V6 is invalid when the machine has no ::1.
	V4, V6 netip.AddrPort
}

// WriteFiles writes files (name -> contents) under dir.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Start writes files into a new temporary directory, loads "steer.yaml"
// from it and serves on free ports of 127.0.0.1 and ::1 (the listen key in
// the file is replaced). The server stops when the test ends.
func Start(t testing.TB, files map[string]string) *Server {
	t.Helper()
	dir := t.TempDir()
	WriteFiles(t, dir, files)
	path := filepath.Join(dir, "steer.yaml")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Listen = []string{"127.0.0.1:0"}
	if HaveIPv6() {
		cfg.Listen = append(cfg.Listen, "[::1]:0")
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	srv := dnsserver.New(snap, nil)
	if err := srv.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	s := &Server{Server: srv, Dir: dir, ConfigPath: path}
	for _, a := range srv.Addrs() {
		if a.Addr().Is4() {
			s.V4 = a
		} else {
			s.V6 = a
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return s
}

// Reload re-reads the server's configuration from disk, keeping its
// listeners, as SIGHUP does. It returns the load error, if any.
func (s *Server) Reload() error {
	cfg, err := config.Load(s.ConfigPath)
	if err != nil {
		return err
	}
	cfg.Listen = s.Handler().Snapshot().Listen
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		return err
	}
	return s.Apply(snap)
}

// HaveIPv6 reports whether ::1 can be bound here.
func HaveIPv6() bool {
	c, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Exchange sends m to addr over "udp" or "tcp" with the miekg/dns client.
func Exchange(t testing.TB, network string, addr netip.AddrPort, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 3 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr.String())
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], err)
	}
	return r
}

// Query builds a query for name and type with RD clear.
func Query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	return m
}

// Kdig runs kdig from knot-dnsutils against addr with args (for example
// "+tcp", "example.com", "SOA") and returns what it printed. It skips or
// fails the test, as NeedTool does, when kdig is missing.
func Kdig(t testing.TB, addr netip.AddrPort, args ...string) string {
	t.Helper()
	NeedTool(t, "kdig")
	all := append([]string{"@" + addr.Addr().String(), "-p", strconv.Itoa(int(addr.Port())), "+time=3", "+retry=1"}, args...)
	cmd := exec.Command("kdig", all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kdig %s: %v\n%s%s", strings.Join(all, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// NeedTool skips the test when the command is not installed, unless the
// environment sets STEER_REQUIRE_TOOLS=1 (as the test script does), where
// it fails instead: CI must never pass by skipping the real clients.
func NeedTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("STEER_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is not installed (the test script installs it: see README)", name)
		}
		t.Skipf("%s is not installed", name)
	}
}

// LockedBuffer collects output (a process's, a logger's) written from
// several goroutines while a test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
