package dnsserver_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

func dialTCP(t testing.TB, addr netip.AddrPort) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// tcpAsk sends m on c and reads one response, within ioTimeout.
func tcpAsk(t testing.TB, c net.Conn, m *dns.Msg) *dns.Msg {
	t.Helper()
	pkt, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write(dnstest.Frame(pkt)); err != nil {
		t.Fatalf("write: %v", err)
	}
	b, err := dnstest.ReadFrame(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil {
		t.Fatal(err)
	}
	if r.Id != m.Id {
		t.Fatalf("id %d, want %d", r.Id, m.Id)
	}
	return r
}

// waitClosed reads from c until the server closes it or limit passes, and
// returns how long that took. A read that times out fails the test.
func waitClosed(t testing.TB, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		if err == nil {
			t.Fatalf("unexpected %d bytes from the server: % x", n, buf[:n])
		}
		if isTimeout(err) {
			t.Fatalf("connection still open after %v", limit)
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read: %v", err)
		}
		return time.Since(start)
	}
}

// TestTCPPipelining writes several queries in one write on one connection
// and expects every one answered (RFC 7766 §6.2.1.1), matched by ID.
func TestTCPPipelining(t *testing.T) {
	s := startServer(t, srvOpts{})
	qs := []struct {
		name    string
		qtype   uint16
		rcode   int
		records int
	}{
		{"www.example.com.", dns.TypeA, dns.RcodeSuccess, 1},
		{"nx.example.com.", dns.TypeA, dns.RcodeNameError, 0},
		{"huge.example.com.", dns.TypeTXT, dns.RcodeSuccess, 6},
		{"example.com.", dns.TypeNS, dns.RcodeSuccess, 2},
		{"alias.example.com.", dns.TypeA, dns.RcodeSuccess, 3},
		{"example.org.", dns.TypeA, dns.RcodeRefused, 0},
		{"www.example.com.", dns.TypeAAAA, dns.RcodeSuccess, 1},
		{"static.example.com.", dns.TypeA, dns.RcodeSuccess, 1},
	}
	for _, tg := range targets(s) {
		t.Run(tg.name, func(t *testing.T) {
			c := dialTCP(t, tg.addr)
			var all bytes.Buffer
			byID := map[uint16]int{}
			for i, q := range qs {
				m := query(q.name, q.qtype)
				m.Id = uint16(1000 + i)
				if i%2 == 0 {
					m.SetEdns0(4096, false)
				}
				byID[m.Id] = i
				pkt, err := m.Pack()
				if err != nil {
					t.Fatal(err)
				}
				all.Write(dnstest.Frame(pkt))
			}
			c.SetDeadline(time.Now().Add(ioTimeout))
			if _, err := c.Write(all.Bytes()); err != nil {
				t.Fatal(err)
			}
			for range qs {
				b, err := dnstest.ReadFrame(c)
				if err != nil {
					t.Fatalf("after %d answers: %v", len(qs)-len(byID), err)
				}
				r := new(dns.Msg)
				if err := r.Unpack(b); err != nil {
					t.Fatal(err)
				}
				i, ok := byID[r.Id]
				if !ok {
					t.Fatalf("answer with unknown or repeated id %d", r.Id)
				}
				delete(byID, r.Id)
				q := qs[i]
				if r.Rcode != q.rcode || len(r.Answer) != q.records || r.Truncated {
					t.Errorf("%s %s: rcode %s, %d records, TC %v; want %s, %d records", q.name, dns.TypeToString[q.qtype],
						rcodeName(r.Rcode), len(r.Answer), r.Truncated, rcodeName(q.rcode), q.records)
				}
				if r.Question[0].Name != q.name || r.Question[0].Qtype != q.qtype {
					t.Errorf("id %d answers %v, want %s %s", r.Id, r.Question[0], q.name, dns.TypeToString[q.qtype])
				}
			}
			// The connection stays usable.
			tcpAsk(t, c, query("www.example.com.", dns.TypeA))
		})
	}
}

// TestTCPHalfClose sends pipelined queries then shuts the write side: every
// query is still answered before the server closes.
func TestTCPHalfClose(t *testing.T) {
	s := startServer(t, srvOpts{})
	c := dialTCP(t, s.V4)
	var all bytes.Buffer
	for i := range 3 {
		m := query("www.example.com.", dns.TypeA)
		m.Id = uint16(i + 1)
		pkt, _ := m.Pack()
		all.Write(dnstest.Frame(pkt))
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	c.Write(all.Bytes())
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := dnstest.ReadFrame(c); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	waitClosed(t, c, ioTimeout)
}

// TestTCPSplitQuery sends one query in pieces, with pauses shorter than the
// idle timeout; it is answered once complete.
func TestTCPSplitQuery(t *testing.T) {
	s := startServer(t, srvOpts{idle: 2 * time.Second})
	c := dialTCP(t, s.V4)
	m := query("www.example.com.", dns.TypeA)
	pkt, _ := m.Pack()
	f := dnstest.Frame(pkt)
	c.SetDeadline(time.Now().Add(ioTimeout))
	for _, part := range [][]byte{f[:1], f[1:2], f[2:10], f[10:]} {
		if _, err := c.Write(part); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, err := dnstest.ReadFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(b); err != nil || r.Id != m.Id || len(r.Answer) != 1 {
		t.Fatalf("answer %v, %v", r, err)
	}
}

// TestTCPIdleTimeout checks that a connection sending nothing is closed
// after tcp.idle_timeout (300 ms here), not at once and not much later, and
// that each query restarts the timer.
func TestTCPIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	s := startServer(t, srvOpts{idle: idle})
	for _, tg := range targets(s) {
		t.Run(tg.name+"/silent", func(t *testing.T) {
			t.Parallel()
			c := dialTCP(t, tg.addr)
			took := waitClosed(t, c, 3*time.Second)
			if took < idle-50*time.Millisecond {
				t.Errorf("closed after %v, before the %v idle timeout", took, idle)
			}
			if took > idle+1500*time.Millisecond {
				t.Errorf("closed after %v; idle timeout is %v", took, idle)
			}
		})
		t.Run(tg.name+"/active", func(t *testing.T) {
			t.Parallel()
			c := dialTCP(t, tg.addr)
			start := time.Now()
			for range 5 { // 5 × 150 ms: well past one idle timeout
				time.Sleep(idle / 2)
				tcpAsk(t, c, query("www.example.com.", dns.TypeA))
			}
			if time.Since(start) < idle*2 {
				t.Fatalf("test too fast to prove anything")
			}
			took := waitClosed(t, c, 3*time.Second)
			if took < idle-50*time.Millisecond {
				t.Errorf("closed %v after the last answer, before the idle timeout", took)
			}
		})
	}
}

// TestTCPMaxConnections opens tcp.max_connections (3) idle connections: a
// fourth is closed by the server at once, the three still get answers, UDP
// keeps working, and a freed slot is reused.
func TestTCPMaxConnections(t *testing.T) {
	s := startServer(t, srvOpts{maxConns: 3, idle: 10 * time.Second})
	var held []*net.TCPConn
	for range 3 {
		held = append(held, dialTCP(t, s.V4))
	}
	// The server accepts in order, so by the time it takes the fourth the
	// three are counted.
	expectRejected(t, s.V4)
	for i, c := range held {
		r := tcpAsk(t, c, query("www.example.com.", dns.TypeA))
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Errorf("held connection %d: %v", i, r)
		}
	}
	r := dnstest.Exchange(t, "udp", s.V4, query("www.example.com.", dns.TypeA))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("UDP while TCP is full: %v", r)
	}
	if s.V6.IsValid() {
		// The limit is the server's, not per listener.
		expectRejected(t, s.V6)
		r := dnstest.Exchange(t, "udp", s.V6, query("www.example.com.", dns.TypeA))
		if r.Rcode != dns.RcodeSuccess {
			t.Errorf("UDP over IPv6 while TCP is full: %v", r)
		}
	}

	// Free a slot: a new connection is served once the server notices.
	held[0].Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.V4.String(), ioTimeout)
		if err == nil {
			pkt, _ := query("www.example.com.", dns.TypeA).Pack()
			c.SetDeadline(time.Now().Add(ioTimeout))
			c.Write(dnstest.Frame(pkt))
			_, err = dnstest.ReadFrame(c)
			c.Close()
			if err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served 3s after a slot was freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectRejected connects to addr and expects the server to close the
// connection at once (on loopback its reset can even fail the connect).
func expectRejected(t testing.TB, addr netip.AddrPort) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), ioTimeout)
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) {
			return
		}
		t.Fatal(err)
	}
	defer c.Close()
	if took := waitClosed(t, c, 2*time.Second); took > time.Second {
		t.Errorf("the connection over the limit was closed only after %v", took)
	}
}

// TestTCPSlowClient stalls one connection after one byte of the length
// prefix (and another mid-message): other clients are answered meanwhile,
// and the stalled connections are closed by the idle timeout.
func TestTCPSlowClient(t *testing.T) {
	const idle = 700 * time.Millisecond
	s := startServer(t, srvOpts{idle: idle})
	start := time.Now()
	slow := dialTCP(t, s.V4)
	if _, err := slow.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	slow2 := dialTCP(t, s.V4)
	pkt, _ := query("www.example.com.", dns.TypeA).Pack()
	if _, err := slow2.Write(dnstest.Frame(pkt)[:10]); err != nil {
		t.Fatal(err)
	}

	// Other clients, on new and reused connections and over UDP. A reused
	// connection asks back to back: left idle while the rest of the loop
	// runs on a loaded machine, it could pass the idle timeout itself.
	for range 5 {
		other := dialTCP(t, s.V4)
		tcpAsk(t, other, query("www.example.com.", dns.TypeA))
		tcpAsk(t, other, query("example.com.", dns.TypeSOA))
		tcpAsk(t, dialTCP(t, s.V4), query("example.com.", dns.TypeSOA))
		dnstest.Exchange(t, "udp", s.V4, query("www.example.com.", dns.TypeA))
	}
	if el := time.Since(start); el > idle/2 {
		t.Logf("other clients took %v (idle timeout %v): the check is weak", el, idle)
	}
	for i, c := range []*net.TCPConn{slow, slow2} {
		waitClosed(t, c, 3*time.Second)
		if took := time.Since(start); took < idle-50*time.Millisecond {
			t.Errorf("stalled connection %d closed after %v, before the idle timeout", i, took)
		}
	}
}

// TestTCPBadLength checks that a length prefix shorter than a DNS header
// closes the connection at once, without an answer.
func TestTCPBadLength(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"zero", []byte{0, 0}},
		{"one", []byte{0, 1, 0}},
		{"eleven", append([]byte{0, 11}, make([]byte, 11)...)},
		{"eleven after a good query", func() []byte {
			pkt, _ := query("www.example.com.", dns.TypeA).Pack()
			return append(dnstest.Frame(pkt), 0, 11)
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dialTCP(t, s.V4)
			conn.SetDeadline(time.Now().Add(ioTimeout))
			if _, err := conn.Write(c.data); err != nil {
				t.Fatal(err)
			}
			if c.name == "eleven after a good query" {
				if _, err := dnstest.ReadFrame(conn); err != nil {
					t.Fatalf("the good query was not answered: %v", err)
				}
			}
			if took := waitClosed(t, conn, 2*time.Second); took > time.Second {
				t.Errorf("closed after %v, want at once", took)
			}
		})
	}
}

// TestTCPMalformed checks what a bad message does to a TCP connection: a
// malformed query gets FORMERR and the connection stays usable; a response
// (QR=1) is not answered and the connection is closed.
func TestTCPMalformed(t *testing.T) {
	s := startServer(t, srvOpts{})
	c := dialTCP(t, s.V4)
	m := query("www.example.com.", dns.TypeA)
	m.Question = append(m.Question, m.Question[0]) // QDCOUNT 2
	r := tcpAsk(t, c, m)
	if r.Rcode != dns.RcodeFormatError {
		t.Errorf("rcode %s, want FORMERR", rcodeName(r.Rcode))
	}
	tcpAsk(t, c, query("www.example.com.", dns.TypeA))

	m = query("www.example.com.", dns.TypeA)
	m.Response = true
	pkt, _ := m.Pack()
	c.SetDeadline(time.Now().Add(ioTimeout))
	c.Write(dnstest.Frame(pkt))
	if took := waitClosed(t, c, 2*time.Second); took > time.Second {
		t.Errorf("closed after %v, want at once", took)
	}
}
