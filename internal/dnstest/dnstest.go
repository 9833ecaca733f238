// Package dnstest holds the helpers every test package shares (as CoreDNS's
// plugin/test does): free ports, waiting for a condition, the real clients
// tests query servers with (miekg/dns, raw packets and kdig, whose output
// it parses back into a dns.Msg) and the Larkbook fixture the demo serves.
//
// Of steer it imports only the leaf qtype (the one query-type parser,
// which imports nothing of steer), so the internal tests of any other
// package may use it; package servertest starts a whole in-process steer
// on top of it.
package dnstest

import (
	"bytes"
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
)

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
