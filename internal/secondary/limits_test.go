package secondary

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// limitZone is the zone origin at serial: an SOA, an NS and n A records.
func limitZone(t testing.TB, origin string, serial uint32, n int) []dns.RR {
	var b strings.Builder
	fmt.Fprintf(&b, "%s 60 IN SOA ns1.%s hostmaster.%s %d 3600 600 86400 60\n", origin, origin, origin, serial)
	fmt.Fprintf(&b, "%s 60 IN NS ns1.%s\n", origin, origin)
	for i := range n {
		fmt.Fprintf(&b, "h%d.%s 60 IN A 198.51.100.%d\n", i, origin, i%250)
	}
	return dnstest.ZoneRRs(t, b.String())
}

func limitManager(t *testing.T, rec *recorder, log *dnstest.LockedBuffer, l Limits) *Manager {
	m := New(Options{Event: rec.event, Changed: rec.change, MinRefresh: 200 * time.Millisecond, Timeout: 2 * time.Second,
		Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})), Limits: l})
	t.Cleanup(m.Close)
	return m
}

// TestTransfersInLimit: 30 zones against one primary whose transfers take
// a while: at most TransfersIn run at once, every zone is transferred,
// and the first SOA queries are spread out rather than sent together.
func TestTransfersInLimit(t *testing.T) {
	t.Parallel()
	zones := map[string][]dns.RR{}
	var cfg []Zone
	p := (*dnstest.Primary)(nil)
	for i := range 30 {
		o := fmt.Sprintf("z%d.example.", i)
		zones[o] = limitZone(t, o, 1, 20)
	}
	// 5 messages: ≥ 160 ms a transfer.
	p = dnstest.StartPrimary(t, zones, dnstest.PrimaryOptions{Every: 40 * time.Millisecond, PerMsg: 5})
	for o := range zones {
		cfg = append(cfg, Zone{Origin: o, Primaries: []string{p.Addr.String()}})
	}
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := limitManager(t, rec, log, Limits{TransfersIn: 4})
	m.Set(cfg)
	dnstest.WaitFor(t, 20*time.Second, "all 30 zones transferred", func() bool { return rec.count("axfr/ok") == 30 },
		log.String)
	maxRun, n, first := p.Stats()
	t.Logf("30 zones, transfers_in 4: at most %d at once over %d transfers", maxRun, n)
	if maxRun > 4 {
		t.Errorf("%d transfers ran at once, transfers_in is 4", maxRun)
	}
	if maxRun < 2 {
		t.Errorf("never more than %d transfer at once: the limit is not what bounds them", maxRun)
	}
	if !strings.Contains(log.String(), "waits for a slot") {
		t.Error("no transfer waited for a slot")
	}
	var lo, hi time.Time
	for _, at := range first {
		if lo.IsZero() || at.Before(lo) {
			lo = at
		}
		if at.After(hi) {
			hi = at
		}
	}
	t.Logf("first SOA queries spread over %v", hi.Sub(lo).Round(time.Millisecond))
	if len(first) != 30 || hi.Sub(lo) < 50*time.Millisecond {
		t.Errorf("first SOA queries of %d zones within %v: not spread", len(first), hi.Sub(lo))
	}

	// A larger limit applies to the transfers that start after it.
	m.SetLimits(Limits{TransfersIn: 30})
	for o := range zones {
		p.SetZone(o, limitZone(t, o, 2, 20))
	}
	for o := range zones {
		m.Refresh(o)
	}
	dnstest.WaitFor(t, 20*time.Second, "all 30 zones at serial 2", func() bool {
		for o := range zones {
			if c, ok := m.Copy(o); !ok || c.Serial != 2 {
				return false
			}
		}
		return true
	})
	if maxRun, _, _ := p.Stats(); maxRun <= 4 {
		t.Errorf("with transfers_in 30, at most %d at once", maxRun)
	}
}

// TestTransferTimeouts: a primary sending a message every 200 ms is
// waited for with a 1 s idle timeout though the whole takes longer;
// the overall limit still ends a transfer that runs past it, and a
// primary silent for longer than the idle timeout fails it, each with a
// message saying which.
func TestTransferTimeouts(t *testing.T) {
	t.Parallel()
	const o = "slow.example."
	start := func(every time.Duration) *dnstest.Primary {
		// 12 messages
		return dnstest.StartPrimary(t, map[string][]dns.RR{o: limitZone(t, o, 7, 20)}, dnstest.PrimaryOptions{Every: every, PerMsg: 2})
	}
	run := func(p *dnstest.Primary, l Limits) (*Manager, *recorder, *dnstest.LockedBuffer) {
		rec, log := &recorder{}, &dnstest.LockedBuffer{}
		m := limitManager(t, rec, log, l)
		m.Set([]Zone{{Origin: o, Primaries: []string{p.Addr.String()}}})
		return m, rec, log
	}

	steady := start(200 * time.Millisecond)
	m, rec, log := run(steady, Limits{IdleTimeout: time.Second, MaxTransferTime: 20 * time.Second})
	began := time.Now()
	dnstest.WaitFor(t, 10*time.Second, "the slow zone transferred", func() bool { c, ok := m.Copy(o); return ok && c.Serial == 7 },
		log.String)
	if d := time.Since(began); d < 2*time.Second {
		t.Errorf("transferred in %v: the primary was not slow", d)
	}
	if rec.has("axfr/timeout") {
		t.Errorf("a timeout before it succeeded: %s\n%s", rec, log.String())
	}

	m, rec, _ = run(steady, Limits{IdleTimeout: time.Second, MaxTransferTime: 1200 * time.Millisecond})
	dnstest.WaitFor(t, 10*time.Second, "the overall limit to end the transfer", func() bool { return rec.has("axfr/timeout") })
	if st := m.Status(); len(st) != 1 || !strings.Contains(st[0].LastError, "max_transfer_time_in") || st[0].HaveCopy {
		t.Errorf("overall limit: %+v", st)
	}

	silent := start(1500 * time.Millisecond)
	m, rec, _ = run(silent, Limits{IdleTimeout: 400 * time.Millisecond})
	dnstest.WaitFor(t, 10*time.Second, "the idle timeout to end the transfer", func() bool { return rec.has("axfr/timeout") })
	if st := m.Status(); len(st) != 1 || !strings.Contains(st[0].LastError, "idle timeout") || st[0].HaveCopy {
		t.Errorf("idle timeout: %+v", st)
	}
}

// TestOlderSerialIsNoRefresh: a primary answering an older serial than
// the copy's neither replaces it nor confirms it, so the copy expires
// on time though the primary answers; the primary back at our serial
// confirms it again.
func TestOlderSerialIsNoRefresh(t *testing.T) {
	t.Parallel()
	f := startFake(t, 5)
	f.set(func(f *fake) { f.timers = "1 1 3 1" }) // refresh and retry 1 s, expire 3 s
	rec, log := &recorder{}, &dnstest.LockedBuffer{}
	m := newManager(t, "", rec, log, nil)
	m.Set([]Zone{{Origin: origin, Primaries: []string{f.addr}}})
	dnstest.WaitFor(t, 3*time.Second, "serial 5", haveSerial(m, 5))
	c0, _ := m.Copy(origin)
	f.set(func(f *fake) { f.serial = 3 })
	m.Refresh(origin)
	dnstest.WaitFor(t, 3*time.Second, "the older serial to be seen", func() bool { return rec.has("soa/older") })
	if c, _ := m.Copy(origin); c.Serial != 5 || !c.Refreshed.Equal(c0.Refreshed) {
		t.Fatalf("after an older serial: serial %d refreshed %v (was %v)", c.Serial, c.Refreshed, c0.Refreshed)
	}
	if st := m.Status(); !strings.Contains(st[0].LastError, "older than ours") {
		t.Errorf("last error: %q", st[0].LastError)
	}
	dnstest.WaitFor(t, 5*time.Second, "the copy to expire", func() bool { c, _ := m.Copy(origin); return c.Expired })
	if c, _ := m.Copy(origin); !c.Refreshed.Equal(c0.Refreshed) || rec.has("soa/uptodate") {
		t.Fatalf("expired copy refreshed %v (was %v), events %s", c.Refreshed, c0.Refreshed, rec)
	}
	f.set(func(f *fake) { f.serial = 5 })
	dnstest.WaitFor(t, 3*time.Second, "the copy confirmed again", func() bool { c, _ := m.Copy(origin); return !c.Expired })
	if _, _, a := f.counts(); a != 1 {
		t.Errorf("%d AXFRs: the older serial was transferred", a)
	}
}
