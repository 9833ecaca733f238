package dnsserver

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/snapshot"
)

// slowOut is a Transfers whose Transfer writes n messages.
type slowOut struct{ n int }

func (s slowOut) Transfer(w dns.ResponseWriter, req *dns.Msg, _ netip.Addr) error {
	for i := range s.n {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeTXT, Class: dns.ClassINET},
			Txt: []string{string(rune('a' + i))}}}
		if err := w.WriteMsg(m); err != nil {
			return err
		}
	}
	return nil
}
func (slowOut) Answer(*dns.Msg, netip.Addr, string) *dns.Msg { return nil }
func (slowOut) Refused(*dns.Msg, netip.Addr, error)          {}

// TestTransferOutDeadlines: a transfer out to a secondary that takes each
// message within the idle timeout goes on past it in total (the whole
// transfer once had one deadline); a secondary that stops reading is
// dropped after the idle timeout; the overall limit ends even a steady
// one.
func TestTransferOutDeadlines(t *testing.T) {
	oldIdle, oldMax := transferIdleOut, transferMaxOut
	t.Cleanup(func() { transferIdleOut, transferMaxOut = oldIdle, oldMax })
	transferIdleOut, transferMaxOut = 300*time.Millisecond, 10*time.Second
	h := NewHandler(&snapshot.Snapshot{})
	h.SetTransfers(slowOut{n: 8})
	req := new(dns.Msg)
	req.SetAxfr("example.com.")
	raw, _ := req.Pack()

	// run transfers over a pipe (no buffer: a write waits for its read)
	// whose reader takes a message every every, stopping after stopAfter.
	run := func(every time.Duration, stopAfter int) (int, error, time.Duration) {
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		got := make(chan int, 1)
		go func() {
			n := 0
			for n < stopAfter {
				if _, err := dnstest.ReadFrame(c2); err != nil {
					break
				}
				n++
				time.Sleep(every)
			}
			got <- n
			if n == stopAfter {
				time.Sleep(2 * time.Second) // stalled, not gone
			}
		}()
		start := time.Now()
		err := h.transfer(c1, raw, netip.MustParseAddr("127.0.0.1"))
		took := time.Since(start)
		c1.Close()
		return <-got, err, took
	}

	n, err, took := run(150*time.Millisecond, 100)
	if err != nil || n != 8 || took < 900*time.Millisecond {
		t.Fatalf("steady reader: %d messages in %v, %v; want all 8 over more than the idle timeout", n, took, err)
	}
	n, err, took = run(0, 3)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || took > 2*time.Second {
		t.Fatalf("stalled reader after %d messages: %v after %v; want a timeout after about 300 ms", n, err, took)
	}
	transferMaxOut = 500 * time.Millisecond
	n, err, _ = run(150*time.Millisecond, 100)
	if !errors.As(err, &ne) || !ne.Timeout() || n >= 8 {
		t.Fatalf("past the overall limit: %d messages, %v; want a timeout before the end", n, err)
	}
}
