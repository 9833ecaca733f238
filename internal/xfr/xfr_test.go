package xfr

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/peertest"
)

const (
	keyName = "xfr-key."
	secret  = "c3RlZXIgeGZyIHRlc3Qga2V5IDMyIGJ5dGVzIGxvbmcu" // base64, fixed
	origin  = "xfr.example."
	serial  = 2026120101
)

// zone returns SOA, NS, n A/TXT records, SOA.
func zone(n int) []dns.RR {
	mk := func(s string) dns.RR {
		rr, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		return rr
	}
	soa := mk(fmt.Sprintf("%s 3600 IN SOA ns1.%s hostmaster.%s %d 3600 600 86400 300", origin, origin, origin, serial))
	rrs := []dns.RR{soa, mk(fmt.Sprintf("%s 3600 IN NS ns1.%s", origin, origin)), mk(fmt.Sprintf("ns1.%s 3600 IN A 192.0.2.53", origin))}
	for i := 0; len(rrs) < n-1; i++ {
		if i%2 == 0 {
			rrs = append(rrs, mk(fmt.Sprintf("host%d.%s 300 IN A 198.51.%d.%d", i, origin, i/256%256, i%256)))
		} else {
			rrs = append(rrs, mk(fmt.Sprintf("host%d.%s 300 IN TXT \"record %d of the test zone, padded to make it bigger\"", i, origin, i)))
		}
	}
	return append(rrs, dns.Copy(soa))
}

func axfrReq(signed bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetAxfr(origin)
	if signed {
		m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	}
	return m
}

func sameRRs(t *testing.T, got, want []dns.RR) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !dns.IsDuplicate(got[i], want[i]) {
			t.Fatalf("record %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestMessagesSplit(t *testing.T) {
	rrs := zone(3000)
	total := 0
	for _, rr := range rrs {
		total += dns.Len(rr)
	}
	if total < 150_000 {
		t.Fatalf("test zone only %d bytes", total)
	}
	for _, signed := range []bool{false, true} {
		req := axfrReq(signed)
		for _, limit := range []int{0, 16000} {
			msgs, err := Messages(req, rrs, limit)
			if err != nil {
				t.Fatal(err)
			}
			max := limit
			if max == 0 {
				max = DefaultLimit
			}
			if len(msgs) < total/max {
				t.Fatalf("%d messages for %d bytes at limit %d", len(msgs), total, max)
			}
			var all []dns.RR
			for i, m := range msgs {
				if m.Id != req.Id || !m.Authoritative || m.Rcode != dns.RcodeSuccess || len(m.Question) != 1 || m.Question[0] != req.Question[0] {
					t.Fatalf("message %d header/question: %v", i, m.MsgHdr)
				}
				if signed {
					m = m.Copy()
					m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
					b, _, err := dns.TsigGenerate(m, secret, "", i > 0)
					if err != nil {
						t.Fatal(err)
					}
					if len(b) > max {
						t.Fatalf("signed message %d is %d bytes > %d", i, len(b), max)
					}
				} else if b, err := m.Pack(); err != nil || len(b) > max {
					t.Fatalf("message %d: %d bytes > %d (%v)", i, len(b), max, err)
				}
				all = append(all, m.Answer...)
			}
			sameRRs(t, all, rrs)
			t.Logf("signed=%v limit=%d: %d bytes of records in %d messages", signed, max, total, len(msgs))
		}
	}
}

func TestMessagesErrors(t *testing.T) {
	rrs := zone(10)
	if _, err := Messages(axfrReq(false), rrs[1:], 0); err == nil {
		t.Fatal("zone without leading SOA accepted")
	}
	big := &dns.TXT{Hdr: dns.RR_Header{Name: "big." + origin, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1}}
	for range 10 {
		big.Txt = append(big.Txt, strings.Repeat("x", 250))
	}
	rrs = append([]dns.RR{rrs[0], big}, rrs[1:]...)
	if _, err := Messages(axfrReq(false), rrs, 2000); !errors.Is(err, ErrTooBig) {
		t.Fatalf("oversized record: %v", err)
	}
}

// primary serves zones over TCP and UDP on 127.0.0.1 with the test key; it
// refuses AXFR without the key when requireKey is set.
func primary(t *testing.T, rrs []dns.RR, requireKey bool) (addr string, errs chan error) {
	t.Helper()
	errs = make(chan error, 16)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if len(r.Question) != 1 || r.Question[0].Qtype != dns.TypeAXFR {
			// The SOA is what a secondary asks before it transfers.
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeRefused)
			if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeSOA {
				m.SetReply(r)
				m.Authoritative = true
				m.Answer = []dns.RR{rrs[0]}
			}
			if t := r.IsTsig(); t != nil && w.TsigStatus() == nil {
				m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, time.Now().Unix())
			}
			w.WriteMsg(m)
			return
		}
		if requireKey && r.IsTsig() == nil {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeRefused)
			w.WriteMsg(m)
			return
		}
		if err := Serve(w, r, rrs); err != nil {
			select {
			case errs <- err:
			default:
			}
		}
	})
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
	for _, s := range []*dns.Server{{Listener: tl, Handler: h, TsigSecret: secrets}, {PacketConn: ul, Handler: h, TsigSecret: secrets}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("server did not start")
		}
		t.Cleanup(func() { s.Shutdown() })
	}
	return tl.Addr().String(), errs
}

func transferIn(t *testing.T, addr string, signed bool) ([]dns.RR, int, error) {
	t.Helper()
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second}
	if signed {
		tr.TsigSecret = map[string]string{keyName: secret}
	}
	ch, err := tr.In(axfrReq(signed), addr)
	if err != nil {
		return nil, 0, err
	}
	var got []dns.RR
	n := 0
	for e := range ch {
		if e.Error != nil {
			return got, n, e.Error
		}
		n++
		got = append(got, e.RR...)
	}
	return got, n, nil
}

func TestServeMiekgClient(t *testing.T) {
	for _, size := range []int{10, 3000} {
		rrs := zone(size)
		for _, requireKey := range []bool{false, true} {
			addr, _ := primary(t, rrs, requireKey)
			for _, signed := range []bool{false, true} {
				got, n, err := transferIn(t, addr, signed)
				if requireKey && !signed {
					if err == nil {
						t.Fatalf("size %d: unsigned transfer accepted by a primary requiring the key", size)
					}
					continue
				}
				// Transfer.In verifies each envelope's TSIG (e.Error carries it).
				if err != nil {
					t.Fatalf("size %d signed=%v: %v", size, signed, err)
				}
				sameRRs(t, got, rrs)
				if size == 3000 && n < 3 {
					t.Fatalf("> 64 KiB zone in %d messages", n)
				}
				t.Logf("size %d signed=%v requireKey=%v: %d messages", size, signed, requireKey, n)
			}
		}
	}
}

func TestServeBadKey(t *testing.T) {
	addr, errs := primary(t, zone(10), true)
	tr := &dns.Transfer{DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
		TsigSecret: map[string]string{keyName: "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdCBrZXkh"}}
	ch, err := tr.In(axfrReq(true), addr)
	if err != nil {
		t.Fatal(err)
	}
	var got []dns.RR
	var last error
	for e := range ch {
		got = append(got, e.RR...)
		last = e.Error
	}
	if len(got) != 0 || last == nil {
		t.Fatalf("wrong key: %d records, err %v", len(got), last)
	}
	select {
	case err := <-errs:
		t.Logf("client: %v; server: %v", last, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Serve reported no error for a bad signature")
	}
}

func TestServeUDPRefused(t *testing.T) {
	addr, _ := primary(t, zone(10), false)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(axfrReq(false), addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
		t.Fatalf("AXFR over UDP: %s with %d records", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
}

// secondaryCheck asks s for the zone's SOA and a record near its end until
// it serves the transferred serial (≤ 10 s).
func secondaryCheck(t *testing.T, s *peertest.Server, rrs []dns.RR) {
	t.Helper()
	probe := rrs[len(rrs)-2]
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := new(dns.Msg)
		q.SetQuestion(origin, dns.TypeSOA)
		r, err := s.Exchange(q, "udp")
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			if soa, ok := r.Answer[0].(*dns.SOA); ok && soa.Serial == serial {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never served serial %d (last %v, %v):\n%s", s.Name, serial, r, err, s.Log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	q := new(dns.Msg)
	q.SetQuestion(probe.Header().Name, probe.Header().Rrtype)
	r, err := s.Exchange(q, "tcp")
	if err != nil || len(r.Answer) != 1 || !dns.IsDuplicate(r.Answer[0], probe) {
		t.Fatalf("%s for %s: %v %v", s.Name, probe.Header().Name, r, err)
	}
}

func hostPort(t *testing.T, addr string) (string, string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

func TestKnotSecondary(t *testing.T) {
	rrs := zone(3000)
	addr, _ := primary(t, rrs, true)
	h, p := hostPort(t, addr)
	dir := t.TempDir()
	s := peertest.StartKnot(t, []peertest.Zone{{Origin: origin, File: filepath.Join(dir, "absent.zone")}}, peertest.Options{
		Top: fmt.Sprintf(`key:
  - id: %s
    algorithm: hmac-sha256
    secret: %s
remote:
  - id: primary
    address: %s@%s
    key: %s
`, keyName, secret, h, p, keyName),
		Zone: "master: primary\nzonefile-load: none\n",
	})
	secondaryCheck(t, s, rrs)
	if !strings.Contains(s.Log.String(), "AXFR, incoming") {
		t.Logf("knot log:\n%s", s.Log.String())
	}
	for _, l := range strings.Split(s.Log.String(), "\n") {
		if strings.Contains(l, "AXFR") {
			t.Log(l)
		}
	}
}

func TestNSDSecondary(t *testing.T) {
	rrs := zone(3000)
	addr, _ := primary(t, rrs, true)
	h, p := hostPort(t, addr)
	dir := t.TempDir()
	s := peertest.StartNSD(t, []peertest.Zone{{Origin: origin, File: filepath.Join(dir, "absent.zone")}}, peertest.Options{
		Top:  fmt.Sprintf("key:\n  name: %s\n  algorithm: hmac-sha256\n  secret: %q\n", keyName, secret),
		Zone: fmt.Sprintf("request-xfr: AXFR %s@%s %s\n", h, p, keyName),
	})
	secondaryCheck(t, s, rrs)
	for _, l := range strings.Split(s.Log.String(), "\n") {
		if strings.Contains(strings.ToLower(l), "xfr") {
			t.Log(l)
		}
	}
}

func TestBINDSecondary(t *testing.T) {
	rrs := zone(3000)
	addr, _ := primary(t, rrs, true)
	h, p := hostPort(t, addr)
	dir := t.TempDir()
	// StartBIND's zones are primaries and its readiness wait needs one:
	// a one-record zone is it, and the secondary comes in through Top.
	dummy := filepath.Join(dir, "dummy.zone")
	if err := os.WriteFile(dummy, []byte("dummy.test. 60 IN SOA ns.dummy.test. h.dummy.test. 1 60 60 600 60\ndummy.test. 60 IN NS ns.dummy.test.\nns.dummy.test. 60 IN A 192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := peertest.StartBIND(t, []peertest.Zone{{Origin: "dummy.test.", File: dummy}}, peertest.Options{
		Top: fmt.Sprintf(`key %q { algorithm hmac-sha256; secret %q; };
zone %q { type secondary; primaries { %s port %s key %q; }; file %q; };
`, keyName, secret, origin, h, p, keyName, filepath.Join(dir, "xfr.example.db")),
	})
	secondaryCheck(t, s, rrs)
	for _, l := range strings.Split(s.Log.String(), "\n") {
		if strings.Contains(l, "transfer") {
			t.Log(l)
		}
	}
}
