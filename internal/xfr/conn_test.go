package xfr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/tsig"
)

// rawPrimary is a test primary the way steer's own server is built: a TCP
// listener reading length-prefixed requests itself and answering through
// tsig.NewConnWriter; UDP (SOA queries, IXFR over UDP) is a miekg dns.Server on
// the same port. Its zone can be changed (set), which records a delta in
// its journal; it logs every transfer request it gets.
type rawPrimary struct {
	addr       string
	requireKey bool
	errs       chan error

	mu   sync.Mutex
	zone []dns.RR // SOA first, no trailing SOA
	j    *Journal
	log  []string
}

func newRawPrimary(t *testing.T, zone []dns.RR, requireKey bool) *rawPrimary {
	t.Helper()
	p := &rawPrimary{zone: zone, j: NewJournal(4), requireKey: requireKey, errs: make(chan error, 16)}
	secrets := map[string]string{keyName: secret}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := net.ListenPacket("udp", tl.Addr().String())
	if err != nil {
		tl.Close()
		t.Fatal(err)
	}
	p.addr = tl.Addr().String()
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns[c] = true
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				for {
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					var l [2]byte
					if _, err := io.ReadFull(c, l[:]); err != nil {
						return
					}
					b := make([]byte, binary.BigEndian.Uint16(l[:]))
					if _, err := io.ReadFull(c, b); err != nil {
						return
					}
					w, req, err := tsig.NewConnWriter(c, b, tsig.NewKeyring(*testKey))
					if err != nil {
						p.report(err)
						return
					}
					p.handle(w, req)
				}
			}()
		}
	}()
	s := &dns.Server{PacketConn: ul, Handler: dns.HandlerFunc(p.handle), TsigSecret: secrets}
	started := make(chan struct{})
	s.NotifyStartedFunc = func() { close(started) }
	go s.ActivateAndServe()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		tl.Close()
		connsMu.Lock()
		for c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *rawPrimary) report(err error) {
	select {
	case p.errs <- err:
	default:
	}
}

// set makes zone current, journalling the change from the previous one.
func (p *rawPrimary) set(zone []dns.RR) Delta {
	p.mu.Lock()
	defer p.mu.Unlock()
	del, add := Diff(p.zone, zone)
	d := Delta{From: p.zone[0].(*dns.SOA), To: zone[0].(*dns.SOA), Del: del, Add: add}
	p.j.Add(d)
	p.zone = zone
	return d
}

// replace makes zone current with the journal emptied, as after a
// restart: an IXFR for an older serial gets the AXFR-style answer.
func (p *rawPrimary) replace(zone []dns.RR) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.j = NewJournal(4)
	p.zone = zone
}

func (p *rawPrimary) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *rawPrimary) handle(w dns.ResponseWriter, r *dns.Msg) {
	p.mu.Lock()
	zone, j := p.zone, p.j
	p.mu.Unlock()
	signed := r.IsTsig() != nil
	if len(r.Question) == 1 && (r.Question[0].Qtype == dns.TypeAXFR || r.Question[0].Qtype == dns.TypeIXFR) {
		entry := fmt.Sprintf("%s from %s over %s signed=%v", dns.TypeToString[r.Question[0].Qtype], w.RemoteAddr(), w.RemoteAddr().Network(), signed)
		if len(r.Ns) > 0 {
			if soa, ok := r.Ns[0].(*dns.SOA); ok {
				entry += fmt.Sprintf(" serial=%d", soa.Serial)
			}
		}
		p.mu.Lock()
		p.log = append(p.log, entry)
		p.mu.Unlock()
		if p.requireKey && !signed {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeRefused)
			w.WriteMsg(m)
			return
		}
		var err error
		if r.Question[0].Qtype == dns.TypeAXFR {
			err = Serve(w, r, append(append([]dns.RR(nil), zone...), zone[0]))
		} else {
			var rrs []dns.RR
			if len(r.Ns) > 0 {
				if soa, ok := r.Ns[0].(*dns.SOA); ok {
					rrs = IXFR(zone, soa.Serial, j)
				}
			}
			err = ServeIXFR(w, r, rrs)
		}
		if err != nil {
			p.report(err)
		}
		return
	}
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeRefused)
	if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeSOA {
		m.SetReply(r)
		m.Authoritative = true
		m.Answer = []dns.RR{zone[0]}
	}
	if t := r.IsTsig(); t != nil && w.TsigStatus() == nil {
		m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, 0)
	}
	w.WriteMsg(m)
}

func TestConnWriterTsigStatus(t *testing.T) {
	keys := tsig.NewKeyring(*testKey)
	pack := func(name, sec, alg string) []byte {
		m := axfrReq(false)
		if name == "" {
			b, _ := m.Pack()
			return b
		}
		m.SetTsig(name, alg, 300, time.Now().Unix())
		b, _, err := dns.TsigGenerate(m, sec, "", false)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	for _, tc := range []struct {
		name, key, secret, alg string
		want                   error
	}{
		{"unsigned", "", "", "", nil},
		{"good", keyName, secret, dns.HmacSHA256, nil},
		{"upper-case key name", "XFR-Key.", secret, dns.HmacSHA256, nil},
		{"unknown key", "other-key.", secret, dns.HmacSHA256, dns.ErrSecret},
		{"wrong secret", keyName, "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdCBrZXkh", dns.HmacSHA256, dns.ErrSig},
		// The key is hmac-sha256: the same secret under another
		// algorithm is not the key (RFC 8945 §5.2.1).
		{"same secret, hmac-sha512", keyName, secret, dns.HmacSHA512, dns.ErrKeyAlg},
		{"same secret, hmac-sha1", keyName, secret, dns.HmacSHA1, dns.ErrKeyAlg},
	} {
		w, req, err := tsig.NewConnWriter(c1, pack(tc.key, tc.secret, tc.alg), keys)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if req.Question[0].Qtype != dns.TypeAXFR {
			t.Fatalf("%s: unpacked %v", tc.name, req.Question)
		}
		if got := w.TsigStatus(); !errors.Is(got, tc.want) {
			t.Fatalf("%s: TsigStatus %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, _, err := tsig.NewConnWriter(c1, []byte{1, 2, 3}, keys); err == nil {
		t.Fatal("garbage request unpacked")
	}
}

// TestConnWriterChain checks the signing chain message by message: the
// first response over the request MAC, then each over the previous MAC
// with timers only, as a secondary verifies them.
func TestConnWriterChain(t *testing.T) {
	req := axfrReq(true)
	b, reqMAC, err := dns.TsigGenerate(req, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := tcpPair(t)
	w, r, err := tsig.NewConnWriter(c1, b, tsig.NewKeyring(*testKey))
	if err != nil || w.TsigStatus() != nil {
		t.Fatal(err, w.TsigStatus())
	}
	rrs := zone(3000)
	done := make(chan error, 1)
	go func() { done <- Serve(w, r, rrs) }()
	co := &dns.Conn{Conn: c2}
	mac := reqMAC
	var got []dns.RR
	for i := 0; ; i++ {
		raw, err := co.ReadMsgHeader(nil)
		if err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(raw); err != nil || m.IsTsig() == nil {
			t.Fatalf("message %d: %v, unsigned=%v", i, err, m.IsTsig() == nil)
		}
		if err := dns.TsigVerify(raw, secret, mac, i > 0); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		mac = m.IsTsig().MAC
		got = append(got, m.Answer...)
		if len(got) == len(rrs) {
			if i < 2 {
				t.Fatalf("> 64 KiB zone in %d messages", i+1)
			}
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sameRRs(t, got, rrs)
}

// tcpPair returns both ends of a loopback TCP connection (Serve refuses
// anything whose remote address is not TCP, so net.Pipe will not do).
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestConnWriterMiekgTransfer(t *testing.T) {
	rrs := zone(3000)
	p := newRawPrimary(t, rrs[:len(rrs)-1], true)
	got, n, err := transferIn(t, p.addr, true)
	if err != nil {
		t.Fatal(err)
	}
	sameRRs(t, got, rrs)
	if n < 3 {
		t.Fatalf("> 64 KiB zone in %d messages", n)
	}
	if _, _, err := transferIn(t, p.addr, false); err == nil {
		t.Fatal("unsigned AXFR accepted by a primary requiring the key")
	}
	t.Logf("%d messages, each TSIG verified by dns.Transfer", n)
}

// rawExchange sends m (signed with name/sec when name is set) over TCP and
// returns the first response without verifying it.
func rawExchange(t *testing.T, addr string, m *dns.Msg, name, sec string) *dns.Msg {
	t.Helper()
	var b []byte
	var err error
	if name != "" {
		m.SetTsig(name, dns.HmacSHA256, 300, time.Now().Unix())
		b, _, err = dns.TsigGenerate(m, sec, "", false)
	} else {
		b, err = m.Pack()
	}
	if err != nil {
		t.Fatal(err)
	}
	raw, err := dnstest.ExchangeRaw("tcp", netip.MustParseAddrPort(addr), b)
	if err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(raw); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConnWriterBadKey(t *testing.T) {
	rrs := zone(10)
	p := newRawPrimary(t, rrs[:len(rrs)-1], true)
	for _, tc := range []struct {
		name, key, secret string
		want              uint16
	}{
		{"wrong secret", keyName, "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdCBrZXkh", dns.RcodeBadSig},
		{"unknown key", "other-key.", secret, dns.RcodeBadKey},
	} {
		for _, q := range []*dns.Msg{axfrReq(false), new(dns.Msg).SetIxfr(origin, serial-1, "ns1."+origin, "hostmaster."+origin)} {
			r := rawExchange(t, p.addr, q, tc.key, tc.secret)
			tr := r.IsTsig()
			if r.Rcode != dns.RcodeNotAuth || len(r.Answer) != 0 || tr == nil || tr.Error != tc.want || tr.MAC != "" {
				t.Fatalf("%s %s: %v", tc.name, dns.TypeToString[q.Question[0].Qtype], r)
			}
			select {
			case err := <-p.errs:
				t.Logf("%s %s: %s/%s; server: %v", tc.name, dns.TypeToString[q.Question[0].Qtype], dns.RcodeToString[r.Rcode], dns.RcodeToString[int(tr.Error)], err)
			case <-time.After(2 * time.Second):
				t.Fatal("no server error")
			}
		}
	}
	// And through miekg's client, which must fail the transfer.
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
		TsigSecret: map[string]string{keyName: "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdCBrZXkh"}}
	ch, err := tr.In(axfrReq(true), p.addr)
	if err != nil {
		t.Fatal(err)
	}
	var last error
	n := 0
	for e := range ch {
		n += len(e.RR)
		last = e.Error
	}
	if n != 0 || last == nil {
		t.Fatalf("wrong key via dns.Transfer: %d records, %v", n, last)
	}
}
