package dnsserver_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/servertest"
	"github.com/steer-dns/steer/internal/tcplimit"
)

// startLimited starts the test server with SetTCPLimits(l) applied before
// any connection.
func startLimited(t testing.TB, o srvOpts, l tcplimit.Limits) *servertest.Server {
	t.Helper()
	s := startServer(t, o)
	if err := s.SetTCPLimits(l); err != nil {
		t.Fatal(err)
	}
	return s
}

// typicalLimits returns limits like a node's by default: 1024
// connections, 32 per /24 or /56, 10s idle, 2s to the first query.
func typicalLimits() tcplimit.Limits {
	return tcplimit.Limits{
		MaxConns:   1024,
		PerPrefix:  32,
		IPv4Prefix: tcplimit.DefaultIPv4Prefix,
		IPv6Prefix: tcplimit.DefaultIPv6Prefix,
		Idle:       10 * time.Second,
		FirstQuery: 2 * time.Second,
	}
}

// limits returns typicalLimits with the given caps and timeouts long
// enough that only eviction closes a connection during a test.
func limits(maxConns, perPrefix int) tcplimit.Limits {
	l := typicalLimits()
	l.MaxConns, l.PerPrefix = maxConns, perPrefix
	l.Idle, l.FirstQuery = 30*time.Second, 30*time.Second
	return l
}

// dialFrom connects to addr from the loopback address src (any of
// 127.0.0.0/8 on Linux).
func dialFrom(t testing.TB, src string, addr netip.AddrPort) *net.TCPConn {
	t.Helper()
	c, err := dialFromErr(src, addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { resetClose(c) })
	return c
}

// resetClose closes c with a reset, which leaves no socket in TIME_WAIT
// on either side (the server has often closed first).
func resetClose(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

func dialFromErr(src string, addr netip.AddrPort) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: ioTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// waitStats polls the server's TCP counters until ok holds, for at most
// ioTimeout, and returns them.
func waitStats(t testing.TB, s *servertest.Server, what string, ok func(dnsserver.TCPStats) bool) dnsserver.TCPStats {
	t.Helper()
	return waitStatsFor(t, s, ioTimeout, what, ok)
}

// waitStatsFor is waitStats waiting for at most limit.
func waitStatsFor(t testing.TB, s *servertest.Server, limit time.Duration, what string, ok func(dnsserver.TCPStats) bool) dnsserver.TCPStats {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := s.TCPStats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %+v after %v", what, st, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// accepted waits until the server has accepted n connections in all, so
// that connections dialled one after another are ranked in that order.
func accepted(t testing.TB, s *servertest.Server, n uint64) {
	t.Helper()
	waitStats(t, s, fmt.Sprintf("%d accepted", n), func(st dnsserver.TCPStats) bool { return st.Accepted >= n })
}

// settled waits until every accepted connection is either open or counted
// as closed, and returns the counters.
func settled(t testing.TB, s *servertest.Server) dnsserver.TCPStats {
	t.Helper()
	return waitStats(t, s, "settled", func(st dnsserver.TCPStats) bool {
		return st.Accepted == uint64(st.Current)+sum(st.Closed[:])
	})
}

func sum(xs []uint64) uint64 {
	var n uint64
	for _, x := range xs {
		n += x
	}
	return n
}

// closedBy returns the non-zero close counters by name, for messages and
// comparisons.
func closedBy(st dnsserver.TCPStats) map[string]uint64 {
	m := map[string]uint64{}
	for r := range dnsserver.NumTCPCloseReasons {
		if st.Closed[r] != 0 {
			m[r.String()] = st.Closed[r]
		}
	}
	return m
}

func wantClosed(t testing.TB, st dnsserver.TCPStats, want map[string]uint64) {
	t.Helper()
	if got := closedBy(st); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("closed by reason %v, want %v (stats %+v)", got, want, st)
	}
}

// expectOpen checks that c is still served.
func expectOpen(t testing.TB, c net.Conn, what string) {
	t.Helper()
	r := tcpAsk(t, c, query("www.example.com.", dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("%s: %v", what, r)
	}
}

func TestTCPLimitsValidate(t *testing.T) {
	d := typicalLimits()
	if err := d.Validate(); err != nil {
		t.Fatalf("typical limits: %v", err)
	}
	idle0 := d
	idle0.Idle = 0
	if err := idle0.Validate(); err != nil {
		t.Errorf("Idle 0 (the snapshot's): %v", err)
	}
	for _, c := range []struct {
		name string
		mod  func(*tcplimit.Limits)
		want string
	}{
		{"MaxConns 0", func(l *tcplimit.Limits) { l.MaxConns = 0 }, "MaxConns = 0: must be 1 to 1048576"},
		{"MaxConns huge", func(l *tcplimit.Limits) { l.MaxConns = 1<<20 + 1 }, "MaxConns = 1048577"},
		{"PerPrefix 0", func(l *tcplimit.Limits) { l.PerPrefix = 0 }, "PerPrefix = 0: must be 1 to MaxConns (1024)"},
		{"PerPrefix over MaxConns", func(l *tcplimit.Limits) { l.MaxConns, l.PerPrefix = 8, 9 }, "PerPrefix = 9: must be 1 to MaxConns (8)"},
		{"IPv4Prefix 0", func(l *tcplimit.Limits) { l.IPv4Prefix = 0 }, "IPv4Prefix = 0: must be 1 to 32"},
		{"IPv4Prefix 33", func(l *tcplimit.Limits) { l.IPv4Prefix = 33 }, "IPv4Prefix = 33: must be 1 to 32"},
		{"IPv6Prefix 129", func(l *tcplimit.Limits) { l.IPv6Prefix = 129 }, "IPv6Prefix = 129: must be 1 to 128"},
		{"Idle negative", func(l *tcplimit.Limits) { l.Idle = -time.Second }, "Idle = -1s: must be 0 (the snapshot's idle timeout) or 100ms to 1h49m13.5s"},
		{"Idle too short", func(l *tcplimit.Limits) { l.Idle = time.Millisecond }, "Idle = 1ms"},
		{"Idle too long", func(l *tcplimit.Limits) { l.Idle = 2 * time.Hour }, "Idle = 2h0m0s"},
		{"FirstQuery 0", func(l *tcplimit.Limits) { l.FirstQuery = 0 }, "FirstQuery = 0s: must be 100ms to 1h49m13.5s"},
	} {
		l := typicalLimits()
		c.mod(&l)
		err := l.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	s := startServer(t, srvOpts{})
	bad := typicalLimits()
	bad.PerPrefix = 0
	if err := s.SetTCPLimits(bad); err == nil {
		t.Errorf("SetTCPLimits accepted %+v", bad)
	}
	for r := range dnsserver.NumTCPCloseReasons {
		if n := r.String(); n == "" || strings.Contains(n, "(") {
			t.Errorf("reason %d has no name: %q", r, n)
		}
	}
}

// TestTCPLimitsGlobalCap fills MaxConns (8) with idle connections from
// different /24s: a ninth is answered and the oldest idle one is closed,
// the others stay open.
func TestTCPLimitsGlobalCap(t *testing.T) {
	s := startLimited(t, srvOpts{}, limits(8, 4))
	var held []*net.TCPConn
	for i := range 8 {
		held = append(held, dialFrom(t, fmt.Sprintf("127.7.%d.1", i), s.V4))
		accepted(t, s, uint64(i+1))
	}
	start := time.Now()
	ninth := dialFrom(t, "127.7.100.1", s.V4)
	expectOpen(t, ninth, "ninth connection")
	t.Logf("ninth connection answered in %v", time.Since(start))
	waitClosed(t, held[0], 2*time.Second)
	for i, c := range held[1:] {
		expectOpen(t, c, fmt.Sprintf("held connection %d", i+1))
	}
	st := settled(t, s)
	if st.Current != 8 || st.Accepted != 9 {
		t.Errorf("current %d, accepted %d; want 8 and 9", st.Current, st.Accepted)
	}
	wantClosed(t, st, map[string]uint64{"evicted_global": 1})

	// UDP is untouched by the limit.
	if r := dnstest.Exchange(t, "udp", s.V4, query("www.example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Errorf("UDP: %v", r)
	}
}

// TestTCPLimitsPerPrefix fills one /24's cap (3): a fourth connection from
// that /24 closes the /24's oldest connection, not an older one from
// another /24, and the global cap is far away.
func TestTCPLimitsPerPrefix(t *testing.T) {
	s := startLimited(t, srvOpts{}, limits(64, 3))
	n := uint64(0)
	other := dialFrom(t, "127.7.1.1", s.V4) // the oldest of all
	n++
	accepted(t, s, n)
	var a []*net.TCPConn
	for i := range 3 {
		a = append(a, dialFrom(t, fmt.Sprintf("127.7.0.%d", i+1), s.V4))
		n++
		accepted(t, s, n)
	}
	var b []*net.TCPConn
	for i := range 2 {
		b = append(b, dialFrom(t, fmt.Sprintf("127.7.1.%d", i+2), s.V4))
		n++
		accepted(t, s, n)
	}
	fourth := dialFrom(t, "127.7.0.200", s.V4)
	expectOpen(t, fourth, "fourth connection of 127.7.0.0/24")
	waitClosed(t, a[0], 2*time.Second)
	expectOpen(t, other, "oldest connection, from 127.7.1.0/24")
	for i, c := range append(a[1:], b...) {
		expectOpen(t, c, fmt.Sprintf("connection %d", i))
	}
	st := settled(t, s)
	if st.Current != 6 {
		t.Errorf("current %d, want 6", st.Current)
	}
	wantClosed(t, st, map[string]uint64{"evicted_prefix": 1})

	// A narrower prefix (/32) set on reload applies to new connections:
	// 127.7.0.200 may now hold 3 connections of its own.
	l := limits(64, 3)
	l.IPv4Prefix = 32
	if err := s.SetTCPLimits(l); err != nil {
		t.Fatal(err)
	}
	more := []*net.TCPConn{dialFrom(t, "127.7.0.200", s.V4), dialFrom(t, "127.7.0.200", s.V4), dialFrom(t, "127.7.0.200", s.V4)}
	for i, c := range more {
		expectOpen(t, c, fmt.Sprintf("connection %d from 127.7.0.200", i))
	}
	st = settled(t, s)
	wantClosed(t, st, map[string]uint64{"evicted_prefix": 1})
}

// TestTCPLimitsRecentNotEvicted: a connection answered recently is not
// evicted before one idle for longer, even if it is older; and one with a
// partial query pending is ranked by its last completed exchange.
func TestTCPLimitsRecentNotEvicted(t *testing.T) {
	s := startLimited(t, srvOpts{}, limits(4, 4))
	var c []*net.TCPConn
	for i := range 4 {
		c = append(c, dialFrom(t, fmt.Sprintf("127.7.%d.1", i), s.V4))
		accepted(t, s, uint64(i+1))
	}
	// Order of last activity: 1, 2, 3, 0.
	expectOpen(t, c[0], "oldest connection")
	e := dialFrom(t, "127.7.10.1", s.V4)
	expectOpen(t, e, "new connection")
	waitClosed(t, c[1], 2*time.Second)

	// Order now: 2, 3, 0, e. Connection 2 starts a query and stalls: it
	// is still the longest idle.
	pkt, _ := query("www.example.com.", dns.TypeA).Pack()
	if _, err := c[2].Write(dnstest.Frame(pkt)[:5]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	f := dialFrom(t, "127.7.11.1", s.V4)
	expectOpen(t, f, "second new connection")
	waitClosed(t, c[2], 2*time.Second)
	for i, x := range []*net.TCPConn{c[3], c[0], e} {
		expectOpen(t, x, fmt.Sprintf("survivor %d", i))
	}
	st := settled(t, s)
	wantClosed(t, st, map[string]uint64{"evicted_global": 2})
}

// TestTCPLimitsFirstQuery: a connection that sends nothing, or only part
// of a query, is closed FirstQuery after it was accepted; one that sends a
// query in time is then held for the idle timeout between queries.
func TestTCPLimitsFirstQuery(t *testing.T) {
	const first, idle = 300 * time.Millisecond, time.Second
	l := limits(64, 32)
	l.FirstQuery, l.Idle = first, idle
	s := startLimited(t, srvOpts{}, l)
	check := func(name string, took, lo, hi time.Duration) {
		t.Helper()
		if took < lo || took > hi {
			t.Errorf("%s: closed after %v, want %v to %v", name, took, lo, hi)
		} else {
			t.Logf("%s: closed after %v", name, took)
		}
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		c := dialTCP(t, s.V4)
		check("silent", waitClosed(t, c, 3*time.Second), first-50*time.Millisecond, first+700*time.Millisecond)
	}()
	go func() {
		defer wg.Done()
		// Slowloris: one byte of the length now, the rest never.
		c := dialTCP(t, s.V4)
		start := time.Now()
		c.Write([]byte{0})
		waitClosed(t, c, 3*time.Second)
		check("partial first query", time.Since(start), first-50*time.Millisecond, first+700*time.Millisecond)
	}()
	go func() {
		defer wg.Done()
		c := dialTCP(t, s.V4)
		time.Sleep(first / 3)
		expectOpen(t, c, "first query in time")
		time.Sleep(first + 200*time.Millisecond) // past the first-query deadline
		expectOpen(t, c, "second query after the first-query deadline")
		last := time.Now()
		waitClosed(t, c, 4*time.Second)
		check("after queries", time.Since(last), idle-50*time.Millisecond, idle+time.Second)
	}()
	wg.Wait()
	st := settled(t, s)
	wantClosed(t, st, map[string]uint64{"first_query_timeout": 2, "idle_timeout": 1})
}

// TestTCPLimitsIdleFromSnapshot: with Idle 0 the snapshot's idle timeout
// is enforced (and bounds the first-query deadline), and it is the value
// edns-tcp-keepalive advertises.
func TestTCPLimitsIdleFromSnapshot(t *testing.T) {
	const idle = 500 * time.Millisecond
	l := limits(64, 32)
	l.Idle = 0
	l.FirstQuery = 2 * time.Second
	s := startLimited(t, srvOpts{idle: idle}, l)

	c := dialTCP(t, s.V4)
	m := query("www.example.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
	r := tcpAsk(t, c, m)
	var ka *dns.EDNS0_TCP_KEEPALIVE
	if o := r.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if k, ok := opt.(*dns.EDNS0_TCP_KEEPALIVE); ok {
				ka = k
			}
		}
	}
	if ka == nil || time.Duration(ka.Timeout)*100*time.Millisecond != idle {
		t.Fatalf("keepalive %+v, want %v", ka, idle)
	}
	if took := waitClosed(t, c, 3*time.Second); took < idle-50*time.Millisecond || took > idle+time.Second {
		t.Errorf("closed %v after the answer; advertised and configured idle timeout %v", took, idle)
	}

	// Nothing sent: the idle timeout, shorter than FirstQuery, applies.
	c2 := dialTCP(t, s.V4)
	if took := waitClosed(t, c2, 3*time.Second); took < idle-50*time.Millisecond || took > idle+time.Second {
		t.Errorf("silent connection closed after %v, want about %v", took, idle)
	}
	st := settled(t, s)
	wantClosed(t, st, map[string]uint64{"idle_timeout": 1, "first_query_timeout": 1})
}

// TestTCPLimitsStats closes connections every way but timeouts (tested
// above) and checks each is counted once under its reason.
func TestTCPLimitsStats(t *testing.T) {
	s := startLimited(t, srvOpts{}, limits(3, 2))
	// One at a time, as all come from 127.0.0.1, over PerPrefix together.
	gone := func(n uint64) {
		t.Helper()
		waitStats(t, s, "connection ended", func(st dnsserver.TCPStats) bool { return sum(st.Closed[:]) == n })
	}
	// Client closes after an answer.
	c := dialTCP(t, s.V4)
	expectOpen(t, c, "client")
	c.Close()
	gone(1)
	// Client resets.
	c = dialTCP(t, s.V4)
	expectOpen(t, c, "client")
	c.SetLinger(0)
	c.Close()
	gone(2)
	// Protocol error.
	c = dialTCP(t, s.V4)
	c.Write([]byte{0, 1, 0})
	waitClosed(t, c, 2*time.Second)
	gone(3)
	st := settled(t, s)
	wantClosed(t, st, map[string]uint64{"client": 2, "error": 1})

	// Prefix eviction (3 from 127.7.0.0/24 with PerPrefix 2), then global.
	n := st.Accepted
	x := []*net.TCPConn{dialFrom(t, "127.7.0.1", s.V4), dialFrom(t, "127.7.0.2", s.V4)}
	accepted(t, s, n+2)
	x = append(x, dialFrom(t, "127.7.0.3", s.V4))
	waitClosed(t, x[0], 2*time.Second)
	accepted(t, s, n+3)
	y := dialFrom(t, "127.7.1.1", s.V4) // 3 open: full
	accepted(t, s, n+4)
	z := dialFrom(t, "127.7.2.1", s.V4)
	waitClosed(t, x[1], 2*time.Second)
	for _, c := range []*net.TCPConn{x[2], y, z} {
		expectOpen(t, c, "survivor")
	}
	st = settled(t, s)
	wantClosed(t, st, map[string]uint64{"client": 2, "error": 1, "evicted_prefix": 1, "evicted_global": 1})
	if st.Current != 3 || st.Refused != 0 {
		t.Errorf("current %d, refused %d; want 3, 0", st.Current, st.Refused)
	}

	// Shutdown closes the rest promptly.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("Shutdown took %v", el)
	}
	for _, c := range []*net.TCPConn{x[2], y, z} {
		waitClosed(t, c, time.Second)
	}
	st = s.TCPStats()
	wantClosed(t, st, map[string]uint64{"client": 2, "error": 1, "evicted_prefix": 1, "evicted_global": 1, "shutdown": 3})
	if st.Current != 0 {
		t.Errorf("current %d after Shutdown", st.Current)
	}
}

// TestTCPLimitsLowered: lowering MaxConns on reload leaves open
// connections alone until the next accept, which evicts down to the new
// cap.
func TestTCPLimitsLowered(t *testing.T) {
	s := startLimited(t, srvOpts{}, limits(16, 16))
	var held []*net.TCPConn
	for i := range 10 {
		held = append(held, dialFrom(t, fmt.Sprintf("127.7.%d.1", i), s.V4))
		accepted(t, s, uint64(i+1))
	}
	if err := s.SetTCPLimits(limits(4, 4)); err != nil {
		t.Fatal(err)
	}
	if st := s.TCPStats(); st.Current != 10 {
		t.Fatalf("current %d right after SetTCPLimits, want 10", st.Current)
	}
	expectOpen(t, dialFrom(t, "127.7.200.1", s.V4), "new connection")
	for _, c := range held[:7] {
		waitClosed(t, c, 2*time.Second)
	}
	for i, c := range held[7:] {
		expectOpen(t, c, fmt.Sprintf("newest held %d", i))
	}
	st := settled(t, s)
	if st.Current != 4 {
		t.Errorf("current %d, want 4", st.Current)
	}
	wantClosed(t, st, map[string]uint64{"evicted_global": 7})
}

// TestTCPLimitsConcurrent churns connections from many sources while the
// limits change, for the race detector, and checks the counters add up.
func TestTCPLimitsConcurrent(t *testing.T) {
	s := startLimited(t, srvOpts{}, limits(16, 4))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var answered, failed atomic.Int64
	var maxCur atomic.Int64
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := dialFromErr(fmt.Sprintf("127.7.%d.%d", w, i%8+1), s.V4)
				if err != nil {
					failed.Add(1)
					continue
				}
				pkt, _ := query("www.example.com.", dns.TypeA).Pack()
				c.SetDeadline(time.Now().Add(ioTimeout))
				for range i % 3 {
					if _, err := c.Write(dnstest.Frame(pkt)); err != nil {
						break
					}
					if _, err := dnstest.ReadFrame(c); err != nil {
						failed.Add(1) // evicted meanwhile
						break
					}
					answered.Add(1)
				}
				if i%4 != 0 { // most connections stay open until evicted
					resetClose(c)
				} else {
					t.Cleanup(func() { resetClose(c) })
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			s.SetTCPLimits(limits(8+i%16, 2+i%4))
			if cur := int64(s.TCPStats().Current); cur > maxCur.Load() {
				maxCur.Store(cur)
			}
		}
	})
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	st := settled(t, s)
	t.Logf("%d answers, %d failed exchanges; stats %+v, max current %d", answered.Load(), failed.Load(), st, maxCur.Load())
	if answered.Load() == 0 {
		t.Errorf("nothing answered")
	}
	if maxCur.Load() > 24 || st.Current > 24 {
		t.Errorf("current reached %d (now %d); the caps were at most 23", maxCur.Load(), st.Current)
	}
}

// raiseNoFile makes sure the process may hold n descriptors, or skips.
func raiseNoFile(t testing.TB, n uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	// The limits are uint64 on Linux and darwin, int64 on FreeBSD
	// (where infinity, -1, is the largest as a uint64 too).
	if uint64(rl.Cur) >= n {
		return
	}
	if uint64(rl.Max) < n {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below the %d descriptors this test needs", rl.Max, n)
	}
	old := rl
	setLimit(&rl.Cur, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("setrlimit to %d: %v", n, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// setLimit sets a limit of whichever integer type the system gives it.
func setLimit[T int64 | uint64](p *T, n uint64) { *p = T(n) }

// serverEstablished counts this process's ESTABLISHED TCP sockets whose
// local address is ap, an IPv4 server address: the server's side of its
// connections, from /proc/net/tcp and /proc/self/fd (the table lists the
// whole network namespace, where other processes may have used the port).
// A socket is counted once by inode: the table is not read atomically,
// and a socket can appear twice while others change state. It returns -1
// if the files are unreadable.
func serverEstablished(ap netip.AddrPort) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	ours := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				ours[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return -1
	}
	defer f.Close()
	a := ap.Addr().As4()
	// The address is printed as the in-memory 32-bit word in hex.
	want := fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a[:]), ap.Port())
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(fs) < 10 || fs[3] != "01" { // 01: ESTABLISHED
			continue
		}
		if fs[1] == want && ours[fs[9]] {
			seen[fs[9]] = true
		}
	}
	if sc.Err() != nil {
		return -1
	}
	return len(seen)
}

// loopbackDrops returns the number of packets the kernel has dropped for
// want of room in its per-CPU input queues (netdev_max_backlog), which on
// loopback happens when the machine is so loaded that softirqs lag; -1 if
// unknown. Dropped SYNs and segments are retransmitted after 0.2 to 1 s,
// so latencies measured meanwhile say nothing about the server.
func loopbackDrops() int64 {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return -1
	}
	var n int64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 2 {
			return -1
		}
		v, err := strconv.ParseInt(fs[1], 16, 64)
		if err != nil {
			return -1
		}
		n += v
	}
	return n
}

// TestTCPExhaustion is the acceptance test: 5,000 idle connections from
// 127.7.0.0/16 (about 20 in each of the 256 /24s, under the per-prefix cap
// of 32), then 200 fresh queries from other sources (one per /24), each on
// a new connection kept open. Every fresh query is answered, p99 ≤ 50 ms,
// and the server never holds more than MaxConns (1024) connections. The
// timeouts are raised so that only eviction closes the idle connections.
//
// If the kernel drops loopback packets meanwhile (a machine so loaded that
// its softirqs lag), a failure is reported as a skip naming the drops.
func TestTCPExhaustion(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 connections")
	}
	const idleConns, fresh = 5000, 200
	raiseNoFile(t, 2*idleConns+2048)
	testStart := time.Now()
	drops0 := loopbackDrops()
	// fail reports a failure, or a skip if the loopback dropped packets.
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if d := loopbackDrops(); drops0 >= 0 && d > drops0 {
			t.Skipf("%s; but the kernel dropped %d loopback packets meanwhile (overloaded machine), so this says nothing about the server", msg, d-drops0)
		}
		t.Fatal(msg)
	}
	l := typicalLimits()
	l.Idle, l.FirstQuery = time.Minute, time.Minute
	s := startLimited(t, srvOpts{}, l)

	var maxCur atomic.Int64
	stopPoll := make(chan struct{})
	var pollWG sync.WaitGroup
	pollWG.Go(func() {
		for {
			if cur := int64(s.TCPStats().Current); cur > maxCur.Load() {
				maxCur.Store(cur)
			}
			select {
			case <-stopPoll:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	})

	conns := make([]*net.TCPConn, 0, idleConns+fresh)
	var connsMu sync.Mutex
	t.Cleanup(func() {
		// Reset rather than close: the server closed most of these, and a
		// FIN now would leave as many server sockets in TIME_WAIT. In
		// batches: thousands of packets at once overflow the loopback's
		// input queue, and the drops would hit the next test.
		for i, c := range conns {
			resetClose(c)
			if i%128 == 127 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	var wg sync.WaitGroup
	var dialErr atomic.Value
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < idleConns; i += workers {
				c, err := dialFromErr(fmt.Sprintf("127.7.%d.%d", i%256, i/256+1), s.V4)
				if err != nil {
					dialErr.CompareAndSwap(nil, err)
					return
				}
				connsMu.Lock()
				conns = append(conns, c)
				connsMu.Unlock()
			}
		})
	}
	wg.Wait()
	if err, _ := dialErr.Load().(error); err != nil {
		fail("dialling the idle connections: %v", err)
	}
	if !waitUntil(30*time.Second, func() bool { return s.TCPStats().Accepted >= idleConns }) {
		fail("idle connections not all accepted after 30s: %+v", s.TCPStats())
	}
	dialTime := time.Since(testStart)
	st := s.TCPStats()
	if st.Current != l.MaxConns {
		t.Errorf("after %d idle connections the server holds %d, want %d", idleConns, st.Current, l.MaxConns)
	}

	lat := make([]time.Duration, 0, fresh)
	var freshConns []*net.TCPConn
	ask := func(c *net.TCPConn) error {
		pkt, _ := query("www.example.com.", dns.TypeA).Pack()
		c.SetDeadline(time.Now().Add(ioTimeout))
		if _, err := c.Write(dnstest.Frame(pkt)); err != nil {
			return err
		}
		b, err := dnstest.ReadFrame(c)
		if err != nil {
			return err
		}
		r := new(dns.Msg)
		if err := r.Unpack(b); err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return fmt.Errorf("answer %v", r)
		}
		return nil
	}
	for i := range fresh {
		start := time.Now()
		c, err := dialFromErr(fmt.Sprintf("127.9.%d.1", i), s.V4) // one per /24: the per-prefix cap is 32
		if err != nil {
			fail("fresh connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if err := ask(c); err != nil {
			fail("fresh query %d: %v", i, err)
		}
		lat = append(lat, time.Since(start))
		freshConns = append(freshConns, c)
	}
	// The fresh connections were answered after every idle one was
	// accepted: none of them has been evicted.
	for i, c := range freshConns {
		if err := ask(c); err != nil {
			fail("fresh connection %d, asked again: %v", i, err)
		}
	}
	close(stopPoll)
	pollWG.Wait()

	slices.Sort(lat)
	p50, p99, worst := lat[len(lat)/2], lat[(len(lat)*99+99)/100-1], lat[len(lat)-1]
	st = settled(t, s)
	est := serverEstablished(s.V4)
	t.Logf("%d idle connections dialled and accepted in %v; fresh query on a new connection: p50 %v, p99 %v, max %v; "+
		"server connections: max %d, now %d (ESTABLISHED on the server address: %d); evicted %d; %d goroutines; test %v",
		idleConns, dialTime.Round(time.Millisecond), p50, p99, worst, maxCur.Load(), st.Current, est,
		st.Closed[dnsserver.TCPEvictedGlobal], runtime.NumGoroutine(), time.Since(testStart).Round(time.Millisecond))
	if p99 > 50*time.Millisecond {
		fail("p99 of fresh queries %v, want ≤ 50ms", p99)
	}
	if maxCur.Load() > int64(l.MaxConns) || st.Current > l.MaxConns {
		t.Errorf("the server held %d connections (now %d); MaxConns is %d", maxCur.Load(), st.Current, l.MaxConns)
	}
	if est > l.MaxConns {
		t.Errorf("%d ESTABLISHED sockets on the server address; MaxConns is %d", est, l.MaxConns)
	}
	if want := uint64(idleConns + fresh - l.MaxConns); st.Closed[dnsserver.TCPEvictedGlobal] != want {
		t.Errorf("closed by reason %v, want %d evicted for the global cap", closedBy(st), want)
	}
	// The goroutines of evicted connections have ended.
	if g := runtime.NumGoroutine(); g > l.MaxConns+200 {
		t.Errorf("%d goroutines with %d connections open", g, st.Current)
	}
}

// waitUntil polls ok every millisecond for at most limit.
func waitUntil(limit time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// TestTCPNoLimitsUntilSet: before SetTCPLimits, the snapshot's limit
// refuses rather than evicts (TestTCPMaxConnections tests it fully); the
// refusal is counted.
func TestTCPNoLimitsUntilSet(t *testing.T) {
	s := startServer(t, srvOpts{maxConns: 2, idle: 10 * time.Second})
	a, b := dialTCP(t, s.V4), dialTCP(t, s.V4)
	accepted(t, s, 2)
	expectRejected(t, s.V4)
	expectOpen(t, a, "first")
	expectOpen(t, b, "second")
	st := waitStats(t, s, "refused", func(st dnsserver.TCPStats) bool { return st.Refused == 1 })
	if st.Current != 2 || st.Accepted != 2 {
		t.Errorf("stats %+v", st)
	}
}
