// Package dnsserver owns steer's transports: the UDP and TCP listeners on
// every configured address, RFC 7766 TCP handling (framing, pipelining, idle
// and first-query timeouts, global and per-prefix connection limits that
// close the longest-idle connection; see tcplimit.Limits), and the Handler that
// turns one query packet into one response from the current snapshot.
//
// The query path reads an immutable snapshot through an atomic pointer;
// Apply swaps in a new one (and rebinds listeners whose addresses changed)
// without stopping queries. A request signed with TSIG is verified,
// stripped, answered and signed inside the handler (tsig.go), with the
// snapshot's keys; zone transfers and NOTIFYs go to a Transfers service
// (transfers.go, package xfr's Service), and every answer but a
// transfer's passes the guard (guard.go: cookies, the size cap, rate
// limiting).
//
// The per-query counters are package metrics'; the TCP limits' own
// metrics (steer_tcp_*) are a TCPCollector (tcpmetrics.go).
package dnsserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/tcplimit"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Server serves DNS over UDP and TCP on the addresses its snapshot lists.
type Server struct {
	handler *Handler
	log     *slog.Logger

	mu  sync.Mutex // guards lns; never taken per query
	lns map[string]*listener

	wg      sync.WaitGroup
	closing atomic.Bool

	// TCP: the open connections, the limits SetTCPLimits set (nil: the
	// snapshot's) and the counters TCPStats reports. The UDP path uses
	// none of them.
	tcp       tcpTracker
	tcpLimits atomic.Pointer[tcplimit.Limits]
	tcpStats  tcpCounters
}

type listener struct {
	addr string // as configured
	// UDP is served either by raws (one batched SO_REUSEPORT socket per
	// core, for a specific address on Linux) or by udp (the standard
	// poller, for wildcard addresses, which need IP_PKTINFO, and other
	// platforms).
	udp  *net.UDPConn
	raws []*rawUDP
	tcp  *net.TCPListener
}

// udpAddr describes the listener's UDP side for logs.
func (ln *listener) udpAddr() string {
	if ln.udp != nil {
		return ln.udp.LocalAddr().String()
	}
	return fmt.Sprintf("%s (%d batched sockets)", ln.raws[0].local, len(ln.raws))
}

// New returns a server for snap; Start binds its listeners.
func New(snap *snapshot.Snapshot, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		handler: NewHandler(snap),
		log:     log,
		lns:     map[string]*listener{},
	}
}

// Handler returns the server's query handler.
func (s *Server) Handler() *Handler { return s.handler }

// Start binds every listen address of the current snapshot and serves.
func (s *Server) Start() error {
	return s.Apply(s.handler.Snapshot())
}

// Apply makes snap current. Listen addresses new in snap are bound first; if
// any cannot be bound, nothing changes and the error says why. Then the
// snapshot is swapped in and listeners for addresses no longer listed close.
func (s *Server) Apply(snap *snapshot.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return errors.New("dnsserver: shutting down")
	}
	want := map[string]bool{}
	var added []*listener
	for _, a := range snap.Listen {
		want[a] = true
		if s.lns[a] != nil {
			continue
		}
		ln, err := bind(a)
		if err != nil {
			for _, l := range added {
				l.close()
			}
			return err
		}
		added = append(added, ln)
	}
	s.handler.Swap(snap)
	for _, ln := range added {
		s.lns[ln.addr] = ln
		s.serve(ln)
		s.log.Info("listening", "udp", ln.udpAddr(), "tcp", ln.tcp.Addr().String())
	}
	for a, ln := range s.lns {
		if !want[a] {
			ln.close()
			delete(s.lns, a)
			s.log.Info("stopped listening", "addr", a)
		}
	}
	return nil
}

// Addrs returns the bound address (with the real port) of every listener.
func (s *Server) Addrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []netip.AddrPort
	for _, ln := range s.lns {
		out = append(out, ln.tcp.Addr().(*net.TCPAddr).AddrPort())
	}
	return out
}

// bind opens UDP and TCP on addr. With port 0 the TCP port is chosen first
// and UDP takes the same one, so both transports share a port.
func bind(addr string) (*listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	// Name the family: with plain "tcp", Go binds a wildcard address
	// (0.0.0.0 as well as [::]) as one dual-stack socket, so listing both
	// 0.0.0.0:53 and [::]:53, as operators do, would collide. tcp6/udp6
	// sockets are IPv6-only.
	tcpNet, udpNet := "tcp4", "udp4"
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
		tcpNet, udpNet = "tcp6", "udp6"
	} else if err != nil {
		tcpNet, udpNet = "tcp", "udp" // a host name such as localhost
	}
	var lastErr error
	for range 20 {
		tl, err := net.Listen(tcpNet, addr)
		if err != nil {
			return nil, fmt.Errorf("listen tcp %s: %w", addr, err)
		}
		uaddr := addr
		if port == "0" {
			uaddr = net.JoinHostPort(host, fmt.Sprint(tl.Addr().(*net.TCPAddr).Port))
		}
		tap := tl.Addr().(*net.TCPAddr).AddrPort()
		if rawUDPSupported && !tap.Addr().IsUnspecified() {
			raws, err := bindRaw(netip.AddrPortFrom(tap.Addr().Unmap(), tap.Port()), rawReaders())
			if err != nil {
				tl.Close()
				lastErr = fmt.Errorf("listen udp %s: %w", uaddr, err)
				if port == "0" {
					continue
				}
				return nil, lastErr
			}
			return &listener{addr: addr, raws: raws, tcp: tl.(*net.TCPListener)}, nil
		}
		uc, err := net.ListenPacket(udpNet, uaddr)
		if err != nil {
			tl.Close()
			lastErr = fmt.Errorf("listen udp %s: %w", uaddr, err)
			if port == "0" {
				continue // that port was taken for UDP; try another
			}
			return nil, lastErr
		}
		return &listener{addr: addr, udp: uc.(*net.UDPConn), tcp: tl.(*net.TCPListener)}, nil
	}
	return nil, lastErr
}

// bindRaw opens n batched UDP sockets sharing ap.
//
// SO_REUSEPORT would also let them join sockets that already hold ap, in
// another process of the same user or a server of this one still closing,
// and the kernel would then hand part of the queries to those. A plain
// bind first makes an address in use an error, as for any listener.
func bindRaw(ap netip.AddrPort, n int) ([]*rawUDP, error) {
	probe, err := net.ListenUDP(udpNetwork(ap), net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, err
	}
	probe.Close()
	var raws []*rawUDP
	for range n {
		u, err := listenRawUDP(ap)
		if err != nil {
			for _, r := range raws {
				r.Close()
				r.release()
			}
			return nil, err
		}
		raws = append(raws, u)
	}
	return raws, nil
}

// udpNetwork names ap's family for net.ListenUDP.
func udpNetwork(ap netip.AddrPort) string {
	if ap.Addr().Is4() {
		return "udp4"
	}
	return "udp6"
}

func (ln *listener) close() {
	if ln.udp != nil {
		ln.udp.Close()
	}
	for _, r := range ln.raws {
		r.Close()
	}
	ln.tcp.Close()
}

func (s *Server) serve(ln *listener) {
	for _, r := range ln.raws {
		s.wg.Add(1)
		go s.serveRaw(r)
	}
	s.wg.Add(1)
	go s.acceptTCP(ln.tcp)
	if ln.udp == nil {
		return
	}
	readers := max(1, runtime.GOMAXPROCS(0))
	la := ln.udp.LocalAddr().(*net.UDPAddr)
	for range readers {
		s.wg.Add(1)
		if la.IP.IsUnspecified() {
			go s.serveUDPWildcard(ln.udp, la.IP.To4() != nil)
		} else {
			go s.serveUDP(ln.udp)
		}
	}
}

// serveUDP answers packets on a socket bound to one address.
func (s *Server) serveUDP(c *net.UDPConn) {
	defer s.wg.Done()
	in := make([]byte, 65535)
	out := make([]byte, 0, 65535)
	for {
		n, from, err := c.ReadFromUDPAddrPort(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		resp := s.handler.HandleFrom(in[:n], UDP, from.Addr(), out)
		if resp == nil {
			continue
		}
		if _, err := c.WriteToUDPAddrPort(resp, from); err != nil {
			s.log.Debug("udp write", "to", from.String(), "err", err)
		}
	}
}

// pktinfoConn reads datagrams with the address they were sent to and
// replies from that address: ipv4.PacketConn and ipv6.PacketConn behind
// one face.
type pktinfoConn interface {
	read(b []byte) (n int, from net.Addr, dst net.IP, ifIndex int, err error)
	reply(b []byte, to net.Addr, src net.IP, ifIndex int)
}

type pktinfo4 struct{ *ipv4.PacketConn }

func (p pktinfo4) read(b []byte) (int, net.Addr, net.IP, int, error) {
	n, cm, from, err := p.ReadFrom(b)
	if cm == nil {
		return n, from, nil, 0, err
	}
	return n, from, cm.Dst, cm.IfIndex, err
}

func (p pktinfo4) reply(b []byte, to net.Addr, src net.IP, ifIndex int) {
	var cm *ipv4.ControlMessage
	if src != nil {
		cm = &ipv4.ControlMessage{Src: src, IfIndex: ifIndex}
	}
	p.WriteTo(b, cm, to)
}

type pktinfo6 struct{ *ipv6.PacketConn }

func (p pktinfo6) read(b []byte) (int, net.Addr, net.IP, int, error) {
	n, cm, from, err := p.ReadFrom(b)
	if cm == nil {
		return n, from, nil, 0, err
	}
	return n, from, cm.Dst, cm.IfIndex, err
}

func (p pktinfo6) reply(b []byte, to net.Addr, src net.IP, ifIndex int) {
	var cm *ipv6.ControlMessage
	if src != nil {
		cm = &ipv6.ControlMessage{Src: src, IfIndex: ifIndex}
	}
	p.WriteTo(b, cm, to)
}

// serveUDPWildcard answers packets on a socket bound to 0.0.0.0 or ::,
// replying from the address each query was sent to (IP_PKTINFO), as a
// multi-homed or anycast host must.
func (s *Server) serveUDPWildcard(c *net.UDPConn, v4 bool) {
	defer s.wg.Done()
	var p pktinfoConn
	var err error
	if v4 {
		p4 := ipv4.NewPacketConn(c)
		err = p4.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
		p = pktinfo4{p4}
	} else {
		p6 := ipv6.NewPacketConn(c)
		err = p6.SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
		p = pktinfo6{p6}
	}
	if err != nil {
		s.log.Warn("IP_PKTINFO unavailable; replies use the default source address", "err", err)
	}
	in := make([]byte, 65535)
	out := make([]byte, 0, 65535)
	for {
		n, from, dst, ifIndex, err := p.read(in)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if resp := s.handler.HandleFrom(in[:n], UDP, addrOf(from), out); resp != nil {
			p.reply(resp, from, dst, ifIndex)
		}
	}
}

func (s *Server) acceptTCP(l *net.TCPListener) {
	defer s.wg.Done()
	var backoff time.Duration
	var vbuf [4]*tcpConn
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, do not spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("tcp accept", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		accepted := time.Now()
		pol := s.tcpPolicy()
		from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
		tc, victims := s.tcp.admit(c, from, &pol, &s.closing, vbuf[:0])
		// Shutting a victim's write side sends its FIN at once, even if its
		// goroutine is slow to run; closing it wakes that goroutine, which
		// then releases the descriptor and counts the eviction.
		for i, v := range victims {
			v.c.CloseWrite()
			v.c.Close()
			if i < len(vbuf) {
				vbuf[i] = nil
			}
		}
		if tc == nil {
			s.tcpStats.refused.Add(1)
			if !s.closing.Load() {
				s.log.Debug("tcp connection limit reached; closing new connection", "from", from.String(), "limit", pol.maxConns)
			}
			c.SetLinger(0)
			c.Close()
			continue
		}
		s.tcpStats.accepted.Add(1)
		s.wg.Add(1)
		go s.serveTCP(tc, pol, accepted)
	}
}

// serveTCP answers length-prefixed queries on one connection in order
// (RFC 7766 §6.2.1: pipelined queries are all answered) until the client
// closes it, it is evicted, its first complete query does not arrive
// within pol.firstQuery of accepted or a later one within pol.idle of the
// last answer, or it sends something that is not DNS.
func (s *Server) serveTCP(tc *tcpConn, pol tcpPolicy, accepted time.Time) {
	c := tc.c
	why := TCPError
	defer func() {
		s.tcp.release(tc)
		c.Close()
		if r := tc.evicted.Load(); r != 0 {
			why = TCPCloseReason(r - 1)
		}
		s.tcpStats.closed[why].Add(1)
		s.wg.Done()
	}()
	from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
	r := bufio.NewReaderSize(c, 4096)
	var prefix [2]byte
	msg := make([]byte, 0, 512)
	out := make([]byte, 0, 4096)
	deadline := accepted.Add(pol.firstQuery)
	for queries := 0; ; queries++ {
		c.SetReadDeadline(deadline)
		// Checked after setting the deadline: Shutdown sets closing, then
		// moves the deadline to now, and neither step can be undone here.
		if s.closing.Load() {
			why = TCPShutdown
			return
		}
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			why = s.readEnd(err, queries)
			return
		}
		n := int(binary.BigEndian.Uint16(prefix[:]))
		if n < headerLen {
			return
		}
		if cap(msg) < n {
			msg = make([]byte, n)
		}
		msg = msg[:n]
		if _, err := io.ReadFull(r, msg); err != nil {
			why = s.readEnd(err, queries)
			return
		}
		tc.busy.Store(true)
		if s.handler.xfr != nil && isTransfer(msg) {
			// A transfer writes its own messages, as many as it needs.
			if err := s.handler.transfer(c, msg, from); err != nil {
				why = s.writeEnd(err)
				return
			}
			s.tcp.answered(tc)
			deadline = time.Now().Add(pol.idle)
			continue
		}
		resp := s.handler.HandleFrom(msg, TCP, from, out[:0])
		if resp == nil {
			return
		}
		if cap(resp) > cap(out) {
			out = resp[:0] // keep the larger buffer for the next answer
		}
		binary.BigEndian.PutUint16(prefix[:], uint16(len(resp)))
		c.SetWriteDeadline(time.Now().Add(pol.idle))
		bufs := net.Buffers{prefix[:], resp}
		if _, err := bufs.WriteTo(c); err != nil {
			why = s.writeEnd(err)
			return
		}
		s.tcp.answered(tc)
		deadline = time.Now().Add(pol.idle)
	}
}

// Shutdown stops accepting queries, lets the ones in flight finish, and
// returns when every goroutine has ended or ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	for a, ln := range s.lns {
		ln.close()
		delete(s.lns, a)
	}
	s.mu.Unlock()
	// Wake connections blocked reading the next query; one mid-answer
	// finishes its write first.
	for _, c := range s.tcp.conns() {
		c.SetReadDeadline(time.Now())
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range s.tcp.conns() {
			c.Close()
		}
		return ctx.Err()
	}
}

// addrOf returns the IP of a UDP source address.
func addrOf(a net.Addr) netip.Addr {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.AddrPort().Addr()
	}
	return netip.Addr{}
}
