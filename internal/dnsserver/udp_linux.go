//go:build linux && (amd64 || arm64)

package dnsserver

import (
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The batched UDP transport: one SO_REUSEPORT socket per core, each read
// and written by one goroutine with recvmmsg/sendmmsg on a blocking socket,
// so a busy server makes two system calls per batch of up to batchSize
// queries and never goes through the network poller.
//
// The system calls are raw: the reader keeps its P (scheduler slot) while
// it waits in the kernel, so a query that wakes it is answered at once,
// with no scheduler hand-off (measured with bench/: blocking through the
// scheduler cost 13% more CPU per query than gdnsd and doubled the median
// latency at 20k QPS; raw, steer is within 3% of gdnsd's CPU and 10% of its
// latency). The price is that each socket holds a P: GOMAXPROCS is raised
// by one per socket so the rest of the server (TCP, timers, signals) keeps
// the Ps it had; and the garbage collector (rare: the query path does not
// allocate) stops a reader blocked in the kernel by a signal, which cuts
// the wait short (EINTR), and the reader then steps through the
// scheduler (yieldToRuntime). A reader that stays idle wakes once per
// socket every pollInterval to notice a close (1 ms made dozens of test
// servers in one process burn a core between them).

const (
	batchSize = 32
	// pollInterval bounds how long an idle reader stays in the kernel: how
	// soon it notices a close.
	pollInterval = 10 * time.Millisecond
)

// baseProcs is GOMAXPROCS as the process started (or as the operator set
// it): the Ps left for everything but the UDP readers, and the number of
// sockets per listen address.
var (
	baseProcs   = runtime.GOMAXPROCS(0)
	procsMu     sync.Mutex
	rawSocketsN int
)

// holdProc accounts for a raw socket's reader holding a P.
func holdProc(delta int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	rawSocketsN += delta
	runtime.GOMAXPROCS(baseProcs + rawSocketsN)
}

// rawReaders is how many batched sockets serve one listen address.
func rawReaders() int { return max(1, baseProcs) }

// rawUDP is one blocking UDP socket bound with SO_REUSEPORT.
type rawUDP struct {
	fd     int
	local  netip.AddrPort
	closed atomic.Bool
}

// listenRawUDP binds a blocking UDP socket to ap with SO_REUSEPORT, so
// several sockets can share the address and the kernel spreads queries
// across them by flow.
func listenRawUDP(ap netip.AddrPort) (*rawUDP, error) {
	family := syscall.AF_INET
	if ap.Addr().Is6() {
		family = syscall.AF_INET6
	}
	fd, err := syscall.Socket(family, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_UDP)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*rawUDP, error) {
		syscall.Close(fd)
		return nil, err
	}
	const soReusePort = 0xF // SO_REUSEPORT on Linux
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soReusePort, 1); err != nil {
		return fail(err)
	}
	// Large buffers absorb bursts while a reader is busy.
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<20)
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4<<20)
	tv := syscall.NsecToTimeval(pollInterval.Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return fail(err)
	}
	var sa syscall.Sockaddr
	if family == syscall.AF_INET6 {
		syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, 1)
		sa = &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	} else {
		// Answers go out with DF set and are never fragmented, here or on
		// the way, whatever path MTU an ICMP message (forged or not)
		// claims: RFC 9715 recommends DF for DNS over UDP on IPv4, and an
		// answer is at most 1232 bytes. It also spares the kernel the
		// IP ID it draws for every datagram that may be fragmented
		// (__ip_select_ident, about 3% of a query's CPU with bench/run.sh).
		syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE)
		sa = &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	if err := syscall.Bind(fd, sa); err != nil {
		return fail(&net.OpError{Op: "listen", Net: "udp", Addr: net.UDPAddrFromAddrPort(ap), Err: err})
	}
	holdProc(1)
	return &rawUDP{fd: fd, local: ap}, nil
}

// release closes the descriptor and gives back the P its reader held.
func (u *rawUDP) release() {
	syscall.Close(u.fd)
	holdProc(-1)
}

func (u *rawUDP) Close() error {
	if u.closed.Swap(true) {
		return nil
	}
	// The reader notices within pollInterval and closes the descriptor:
	// closing it here could let the number be reused under a blocked
	// recvmmsg.
	return nil
}

type mmsghdr struct {
	hdr syscall.Msghdr
	n   uint32
	_   [4]byte
}

// serveRaw answers queries on u until it is closed.
func (s *Server) serveRaw(u *rawUDP) {
	defer s.wg.Done()
	defer u.release()
	var (
		in      [batchSize][]byte
		out     [batchSize][]byte
		names   [batchSize]syscall.RawSockaddrAny
		iovIn   [batchSize]syscall.Iovec
		iovOut  [batchSize]syscall.Iovec
		recv    [batchSize]mmsghdr
		send    [batchSize]mmsghdr
		b       batch
		inBuf   = make([]byte, batchSize*maxUDPQuery)
		outBufs = make([]byte, batchSize*maxUDPAnswer)
	)
	for i := range batchSize {
		in[i] = inBuf[i*maxUDPQuery : (i+1)*maxUDPQuery]
		out[i] = outBufs[i*maxUDPAnswer : i*maxUDPAnswer : (i+1)*maxUDPAnswer]
		iovIn[i] = syscall.Iovec{Base: &in[i][0]}
		iovIn[i].SetLen(maxUDPQuery)
		recv[i].hdr.Name = (*byte)(unsafe.Pointer(&names[i]))
		recv[i].hdr.Iov = &iovIn[i]
		recv[i].hdr.Iovlen = 1
	}
	for !u.closed.Load() {
		for i := range batchSize {
			recv[i].hdr.Namelen = syscall.SizeofSockaddrAny
			recv[i].hdr.Flags = 0
		}
		// Block (for at most pollInterval) for the first datagram, then
		// take what is already queued, up to the batch (MSG_WAITFORONE).
		r, _, errno := syscall.RawSyscall6(sysRecvmmsg, uintptr(u.fd), uintptr(unsafe.Pointer(&recv[0])), batchSize, msgWaitForOne, 0, 0)
		if errno != 0 {
			if errno == syscall.EAGAIN || errno == syscall.EINTR || errno == syscall.EWOULDBLOCK {
				yieldToRuntime()
				continue
			}
			if u.closed.Load() {
				return
			}
			s.log.Warn("udp receive", "addr", u.local.String(), "err", errno.Error())
			time.Sleep(10 * time.Millisecond)
			continue
		}
		b.start(s.handler.metrics)
		n := 0
		for i := 0; i < int(r); i++ {
			from, ok := sockaddrAddr(&names[i])
			if !ok || recv[i].hdr.Flags&syscall.MSG_TRUNC != 0 {
				continue
			}
			resp := s.handler.handleBatched(in[i][:recv[i].n], from, out[n][:0], &b)
			if resp == nil {
				continue
			}
			if len(resp) > 0 && &resp[0] != &out[n][:1][0] {
				// Written elsewhere (did not fit the slot): copy or drop.
				if len(resp) > maxUDPAnswer {
					continue
				}
				resp = append(out[n][:0], resp...)
			}
			iovOut[n] = syscall.Iovec{Base: &resp[0]}
			iovOut[n].SetLen(len(resp))
			send[n].hdr = syscall.Msghdr{Name: recv[i].hdr.Name, Namelen: recv[i].hdr.Namelen, Iov: &iovOut[n], Iovlen: 1}
			n++
		}
		b.flush()
		for sent := 0; sent < n; {
			w, _, errno := syscall.RawSyscall6(sysSendmmsg, uintptr(u.fd), uintptr(unsafe.Pointer(&send[sent])), uintptr(n-sent), syscall.MSG_DONTWAIT, 0, 0)
			if errno == syscall.EAGAIN {
				// The socket buffer is full: wait for room the slow way.
				w, _, errno = syscall.Syscall6(sysSendmmsg, uintptr(u.fd), uintptr(unsafe.Pointer(&send[sent])), uintptr(n-sent), 0, 0, 0)
			}
			if errno != 0 {
				if errno == syscall.EINTR || errno == syscall.EAGAIN {
					continue
				}
				// One bad destination must not stall the rest.
				sent++
				continue
			}
			sent += int(w)
		}
	}
}

// yieldToRuntime lets the runtime stop or scan the reader between two
// waits in the kernel: the receive timed out (idle) or a signal cut it
// short (EINTR), which is how the runtime asks a running goroutine to
// stop, for the garbage collector or a stop-the-world. The request is
// honoured at the next function prologue's stack check, and the loop has
// none (RawSyscall6 and runtime.Gosched are nosplit): the collector could
// only stop an idle reader when a signal happened to land on its few
// instructions in user space, and an idle server's forced collection
// spun in suspendG for 0.7-3.4 s of CPU on one core. This function's own
// prologue (it must not be inlined) is that check; when nothing is
// asked it costs a comparison. (A sched_yield here instead gave the core
// away to other processes at every preemption signal: under load on a
// shared core, the median latency went from 35 µs to 0.8 ms.)
//
//go:noinline
func yieldToRuntime() {
	runtime.Gosched() // idle: let anything waiting for a P run
}

// maxUDPQuery is the largest query read (a query never needs more);
// maxUDPAnswer the largest answer sent over UDP.
const (
	maxUDPQuery  = 4096
	maxUDPAnswer = 4096
)

// sockaddrAddr reads the address of a raw socket address.
func sockaddrAddr(sa *syscall.RawSockaddrAny) (netip.Addr, bool) {
	switch sa.Addr.Family {
	case syscall.AF_INET:
		p := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrFrom4(p.Addr), true
	case syscall.AF_INET6:
		p := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa))
		return netip.AddrFrom16(p.Addr).Unmap(), true
	}
	return netip.Addr{}, false
}

// rawUDPSupported says this platform has the batched transport.
const rawUDPSupported = true

const (
	sysRecvmmsg   = unix.SYS_RECVMMSG
	sysSendmmsg   = unix.SYS_SENDMMSG
	msgWaitForOne = unix.MSG_WAITFORONE
)
