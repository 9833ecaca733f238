package dnstest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Primary is a real primary server for tests, on miekg/dns over TCP and
// UDP on one loopback port: it answers SOA queries and AXFR (IXFR gets
// the whole zone, RFC 1995 §4) for its zones, sending PerMsg records per
// message with Every between messages, and counts what it serves: the
// transfers running at once, the source addresses of requests, the time
// of each zone's first SOA query.
type Primary struct {
	Addr netip.AddrPort

	o PrimaryOptions

	mu       sync.Mutex
	zones    map[string][]dns.RR // SOA first, without the closing SOA
	running  int
	maxRun   int
	xfrs     int
	firstSOA map[string]time.Time
	sources  map[netip.Addr]int
}

// PrimaryOptions configure a Primary.
type PrimaryOptions struct {
	// Every is the pause before each message of a transfer after the
	// first; PerMsg the records per message (0: 100).
	Every  time.Duration
	PerMsg int
	// TsigSecret (miekg/dns's map of key name to secret): a signed
	// request must verify and is answered signed; unsigned requests are
	// answered too.
	TsigSecret map[string]string
}

// StartPrimary starts a Primary on 127.0.0.1 (any free port) with the
// zones given (each SOA first), stopped at the end of the test.
func StartPrimary(t testing.TB, zones map[string][]dns.RR, o PrimaryOptions) *Primary {
	t.Helper()
	p := &Primary{o: o, zones: map[string][]dns.RR{}, firstSOA: map[string]time.Time{}, sources: map[netip.Addr]int{}}
	for o, rrs := range zones {
		p.zones[dns.CanonicalName(o)] = rrs
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := net.ListenPacket("udp", tl.Addr().String())
	if err != nil {
		tl.Close()
		t.Fatal(err)
	}
	p.Addr = netip.MustParseAddrPort(tl.Addr().String())
	var servers []*dns.Server
	for _, s := range []*dns.Server{{Listener: tl, Net: "tcp"}, {PacketConn: ul, Net: "udp"}} {
		s.Handler = dns.HandlerFunc(p.serve)
		s.TsigSecret = o.TsigSecret
		servers = append(servers, s)
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
		}
	})
	return p
}

// SetZone replaces a zone's records (SOA first).
func (p *Primary) SetZone(origin string, rrs []dns.RR) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.zones[dns.CanonicalName(origin)] = rrs
}

// Stats returns the most transfers that ran at once, the transfers
// started, and the first SOA query's time of each zone.
func (p *Primary) Stats() (maxConcurrent, transfers int, firstSOA map[string]time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := make(map[string]time.Time, len(p.firstSOA))
	for k, v := range p.firstSOA {
		first[k] = v
	}
	return p.maxRun, p.xfrs, first
}

// Sources returns how many requests came from each source address.
func (p *Primary) Sources() map[netip.Addr]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[netip.Addr]int, len(p.sources))
	for k, v := range p.sources {
		out[k] = v
	}
	return out
}

func (p *Primary) serve(w dns.ResponseWriter, q *dns.Msg) {
	if len(q.Question) != 1 {
		return
	}
	origin := dns.CanonicalName(q.Question[0].Name)
	p.mu.Lock()
	if ap, err := netip.ParseAddrPort(w.RemoteAddr().String()); err == nil {
		p.sources[ap.Addr().Unmap()]++
	}
	zone := p.zones[origin]
	every, per := p.o.Every, p.o.PerMsg
	p.mu.Unlock()
	sign := func(m *dns.Msg) {
		if t := q.IsTsig(); t != nil && w.TsigStatus() == nil {
			m.SetTsig(t.Hdr.Name, t.Algorithm, 300, time.Now().Unix())
		}
	}
	r := new(dns.Msg)
	r.SetReply(q)
	if zone == nil || (q.IsTsig() != nil && w.TsigStatus() != nil) {
		r.Rcode = dns.RcodeRefused
		if zone != nil {
			r.Rcode = dns.RcodeNotAuth
		}
		w.WriteMsg(r)
		return
	}
	r.Authoritative = true
	switch q.Question[0].Qtype {
	case dns.TypeSOA:
		p.mu.Lock()
		if _, ok := p.firstSOA[origin]; !ok {
			p.firstSOA[origin] = time.Now()
		}
		p.mu.Unlock()
		r.Answer = []dns.RR{zone[0]}
		sign(r)
		w.WriteMsg(r)
		return
	case dns.TypeAXFR, dns.TypeIXFR:
		if _, ok := w.RemoteAddr().(*net.TCPAddr); !ok {
			r.Answer = []dns.RR{zone[0]}
			w.WriteMsg(r)
			return
		}
	default:
		r.Rcode = dns.RcodeNotImplemented
		w.WriteMsg(r)
		return
	}
	p.mu.Lock()
	p.running++
	p.xfrs++
	p.maxRun = max(p.maxRun, p.running)
	p.mu.Unlock()
	// No longer running once the last message is on its way: the client
	// cannot have it, and start another transfer, before.
	done := sync.OnceFunc(func() {
		p.mu.Lock()
		p.running--
		p.mu.Unlock()
	})
	defer done()
	if per <= 0 {
		per = 100
	}
	ch := make(chan *dns.Envelope)
	tr := new(dns.Transfer)
	out := make(chan error, 1)
	go func() { out <- tr.Out(w, q, ch) }()
	all := append(append([]dns.RR(nil), zone...), zone[0])
	for i := 0; i < len(all); i += per {
		if i > 0 && every > 0 {
			time.Sleep(every)
		}
		if i+per >= len(all) {
			done()
		}
		select {
		case ch <- &dns.Envelope{RR: all[i:min(i+per, len(all))]}:
		case err := <-out: // the client went away
			_ = err
			w.Close()
			return
		}
	}
	close(ch)
	<-out
	w.Close()
}

// ZoneRRs parses text (one record per line, absolute names) into
// records, failing the test on a bad line.
func ZoneRRs(t testing.TB, text string) []dns.RR {
	t.Helper()
	var out []dns.RR
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if rr != nil {
			out = append(out, rr)
		}
	}
	return out
}
