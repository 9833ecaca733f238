package xfr

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/secondary"
)

// TestNotifySource: NOTIFYs leave from the notify source. The receiver
// is steer's own transfer service holding the zone as a secondary of
// 127.0.0.2: it accepts a NOTIFY only from that address, so one sent
// from 127.0.0.2 is acknowledged and one from the default source
// (127.0.0.1) is refused. A Notifier given Source sends from it.
func TestNotifySource(t *testing.T) {
	fastNotify(t)
	src := netip.MustParseAddr("127.0.0.2")
	if c, err := net.ListenPacket("udp", "127.0.0.2:0"); err != nil {
		t.Skipf("cannot bind 127.0.0.2: %v", err)
	} else {
		c.Close()
	}
	svc := New(Options{MinRefresh: time.Hour})
	t.Cleanup(svc.Close)
	svc.SetIn([]secondary.Zone{{Origin: origin, Primaries: []string{"127.0.0.2:1"}}}) // no primary answers there
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		from := netip.MustParseAddrPort(w.RemoteAddr().String()).Addr()
		if r := svc.Answer(req, from, ""); r != nil {
			w.WriteMsg(r)
		}
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	addr := pc.LocalAddr().String()
	soa := soaAt(t, 3)

	if err := Notify(context.Background(), origin, soa, Target{Addr: addr, Source: src}, 3); err != nil {
		t.Fatalf("from 127.0.0.2, the zone's primary: %v", err)
	}
	err = Notify(context.Background(), origin, soa, Target{Addr: addr}, 3)
	var re *RcodeError
	if !errors.As(err, &re) || re.Rcode != dns.RcodeRefused {
		t.Fatalf("from the default source: %v, want REFUSED (the receiver checks the source)", err)
	}

	results := make(chan error, 1)
	n := &Notifier{Source: src, Result: func(_ string, _ Target, _ uint32, err error) { results <- err }}
	t.Cleanup(n.Close)
	n.Send(origin, soa, []Target{{Addr: addr}})
	select {
	case err := <-results:
		if err != nil {
			t.Fatalf("Notifier with Source 127.0.0.2: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Notifier's NOTIFY got no answer")
	}
}
