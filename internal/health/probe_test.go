package health

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/internal/dnstest"
)

func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	w := newWebServer(t, false)
	m := newManager(t)
	checks := map[string]Check{"web": {Type: "http", Port: w.port(t), Path: "/healthz", Host: "shop.example.com", Expect: []int{200, 204}, Interval: iv, Timeout: to, Rise: 2, Fall: 2}}
	k := Key{localhost, "web"}
	m.Apply(checks, []Key{k})
	s := waitStatus(t, m, k, Up, time.Second)
	if s.Reason != "HTTP 200" || s.LastCheck.IsZero() || s.LastLatency <= 0 {
		t.Errorf("up state %+v", s)
	}
	if h := w.lastHost.Load(); h != "shop.example.com" {
		t.Errorf("Host header %v, want shop.example.com", h)
	}
	w.code.Store(204)
	time.Sleep(3 * iv)
	if !m.Usable(k) {
		t.Error("204 is expected but target unusable")
	}
	w.code.Store(503)
	s = waitStatus(t, m, k, Down, time.Second)
	if s.Reason != "HTTP 503" || m.Usable(k) {
		t.Errorf("down state %+v, usable %v", s, m.Usable(k))
	}
	w.code.Store(200)
	waitStatus(t, m, k, Up, time.Second)
}

func TestHTTPRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var followed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) })
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Store(true) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	m := newManager(t)
	k := Key{localhost, "web"}
	m.Apply(map[string]Check{"web": {Type: "http", Port: port(t, srv.Listener.Addr().String()), Interval: iv, Timeout: to, Fall: 1}}, []Key{k})
	if s := waitStatus(t, m, k, Down, time.Second); s.Reason != "HTTP 302" {
		t.Errorf("reason %q, want HTTP 302", s.Reason)
	}
	if followed.Load() {
		t.Error("redirect followed")
	}
}

func TestHTTPBody(t *testing.T) {
	t.Parallel()
	w := newWebServer(t, false)
	w.body.Store("status: ok\n")
	m := newManager(t)
	k := Key{localhost, "body"}
	m.Apply(map[string]Check{"body": {Type: "http", Port: w.port(t), BodyContains: "ok", Interval: iv, Timeout: to, Fall: 2}}, []Key{k})
	waitStatus(t, m, k, Up, time.Second)
	w.body.Store("status: sick\n")
	if s := waitStatus(t, m, k, Down, time.Second); s.Reason != `body lacks "ok"` {
		t.Errorf("reason %q", s.Reason)
	}
	// Only the first 64 KiB count.
	w.body.Store(strings.Repeat("x", maxBody) + "ok")
	time.Sleep(4 * iv)
	if s := m.Snapshot()[k]; s.Status != Down || s.Reason != `body lacks "ok"` {
		t.Errorf("body past 64 KiB counted: %+v", s)
	}
}

func TestHTTPS(t *testing.T) {
	t.Parallel()
	w := newWebServer(t, true)
	p := w.port(t)
	m := newManager(t)
	insecure := Key{localhost, "insecure"}
	strict := Key{localhost, "strict"}
	m.Apply(map[string]Check{
		// TLS handshakes under -race need more than 50ms.
		"insecure": {Type: "https", Port: p, Host: "shop.example.com", InsecureSkipVerify: true, Interval: 10 * iv, Timeout: 10 * to, Fall: 1},
		"strict":   {Type: "https", Port: p, Host: "shop.example.com", Interval: 10 * iv, Timeout: 10 * to, Fall: 1},
	}, []Key{insecure, strict})
	if s := waitStatus(t, m, insecure, Up, 3*time.Second); s.Reason != "HTTP 200" {
		t.Errorf("insecure: %+v", s)
	}
	var s State
	dnstest.WaitFor(t, 3*time.Second, "down for a certificate error", func() bool {
		s = m.Snapshot()[strict]
		return s.Status == Down && strings.Contains(s.Reason, "certificate")
	})
	if m.Usable(strict) {
		t.Errorf("strict usable: %+v", s)
	}
	if h := w.lastHost.Load(); h != "shop.example.com" {
		t.Errorf("Host header %v", h)
	}
}

// TestHTTPSServerName checks that SNI is the check's Host.
func TestHTTPSServerName(t *testing.T) {
	t.Parallel()
	var sni atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sni.Store(r.TLS.ServerName)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := Check{Type: "https", Port: port(t, srv.Listener.Addr().String()), Host: "shop.example.com", InsecureSkipVerify: true, Interval: 4 * iv, Timeout: 4 * to}.WithDefaults()
	ok, reason := newProber(c, localhost, nil)(context.Background())
	if !ok || sni.Load() != "shop.example.com" {
		t.Errorf("probe %v %q, SNI %v", ok, reason, sni.Load())
	}
}

func TestTCPDownBoundAndBack(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	accept := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}
	go accept(ln)
	const fall, rise = 3, 2
	m := newManager(t)
	k := Key{localhost, "tcp"}
	m.Apply(map[string]Check{"tcp": {Type: "tcp", Port: port(t, addr), Interval: iv, Timeout: to, Rise: rise, Fall: fall}}, []Key{k})
	waitStatus(t, m, k, Up, time.Second)

	closed := time.Now()
	ln.Close()
	s := waitStatus(t, m, k, Down, 2*time.Second)
	took := s.Since.Sub(closed)
	bound := iv*fall + to
	// The transition is stamped when recorded; allow a little for scheduling.
	if took > bound+20*time.Millisecond {
		t.Errorf("down after %s, bound interval×fall+timeout = %s", took, bound)
	}
	if took < iv*(fall-1)-10*time.Millisecond {
		t.Errorf("down after %s: fewer than fall=%d checks?", took, fall)
	}
	if !strings.Contains(s.Reason, "connection refused") {
		t.Errorf("reason %q", s.Reason)
	}
	if m.Usable(k) {
		t.Error("down target usable")
	}

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port reused meanwhile: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go accept(ln)
	reopened := time.Now()
	s = waitStatus(t, m, k, Up, 2*time.Second)
	if took := s.Since.Sub(reopened); took < iv*(rise-1)-10*time.Millisecond || took > iv*rise+to+20*time.Millisecond {
		t.Errorf("up %s after reopening, want about rise=%d checks", took, rise)
	}
	if s.Reason != "connected" {
		t.Errorf("reason %q", s.Reason)
	}
}

// dnsServer starts a miekg/dns server on a UDP port answering example.com
// SOA with rcode, and records whether queries had RD set.
func dnsServer(t *testing.T, rcode *atomic.Int64, sawRD *atomic.Bool) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	soa, err := dns.NewRR("example.com. 300 IN SOA ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 300")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		if q.RecursionDesired {
			sawRD.Store(true)
		}
		r := new(dns.Msg)
		r.SetReply(q)
		r.Authoritative = true
		r.Rcode = int(rcode.Load())
		if r.Rcode == dns.RcodeSuccess && q.Question[0].Qtype == dns.TypeSOA {
			r.Answer = append(r.Answer, soa)
		}
		w.WriteMsg(r)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return port(t, pc.LocalAddr().String())
}

func TestDNS(t *testing.T) {
	t.Parallel()
	var rcode atomic.Int64
	var sawRD atomic.Bool
	p := dnsServer(t, &rcode, &sawRD)
	m := newManager(t)
	k := Key{localhost, "dns"}
	m.Apply(map[string]Check{"dns": {Type: "dns", Port: p, QName: "example.com", QType: dns.TypeSOA, Interval: iv, Timeout: to, Fall: 2}}, []Key{k})
	if s := waitStatus(t, m, k, Up, time.Second); s.Reason != "rcode NOERROR" {
		t.Errorf("reason %q", s.Reason)
	}
	rcode.Store(dns.RcodeServerFailure)
	if s := waitStatus(t, m, k, Down, time.Second); s.Reason != "rcode SERVFAIL" {
		t.Errorf("reason %q", s.Reason)
	}
	if sawRD.Load() {
		t.Error("query sent with RD=1")
	}
}

func TestDNSNoServer(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := port(t, pc.LocalAddr().String())
	t.Cleanup(func() { pc.Close() }) // bound but never answering: timeouts
	c := Check{Type: "dns", Port: p, QName: "example.com", Interval: iv, Timeout: to}.WithDefaults()
	start := time.Now()
	ok, reason := newProber(c, localhost, nil)(context.Background())
	if ok || reason != "timeout after 50ms" {
		t.Errorf("probe %v %q", ok, reason)
	}
	if d := time.Since(start); d > 4*to {
		t.Errorf("probe took %s with timeout %s", d, to)
	}
}

// TestFlapping: a server failing every other check never goes down with
// fall 2; and transitions happen on exactly the fall-th failure and the
// rise-th success, read in OnChange (which runs on the checker goroutine
// before its next check).
func TestFlappingAndExactCounts(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	var script atomic.Value // func(request number) status code
	script.Store(func(i int64) int {
		if i%2 == 0 {
			return 500
		}
		return 200
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.WriteHeader(script.Load().(func(int64) int)(i))
	}))
	t.Cleanup(srv.Close)
	m := newManager(t)
	k := Key{localhost, "flap"}
	type change struct {
		status Status
		req    int64
	}
	changes := make(chan change, 64)
	var mu sync.Mutex
	last := Unknown
	m.OnChange(func() { // record observed transitions only
		mu.Lock()
		defer mu.Unlock()
		if s := m.Snapshot()[k].Status; s != last {
			last = s
			changes <- change{s, n.Load()}
		}
	})
	m.Apply(map[string]Check{"flap": {Type: "http", Port: port(t, srv.Listener.Addr().String()), Interval: iv, Timeout: to, Rise: 3, Fall: 2}}, []Key{k})
	if c := <-changes; c.status != Up || c.req != 1 {
		t.Fatalf("first change %+v, want up after request 1", c)
	}
	dnstest.WaitFor(t, 2*time.Second, "20 requests", func() bool { return n.Load() >= 20 })
	select {
	case c := <-changes:
		t.Fatalf("flapping with fall 2 changed status: %+v", c)
	default:
	}

	// From request base+1 on: fail, fail (down on the 2nd), pass, pass, fail,
	// pass, pass, pass (up on the 3rd consecutive), then pass.
	base := n.Load() + 3 // leave room for a request racing the script change
	seq := []int{500, 500, 200, 200, 500, 200, 200, 200}
	script.Store(func(i int64) int {
		if j := i - base; j >= 0 && j < int64(len(seq)) {
			return seq[j]
		}
		return 200
	})
	c := <-changes
	if c.status != Down || c.req != base+1 {
		t.Errorf("down change %+v, want after request %d", c, base+1)
	}
	c = <-changes
	if c.status != Up || c.req != base+7 {
		t.Errorf("up change %+v, want after request %d", c, base+7)
	}
}
