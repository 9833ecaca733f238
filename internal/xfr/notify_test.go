package xfr

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

var testKey = &tsig.Key{Name: keyName, Algorithm: dns.HmacSHA256, Secret: secret}

// responder is a UDP NOTIFY receiver: it verifies each NOTIFY's TSIG with
// dns.TsigVerify (when signed), counts it, and answers per mode.
type responder struct {
	addr  string
	mode  atomic.Value // "ack", "refused", "silent", "slow"
	count atomic.Int32
	bad   atomic.Int32 // NOTIFYs that failed checks

	mu      sync.Mutex
	serials []uint32
}

func newResponder(t *testing.T, mode string) *responder {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &responder{addr: pc.LocalAddr().String()}
	r.mode.Store(mode)
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		var first *dns.Msg
		var firstMAC string
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			raw := append([]byte(nil), buf[:n]...)
			m := new(dns.Msg)
			if m.Unpack(raw) != nil {
				r.bad.Add(1)
				continue
			}
			var mac string
			if tt := m.IsTsig(); tt != nil {
				mac = tt.MAC
				if err := dns.TsigVerify(raw, secret, "", false); err != nil {
					r.bad.Add(1)
					continue
				}
			}
			soa, _ := func() (*dns.SOA, bool) {
				if len(m.Answer) == 1 {
					s, ok := m.Answer[0].(*dns.SOA)
					return s, ok
				}
				return nil, false
			}()
			if m.Opcode != dns.OpcodeNotify || !m.Authoritative || len(m.Question) != 1 || m.Question[0].Qtype != dns.TypeSOA || soa == nil {
				r.bad.Add(1)
				continue
			}
			r.count.Add(1)
			r.mu.Lock()
			r.serials = append(r.serials, soa.Serial)
			r.mu.Unlock()
			mode := r.mode.Load().(string)
			if mode == "silent" {
				continue
			}
			if mode == "late" {
				// Hold the first NOTIFY; answer it when the retry comes.
				if first == nil {
					first, firstMAC = m, mac
					continue
				}
				m, mac = first, firstMAC
			}
			if mode == "slow" {
				time.Sleep(200 * time.Millisecond)
			}
			resp := new(dns.Msg)
			resp.SetReply(m)
			if mode == "refused" {
				resp.Rcode = dns.RcodeRefused
			}
			// A stray datagram first: wrong ID, which Notify must skip.
			stray := resp.Copy()
			stray.Id++
			if b, err := stray.Pack(); err == nil {
				pc.WriteTo(b, from)
			}
			var b []byte
			if tt := m.IsTsig(); tt != nil {
				resp.SetTsig(tt.Hdr.Name, tt.Algorithm, 300, time.Now().Unix())
				b, _, err = dns.TsigGenerate(resp, secret, mac, false)
			} else {
				b, err = resp.Pack()
			}
			if err == nil {
				pc.WriteTo(b, from)
			}
		}
	}()
	return r
}

func (r *responder) got() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint32(nil), r.serials...)
}

func fastNotify(t *testing.T) {
	old := notifyInterval
	notifyInterval = 50 * time.Millisecond
	t.Cleanup(func() { notifyInterval = old })
}

func TestNotify(t *testing.T) {
	fastNotify(t)
	soa := soaAt(t, 7)
	ctx := context.Background()
	for _, key := range []*tsig.Key{nil, testKey} {
		r := newResponder(t, "ack")
		if err := Notify(ctx, origin, soa, Target{Addr: r.addr, Key: key}, 3); err != nil {
			t.Fatalf("signed=%v ack: %v", key != nil, err)
		}
		r.mode.Store("refused")
		err := Notify(ctx, origin, soa, Target{Addr: r.addr, Key: key}, 3)
		var re *RcodeError
		if !errors.As(err, &re) || re.Rcode != dns.RcodeRefused || !strings.HasSuffix(err.Error(), ": REFUSED") {
			t.Fatalf("signed=%v refused: %v", key != nil, err)
		}
		if r.count.Load() != 2 || r.bad.Load() != 0 || r.got()[0] != 7 {
			t.Fatalf("signed=%v: responder saw %d good, %d bad", key != nil, r.count.Load(), r.bad.Load())
		}
	}
	// A response signed with another secret is not accepted.
	r := newResponder(t, "ack")
	other := &tsig.Key{Name: keyName, Algorithm: dns.HmacSHA256, Secret: "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdCBrZXkh"}
	if err := Notify(ctx, origin, soa, Target{Addr: r.addr, Key: other}, 1); err == nil {
		t.Fatal("NOTIFY with a key the responder rejects succeeded")
	}
}

func TestNotifyRetries(t *testing.T) {
	fastNotify(t)
	soa := soaAt(t, 7)
	r := newResponder(t, "silent")
	start := time.Now()
	err := Notify(context.Background(), origin, soa, Target{Addr: r.addr, Key: testKey}, 4)
	el := time.Since(start)
	// 50 + 100 + 200 + 400 ms.
	if err == nil || r.count.Load() != 4 || el < 700*time.Millisecond || el > 2*time.Second {
		t.Fatalf("silent: %v after %v, %d NOTIFYs", err, el, r.count.Load())
	}
	t.Logf("silent, 4 tries: %v after %v", err, el)
	// ctx bounds it: 10 tries would take 51 s.
	r = newResponder(t, "silent")
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = Notify(ctx, origin, soa, Target{Addr: r.addr}, 10)
	el = time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || el > time.Second || r.count.Load() != 3 {
		t.Fatalf("bounded: %v after %v, %d NOTIFYs", err, el, r.count.Load())
	}
	// Nobody listening (ICMP unreachable) is retried on schedule too.
	pc, _ := net.ListenPacket("udp", "127.0.0.1:0")
	dead := pc.LocalAddr().String()
	pc.Close()
	start = time.Now()
	if err := Notify(context.Background(), origin, soa, Target{Addr: dead}, 3); err == nil || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("closed port: %v after %v", err, time.Since(start))
	}
	// The answer to the first attempt arrives during the second: accepted
	// (its TSIG is over the first attempt's MAC, which differs from the
	// retry's only when they were signed in different seconds: hence the
	// interval over 1 s here).
	notifyInterval = 1100 * time.Millisecond
	r = newResponder(t, "late")
	err = Notify(context.Background(), origin, soa, Target{Addr: r.addr, Key: testKey}, 3)
	notifyInterval = 50 * time.Millisecond
	if err != nil || r.count.Load() != 2 {
		t.Fatalf("late answer: %v, %d NOTIFYs", err, r.count.Load())
	}
	// Then it answers: the retry gets through.
	r = newResponder(t, "silent")
	go func() { time.Sleep(120 * time.Millisecond); r.mode.Store("ack") }()
	if err := Notify(context.Background(), origin, soa, Target{Addr: r.addr, Key: testKey}, 5); err != nil || r.count.Load() < 2 {
		t.Fatalf("late ack: %v, %d NOTIFYs", err, r.count.Load())
	}
}

func TestNotifier(t *testing.T) {
	// The default 1 s interval: slow's 200 ms answer needs no retry.
	slow := newResponder(t, "slow")
	other := newResponder(t, "ack")
	type result struct {
		addr   string
		serial uint32
		err    error
	}
	results := make(chan result, 100)
	n := &Notifier{Tries: 2, Result: func(zone string, tg Target, serial uint32, err error) {
		if zone != origin {
			t.Errorf("zone %q", zone)
		}
		results <- result{tg.Addr, serial, err}
	}}
	targets := []Target{{Addr: slow.addr, Key: testKey}, {Addr: other.addr}}
	n.Send(origin, soaAt(t, 1), targets)
	time.Sleep(50 * time.Millisecond) // serial 1 is in flight at slow
	for s := uint32(2); s <= 5; s++ {
		n.Send(origin, soaAt(t, s), targets[:1])
	}
	n.Send(origin, soaAt(t, 3), targets[:1]) // older than pending 5: ignored
	deadline := time.After(5 * time.Second)
	var got []result
	for len(got) < 3 {
		select {
		case r := <-results:
			got = append(got, r)
		case <-deadline:
			t.Fatalf("results %v", got)
		}
	}
	n.Close()
	close(results)
	for r := range results {
		got = append(got, r)
	}
	var slowSerials []uint32
	for _, r := range got {
		if r.err != nil {
			t.Fatalf("%v", r)
		}
		if r.addr == slow.addr {
			slowSerials = append(slowSerials, r.serial)
		}
	}
	if len(got) != 3 || len(slowSerials) != 2 || slowSerials[0] != 1 || slowSerials[1] != 5 {
		t.Fatalf("results %v", got)
	}
	if s := slow.got(); len(s) != 2 || s[1] != 5 {
		t.Fatalf("slow responder saw serials %v", s)
	}
	// After Close, Send does nothing; Close again is fine.
	n.Send(origin, soaAt(t, 9), targets)
	n.Close()
	if len(other.got()) != 1 {
		t.Fatalf("other saw %v", other.got())
	}
}

// TestNotifierInFlight: the same or an older serial than the one in flight
// is not sent again.
func TestNotifierInFlight(t *testing.T) {
	r := newResponder(t, "slow")
	var calls atomic.Int32
	n := &Notifier{Result: func(_ string, _ Target, _ uint32, err error) {
		if err != nil {
			t.Error(err)
		}
		calls.Add(1)
	}}
	tg := []Target{{Addr: r.addr, Key: testKey}}
	n.Send(origin, soaAt(t, 7), tg)
	time.Sleep(50 * time.Millisecond)
	n.Send(origin, soaAt(t, 7), tg)
	n.Send(origin, soaAt(t, 6), tg)
	deadline := time.Now().Add(3 * time.Second)
	for calls.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	n.Close()
	if calls.Load() != 1 || len(r.got()) != 1 {
		t.Fatalf("%d results, responder saw %v", calls.Load(), r.got())
	}
}

func TestNotifierCloseStopsRetries(t *testing.T) {
	r := newResponder(t, "silent")
	var calls atomic.Int32
	var lastErr atomic.Value
	n := &Notifier{Result: func(_ string, _ Target, _ uint32, err error) { calls.Add(1); lastErr.Store(err) }}
	n.Send(origin, soaAt(t, 1), []Target{{Addr: r.addr}})
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	n.Close()
	if time.Since(start) > time.Second || calls.Load() != 1 || !errors.Is(lastErr.Load().(error), context.Canceled) {
		t.Fatalf("Close took %v, %d results, %v", time.Since(start), calls.Load(), lastErr.Load())
	}
}
