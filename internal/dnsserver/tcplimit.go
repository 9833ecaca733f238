package dnsserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/steer-dns/steer/internal/tcplimit"
)

// SetTCPLimits validates l (see tcplimit.Limits for the limits and how
// eviction works) and makes it govern the TCP connections accepted from
// now on; connections already open keep their timeouts, and are evicted
// under the new caps as new connections arrive. It may be called
// at any time, concurrently with serving (on reload, say).
//
// Until it is first called the server keeps the snapshot's limits: past
// TCPMaxConnections new connections are refused, and TCPIdleTimeout also
// bounds the wait for the first query. Once it has been called the
// snapshot's TCPMaxConnections no longer applies.
func (s *Server) SetTCPLimits(l tcplimit.Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	s.tcpLimits.Store(&l)
	return nil
}

// TCPCloseReason says why a TCP connection ended.
type TCPCloseReason uint8

// Reasons a TCP connection ends, indexing TCPStats.Closed.
const (
	// TCPClosedByClient: the client closed or reset the connection.
	TCPClosedByClient TCPCloseReason = iota
	// TCPIdleTimeout: no complete query within the idle timeout after an answer.
	TCPIdleTimeout
	// TCPFirstQueryTimeout: no complete first query within the first-query deadline.
	TCPFirstQueryTimeout
	// TCPEvictedGlobal: closed as the longest-idle connection to make room
	// under tcplimit.Limits.MaxConns.
	TCPEvictedGlobal
	// TCPEvictedPrefix: closed as the longest-idle connection of its source
	// prefix to make room under tcplimit.Limits.PerPrefix.
	TCPEvictedPrefix
	// TCPError: a protocol error (a length shorter than a DNS header, a
	// message that gets no answer) or a failed read or write.
	TCPError
	// TCPShutdown: closed by Shutdown.
	TCPShutdown
	// NumTCPCloseReasons is the number of reasons, the length of TCPStats.Closed.
	NumTCPCloseReasons
)

var tcpCloseReasonNames = [NumTCPCloseReasons]string{
	"client", "idle_timeout", "first_query_timeout", "evicted_global", "evicted_prefix", "error", "shutdown",
}

// String returns the reason's name in snake case, fit for a metric label.
func (r TCPCloseReason) String() string {
	if r < NumTCPCloseReasons {
		return tcpCloseReasonNames[r]
	}
	return fmt.Sprintf("TCPCloseReason(%d)", uint8(r))
}

// TCPStats counts the server's TCP connections since New.
type TCPStats struct {
	// Current is the number of connections open now (evicted ones no
	// longer count, even while their goroutine is finishing).
	Current int
	// Accepted is the number of connections accepted and served.
	Accepted uint64
	// Refused is the number of connections closed as soon as accepted:
	// past the snapshot's TCPMaxConnections before SetTCPLimits was called,
	// or during Shutdown.
	Refused uint64
	// Closed counts the connections that have ended, by reason. Once a
	// connection's goroutine has ended it is counted here, so Accepted
	// equals Current plus the sum of Closed when no connection is closing.
	Closed [NumTCPCloseReasons]uint64
}

// TCPStats returns the TCP connection counters. It takes no lock.
func (s *Server) TCPStats() TCPStats {
	st := TCPStats{
		Current:  int(s.tcp.current.Load()),
		Accepted: s.tcpStats.accepted.Load(),
		Refused:  s.tcpStats.refused.Load(),
	}
	for i := range st.Closed {
		st.Closed[i] = s.tcpStats.closed[i].Load()
	}
	return st
}

type tcpCounters struct {
	accepted atomic.Uint64
	refused  atomic.Uint64
	closed   [NumTCPCloseReasons]atomic.Uint64
}

// tcpPolicy is what one connection is served under, fixed when it is
// accepted.
type tcpPolicy struct {
	maxConns   int
	perPrefix  int  // 0: no per-prefix cap
	refuse     bool // refuse a connection past maxConns instead of evicting
	v4bits     int
	v6bits     int
	idle       time.Duration
	firstQuery time.Duration
}

// tcpPolicy returns the policy for a connection accepted now.
func (s *Server) tcpPolicy() tcpPolicy {
	snap := s.handler.Snapshot()
	l := s.tcpLimits.Load()
	if l == nil {
		return tcpPolicy{
			maxConns:   snap.TCPMaxConnections,
			refuse:     true,
			v4bits:     tcplimit.DefaultIPv4Prefix,
			v6bits:     tcplimit.DefaultIPv6Prefix,
			idle:       snap.TCPIdleTimeout,
			firstQuery: snap.TCPIdleTimeout,
		}
	}
	idle := l.Idle
	if idle == 0 {
		idle = snap.TCPIdleTimeout
	}
	return tcpPolicy{
		maxConns:   l.MaxConns,
		perPrefix:  l.PerPrefix,
		v4bits:     l.IPv4Prefix,
		v6bits:     l.IPv6Prefix,
		idle:       idle,
		firstQuery: min(l.FirstQuery, idle),
	}
}

// prefixOf returns the source prefix a connection from a counts under.
func (p *tcpPolicy) prefixOf(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := p.v6bits
	if a.Is4() {
		bits = p.v4bits
	}
	pfx, _ := a.Prefix(bits) // an invalid address gives the zero prefix: one shared bucket
	return pfx
}

// The tracker keeps every open connection in two intrusive doubly linked
// lists ordered from least to most recently active: one over the server
// and one per source prefix. Accept, close and each answered query take
// its mutex once and do O(1) work (plus one map lookup on accept and
// close); finding a victim looks at no more than victimScan entries.
const (
	listAll    = 0 // index of the server-wide list in tcpConn.links
	listPrefix = 1 // index of the per-prefix list
	victimScan = 8 // busy connections eviction passes over before taking the oldest anyway
)

// tcpConn is one served connection.
type tcpConn struct {
	c *net.TCPConn
	// Guarded by tcpTracker.mu.
	links  [2]struct{ prev, next *tcpConn }
	pfx    *tcpPrefix
	linked bool
	// busy is set while a complete query is being answered.
	busy atomic.Bool
	// evicted is 1 + the TCPCloseReason of an eviction, 0 if none.
	evicted atomic.Uint32
}

type connList struct {
	head, tail *tcpConn
	n          int
}

func (l *connList) pushBack(c *tcpConn, i int) {
	c.links[i].prev, c.links[i].next = l.tail, nil
	if l.tail != nil {
		l.tail.links[i].next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.n++
}

func (l *connList) remove(c *tcpConn, i int) {
	lk := &c.links[i]
	if lk.prev != nil {
		lk.prev.links[i].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links[i].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
	l.n--
}

// victim returns the least recently active connection that is not busy,
// passing over at most victimScan busy ones; if those are all busy, the
// least recently active one.
func (l *connList) victim(i int) *tcpConn {
	c := l.head
	for k := 0; c != nil && k <= victimScan; k++ {
		if !c.busy.Load() {
			return c
		}
		c = c.links[i].next
	}
	return l.head
}

type tcpPrefix struct {
	key  netip.Prefix
	list connList
}

type tcpTracker struct {
	mu       sync.Mutex
	all      connList
	prefixes map[netip.Prefix]*tcpPrefix
	current  atomic.Int64 // all.n, for TCPStats without the lock
}

// admit registers c under pol and returns it, with the connections evicted
// to make room: they are unlinked and marked, and the caller closes them.
// It returns nil if c is to be refused (closing, or past a refusing cap).
func (t *tcpTracker) admit(c *net.TCPConn, from netip.Addr, pol *tcpPolicy, closing *atomic.Bool, victims []*tcpConn) (*tcpConn, []*tcpConn) {
	key := pol.prefixOf(from)
	t.mu.Lock()
	defer t.mu.Unlock()
	if closing.Load() || (pol.refuse && t.all.n >= pol.maxConns) {
		return nil, victims
	}
	if p := t.prefixes[key]; p != nil && pol.perPrefix > 0 {
		for p.list.n >= pol.perPrefix {
			v := p.list.victim(listPrefix)
			t.unlink(v)
			v.evicted.Store(1 + uint32(TCPEvictedPrefix))
			victims = append(victims, v)
		}
	}
	for t.all.n >= pol.maxConns && t.all.n > 0 {
		v := t.all.victim(listAll)
		t.unlink(v)
		v.evicted.Store(1 + uint32(TCPEvictedGlobal))
		victims = append(victims, v)
	}
	p := t.prefixes[key]
	if p == nil {
		if t.prefixes == nil {
			t.prefixes = map[netip.Prefix]*tcpPrefix{}
		}
		p = &tcpPrefix{key: key}
		t.prefixes[key] = p
	}
	tc := &tcpConn{c: c, pfx: p, linked: true}
	t.all.pushBack(tc, listAll)
	p.list.pushBack(tc, listPrefix)
	t.current.Store(int64(t.all.n))
	return tc, victims
}

// unlink removes tc from both lists; t.mu is held.
func (t *tcpTracker) unlink(tc *tcpConn) {
	if !tc.linked {
		return
	}
	tc.linked = false
	t.all.remove(tc, listAll)
	p := tc.pfx
	p.list.remove(tc, listPrefix)
	if p.list.n == 0 {
		delete(t.prefixes, p.key)
	}
	tc.pfx = nil
	t.current.Store(int64(t.all.n))
}

// answered moves tc to the most recently active end of its lists and
// clears busy: a response has just been written.
func (t *tcpTracker) answered(tc *tcpConn) {
	t.mu.Lock()
	if tc.linked {
		t.all.remove(tc, listAll)
		t.all.pushBack(tc, listAll)
		tc.pfx.list.remove(tc, listPrefix)
		tc.pfx.list.pushBack(tc, listPrefix)
	}
	tc.busy.Store(false)
	t.mu.Unlock()
}

// release forgets tc, which is ending.
func (t *tcpTracker) release(tc *tcpConn) {
	t.mu.Lock()
	t.unlink(tc)
	t.mu.Unlock()
}

// conns returns the tracked connections.
func (t *tcpTracker) conns() []*net.TCPConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*net.TCPConn, 0, t.all.n)
	for c := t.all.head; c != nil; c = c.links[listAll].next {
		out = append(out, c.c)
	}
	return out
}

// readEnd classifies the error that ended a read: queries is the number
// answered so far on the connection.
func (s *Server) readEnd(err error, queries int) TCPCloseReason {
	switch {
	case s.closing.Load():
		return TCPShutdown
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return TCPClosedByClient
	case errors.Is(err, os.ErrDeadlineExceeded) && queries == 0:
		return TCPFirstQueryTimeout
	case errors.Is(err, os.ErrDeadlineExceeded):
		return TCPIdleTimeout
	}
	return TCPError
}

// writeEnd classifies the error that ended a write.
func (s *Server) writeEnd(err error) TCPCloseReason {
	switch {
	case s.closing.Load():
		return TCPShutdown
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return TCPClosedByClient
	}
	return TCPError
}
