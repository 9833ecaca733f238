// Package secondary owns the zones steer serves as a secondary: it
// transfers each one in from its primaries (IXFR with AXFR fallback, RFC
// 1995/5936), refreshes it on the SOA timers, transfers at once on NOTIFY
// (RFC 1996), keeps the last good copy on disk so a restart serves it
// before a primary answers, and expires it per SOA EXPIRE; only a primary
// at the copy's own serial confirms it (an older serial is no refresh).
// Limits bound the transfers: an idle timeout per message and an overall
// limit (so a large or slow zone is transferred while data keeps
// coming), a number running at once over all zones, and the local
// address they leave from; zones added together start their SOA checks
// spread over a short time. An IXFR is applied to the sorted copy in
// proportion to its difference. Signatures go through tsig.Keyring, which
// binds a key to its algorithm. Whether a copy may be served (zone
// checks, steered names) is the caller's: Options.Accept.
package secondary

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

// Zone is one secondary zone's configuration.
type Zone struct {
	Origin    string    // canonical, lower case, trailing dot
	Primaries []string  // host:port, tried in order
	Key       *tsig.Key // nil: transfers and SOA queries unsigned
}

// Options configure a Manager.
type Options struct {
	// Dir keeps one file per zone (CacheFile), the last good copy as
	// master-file text ("" keeps none). The file's modification time is
	// when a primary last confirmed the copy, so expiry survives
	// restarts.
	Dir string
	// Accept checks a candidate copy before it replaces the current one:
	// text is the whole zone as master-file text (absolute names, one
	// record per line). A non-nil error rejects the transfer whole; the
	// old copy keeps serving and the error is logged and counted. nil
	// Accept: accept everything that has an SOA at the apex.
	Accept func(origin string, text []byte) error
	// Changed is called (from the manager's goroutines, never while
	// holding a lock) when the copy to serve changed: a copy was loaded
	// from disk or a new one accepted, a zone expired or unexpired, or a
	// zone was removed. The caller then reads Copy.
	Changed func(origin string)
	// Event is called for every transfer attempt and NOTIFY, for
	// metrics: kind is "axfr", "ixfr", "soa" or "notify"; result is "ok",
	// "uptodate", "older" (the primary's serial is older than ours: no
	// refresh), "refused", "tsig", "timeout", "error", "rejected" or
	// "broken". May be nil.
	Event func(origin, kind, result string)
	Log   *slog.Logger
	// MinRefresh floors the SOA refresh and retry intervals. Default 1s.
	MinRefresh time.Duration
	// Timeout for one SOA query. Default 10s.
	Timeout time.Duration
	// Limits bound the transfers; SetLimits changes them later.
	Limits
	// Now, for tests; nil time.Now.
	Now func() time.Time
}

// Limits bound the transfers in. Zero fields take the defaults.
type Limits struct {
	// IdleTimeout is how long a transfer waits for the connection and
	// then for each of its messages: a primary that streams slowly but
	// steadily is waited for. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxTransferTime bounds one transfer whole (BIND's
	// max-transfer-time-in). Default DefaultMaxTransferTime.
	MaxTransferTime time.Duration
	// TransfersIn is how many transfers (and the checks of their copies)
	// run at once over all zones (BIND's transfers-in); the others wait
	// their turn. Default DefaultTransfersIn.
	TransfersIn int
	// Source is the local address SOA queries and transfers are made
	// from (transfer_source); the zero Addr lets the system choose.
	Source netip.Addr
}

func (l Limits) withDefaults() Limits {
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxTransferTime <= 0 {
		l.MaxTransferTime = DefaultMaxTransferTime
	}
	if l.TransfersIn <= 0 {
		l.TransfersIn = DefaultTransfersIn
	}
	return l
}

// Copy is the copy of a zone there is to serve.
type Copy struct {
	Origin    string
	Serial    uint32
	Text      []byte    // master-file text as on disk; Accept saw exactly this. Do not modify.
	Refreshed time.Time // when a primary last confirmed it
	Expires   time.Time // Refreshed + SOA EXPIRE
	Expired   bool      // past Expires: the caller must not serve it (SERVFAIL)
	From      string    // "disk" or the primary's host:port
}

// Status is what the admin API shows of one zone.
type Status struct {
	Origin                          string
	Serial                          uint32
	HaveCopy, Expired               bool
	Refreshed, NextRefresh, Expires time.Time
	LastError                       string
	LastTransfer                    string // "ixfr" or "axfr"
	Primary                         string
}

// maxBackoff bounds the retry interval of a zone with no copy at all.
const maxBackoff = 60 * time.Second

// Defaults of Options.
const (
	DefaultIdleTimeout     = 30 * time.Second
	DefaultMaxTransferTime = 120 * time.Minute
	DefaultTransfersIn     = 10
)

// Zones added together by one Set make their first SOA query at a random
// moment within startSpreadPerZone times their number (at most
// maxStartSpread), so that a server starting with many secondary zones
// does not query their primaries all at once.
const (
	startSpreadPerZone = 10 * time.Millisecond
	maxStartSpread     = 10 * time.Second
)

// Manager keeps the secondary zones.
type Manager struct {
	o      Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	zones   map[string]*zoneState
	closed  bool
	lim     Limits        // with defaults
	running int           // transfers holding a slot (at most lim.TransfersIn)
	freed   chan struct{} // closed (and replaced) when a slot frees
}

type zoneState struct {
	origin string
	cfg    Zone // guarded by Manager.mu
	kick   chan struct{}
	stop   chan struct{}
	// guarded by Manager.mu:
	copy         *Copy
	rrs          []dns.RR // the copy's records, SOA first
	removed      bool
	nextRefresh  time.Time
	lastError    string
	lastTransfer string
	primary      string
	loadedDisk   bool
	firstDelay   time.Duration // before the first SOA query (start spread)
}

// New returns a Manager with no zones; Set gives it some.
func New(o Options) *Manager {
	if o.MinRefresh <= 0 {
		o.MinRefresh = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{o: o, log: log, ctx: ctx, cancel: cancel, zones: map[string]*zoneState{},
		lim: o.Limits.withDefaults(), freed: make(chan struct{})}
}

// SetLimits changes the limits of transfers that start from now on (a
// smaller TransfersIn lets the transfers running finish).
func (m *Manager) SetLimits(l Limits) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lim = l.withDefaults()
	close(m.freed) // waiters look again: there may be more slots
	m.freed = make(chan struct{})
}

func (m *Manager) limits() Limits {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lim
}

func (m *Manager) event(origin, kind, result string) {
	if m.o.Event != nil {
		m.o.Event(origin, kind, result)
	}
}

func (m *Manager) changed(origin string) {
	if m.o.Changed != nil {
		m.o.Changed(origin)
	}
}

// Set (re)configures the zones: new zones load their disk copy (if any,
// and if Accept takes it) synchronously, so that right after Set returns
// Copy has it, then start refreshing (an SOA check at once); removed zones
// stop (Changed called); a zone whose primaries or key changed keeps its
// copy and refreshes at once. Safe to call repeatedly.
func (m *Manager) Set(zones []Zone) {
	want := map[string]Zone{}
	for _, z := range zones {
		z.Origin = dns.CanonicalName(z.Origin)
		z.Primaries = append([]string(nil), z.Primaries...)
		if z.Key != nil {
			k := *z.Key
			z.Key = &k
		}
		want[z.Origin] = z
	}
	// Disk copies are read outside the lock (Accept may be slow).
	loaded := map[string]*diskCopy{}
	m.mu.Lock()
	var fresh []string
	for origin := range want {
		if _, ok := m.zones[origin]; !ok {
			fresh = append(fresh, origin)
		}
	}
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return
	}
	for _, origin := range fresh {
		if dc := m.loadDisk(origin); dc != nil {
			loaded[origin] = dc
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for origin, zs := range m.zones {
		if _, ok := want[origin]; !ok {
			zs.removed = true
			close(zs.stop)
			delete(m.zones, origin)
		}
	}
	spread := time.Duration(0)
	if len(fresh) > 1 {
		spread = min(time.Duration(len(fresh))*startSpreadPerZone, maxStartSpread)
	}
	for origin, z := range want {
		if zs, ok := m.zones[origin]; ok {
			if !sameConfig(zs.cfg, z) {
				zs.cfg = z
				select {
				case zs.kick <- struct{}{}:
				default:
				}
			}
			continue
		}
		zs := &zoneState{origin: origin, cfg: z, kick: make(chan struct{}, 1), stop: make(chan struct{})}
		if spread > 0 {
			zs.firstDelay = rand.N(spread)
		}
		if dc := loaded[origin]; dc != nil {
			zs.copy, zs.rrs, zs.loadedDisk = dc.copy, dc.rrs, true
		}
		m.zones[origin] = zs
		m.wg.Add(1)
		go m.run(zs)
	}
}

func sameConfig(a, b Zone) bool {
	if len(a.Primaries) != len(b.Primaries) || (a.Key == nil) != (b.Key == nil) {
		return false
	}
	for i := range a.Primaries {
		if a.Primaries[i] != b.Primaries[i] {
			return false
		}
	}
	return a.Key == nil || *a.Key == *b.Key
}

// Copy returns the copy of origin there is to serve, if any.
func (m *Manager) Copy(origin string) (Copy, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	zs, ok := m.zones[dns.CanonicalName(origin)]
	if !ok || zs.copy == nil {
		return Copy{}, false
	}
	return *zs.copy, true
}

// Notify handles a NOTIFY for origin from address from (the caller
// verified TSIG). It returns false when origin is not a secondary zone
// here or from is not one of its primaries' addresses (any port; only
// primaries given as IP literals match); otherwise it schedules an
// immediate refresh and returns true. A NOTIFY during a refresh queues
// one more refresh after it.
func (m *Manager) Notify(origin string, from netip.Addr) bool {
	origin = dns.CanonicalName(origin)
	from = from.Unmap()
	m.mu.Lock()
	zs, ok := m.zones[origin]
	match := false
	if ok {
		for _, p := range zs.cfg.Primaries {
			host, _, err := net.SplitHostPort(p)
			if err != nil {
				host = p
			}
			if a, err := netip.ParseAddr(host); err == nil && a.Unmap() == from {
				match = true
				break
			}
		}
	}
	m.mu.Unlock()
	if !ok {
		return false
	}
	if !match {
		m.event(origin, "notify", "refused")
		m.log.Warn("NOTIFY from an address that is not a primary", "zone", origin, "from", from.String())
		return false
	}
	m.event(origin, "notify", "ok")
	m.log.Info("NOTIFY received", "zone", origin, "from", from.String())
	select {
	case zs.kick <- struct{}{}:
	default:
	}
	return true
}

// Refresh forces a refresh of origin now; false if it is not a secondary
// zone here.
func (m *Manager) Refresh(origin string) bool {
	m.mu.Lock()
	zs, ok := m.zones[dns.CanonicalName(origin)]
	m.mu.Unlock()
	if ok {
		select {
		case zs.kick <- struct{}{}:
		default:
		}
	}
	return ok
}

// Status returns every zone's state, sorted by origin.
func (m *Manager) Status() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.zones))
	for origin, zs := range m.zones {
		s := Status{Origin: origin, NextRefresh: zs.nextRefresh, LastError: zs.lastError,
			LastTransfer: zs.lastTransfer, Primary: zs.primary}
		if c := zs.copy; c != nil {
			s.HaveCopy, s.Serial, s.Expired, s.Refreshed, s.Expires = true, c.Serial, c.Expired, c.Refreshed, c.Expires
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Origin < out[j].Origin })
	return out
}

// Close stops every goroutine and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		for _, zs := range m.zones {
			close(zs.stop)
		}
	}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// run is one zone's refresh loop.
func (m *Manager) run(zs *zoneState) {
	defer m.wg.Done()
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	go func() {
		select {
		case <-zs.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	m.mu.Lock()
	fromDisk, first := zs.loadedDisk, zs.firstDelay
	m.mu.Unlock()
	if fromDisk {
		m.changed(zs.origin)
	}
	backoff := m.o.MinRefresh
	timer := time.NewTimer(first) // an SOA check at once, or within the start spread
	defer timer.Stop()
	kicked := false
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			removed := zs.removed
			m.mu.Unlock()
			if removed {
				m.log.Info("secondary zone removed", "zone", zs.origin)
				m.changed(zs.origin)
			}
			return
		case <-timer.C:
		case <-zs.kick:
			kicked = true
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		if m.checkExpiry(zs) {
			m.changed(zs.origin)
		}
		m.mu.Lock()
		early := m.o.Now().Before(zs.nextRefresh)
		wait := m.wakeIn(zs)
		m.mu.Unlock()
		if !kicked && early {
			// Woken for expiry alone: wait on for the refresh.
			timer.Reset(wait)
			continue
		}
		kicked = false
		ok, changed := m.refresh(ctx, zs)
		if ctx.Err() != nil {
			continue
		}
		if changed {
			m.changed(zs.origin)
		}
		m.mu.Lock()
		wait = 0
		switch {
		case zs.copy == nil:
			wait = backoff
			backoff *= 2
			if backoff > maxBackoff {
				backoff = max(maxBackoff, m.o.MinRefresh)
			}
		default:
			backoff = m.o.MinRefresh
			soa := zs.rrs[0].(*dns.SOA)
			if ok {
				wait = time.Duration(soa.Refresh) * time.Second
			} else {
				wait = time.Duration(soa.Retry) * time.Second
			}
			wait = max(wait, m.o.MinRefresh)
		}
		zs.nextRefresh = m.o.Now().Add(wait)
		wait = m.wakeIn(zs)
		m.mu.Unlock()
		timer.Reset(wait)
	}
}

// wakeIn is how long the zone's loop sleeps: until the next refresh or,
// if sooner, just past the copy's expiry (m.mu held).
func (m *Manager) wakeIn(zs *zoneState) time.Duration {
	now := m.o.Now()
	wait := zs.nextRefresh.Sub(now)
	if c := zs.copy; c != nil && !c.Expired {
		if until := c.Expires.Sub(now) + 10*time.Millisecond; until < wait {
			wait = until
		}
	}
	return max(wait, 0)
}

// checkExpiry marks the copy expired when its time has come; true if it
// changed.
func (m *Manager) checkExpiry(zs *zoneState) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := zs.copy
	if c == nil || c.Expired || !m.o.Now().After(c.Expires) {
		return false
	}
	nc := *c
	nc.Expired = true
	zs.copy = &nc
	m.log.Error(fmt.Sprintf("zone %s expired: no primary confirmed serial %d since %s; answering SERVFAIL",
		zs.origin, c.Serial, c.Refreshed.UTC().Format(time.RFC3339)),
		"zone", zs.origin, "serial", c.Serial, "refreshed", c.Refreshed, "expires", c.Expires)
	return true
}

// refresh asks the primaries in order for the SOA and transfers the zone
// when a primary has a newer serial. ok reports whether a primary
// confirmed or replaced the copy; changed whether what to serve changed.
func (m *Manager) refresh(ctx context.Context, zs *zoneState) (ok, changed bool) {
	m.mu.Lock()
	cfg := zs.cfg
	var cur []dns.RR
	var curSerial uint32
	have := zs.copy != nil
	if have {
		cur = zs.rrs
		curSerial = zs.copy.Serial
	}
	m.mu.Unlock()

	var errs []string
	for _, primary := range cfg.Primaries {
		if ctx.Err() != nil {
			return false, false
		}
		serial, err := m.querySOA(ctx, cfg, primary)
		if err != nil {
			res := classify(err)
			m.event(zs.origin, "soa", res)
			m.log.Warn("SOA query failed", "zone", zs.origin, "primary", primary, "result", res, "error", err.Error())
			errs = append(errs, fmt.Sprintf("%s: SOA: %v", primary, err))
			continue
		}
		if have && serial == curSerial {
			m.event(zs.origin, "soa", "uptodate")
			m.log.Debug("zone up to date", "zone", zs.origin, "primary", primary, "serial", serial)
			return true, m.confirm(zs, primary)
		}
		if have && !serialNewer(serial, curSerial) {
			// Older (or 2^31 away): this primary does not have our copy,
			// so it confirms nothing and the expiry stays where it was.
			m.event(zs.origin, "soa", "older")
			m.log.Warn("primary has an older serial than ours; keeping ours, not counted as a refresh",
				"zone", zs.origin, "primary", primary, "ours", curSerial, "primary_serial", serial)
			errs = append(errs, fmt.Sprintf("%s: serial %d is older than ours (%d): not a refresh", primary, serial, curSerial))
			continue
		}
		m.event(zs.origin, "soa", "ok")
		if !m.acquire(ctx, zs.origin) {
			return false, false
		}
		start := time.Now()
		rrs, kind, err := m.transfer(ctx, zs.origin, cfg, primary, cur)
		if err == nil && rrs != nil && have && !serialNewer(rrs[0].(*dns.SOA).Serial, curSerial) {
			err = fmt.Errorf("transferred serial %d is not newer than ours (%d)", rrs[0].(*dns.SOA).Serial, curSerial)
			m.event(zs.origin, kind, "older")
			m.log.Warn("transfer brought a serial not newer than ours; keeping ours", "zone", zs.origin,
				"primary", primary, "error", err.Error())
		}
		if err == nil {
			if rrs == nil { // IXFR said up to date after all
				m.release()
				return true, m.confirm(zs, primary)
			}
			changed, err = m.install(zs, primary, kind, rrs, curSerial, have, time.Since(start))
			m.release()
			if err == nil {
				return true, changed
			}
			errs = append(errs, fmt.Sprintf("%s: %v", primary, err))
			// Rejected by Accept: another primary would send the same.
			break
		}
		m.release()
		errs = append(errs, fmt.Sprintf("%s: %v", primary, err))
	}
	if len(cfg.Primaries) == 0 {
		errs = append(errs, "no primaries")
	}
	if ctx.Err() != nil {
		return false, false
	}
	m.mu.Lock()
	zs.lastError = strings.Join(errs, "; ")
	m.mu.Unlock()
	return false, false
}

// acquire waits for one of the TransfersIn slots; false if ctx ended
// first.
func (m *Manager) acquire(ctx context.Context, origin string) bool {
	logged := false
	for {
		m.mu.Lock()
		if m.running < m.lim.TransfersIn {
			m.running++
			m.mu.Unlock()
			return true
		}
		freed, n := m.freed, m.lim.TransfersIn
		m.mu.Unlock()
		if !logged {
			m.log.Debug("transfer waits for a slot (transfers_in)", "zone", origin, "transfers_in", n)
			logged = true
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

func (m *Manager) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running--
	close(m.freed)
	m.freed = make(chan struct{})
}

// confirm records that primary confirmed the current copy: Refreshed is
// now, the file's mtime too; true if that unexpired the copy.
func (m *Manager) confirm(zs *zoneState, primary string) bool {
	now := m.o.Now()
	m.mu.Lock()
	c := zs.copy
	if c == nil {
		m.mu.Unlock()
		return false
	}
	nc := *c
	nc.Refreshed = now
	nc.Expires = now.Add(time.Duration(zs.rrs[0].(*dns.SOA).Expire) * time.Second)
	unexpired := nc.Expired
	nc.Expired = false
	zs.copy = &nc
	zs.lastError = ""
	zs.primary = primary
	m.mu.Unlock()
	m.touch(zs.origin, now)
	if unexpired {
		m.log.Info("zone no longer expired", "zone", zs.origin, "serial", nc.Serial, "primary", primary)
	}
	return unexpired
}

// install checks and saves a transferred copy and makes it current.
func (m *Manager) install(zs *zoneState, primary, kind string, rrs []dns.RR, oldSerial uint32, hadCopy bool, took time.Duration) (bool, error) {
	now := m.o.Now()
	soa := rrs[0].(*dns.SOA)
	text := zoneText(zs.origin, rrs, primary, now)
	if err := m.accept(zs.origin, text); err != nil {
		m.event(zs.origin, kind, "rejected")
		m.log.Error("transferred copy rejected; the old copy keeps serving", "zone", zs.origin, "primary", primary,
			"kind", kind, "serial", soa.Serial, "error", err.Error())
		return false, fmt.Errorf("rejected: %w", err)
	}
	if err := m.save(zs.origin, text, now); err != nil {
		m.log.Error("cannot save the zone's copy", "zone", zs.origin, "error", err.Error())
	}
	c := &Copy{Origin: zs.origin, Serial: soa.Serial, Text: text, Refreshed: now,
		Expires: now.Add(time.Duration(soa.Expire) * time.Second), From: primary}
	m.mu.Lock()
	zs.copy, zs.rrs = c, rrs
	zs.lastError, zs.lastTransfer, zs.primary = "", kind, primary
	m.mu.Unlock()
	m.event(zs.origin, kind, "ok")
	old := "none"
	if hadCopy {
		old = fmt.Sprint(oldSerial)
	}
	m.log.Info("zone transferred", "zone", zs.origin, "primary", primary, "kind", kind,
		"serial", fmt.Sprintf("%s→%d", old, soa.Serial), "records", len(rrs), "duration", took.Round(time.Millisecond))
	return true, nil
}

func (m *Manager) accept(origin string, text []byte) error {
	if m.o.Accept != nil {
		return m.o.Accept(origin, text)
	}
	return nil
}

// zoneText is the master-file text of rrs (SOA first): a comment line,
// the SOA, then the rest in a stable order.
func zoneText(origin string, rrs []dns.RR, from string, at time.Time) []byte {
	var b bytes.Buffer
	b.Grow(len(rrs) * 48) // about a record's line; grows if not
	fmt.Fprintf(&b, "; zone %s serial %d transferred from %s by steer at %s\n",
		origin, rrs[0].(*dns.SOA).Serial, from, at.UTC().Format(time.RFC3339))
	for _, rr := range rrs {
		b.WriteString(rr.String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// sortRecords puts the SOA first and the rest in canonical name order,
// then type, then text (recordLess). The text of a record is made only
// for those sharing their owner and type with another.
func sortRecords(rrs []dns.RR) {
	type keyed struct {
		rr   dns.RR
		name string
	}
	ks := make([]keyed, len(rrs))
	for i, rr := range rrs {
		ks[i] = keyed{rr, canonicalKey(rr.Header().Name)}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		as, bs := a.rr.Header().Rrtype == dns.TypeSOA, b.rr.Header().Rrtype == dns.TypeSOA
		if as != bs {
			return as
		}
		if a.name != b.name {
			return a.name < b.name
		}
		return a.rr.Header().Rrtype < b.rr.Header().Rrtype
	})
	for i := range ks {
		rrs[i] = ks[i].rr
	}
	// Runs of one owner and type, ordered by their text.
	for i := 0; i < len(ks); {
		j := i + 1
		for j < len(ks) && ks[j].name == ks[i].name && ks[j].rr.Header().Rrtype == ks[i].rr.Header().Rrtype {
			j++
		}
		if j-i > 1 {
			run := rrs[i:j]
			txt := make(map[dns.RR]string, len(run))
			for _, rr := range run {
				txt[rr] = rr.String()
			}
			sort.SliceStable(run, func(a, b int) bool { return txt[run[a]] < txt[run[b]] })
		}
		i = j
	}
}

// recordCompare orders two records (neither the SOA) as sortRecords
// does: canonical name, type, text.
func recordCompare(a, b dns.RR) int {
	if c := strings.Compare(canonicalKey(a.Header().Name), canonicalKey(b.Header().Name)); c != 0 {
		return c
	}
	if at, bt := a.Header().Rrtype, b.Header().Rrtype; at != bt {
		if at < bt {
			return -1
		}
		return 1
	}
	return strings.Compare(a.String(), b.String())
}

// canonicalKey orders names with their labels reversed, so a zone's
// names come out grouped by parent.
func canonicalKey(name string) string {
	labels := dns.SplitDomainName(strings.ToLower(name))
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return strings.Join(labels, "\x00")
}

// serialNewer reports whether serial a is newer than b in RFC 1982
// arithmetic (32 bits). Serials exactly 2^31 apart are incomparable:
// neither is newer.
func serialNewer(a, b uint32) bool {
	d := a - b
	return d != 0 && d < 1<<31
}
