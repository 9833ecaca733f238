package dnstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitFor returns as soon as cond holds and fails the test, naming what it
// waited for and printing logs, when limit passes first. It checks at once,
// then every millisecond at first and at most every 10 ms, so a test waits
// little longer than the event it awaits takes.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool, logs ...func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			for _, l := range logs {
				t.Log(l())
			}
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// belowEphemeral draws a port below the kernel's ephemeral range: a port
// the kernel hands out for port 0 can be taken, between the test choosing
// it and a server binding it, as the source port of any outgoing TCP
// connection on the machine (an etcd client, an HTTP probe), which then
// fails the server's listen with "address already in use". Ports below the
// range are given only to those who ask for them by number.
//
// Test binaries run side by side, each choosing ports: each process
// draws from its own share of the range (by process id), and a process
// never hands out a port twice, so that a port one test chose and has
// not bound yet is not chosen again by a test beside it.
func belowEphemeral() int {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				lo = v
			}
		}
	}
	const shares = 8
	width := (lo - 10000) / shares
	base := 10000 + os.Getpid()%shares*width
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 64 {
		port := base + rand.IntN(width)
		if !handed[port] {
			handed[port] = true
			return port
		}
	}
	return base + rand.IntN(width) // the share is nearly used up: chance
}

var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// FreePort returns a port free now for both UDP and TCP on every one of
// hosts (127.0.0.1 when none is given). The test is skipped when the first
// host cannot be bound at all, as on a machine without ::1.
func FreePort(t testing.TB, hosts ...string) int {
	t.Helper()
	return FreePorts(t, 1, hosts...)[0]
}

// FreePorts returns n distinct ports, each free now for both UDP and TCP
// on every one of hosts (127.0.0.1 when none is given). It holds each port
// until all are chosen, so none repeats.
func FreePorts(t testing.TB, n int, hosts ...string) []int {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	var held []func()
	defer func() {
		for _, c := range held {
			c()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 50*n {
			t.Fatalf("no %d ports free for UDP and TCP on %s", n, strings.Join(hosts, ", "))
		}
		if tries == 0 {
			probe, err := net.ListenPacket("udp", net.JoinHostPort(hosts[0], "0"))
			if err != nil {
				t.Skipf("cannot bind %s: %v", hosts[0], err)
			}
			probe.Close()
		}
		port := belowEphemeral()
		u, err := net.ListenPacket("udp", net.JoinHostPort(hosts[0], fmt.Sprint(port)))
		if err != nil {
			continue
		}
		claimed := []func(){func() { u.Close() }}
		ok := true
		for i, h := range hosts {
			a := net.JoinHostPort(h, fmt.Sprint(port))
			if i > 0 {
				v, err := net.ListenPacket("udp", a)
				if err != nil {
					ok = false
					break
				}
				claimed = append(claimed, func() { v.Close() })
			}
			l, err := net.Listen("tcp", a)
			if err != nil {
				ok = false
				break
			}
			claimed = append(claimed, func() { l.Close() })
		}
		held = append(held, claimed...)
		if ok {
			ports = append(ports, port)
		}
	}
	return ports
}
