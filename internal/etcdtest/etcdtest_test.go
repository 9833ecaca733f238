package etcdtest

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestClusterStopRestart(t *testing.T) {
	t0 := time.Now()
	c := Start(t, Options{Members: 3})
	t.Logf("3 members ready in %v", time.Since(t0))
	eps := c.Endpoints()
	if len(eps) != 3 {
		t.Fatalf("endpoints %v", eps)
	}
	seen := map[string]bool{}
	for _, ep := range eps {
		if !strings.HasPrefix(ep, "http://127.0.0.1:") || seen[ep] {
			t.Fatalf("endpoints %v: want distinct loopback URLs", eps)
		}
		seen[ep] = true
	}
	rev := c.Rev()
	c.Member(1).Stop()
	if c.Member(1).Running() {
		t.Fatal("m1 still running after Stop")
	}
	c.Member(1).Stop() // twice is harmless
	t0 = time.Now()
	c.Member(1).Restart()
	t.Logf("m1 restarted in %v", time.Since(t0))
	if !c.Member(1).Running() {
		t.Fatal("m1 not running after Restart")
	}
	if got := c.Rev(); got < rev {
		t.Fatalf("revision went back from %d to %d", rev, got)
	}
	c.Compact(c.Rev())
}

func TestTLSFiles(t *testing.T) {
	f := NewTLS(t)
	c := Start(t, Options{TLS: f, ClientCertAuth: true})
	if ep := c.Endpoints()[0]; !strings.HasPrefix(ep, "https://") {
		t.Fatalf("TLS member endpoint %s", ep)
	}
}

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestBridge(t *testing.T) {
	b := NewBridge(t, echo(t))
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(msg string, timeout time.Duration) (string, error) {
		c.SetDeadline(time.Now().Add(timeout))
		if _, err := io.WriteString(c, msg+"\n"); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		return strings.TrimSuffix(line, "\n"), err
	}
	if got, err := roundTrip("one", 2*time.Second); err != nil || got != "one" {
		t.Fatalf("through the bridge: %q, %v", got, err)
	}

	b.Cut()
	if got, err := roundTrip("lost", 200*time.Millisecond); err == nil {
		t.Fatalf("cut bridge passed %q", got)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("cut bridge: %v, want a timeout (connection kept open)", err)
	}
	b.Heal()
	if got, err := roundTrip("two", 2*time.Second); err != nil || got != "two" {
		t.Fatalf("after heal: %q, %v (the bytes sent while cut must be lost)", got, err)
	}

	b.Drop()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("dropped connection still open")
	}
	c2, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatalf("new connection after drop: %v", err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(c2, "three\n")
	if line, err := bufio.NewReader(c2).ReadString('\n'); err != nil || line != "three\n" {
		t.Fatalf("new connection after drop: %q, %v", line, err)
	}
}
