// Command abuse is the traffic generator of bench/abuse.sh: against one
// server address it runs three classes of UDP traffic at once, from
// loopback source addresses (Linux routes all of 127.0.0.0/8 to lo, so any
// address in it can be bound as a source), and prints one JSON line per
// class:
//
//	flood   a spoofed-victim flood: 254 sources 127.9.9.1-254 (one socket
//	        each), 20,000 q/s in total of big.example.com TXT, EDNS 4096,
//	        a random ECS /24 per query, no cookie. Queries and bytes sent,
//	        responses and bytes received, amplification, % TC, % without
//	        a response, responses/s delivered to the victims.
//	legit   a legitimate ECS-honouring resolver: 127.8.8.8, 83 q/s of
//	        shop.example.com A, EDNS 1232, no cookie, each query with the
//	        next of 5,000 distinct client /24s. % answered on UDP without
//	        TC, % TC, % unanswered within the timeout, p50/p99 latency and
//	        the ECS scopes the server returned.
//	cookie  cookie-bearing clients: 127.6.6.1-50, 2 q/s each of
//	        big.example.com TXT with an RFC 7873 client cookie; the server
//	        cookie of each answer is presented with the next query, and a
//	        BADCOOKIE answer is retried at once with the cookie it carries
//	        (RFC 7873 §5.3), as a resolver does. % answered without TC.
//
// A fourth line, class "generator", gives the generator's own CPU time and
// its achieved send rates against the targets, to show it was not the
// bottleneck.
//
//	abuse -server 127.0.0.1:5321 -label bind -duration 60s
//	abuse -probe -server 127.0.0.1:5321     # exit 0 once it answers
//	abuse -report results.jsonl             # markdown table of JSON lines
//
// Pacing is a token bucket per sender (a 1 ms ticker sends what is due
// since the start, so a late tick catches up instead of losing rate);
// responses are read by one goroutine per socket; counters are atomics.
package main

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// wireOverhead is what IPv4 and UDP headers add to each datagram.
const wireOverhead = 28

type config struct {
	server   netip.AddrPort
	label    string
	duration time.Duration
	timeout  time.Duration

	floodNet   [3]byte // sources floodNet.1 .. floodNet.254
	floodQPS   float64
	floodName  string
	floodType  uint16
	floodEDNS  uint16
	floodSends int // sending goroutines

	legitSrc     netip.Addr
	legitQPS     float64
	legitName    string
	legitEDNS    uint16
	legitSubnets int

	cookieNet     [3]byte
	cookieClients int
	cookieQPS     float64
	cookieName    string
	cookieType    uint16
	cookieEDNS    uint16
}

func main() {
	var (
		server    = flag.String("server", "127.0.0.1:5321", "server address host:port")
		label     = flag.String("label", "", "server name put in every JSON line")
		duration  = flag.Duration("duration", 60*time.Second, "how long every class sends")
		quick     = flag.Bool("quick", false, "15 s instead of -duration")
		timeout   = flag.Duration("timeout", 2*time.Second, "a response later than this counts as none")
		floodNet  = flag.String("flood-net", "127.9.9", "the flood's /24 (first three octets); sources .1-.254")
		floodQPS  = flag.Float64("flood-qps", 20000, "flood rate, queries/s over all sources (0: off)")
		floodName = flag.String("flood-name", "big.example.com", "flood query name")
		floodType = flag.String("flood-type", "TXT", "flood query type")
		floodEDNS = flag.Int("flood-edns", 4096, "flood EDNS UDP size")
		floodSend = flag.Int("flood-senders", 4, "flood sending goroutines")
		legitSrc  = flag.String("legit-src", "127.8.8.8", "the ECS resolver's source address")
		legitQPS  = flag.Float64("legit-qps", 83, "the ECS resolver's rate (0: off)")
		legitName = flag.String("legit-name", "shop.example.com", "the ECS resolver's query name (type A)")
		legitEDNS = flag.Int("legit-edns", 1232, "the ECS resolver's EDNS UDP size")
		legitN    = flag.Int("legit-subnets", 5000, "distinct client /24s the resolver cycles through")
		cookieNet = flag.String("cookie-net", "127.6.6", "the cookie clients' /24 (first three octets)")
		cookieN   = flag.Int("cookie-clients", 50, "cookie clients, sources .1-.N (0: off)")
		cookieQPS = flag.Float64("cookie-qps", 2, "queries/s of each cookie client")
		cookieNm  = flag.String("cookie-name", "big.example.com", "cookie clients' query name")
		cookieTy  = flag.String("cookie-type", "TXT", "cookie clients' query type")
		cookieED  = flag.Int("cookie-edns", 1232, "cookie clients' EDNS UDP size")
		probe     = flag.Bool("probe", false, "only ask -server for -legit-name once; exit 0 on an answer")
		report    = flag.Bool("report", false, "read JSON lines from the files named (or stdin) and print markdown tables")
	)
	flag.Parse()
	if *report {
		if err := printReport(flag.Args(), os.Stdout); err != nil {
			fatal(err)
		}
		return
	}
	ap, err := netip.ParseAddrPort(*server)
	if err != nil {
		fatal(fmt.Errorf("-server: %v", err))
	}
	if *probe {
		if err := probeOnce(ap, *legitName, *timeout); err != nil {
			fatal(err)
		}
		return
	}
	c := config{
		server: ap, label: *label, duration: *duration, timeout: *timeout,
		floodQPS: *floodQPS, floodName: *floodName, floodType: qtype(*floodType), floodEDNS: uint16(*floodEDNS), floodSends: max(1, *floodSend),
		legitQPS: *legitQPS, legitName: *legitName, legitEDNS: uint16(*legitEDNS), legitSubnets: *legitN,
		cookieClients: *cookieN, cookieQPS: *cookieQPS, cookieName: *cookieNm, cookieType: qtype(*cookieTy), cookieEDNS: uint16(*cookieED),
	}
	if *quick {
		c.duration = 15 * time.Second
	}
	if c.floodNet, err = net24(*floodNet); err != nil {
		fatal(fmt.Errorf("-flood-net: %v", err))
	}
	if c.cookieNet, err = net24(*cookieNet); err != nil {
		fatal(fmt.Errorf("-cookie-net: %v", err))
	}
	if c.legitSrc, err = netip.ParseAddr(*legitSrc); err != nil {
		fatal(fmt.Errorf("-legit-src: %v", err))
	}
	if c.cookieClients > 254 {
		fatal(fmt.Errorf("-cookie-clients: at most 254"))
	}
	if err := run(&c, os.Stdout); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "abuse:", err)
	os.Exit(1)
}

func qtype(s string) uint16 {
	t, ok := dns.StringToType[s]
	if !ok {
		fatal(fmt.Errorf("unknown type %q", s))
	}
	return t
}

func net24(s string) ([3]byte, error) {
	a, err := netip.ParseAddr(s + ".0")
	if err != nil || !a.Is4() {
		return [3]byte{}, fmt.Errorf("%q is not three IPv4 octets", s)
	}
	b := a.As4()
	return [3]byte{b[0], b[1], b[2]}, nil
}

// ---- pacing ----------------------------------------------------------------

// pacer is a token bucket that starts full at zero: due says how many
// sends the rate allows from start to now, so a sender that fell behind
// (a late tick, a descheduled goroutine) catches up on the next tick.
type pacer struct {
	start time.Time
	rate  float64 // per second
}

func (p pacer) due(now time.Time) int64 {
	el := now.Sub(p.start)
	if el <= 0 {
		return 0
	}
	return int64(el.Seconds() * p.rate)
}

// tickFor is the ticker period for a rate: one send per tick at low rates,
// 1 ms at most, 50 ms at least often.
func tickFor(rate float64) time.Duration {
	if rate <= 0 {
		return 50 * time.Millisecond
	}
	d := time.Duration(float64(time.Second) / rate)
	return min(max(d, time.Millisecond), 50*time.Millisecond)
}

// paced calls send(i) for i = 0, 1, ... at rate until stop, and returns how
// many it called.
func paced(rate float64, start, stop time.Time, send func(i int64)) int64 {
	p := pacer{start: start, rate: rate}
	if d := time.Until(start); d > 0 {
		time.Sleep(d)
	}
	t := time.NewTicker(tickFor(rate))
	defer t.Stop()
	var n int64
	for {
		now := time.Now()
		if !now.Before(stop) {
			return n
		}
		for due := p.due(now); n < due; n++ {
			send(n)
		}
		<-t.C
	}
}

// ---- ECS subnets -----------------------------------------------------------

// publicSlash24 reports whether the /24 a.b.c.0 is ordinary unicast space
// (not private, loopback, link-local, CGNAT, documentation, multicast or
// reserved), so geo lookups of it mean something.
func publicSlash24(a, b, c byte) bool {
	switch {
	case a == 0 || a == 10 || a == 127 || a >= 224:
		return false
	case a == 100 && b&0xC0 == 64: // 100.64/10
		return false
	case a == 169 && b == 254, a == 172 && b&0xF0 == 16, a == 192 && b == 168:
		return false
	case a == 192 && b == 0 && (c == 0 || c == 2), a == 198 && b&0xFE == 18,
		a == 198 && b == 51 && c == 100, a == 203 && b == 0 && c == 113:
		return false
	}
	return true
}

// legitSubnets returns n distinct public /24s (their first three octets),
// the same for every run (a fixed seed), in a random order.
func legitSubnets(n int) [][3]byte {
	r := rand.New(rand.NewPCG(14, 83))
	seen := make(map[[3]byte]bool, n)
	out := make([][3]byte, 0, n)
	for len(out) < n {
		v := r.Uint32()
		s := [3]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8)}
		if !publicSlash24(s[0], s[1], s[2]) || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// randomSlash24 returns a random public /24 for a flood query.
func randomSlash24(r *rand.Rand) [3]byte {
	for {
		v := r.Uint32()
		if publicSlash24(byte(v>>24), byte(v>>16), byte(v>>8)) {
			return [3]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8)}
		}
	}
}

// ---- queries ---------------------------------------------------------------

// query is a wire-format query with an OPT record, built once; the ID, the
// ECS address and the cookie are patched in place.
type query struct {
	buf       []byte
	rdlOff    int // offset of the OPT's RDLENGTH
	ecsOff    int // offset of the ECS option's 3 address bytes, or -1
	cookieOff int // offset of the COOKIE option's code, or -1
}

// newQuery builds name/qtype IN with RD clear and EDNS udp, an ECS option
// (IPv4, source /24, scope 0) when withECS, and room for a COOKIE option
// when withCookie (set by setCookie).
func newQuery(name string, qt, udp uint16, withECS, withCookie bool) *query {
	b := make([]byte, 12, 128)
	b[5] = 1  // QDCOUNT
	b[11] = 1 // ARCOUNT: the OPT
	b = appendName(b, name)
	b = binary.BigEndian.AppendUint16(b, qt)
	b = binary.BigEndian.AppendUint16(b, dns.ClassINET)
	// OPT: root name, type, class = UDP size, TTL 0, RDLENGTH patched below
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, dns.TypeOPT)
	b = binary.BigEndian.AppendUint16(b, udp)
	b = append(b, 0, 0, 0, 0, 0, 0)
	rdl := len(b) - 2
	q := &query{rdlOff: rdl, ecsOff: -1, cookieOff: -1}
	if withECS {
		b = append(b, 0, 8, 0, 7, 0, 1, 24, 0) // code 8, len 7, family 1, /24, scope 0
		q.ecsOff = len(b)
		b = append(b, 0, 0, 0)
	}
	binary.BigEndian.PutUint16(b[rdl:], uint16(len(b)-rdl-2))
	if withCookie {
		q.cookieOff = len(b)
	}
	q.buf = b
	return q
}

func appendName(b []byte, name string) []byte {
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			if i > start {
				b = append(b, byte(i-start))
				b = append(b, name[start:i]...)
			}
			start = i + 1
		}
	}
	return append(b, 0)
}

func (q *query) setID(id uint16) { binary.BigEndian.PutUint16(q.buf, id) }

func (q *query) setECS(s [3]byte) { copy(q.buf[q.ecsOff:], s[:]) }

// setCookie replaces the COOKIE option with client (8 bytes) and server
// (empty, or 8-32 bytes).
func (q *query) setCookie(client [8]byte, server []byte) {
	b := q.buf[:q.cookieOff]
	b = binary.BigEndian.AppendUint16(b, dns.EDNS0COOKIE)
	b = binary.BigEndian.AppendUint16(b, uint16(8+len(server)))
	b = append(b, client[:]...)
	b = append(b, server...)
	q.buf = b
	binary.BigEndian.PutUint16(q.buf[q.rdlOff:], uint16(len(q.buf)-q.rdlOff-2))
}

// ---- sockets ---------------------------------------------------------------

func listen(a netip.Addr) (*net.UDPConn, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
	if err != nil {
		return nil, fmt.Errorf("bind %s: %v (run as root on Linux, where 127.0.0.0/8 is local)", a, err)
	}
	_ = c.SetReadBuffer(1 << 20)
	return c, nil
}

// readAll calls fn with every datagram c receives from server until c is
// closed.
func readAll(c *net.UDPConn, server netip.AddrPort, fn func([]byte)) {
	buf := make([]byte, 65535)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if from.Addr().Unmap() != server.Addr() || from.Port() != server.Port() {
			continue
		}
		fn(buf[:n])
	}
}

// socketDrops sums the receive-buffer drops /proc/net/udp shows for the
// sockets conns (-1 when it cannot be read).
func socketDrops(conns []*net.UDPConn) int64 {
	want := map[string]bool{}
	for _, c := range conns {
		a := c.LocalAddr().(*net.UDPAddr).AddrPort()
		b := a.Addr().As4()
		// /proc/net/udp prints the address as a host-order (little
		// endian) 32-bit hex number, then the port
		want[fmt.Sprintf("%02X%02X%02X%02X:%04X", b[3], b[2], b[1], b[0], a.Port())] = true
	}
	data, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return -1
	}
	var n int64
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 || !want[f[1]] {
			continue
		}
		var d int64
		fmt.Sscan(f[len(f)-1], &d)
		n += d
	}
	return n
}

// ---- run -------------------------------------------------------------------

type floodStats struct {
	sent, sendErr, bytesSent, resp, bytesRecv, tc, noerror, refused, other atomic.Int64
}

type legitSlot struct {
	sent   atomic.Int64 // unix ns, 0 = free
	subnet int
}

type legitStats struct {
	sent, sendErr                        atomic.Int64
	ok, tc, rcodeOther, empty, late, dup atomic.Int64
	mu                                   sync.Mutex
	lat                                  []time.Duration
	scopes                               map[int]int
	rcodes                               map[string]int
}

type cookieStats struct {
	logical, sends, sendErr, retries atomic.Int64
	ok, tc, badcookie, other, late   atomic.Int64
	withServer, answersWithServer    atomic.Int64
	responses                        atomic.Int64
	mu                               sync.Mutex
	rcodes                           map[string]int
}

func run(c *config, w *os.File) error {
	var conns []*net.UDPConn
	closeAll := func() {
		for _, x := range conns {
			x.Close()
		}
	}
	defer closeAll()
	var flood []*net.UDPConn
	if c.floodQPS > 0 {
		for i := 1; i <= 254; i++ {
			x, err := listen(netip.AddrFrom4([4]byte{c.floodNet[0], c.floodNet[1], c.floodNet[2], byte(i)}))
			if err != nil {
				return err
			}
			flood = append(flood, x)
			conns = append(conns, x)
		}
	}
	var legit *net.UDPConn
	if c.legitQPS > 0 {
		x, err := listen(c.legitSrc)
		if err != nil {
			return err
		}
		legit = x
		conns = append(conns, x)
	}
	var cookies []*net.UDPConn
	for i := 1; i <= c.cookieClients && c.cookieQPS > 0; i++ {
		x, err := listen(netip.AddrFrom4([4]byte{c.cookieNet[0], c.cookieNet[1], c.cookieNet[2], byte(i)}))
		if err != nil {
			return err
		}
		cookies = append(cookies, x)
		conns = append(conns, x)
	}

	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now().Add(100 * time.Millisecond)
	stop := start.Add(c.duration)
	var readers, senders sync.WaitGroup

	// flood
	var fs floodStats
	floodSent := make([]int64, c.floodSends)
	for _, x := range flood {
		readers.Add(1)
		go func() {
			defer readers.Done()
			readAll(x, c.server, func(b []byte) {
				fs.resp.Add(1)
				fs.bytesRecv.Add(int64(len(b)))
				if len(b) < 12 {
					return
				}
				if b[2]&0x02 != 0 {
					fs.tc.Add(1)
				}
				switch b[3] & 0x0F {
				case dns.RcodeSuccess:
					fs.noerror.Add(1)
				case dns.RcodeRefused:
					fs.refused.Add(1)
				default:
					fs.other.Add(1)
				}
			})
		}()
	}
	for g := 0; g < c.floodSends && len(flood) > 0; g++ {
		var mine []*net.UDPConn
		for i := g; i < len(flood); i += c.floodSends {
			mine = append(mine, flood[i])
		}
		senders.Add(1)
		go func() {
			defer senders.Done()
			q := newQuery(c.floodName, c.floodType, c.floodEDNS, true, false)
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			floodSent[g] = paced(c.floodQPS/float64(c.floodSends), start, stop, func(i int64) {
				q.setID(uint16(r.Uint32()))
				q.setECS(randomSlash24(r))
				if _, err := mine[i%int64(len(mine))].WriteToUDPAddrPort(q.buf, c.server); err != nil {
					fs.sendErr.Add(1)
					return
				}
				fs.sent.Add(1)
				fs.bytesSent.Add(int64(len(q.buf)))
			})
		}()
	}

	// legitimate ECS resolver: query i has ID i mod 65536 and subnet
	// i mod N; its slot holds the send time until the answer or timeout.
	var ls legitStats
	ls.scopes, ls.rcodes = map[int]int{}, map[string]int{}
	var slots [65536]legitSlot
	var legitDone int64
	if legit != nil {
		subnets := legitSubnets(c.legitSubnets)
		readers.Add(1)
		go func() {
			defer readers.Done()
			readAll(legit, c.server, func(b []byte) {
				now := time.Now().UnixNano()
				if len(b) < 2 {
					return
				}
				s := &slots[binary.BigEndian.Uint16(b)]
				t := s.sent.Swap(0)
				if t == 0 {
					ls.dup.Add(1)
					return
				}
				d := time.Duration(now - t)
				if d > c.timeout {
					ls.late.Add(1)
					return
				}
				var m dns.Msg
				if err := m.Unpack(b); err != nil {
					ls.mu.Lock()
					ls.rcodes["unparsable"]++
					ls.mu.Unlock()
					ls.rcodeOther.Add(1)
					return
				}
				scope := -1
				if o := m.IsEdns0(); o != nil {
					for _, e := range o.Option {
						if s, ok := e.(*dns.EDNS0_SUBNET); ok {
							scope = int(s.SourceScope)
						}
					}
				}
				ls.mu.Lock()
				defer ls.mu.Unlock()
				switch {
				case m.Truncated:
					ls.tc.Add(1)
					ls.rcodes["TC"]++
				case m.Rcode != dns.RcodeSuccess:
					ls.rcodeOther.Add(1)
					ls.rcodes[dns.RcodeToString[m.Rcode]]++
				case len(m.Answer) == 0:
					ls.empty.Add(1)
					ls.rcodes["NODATA"]++
				default:
					ls.ok.Add(1)
					ls.lat = append(ls.lat, d)
					ls.scopes[scope]++
				}
			})
		}()
		senders.Add(1)
		go func() {
			defer senders.Done()
			q := newQuery(c.legitName, dns.TypeA, c.legitEDNS, true, false)
			legitDone = paced(c.legitQPS, start, stop, func(i int64) {
				id := uint16(i)
				q.setID(id)
				q.setECS(subnets[i%int64(len(subnets))])
				s := &slots[id]
				s.sent.Store(time.Now().UnixNano())
				if _, err := legit.WriteToUDPAddrPort(q.buf, c.server); err != nil {
					s.sent.Store(0)
					ls.sendErr.Add(1)
					return
				}
				ls.sent.Add(1)
			})
		}()
	}

	// cookie clients
	var cs cookieStats
	cs.rcodes = map[string]int{}
	for i, x := range cookies {
		cl := newCookieClient(c, x, &cs)
		readers.Add(1)
		go func() {
			defer readers.Done()
			readAll(x, c.server, cl.receive)
		}()
		senders.Add(1)
		go func() {
			defer senders.Done()
			// stagger the clients over one period
			off := time.Duration(float64(time.Second) / c.cookieQPS * float64(i) / float64(len(cookies)))
			paced(c.cookieQPS, start.Add(off), stop, func(int64) { cl.send() })
		}()
	}

	senders.Wait()
	time.Sleep(c.timeout) // the last answers
	rxDrops := socketDrops(conns)
	closeAll()
	readers.Wait()
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	secs := c.duration.Seconds()

	enc := json.NewEncoder(w)
	if len(flood) > 0 {
		sent, bin, resp, bout := fs.sent.Load(), fs.bytesSent.Load(), fs.resp.Load(), fs.bytesRecv.Load()
		_ = enc.Encode(map[string]any{
			"server": c.label, "class": "flood", "duration_s": secs,
			"sources": len(flood), "target_qps": c.floodQPS, "send_qps": round(float64(sent) / secs),
			"sent": sent, "send_errors": fs.sendErr.Load(), "bytes_sent": bin,
			"responses": resp, "bytes_received": bout, "resp_per_s": round(float64(resp) / secs),
			"bytes_received_per_s": round(float64(bout) / secs),
			"amplification":        ratio(bout, bin),
			"amplification_wire":   ratio(bout+wireOverhead*resp, bin+wireOverhead*sent),
			"mean_query_bytes":     ratio(bin, sent), "mean_response_bytes": ratio(bout, resp),
			"tc_pct": pct(fs.tc.Load(), sent), "noerror_pct": pct(fs.noerror.Load(), sent),
			"refused": fs.refused.Load(), "other_rcode": fs.other.Load(),
			"no_response_pct": pct(max(0, sent-resp), sent),
		})
	}
	if legit != nil {
		// whatever is still in a slot got no answer
		unanswered := int64(0)
		for i := range slots {
			if slots[i].sent.Load() != 0 {
				unanswered++
			}
		}
		unanswered += ls.late.Load()
		sent := ls.sent.Load()
		ls.mu.Lock()
		sort.Slice(ls.lat, func(i, j int) bool { return ls.lat[i] < ls.lat[j] })
		scopes := map[string]int{}
		for k, v := range ls.scopes {
			key := fmt.Sprintf("/%d", k)
			if k < 0 {
				key = "none"
			}
			scopes[key] = v
		}
		_ = enc.Encode(map[string]any{
			"server": c.label, "class": "legit", "duration_s": secs,
			"target_qps": c.legitQPS, "send_qps": round(float64(sent) / secs), "sent": sent, "send_errors": ls.sendErr.Load(),
			"subnets":      min(c.legitSubnets, int(legitDone)),
			"answered_pct": pct(ls.ok.Load(), sent), "tc_pct": pct(ls.tc.Load(), sent),
			"unanswered_pct": pct(unanswered, sent), "other_pct": pct(ls.rcodeOther.Load()+ls.empty.Load(), sent),
			"outcomes": ls.rcodes, "late": ls.late.Load(), "duplicates": ls.dup.Load(),
			"p50_ms": ms(quantile(ls.lat, 0.50)), "p99_ms": ms(quantile(ls.lat, 0.99)),
			"scopes": scopes,
		})
		ls.mu.Unlock()
	}
	if len(cookies) > 0 {
		logical := cs.logical.Load()
		cs.mu.Lock()
		_ = enc.Encode(map[string]any{
			"server": c.label, "class": "cookie", "duration_s": secs, "clients": len(cookies),
			"target_qps": c.cookieQPS * float64(len(cookies)), "send_qps": round(float64(cs.sends.Load()) / secs),
			"queries": logical, "datagrams": cs.sends.Load(), "send_errors": cs.sendErr.Load(),
			"badcookie_retries": cs.retries.Load(), "badcookie": cs.badcookie.Load(),
			"answered_pct": pct(cs.ok.Load(), logical), "tc_pct": pct(cs.tc.Load(), logical),
			"other_pct":                        pct(cs.other.Load(), logical),
			"unanswered_pct":                   pct(max(0, logical-cs.ok.Load()-cs.tc.Load()-cs.other.Load()), logical),
			"sent_with_server_cookie_pct":      pct(cs.withServer.Load(), cs.sends.Load()),
			"responses_with_server_cookie_pct": pct(cs.answersWithServer.Load(), cs.responses.Load()),
			"outcomes":                         cs.rcodes,
		})
		cs.mu.Unlock()
	}
	cpu := func(r *syscall.Rusage) float64 {
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
	}
	var fsTotal int64
	for _, v := range floodSent {
		fsTotal += v
	}
	_ = enc.Encode(map[string]any{
		"server": c.label, "class": "generator", "duration_s": secs,
		"cpu_s":            round(cpu(&ru1) - cpu(&ru0)),
		"flood_target_qps": c.floodQPS, "flood_achieved_qps": round(float64(fsTotal) / secs),
		"flood_achieved_pct":  pct(fsTotal, int64(c.floodQPS*secs)),
		"legit_achieved_qps":  round(float64(legitDone) / secs),
		"cookie_achieved_qps": round(float64(cs.logical.Load()) / secs),
		// datagrams the kernel dropped because a generator socket's
		// receive buffer was full: responses lost on the generator's side
		"rx_drops": rxDrops,
	})
	return nil
}

// ---- cookie clients --------------------------------------------------------

type cookiePending struct {
	logical int64
	sent    int64 // unix ns
	retry   bool
}

// cookieClient is one resolver with a client cookie: it presents the last
// server cookie it was given, and retries a BADCOOKIE answer once.
type cookieClient struct {
	c      *config
	conn   *net.UDPConn
	st     *cookieStats
	client [8]byte
	mu     sync.Mutex
	server []byte
	q      *query
	nextID uint16
	seq    int64
	wait   map[uint16]cookiePending
}

func newCookieClient(c *config, conn *net.UDPConn, st *cookieStats) *cookieClient {
	cl := &cookieClient{c: c, conn: conn, st: st, wait: map[uint16]cookiePending{},
		q: newQuery(c.cookieName, c.cookieType, c.cookieEDNS, false, true)}
	binary.BigEndian.PutUint64(cl.client[:], rand.Uint64())
	cl.nextID = uint16(rand.Uint32())
	return cl
}

// send sends the next query.
func (cl *cookieClient) send() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.seq++
	cl.st.logical.Add(1)
	cl.sendLocked(cl.seq, false)
}

// sendLocked sends query logical (retry: again, after BADCOOKIE), under the
// lock.
func (cl *cookieClient) sendLocked(logical int64, retry bool) {
	now := time.Now().UnixNano()
	// forget what timed out
	for id, p := range cl.wait {
		if time.Duration(now-p.sent) > cl.c.timeout {
			delete(cl.wait, id)
		}
	}
	id := cl.nextID
	cl.nextID++
	cl.q.setID(id)
	cl.q.setCookie(cl.client, cl.server)
	cl.wait[id] = cookiePending{logical: logical, sent: now, retry: retry}
	if len(cl.server) > 0 {
		cl.st.withServer.Add(1)
	}
	if _, err := cl.conn.WriteToUDPAddrPort(cl.q.buf, cl.c.server); err != nil {
		cl.st.sendErr.Add(1)
		delete(cl.wait, id)
		return
	}
	cl.st.sends.Add(1)
}

func (cl *cookieClient) receive(b []byte) {
	now := time.Now().UnixNano()
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		return
	}
	cl.st.responses.Add(1)
	var srv []byte
	if o := m.IsEdns0(); o != nil {
		for _, e := range o.Option {
			if ck, ok := e.(*dns.EDNS0_COOKIE); ok && len(ck.Cookie) > 16 {
				if raw, err := hex.DecodeString(ck.Cookie); err == nil && len(raw) >= 16 && [8]byte(raw[:8]) == cl.client {
					srv = raw[8:]
				}
			}
		}
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if srv != nil {
		cl.st.answersWithServer.Add(1)
		cl.server = append(cl.server[:0], srv...)
	}
	p, ok := cl.wait[m.Id]
	if !ok {
		return
	}
	delete(cl.wait, m.Id)
	if time.Duration(now-p.sent) > cl.c.timeout {
		cl.st.late.Add(1)
		return
	}
	outcome := ""
	switch {
	case m.Rcode == dns.RcodeBadCookie:
		cl.st.badcookie.Add(1)
		if !p.retry && srv != nil {
			cl.st.retries.Add(1)
			cl.sendLocked(p.logical, true)
			return
		}
		cl.st.other.Add(1)
		outcome = "BADCOOKIE"
	case m.Truncated:
		cl.st.tc.Add(1)
		outcome = "TC"
	case m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0:
		cl.st.ok.Add(1)
		return
	default:
		cl.st.other.Add(1)
		outcome = dns.RcodeToString[m.Rcode]
		if m.Rcode == dns.RcodeSuccess {
			outcome = "NODATA"
		}
	}
	cl.st.mu.Lock()
	cl.st.rcodes[outcome]++
	cl.st.mu.Unlock()
}

// ---- probe -----------------------------------------------------------------

func probeOnce(server netip.AddrPort, name string, timeout time.Duration) error {
	c := &dns.Client{Net: "udp", Timeout: timeout}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	m.RecursionDesired = false
	r, _, err := c.Exchange(m, server.String())
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		return fmt.Errorf("%s: %s with %d answers", name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	return nil
}

// ---- helpers ---------------------------------------------------------------

func pct(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return round(100 * float64(a) / float64(b))
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return round(float64(a) / float64(b))
}

func round(f float64) float64 {
	if f >= 100 {
		return float64(int64(f*10+0.5)) / 10
	}
	return float64(int64(f*1000+0.5)) / 1000
}

func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(q * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) float64 { return round(float64(d) / 1e6) }
