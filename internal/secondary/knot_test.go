package secondary

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

func copyHas(c Copy, rr string) bool {
	want, err := dns.NewRR(rr)
	if err != nil {
		panic(err)
	}
	for _, l := range strings.Split(string(c.Text), "\n") {
		if strings.HasPrefix(l, ";") || l == "" {
			continue
		}
		if got, err := dns.NewRR(l); err == nil && dns.IsDuplicate(got, want) {
			return true
		}
	}
	return false
}

func haveSerial(m *Manager, serial uint32) func() bool {
	return func() bool {
		c, ok := m.Copy(origin)
		return ok && c.Serial == serial
	}
}

// TestKnotAXFRThenIXFR: a signed AXFR from Knot gives the whole zone,
// in memory and on disk; after Knot loads a change, a NOTIFY brings it in
// by IXFR within 2 s.
func TestKnotAXFRThenIXFR(t *testing.T) {
	k := startKnot(t, zoneBody(1, slowTimers, "old."+origin+" 60 IN A 192.0.2.1"))
	dir := t.TempDir()
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, dir, rec, log, nil)
	primary := k.Addr.String()
	m.Set([]Zone{{Origin: origin, Primaries: []string{primary}, Key: testKey(secret)}})
	dnstest.WaitFor(t, 5*time.Second, "the AXFR", haveSerial(m, 1))

	c, _ := m.Copy(origin)
	if c.From != primary || c.Expired || !rec.has("axfr/ok") {
		t.Fatalf("copy from %q expired=%v, events %s", c.From, c.Expired, rec)
	}
	for _, rr := range []string{"ns1." + origin + " 60 IN A 192.0.2.53", "host19." + origin + " 60 IN A 198.51.100.19", "old." + origin + " 60 IN A 192.0.2.1"} {
		if !copyHas(c, rr) {
			t.Fatalf("copy lacks %s:\n%s", rr, c.Text)
		}
	}
	if n := strings.Count(string(c.Text), "\n"); n != 1+24 {
		t.Fatalf("%d lines, want a comment and 24 records:\n%s", n, c.Text)
	}
	disk, err := os.ReadFile(filepath.Join(dir, "sec.example.zone"))
	if err != nil || string(disk) != string(c.Text) {
		t.Fatalf("disk copy (%v):\n%s\nwant:\n%s", err, disk, c.Text)
	}
	if fi, err := os.Stat(filepath.Join(dir, "sec.example.zone")); err != nil || fi.ModTime().Sub(c.Refreshed).Abs() > time.Second {
		t.Fatalf("mtime %v, refreshed %v (%v)", fi.ModTime(), c.Refreshed, err)
	}
	if !strings.HasPrefix(string(c.Text), "; zone sec.example. serial 1 transferred from "+primary+" by steer at ") {
		t.Fatalf("first line: %q", strings.SplitN(string(c.Text), "\n", 2)[0])
	}
	changes := rec.changes()

	// One record added, one removed, a new serial.
	k.change(t, zoneBody(2, slowTimers, "new."+origin+" 60 IN A 192.0.2.2"))
	if m.Notify(origin, netip.MustParseAddr("192.0.2.7")) {
		t.Fatal("NOTIFY from a stranger accepted")
	}
	if m.Notify("other.example.", k.Addr.Addr()) {
		t.Fatal("NOTIFY for a zone not here accepted")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("steer log:\n%s\nknot log:\n%s\nevents: %s", log.String(), k.Log.String(), rec)
		}
	})
	start := time.Now()
	if !m.Notify(origin, k.Addr.Addr()) {
		t.Fatal("NOTIFY from the primary refused")
	}
	dnstest.WaitFor(t, 2*time.Second, "the IXFR after NOTIFY", haveSerial(m, 2))
	t.Logf("NOTIFY to serial 2 in %v", time.Since(start))
	c, _ = m.Copy(origin)
	if !copyHas(c, "new."+origin+" 60 IN A 192.0.2.2") || copyHas(c, "old."+origin+" 60 IN A 192.0.2.1") {
		t.Fatalf("after the IXFR:\n%s", c.Text)
	}
	if !rec.has("ixfr/ok") || !rec.has("notify/ok") || rec.has("axfr/ok") && rec.count("axfr/ok") != 1 {
		t.Fatalf("events %s", rec)
	}
	if rec.changes() <= changes {
		t.Fatal("Changed not called for the new copy")
	}
	if !strings.Contains(k.Log.String(), "IXFR, outgoing") || !strings.Contains(k.Log.String(), "serial 1 -> 2") {
		t.Fatalf("knot served no IXFR 1 -> 2:\n%s", k.Log.String())
	}
	st := m.Status()
	if len(st) != 1 || st[0].Serial != 2 || st[0].LastTransfer != "ixfr" || st[0].Primary != primary || st[0].LastError != "" || !st[0].HaveCopy {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(log.String(), "zone transferred") || !strings.Contains(log.String(), "serial=1→2") {
		t.Fatalf("log:\n%s", log.String())
	}

	// An SOA check saying the serial is current touches the file.
	before := c.Refreshed
	time.Sleep(50 * time.Millisecond)
	m.Refresh(origin)
	dnstest.WaitFor(t, 2*time.Second, "the SOA check", func() bool { c, _ := m.Copy(origin); return c.Refreshed.After(before) })
	if !rec.has("soa/uptodate") {
		t.Fatalf("events %s", rec)
	}
	c, _ = m.Copy(origin)
	if fi, err := os.Stat(filepath.Join(dir, "sec.example.zone")); err != nil || fi.ModTime().Sub(c.Refreshed).Abs() > 10*time.Millisecond {
		t.Fatalf("mtime not updated: %v vs %v", fi.ModTime(), c.Refreshed)
	}
}

// TestKnotWrongKey: a key Knot does not know by that secret gets no copy,
// counts as a TSIG failure, and both sides log it.
func TestKnotWrongKey(t *testing.T) {
	k := startKnot(t, zoneBody(1, slowTimers))
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, t.TempDir(), rec, log, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{k.Addr.String()}, Key: testKey(badSecre)}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("steer log:\n%s\nknot log:\n%s\nevents: %s", log.String(), k.Log.String(), rec)
		}
	})
	dnstest.WaitFor(t, 5*time.Second, "a TSIG failure", func() bool { return rec.has("soa/tsig") || rec.has("soa/refused") })
	time.Sleep(300 * time.Millisecond)
	if _, ok := m.Copy(origin); ok {
		t.Fatal("a copy with the wrong key")
	}
	if rec.has("axfr/ok") {
		t.Fatalf("events %s", rec)
	}
	if !strings.Contains(log.String(), "TSIG") {
		t.Fatalf("log does not say TSIG:\n%s", log.String())
	}
	st := m.Status()
	if len(st) != 1 || st[0].HaveCopy || !strings.Contains(st[0].LastError, "TSIG") {
		t.Fatalf("status %+v", st)
	}
	// The refresh stops at the SOA query; a transfer with the key fails
	// the same way, and Knot logs that one.
	_, err := m.xfrIn(context.Background(), Zone{Origin: origin, Key: testKey(badSecre)}, k.Addr.String(), dns.TypeAXFR, nil)
	if classify(err) != "tsig" || !strings.HasPrefix(err.Error(), "TSIG: ") {
		t.Fatalf("AXFR with the wrong key: %v (%s)", err, classify(err))
	}
	t.Logf("AXFR with the wrong key: %v", err)
	dnstest.WaitFor(t, 3*time.Second, "knot to log the bad signature", func() bool {
		return strings.Count(k.debug(), "TSIG, key '"+keyName+"', verification failed") >= 2
	})
	for _, l := range strings.Split(k.debug(), "\n") {
		if strings.Contains(l, "TSIG") {
			t.Log("knot: " + l)
		}
	}
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "TSIG") {
			t.Log("steer: " + l)
			break
		}
	}
}

// TestKnotRestartFromDisk: a new Manager on the same directory serves
// the saved copy at once, with the primary gone.
func TestKnotRestartFromDisk(t *testing.T) {
	k := startKnot(t, zoneBody(7, slowTimers))
	dir := t.TempDir()
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, dir, rec, log, nil)
	zones := []Zone{{Origin: origin, Primaries: []string{k.Addr.String()}, Key: testKey(secret)}}
	m.Set(zones)
	dnstest.WaitFor(t, 5*time.Second, "the AXFR", haveSerial(m, 7))
	first, _ := m.Copy(origin)
	m.Close()
	k.stop(t)

	rec2, log2 := &recorder{}, &dnstest.LockedBuffer{}
	var accepted []string
	m2 := newManager(t, dir, rec2, log2, func(o string, text []byte) error {
		accepted = append(accepted, o)
		return nil
	})
	m2.Set(zones)
	c, ok := m2.Copy(origin)
	if !ok || c.From != "disk" || c.Serial != 7 || c.Expired || string(c.Text) != string(first.Text) || len(accepted) != 1 {
		t.Fatalf("after restart: ok=%v from=%q serial=%d expired=%v accepted=%v", ok, c.From, c.Serial, c.Expired, accepted)
	}
	if c.Refreshed.Sub(first.Refreshed).Abs() > time.Millisecond || c.Expires.Sub(first.Refreshed.Add(86400*time.Second)).Abs() > time.Millisecond {
		t.Fatalf("refreshed %v (was %v), expires %v", c.Refreshed, first.Refreshed, c.Expires)
	}
	dnstest.WaitFor(t, 3*time.Second, "the failed SOA check", func() bool { return rec2.has("soa/error") || rec2.has("soa/timeout") })
	if c, ok := m2.Copy(origin); !ok || c.Serial != 7 || c.Expired {
		t.Fatalf("copy lost after a failed refresh: %+v", c)
	}
	dnstest.WaitFor(t, time.Second, "Changed for the disk copy", func() bool { return rec2.changes() > 0 })

	// A corrupt copy is ignored, not fatal.
	m2.Close()
	if err := os.WriteFile(filepath.Join(dir, CacheFile(origin)), []byte("this is not a zone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log3 := &dnstest.LockedBuffer{}
	m3 := newManager(t, dir, &recorder{}, log3, nil)
	m3.Set(zones)
	if _, ok := m3.Copy(origin); ok {
		t.Fatal("corrupt copy served")
	}
	if !strings.Contains(log3.String(), "corrupt") {
		t.Fatalf("log:\n%s", log3.String())
	}

	// A copy Accept refuses is not served either.
	if err := os.WriteFile(filepath.Join(dir, CacheFile(origin)), first.Text, 0o644); err != nil {
		t.Fatal(err)
	}
	m4 := newManager(t, dir, &recorder{}, &dnstest.LockedBuffer{}, func(string, []byte) error { return errors.New("no") })
	m4.Set(zones)
	if _, ok := m4.Copy(origin); ok {
		t.Fatal("a disk copy Accept refused is served")
	}

	// A copy older than SOA EXPIRE is loaded expired.
	old := time.Now().Add(-2 * 86400 * time.Second)
	if err := os.Chtimes(filepath.Join(dir, CacheFile(origin)), old, old); err != nil {
		t.Fatal(err)
	}
	log5 := &dnstest.LockedBuffer{}
	m5 := newManager(t, dir, &recorder{}, log5, nil)
	m5.Set(zones)
	if c, ok := m5.Copy(origin); !ok || !c.Expired || c.From != "disk" {
		t.Fatalf("old disk copy: ok=%v expired=%v", ok, c.Expired)
	}
	if !strings.Contains(log5.String(), "expired: no primary confirmed serial 7") {
		t.Fatalf("log:\n%s", log5.String())
	}
}

// TestKnotExpiry: with the primary gone, the copy expires after SOA
// EXPIRE (3 s), Changed is called, and the copy says Expired.
func TestKnotExpiry(t *testing.T) {
	t.Parallel() // waits out REFRESH, RETRY and EXPIRE timers
	k := startKnot(t, zoneBody(3, "1 1 3 1"))
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, t.TempDir(), rec, log, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{k.Addr.String()}, Key: testKey(secret)}})
	dnstest.WaitFor(t, 5*time.Second, "the AXFR", haveSerial(m, 3))
	k.stop(t)
	stopped := time.Now()
	c, _ := m.Copy(origin)
	if c.Expires.Sub(c.Refreshed) != 3*time.Second {
		t.Fatalf("expires %v after refreshed", c.Expires.Sub(c.Refreshed))
	}
	changes := rec.changes()
	dnstest.WaitFor(t, 8*time.Second, "expiry", func() bool { c, _ := m.Copy(origin); return c.Expired })
	took := time.Since(stopped)
	c, _ = m.Copy(origin)
	if time.Now().Before(c.Expires) {
		t.Fatalf("expired before %v", c.Expires)
	}
	t.Logf("expired %v after knot stopped", took)
	if took > 4500*time.Millisecond {
		t.Fatalf("expired only after %v", took)
	}
	dnstest.WaitFor(t, time.Second, "Changed", func() bool { return rec.changes() > changes })
	if !strings.Contains(log.String(), "zone sec.example. expired: no primary confirmed serial 3 since") ||
		!strings.Contains(log.String(), "level=ERROR") {
		t.Fatalf("log:\n%s", log.String())
	}
	if st := m.Status(); !st[0].Expired || st[0].LastError == "" {
		t.Fatalf("status %+v", st)
	}
}

// TestKnotAcceptRejects: a transfer Accept refuses leaves the old copy.
func TestKnotAcceptRejects(t *testing.T) {
	k := startKnot(t, zoneBody(1, slowTimers))
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	var seen []string
	m := newManager(t, t.TempDir(), rec, log, func(o string, text []byte) error {
		seen = append(seen, string(text))
		if strings.Contains(string(text), "bad.sec.example.") {
			return errors.New("bad.sec.example. is not allowed")
		}
		return nil
	})
	m.Set([]Zone{{Origin: origin, Primaries: []string{k.Addr.String()}, Key: testKey(secret)}})
	dnstest.WaitFor(t, 5*time.Second, "the AXFR", haveSerial(m, 1))
	k.change(t, zoneBody(2, slowTimers, "bad."+origin+" 60 IN A 192.0.2.66"))
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the rejection", func() bool { return rec.has("ixfr/rejected") })
	c, _ := m.Copy(origin)
	if c.Serial != 1 || copyHas(c, "bad."+origin+" 60 IN A 192.0.2.66") {
		t.Fatalf("rejected copy served: serial %d", c.Serial)
	}
	// The event is recorded a moment before the log line and the status
	// are written (a loaded run read the status in between).
	dnstest.WaitFor(t, 3*time.Second, "the rejection logged", func() bool {
		return strings.Contains(log.String(), "bad.sec.example. is not allowed")
	}, log.String)
	dnstest.WaitFor(t, 3*time.Second, "the rejection in the status", func() bool {
		return strings.Contains(m.Status()[0].LastError, "rejected")
	}, func() string { return fmt.Sprintf("status %+v", m.Status()) })
	if !strings.Contains(seen[len(seen)-1], "bad."+origin) {
		t.Fatal("Accept did not see the new copy")
	}
}

// TestKnotTransferSource: Knot allows transfers from 127.0.0.2 only. A
// Manager whose Source is 127.0.0.2 transfers the zone; one with the
// same key and the default source (127.0.0.1 over loopback) is refused
// (Knot answers its signed SOA query BADKEY: the key is not allowed from
// there).
func TestKnotTransferSource(t *testing.T) {
	k := startKnotACL(t, zoneBody(4, slowTimers), "127.0.0.2")
	z := []Zone{{Origin: origin, Primaries: []string{k.Addr.String()}, Key: testKey(secret)}}

	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := New(Options{Event: rec.event, Log: slog.New(slog.NewTextHandler(log, nil)), MinRefresh: 200 * time.Millisecond,
		Limits: Limits{Source: netip.MustParseAddr("127.0.0.2")}})
	t.Cleanup(m.Close)
	m.Set(z)
	dnstest.WaitFor(t, 5*time.Second, "the transfer from 127.0.0.2", haveSerial(m, 4), func() string { return log.String() + k.debug() })

	other, olog := &recorder{}, &dnstest.LockedBuffer{}
	d := New(Options{Event: other.event, Log: slog.New(slog.NewTextHandler(olog, nil)), MinRefresh: 200 * time.Millisecond})
	t.Cleanup(d.Close)
	d.Set(z)
	dnstest.WaitFor(t, 5*time.Second, "the transfer from 127.0.0.1 refused", func() bool {
		return other.has("soa/tsig") || other.has("axfr/refused") || other.has("axfr/tsig")
	}, olog.String)
	if _, ok := d.Copy(origin); ok {
		t.Fatal("a copy through Knot's ACL from the default source")
	}
	t.Logf("default source: %s", other)
}
