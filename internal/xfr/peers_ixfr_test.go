package xfr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/tsig"
)

// waitSerial asks s for the zone's SOA until it serves serial (within d).
func waitSerial(t *testing.T, s *peertest.Server, want uint32, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		q := new(dns.Msg)
		q.SetQuestion(origin, dns.TypeSOA)
		r, err := s.Exchange(q, "udp")
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			if soa, ok := r.Answer[0].(*dns.SOA); ok && soa.Serial == want {
				return time.Since(start)
			}
		}
		if time.Since(start) > d {
			t.Fatalf("%s did not serve serial %d within %v (last %v, %v):\n%s", s.Name, want, d, r, err, s.Log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkServes checks that s answers each of has and has none of gone,
// within 2 s of serving the new serial: NSD reloads into new server
// processes while the old ones finish, so a query right after the new
// SOA was seen may still reach an old one.
func checkServes(t *testing.T, s *peertest.Server, has, gone []dns.RR) {
	t.Helper()
	ask := func(rr dns.RR) []dns.RR {
		q := new(dns.Msg)
		q.SetQuestion(rr.Header().Name, rr.Header().Rrtype)
		r, err := s.Exchange(q, "tcp")
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		return r.Answer
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		var wrong []string
		for _, rr := range has {
			found := false
			for _, a := range ask(rr) {
				found = found || same(a, rr)
			}
			if !found {
				wrong = append(wrong, fmt.Sprintf("%s does not serve %v", s.Name, rr))
			}
		}
		for _, rr := range gone {
			for _, a := range ask(rr) {
				if same(a, rr) {
					wrong = append(wrong, fmt.Sprintf("%s still serves %v", s.Name, rr))
				}
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, w := range wrong {
				t.Error(w)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// secondaryIXFR is the common run: s has taken z1 from p by AXFR; the
// zone changes twice, each time a NOTIFY goes to s, which must fetch the
// new serial by IXFR within 2 s and serve the change.
func secondaryIXFR(t *testing.T, p *rawPrimary, s *peertest.Server, z1 []dns.RR) {
	t.Helper()
	waitSerial(t, s, z1[0].(*dns.SOA).Serial, 10*time.Second)
	// A NOTIFY signed with a key the secondary does not know is refused
	// with an rcode Notify names.
	unknown := &tsig.Key{Name: "other-key.", Algorithm: dns.HmacSHA256, Secret: secret}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := Notify(ctx, origin, z1[0].(*dns.SOA), Target{Addr: s.Addr.String(), Key: unknown}, 2)
	cancel()
	var re *RcodeError
	if !errors.As(err, &re) {
		t.Fatalf("%s: NOTIFY with an unknown key: %v", s.Name, err)
	}
	t.Logf("%s: NOTIFY with an unknown key: %v", s.Name, err)
	zs := [][]dns.RR{z1}
	for i, serial := range []uint32{serial + 1, serial + 2} {
		z := changed(t, zs[i], serial)
		zs = append(zs, z)
		d := p.set(z)
		before := len(p.requests())
		tg := Target{Addr: s.Addr.String(), Key: testKey}
		var err error
		if i == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = Notify(ctx, origin, z[0].(*dns.SOA), tg, 3)
			cancel()
		} else {
			// The second change goes through a Notifier.
			done := make(chan error, 1)
			n := &Notifier{Tries: 3, Result: func(_ string, _ Target, sn uint32, err error) {
				if sn == serial {
					done <- err
				}
			}}
			n.Send(origin, z[0].(*dns.SOA), []Target{tg})
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				err = errors.New("no Result from the Notifier")
			}
			n.Close()
		}
		if err != nil {
			t.Fatalf("%s: NOTIFY: %v\n%s", s.Name, err, s.Log.String())
		}
		took := waitSerial(t, s, serial, 2*time.Second)
		checkServes(t, s, d.Add, d.Del)
		reqs := p.requests()[before:]
		ixfr := false
		for _, r := range reqs {
			ixfr = ixfr || strings.HasPrefix(r, fmt.Sprintf("IXFR from 127.0.0.1:")) && strings.Contains(r, fmt.Sprintf("serial=%d", zs[i][0].(*dns.SOA).Serial))
		}
		if !ixfr {
			t.Errorf("%s fetched serial %d without IXFR from %d: %v", s.Name, serial, zs[i][0].(*dns.SOA).Serial, reqs)
		}
		t.Logf("%s: serial %d served %v after the NOTIFY ack; primary saw %v", s.Name, serial, took.Round(time.Millisecond), reqs)
	}
	// Then the journal is lost (a restart): the IXFR is answered
	// AXFR-style, > 64 KiB in several signed messages.
	z := changed(t, zs[len(zs)-1], serial+3)
	del, add := Diff(zs[len(zs)-1], z)
	p.replace(z)
	before := len(p.requests())
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Notify(ctx, origin, z[0].(*dns.SOA), Target{Addr: s.Addr.String(), Key: testKey}, 3); err != nil {
		t.Fatalf("%s: NOTIFY: %v", s.Name, err)
	}
	took := waitSerial(t, s, serial+3, 2*time.Second)
	checkServes(t, s, append(add, z[len(z)/2], z[len(z)-3]), del)
	t.Logf("%s: serial %d (AXFR-style IXFR answer) served %v after the NOTIFY ack; primary saw %v", s.Name, serial+3, took.Round(time.Millisecond), p.requests()[before:])
	for _, l := range strings.Split(s.Log.String(), "\n") {
		if strings.Contains(strings.ToLower(l), "xfr") || strings.Contains(l, "transfer") || strings.Contains(strings.ToLower(l), "notify") {
			t.Log(l)
		}
	}
	select {
	case err := <-p.errs:
		t.Errorf("primary: %v", err)
	default:
	}
}

// logSays fails unless s's log has a line with all of words and, when
// format is set, a number read from the line by it below max (NSD and
// BIND do not name IXFR at info level: what tells an incremental transfer
// from a full one of the 3,000-record zone there is its size).
func logSays(t *testing.T, s *peertest.Server, format string, max int, words ...string) {
	t.Helper()
	for _, l := range strings.Split(s.Log.String(), "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if !ok {
			continue
		}
		if format != "" {
			var n int
			i := strings.Index(l, strings.SplitN(format, "%", 2)[0])
			if i < 0 {
				continue
			}
			if _, err := fmt.Sscanf(l[i:], format, &n); err != nil || n >= max {
				t.Errorf("%s log: %s (want %q below %d)", s.Name, strings.TrimSpace(l), format, max)
				return
			}
		}
		t.Logf("%s log: %s", s.Name, strings.TrimSpace(l))
		return
	}
	t.Errorf("%s log has no line with %q:\n%s", s.Name, words, s.Log.String())
}

func TestKnotSecondaryIXFR(t *testing.T) {
	z1 := zoneAt(t, 3000, serial)
	p := newRawPrimary(t, z1, true)
	h, port := hostPort(t, p.addr)
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
acl:
  - id: notify
    address: 127.0.0.1
    key: %s
    action: notify
`, keyName, secret, h, port, keyName, keyName),
		Zone: "master: primary\nacl: notify\nzonefile-load: none\n",
	})
	secondaryIXFR(t, p, s, z1)
	logSays(t, s, "", 0, "IXFR, incoming", "finished")
	logSays(t, s, "", 0, "IXFR, incoming", "receiving AXFR-style IXFR")
}

func TestNSDSecondaryIXFR(t *testing.T) {
	z1 := zoneAt(t, 3000, serial)
	p := newRawPrimary(t, z1, true)
	h, port := hostPort(t, p.addr)
	dir := t.TempDir()
	s := peertest.StartNSD(t, []peertest.Zone{{Origin: origin, File: filepath.Join(dir, "absent.zone")}}, peertest.Options{
		// NSD throttles reloads to one per second by default; the NOTIFY
		// must show within 2 s of the first transfer.
		Server: "xfrd-reload-timeout: 0\n",
		Top:    fmt.Sprintf("key:\n  name: %s\n  algorithm: hmac-sha256\n  secret: %q\n", keyName, secret),
		Zone:   fmt.Sprintf("request-xfr: %s@%s %s\nallow-notify: 127.0.0.1 %s\n", h, port, keyName, keyName),
	})
	secondaryIXFR(t, p, s, z1)
	logSays(t, s, "TSIG verified with key xfr-key. of %d bytes", 1000, fmt.Sprintf("received update to serial %d", serial+1))
}

func TestBINDSecondaryIXFR(t *testing.T) {
	z1 := zoneAt(t, 3000, serial)
	p := newRawPrimary(t, z1, true)
	h, port := hostPort(t, p.addr)
	dir := t.TempDir()
	dummy := filepath.Join(dir, "dummy.zone")
	if err := os.WriteFile(dummy, []byte("dummy.test. 60 IN SOA ns.dummy.test. h.dummy.test. 1 60 60 600 60\ndummy.test. 60 IN NS ns.dummy.test.\nns.dummy.test. 60 IN A 192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := peertest.StartBIND(t, []peertest.Zone{{Origin: "dummy.test.", File: dummy}}, peertest.Options{
		Top: fmt.Sprintf(`key %q { algorithm hmac-sha256; secret %q; };
zone %q { type secondary; primaries { %s port %s key %q; }; file %q; allow-notify { key %q; }; };
`, keyName, secret, origin, h, port, keyName, filepath.Join(dir, "xfr.example.db"), keyName),
	})
	secondaryIXFR(t, p, s, z1)
	logSays(t, s, "Transfer completed: 1 messages, %d records", 100, fmt.Sprintf("(serial %d)", serial+1))
}
