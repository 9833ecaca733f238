package etcdtest

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Bridge is a TCP relay on a loopback port in front of one address (an
// etcd member's client port). Point a client at Addr and the test decides
// what the link does: Cut black-holes it (connections stay open, bytes
// are swallowed both ways, as when a path is lost and nothing resets),
// Drop closes every connection (as a reset does), Heal restores it.
type Bridge struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewBridge starts a bridge to target (host:port), closed at the test's
// cleanup.
func NewBridge(t testing.TB, target string) *Bridge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: bridge to %s: %v", target, err)
	}
	b := &Bridge{target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.Close)
	return b
}

// Addr is the bridge's address, host:port.
func (b *Bridge) Addr() string { return b.ln.Addr().String() }

// Cut black-holes the link: open connections stay open and new ones are
// accepted, but nothing gets through in either direction until Heal.
// Bytes sent meanwhile are lost.
func (b *Bridge) Cut() {
	b.mu.Lock()
	b.cut = true
	b.mu.Unlock()
}

// Heal lets bytes through again.
func (b *Bridge) Heal() {
	b.mu.Lock()
	b.cut = false
	b.mu.Unlock()
}

// Drop closes every open connection, both sides. New connections are
// accepted (and black-holed while the link is Cut).
func (b *Bridge) Drop() {
	b.mu.Lock()
	conns := b.conns
	b.conns = make(map[net.Conn]struct{})
	b.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Close stops the bridge and closes every connection.
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.ln.Close()
	b.Drop()
	b.wg.Wait()
}

func (b *Bridge) isCut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cut
}

// track records c as open; false if the bridge is closed.
func (b *Bridge) track(cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	for _, c := range cs {
		b.conns[c] = struct{}{}
	}
	return true
}

func (b *Bridge) accept() {
	defer b.wg.Done()
	for {
		in, err := b.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", b.target, 2*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		if !b.track(in, out) {
			in.Close()
			out.Close()
			return
		}
		b.wg.Add(2)
		go b.pipe(in, out)
		go b.pipe(out, in)
	}
}

// pipe copies from src to dst, swallowing what it reads while the link
// is cut, and closes both when either side ends.
func (b *Bridge) pipe(src, dst net.Conn) {
	defer b.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.isCut() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
