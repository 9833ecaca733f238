package node

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/keyroll"
	"github.com/steer-dns/steer/internal/snapshot"
	zonedata "github.com/steer-dns/steer/internal/zone"
)

// Automatic ZSK rollover (issue 29). Each signed zone with a
// zsk_lifetime, and each signed zone whose key plan is in the state
// directory (a rollover under way must finish even when zsk_lifetime is
// taken out), is signed by its plan (internal/keyroll): which keys sign
// and which are only published comes from plan.At(now) at every build
// (snapshot.Options.ZoneKeys), never from the configured keys directly.
// One goroutine (keyLoop) steps the plans (plan.Next: generate the
// successor, schedule publish/activate/retire/remove by RFC 7583), keeps
// them in the state directory (keyroll/<zone>.json, 0600) before using
// them, logs each key event once, and sleeps until the next event, when
// it asks the reload path for a rebuild of the served configuration
// (kindZones): the zone is signed again where its keys changed (the
// signatures by the old ZSK are not fresh for the new signer, so they are
// replaced; the DNSKEY RRset is re-signed), the steered answer sets too,
// and the queries go on against the served snapshot meanwhile.
//
// A plan that cannot be read (corrupt file), or that says no key signs
// at some instant, rejects the build that asks it: the node goes on
// serving the zone signed as it is; it is never served unsigned, nor
// signed by a key it does not publish. A step that fails (timings the
// rollover cannot follow) is logged and the plan kept as it was.

// keySignMin is the least Dsgn (keyroll.Timings.SignDelay) the node
// counts: the time from a key event to the rebuild that applies it,
// plus the build itself (measured, lastBuild).
const keySignMin = time.Second

// keyLookMax is the longest keyLoop sleeps between two looks at the
// plans.
const keyLookMax = time.Minute

// keyRetryMax bounds the wait between two rebuilds asked for a plan the
// served snapshot does not follow yet (a rebuild failing).
const keyRetryMax = time.Minute

// keyService holds the node's key plans.
type keyService struct {
	log *slog.Logger
	dir string // the state directory; "": plans are kept in memory only
	gen keyroll.Generator

	mu    sync.Mutex
	zones map[string]*keyZone // by canonical origin
	// lastBuild is how long the last build took (Dsgn's measure).
	lastBuild time.Duration
	poked     chan struct{}
	// fleet keeps the plans in a fleet's store (keyroll_fleet.go); nil
	// on a single node.
	fleet *keyFleet
}

// keyZone is one zone's plan.
type keyZone struct {
	plan *keyroll.Plan
	// logged is the time up to which the plan's events were logged.
	logged time.Time
	// stepErr is the last step's error, logged once per distinct text
	// (stepHeld while the rollover is held).
	stepErr string
	// held says why the zone's rollover is held: a generated private
	// key would go to a store that is not TLS and authenticated
	// (keysMayGoLocked); "" when it is not.
	held string
}

// stepHeld is keyZone.stepErr while the rollover is held: the held
// message is logged once however many steps it holds.
const stepHeld = "\x00held"

func newKeyService(log *slog.Logger, dir string) *keyService {
	return &keyService{log: log, dir: dir, gen: dnssec.GenerateKey, zones: map[string]*keyZone{}, poked: make(chan struct{}, 1)}
}

// poke tells keyLoop to look again (a snapshot was swapped in).
func (ks *keyService) poke() {
	select {
	case ks.poked <- struct{}{}:
	default:
	}
}

// path is where origin's plan is kept ("" without a state directory).
func (ks *keyService) path(origin string) string {
	if ks.dir == "" {
		return ""
	}
	return keyroll.File(ks.dir, origin)
}

// save keeps p as origin's plan, on disk first: a plan that holds a
// generated key is used only once it is kept (a restart must find the
// key it published).
func (ks *keyService) save(origin string, p *keyroll.Plan) error {
	if path := ks.path(origin); path != "" {
		if err := keyroll.Save(path, p); err != nil {
			return fmt.Errorf("keeping the key plan: %v", err)
		}
	}
	ks.zones[origin].plan = p
	return nil
}

// zoneKeys is snapshot.Options.ZoneKeys: the keys of origin's plan at
// now, the plan loaded (or made from the configured keys) on first use
// and brought in line with them.
func (ks *keyService) zoneKeys(origin string, dc *dnssec.Config, configured []*dnssec.Key, now time.Time) (sign, publish []*dnssec.Key, err error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.adoptLocked(origin) // in a fleet, the store's plan
	kz := ks.zones[origin]
	if kz == nil {
		p, err := ks.load(origin)
		switch {
		case errors.Is(err, fs.ErrNotExist) && dc.ZSKLifetime <= 0:
			return configured, nil, nil // no rollover: the configured keys sign
		case errors.Is(err, fs.ErrNotExist):
			if p, err = keyroll.New(origin, configured, now); err != nil {
				return nil, nil, err
			}
			if ks.dir == "" {
				ks.log.Warn("DNSSEC key plan kept in memory only: no state directory, so a restart starts the zone's ZSK rollover anew", "zone", origin)
			}
			kz = &keyZone{logged: now}
			ks.zones[origin] = kz
			if err := ks.keep(origin, p, false); err != nil {
				delete(ks.zones, origin)
				return nil, nil, err
			}
			ks.log.Info("DNSSEC key plan started", "zone", origin, "file", ks.path(origin), "keys", planKeys(p, now))
		case err != nil:
			return nil, nil, err // names the file
		default:
			kz = &keyZone{plan: p, logged: now}
			ks.zones[origin] = kz
			ks.log.Info("DNSSEC key plan loaded", "zone", origin, "file", ks.path(origin), "keys", planKeys(p, now))
		}
	}
	p := kz.plan
	if ks.drivesLocked() || !ks.inStoreLocked(origin) {
		// The driver brings the plan in line with the configured keys;
		// the other nodes of a fleet take its plan as it is.
		if p, err = kz.plan.Sync(configured, now); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", ks.path(origin), err)
		}
	}
	if p != kz.plan {
		if err := ks.keep(origin, p, false); err != nil {
			return nil, nil, err
		}
		ks.log.Info("DNSSEC key plan follows the configured keys", "zone", origin, "keys", planKeys(p, now))
	}
	st, err := p.At(now)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", ks.path(origin), err)
	}
	return st.Sign, st.Publish, nil
}

// load reads origin's plan from the state directory; fs.ErrNotExist when
// there is none.
func (ks *keyService) load(origin string) (*keyroll.Plan, error) {
	path := ks.path(origin)
	if path == "" {
		return nil, fs.ErrNotExist
	}
	p, err := keyroll.Load(path)
	if err != nil {
		return nil, err
	}
	if p.Zone != origin {
		return nil, fmt.Errorf("%s: the key plan of zone %s, not of %s", path, p.Zone, origin)
	}
	return p, nil
}

// planKeys describes p's keys at now for the log: "ksk 123 active, zsk
// 456 active, zsk 789 published".
func planKeys(p *keyroll.Plan, now time.Time) string {
	var out []string
	for _, k := range p.Keys {
		if s := k.State(now); s != keyroll.StateRemoved {
			out = append(out, fmt.Sprintf("%s %d %s", k.Role, k.Tag, s))
		}
	}
	return strings.Join(out, ", ")
}

// built records how long a build took (the Dsgn the next steps count).
func (ks *keyService) built(took time.Duration) {
	ks.mu.Lock()
	ks.lastBuild = took
	ks.mu.Unlock()
}

// timings are the rollover timings of the served zone z with dnssec
// section dc: the configured ones, else the zone's own (DNSKEY TTL: the
// SOA's; the longest TTL: of its records, steered answers and negative
// answers).
func (ks *keyService) timings(dc *dnssec.Config, z *zonedata.Zone, snap *snapshot.Snapshot) keyroll.Timings {
	t := keyroll.Timings{
		ZSKLifetime:      dc.ZSKLifetime,
		DNSKEYTTL:        dc.DNSKEYTTL,
		MaxZoneTTL:       dc.MaxZoneTTL,
		PropagationDelay: dc.PropagationDelay,
		SignDelay:        keySignMin + (ks.lastBuild+time.Second-1)/time.Second*time.Second,
	}
	if t.DNSKEYTTL == 0 && z.SOA != nil {
		t.DNSKEYTTL = time.Duration(z.SOA.Hdr.Ttl) * time.Second
	}
	if t.MaxZoneTTL == 0 {
		t.MaxZoneTTL = maxZoneTTL(z, snap)
		if t.DNSKEYTTL > t.MaxZoneTTL {
			t.MaxZoneTTL = t.DNSKEYTTL // the DNSKEY RRset's signatures too
		}
	}
	return t
}

// maxZoneTTL is the longest TTL a signature of z's can be cached for:
// of its records, its steered answers (their degraded TTL too) and its
// negative answers.
func maxZoneTTL(z *zonedata.Zone, snap *snapshot.Snapshot) time.Duration {
	var ttl uint32
	z.EachRecord(func(rr dns.RR) bool {
		ttl = max(ttl, rr.Header().Ttl)
		return true
	})
	if z.NegSOA != nil {
		ttl = max(ttl, z.NegSOA.Hdr.Ttl)
	}
	if snap.Policies != nil {
		for _, r := range snap.Policies.Records {
			if dns.IsSubDomain(z.Origin, r.Name) && snap.Zones.Find(r.Name) == z {
				ttl = max(ttl, r.TTL, r.DegradedTTL)
			}
		}
	}
	return time.Duration(ttl) * time.Second
}

// step steps the plan of every zone snap serves with one at now, keeps
// and logs what changed, and returns the time of the first event to come
// and whether snap serves keys other than its plans say at now (a
// rebuild is due).
func (ks *keyService) step(snap *snapshot.Snapshot, now time.Time) (next time.Time, stale bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if snap == nil || snap.Config == nil || snap.Zones == nil {
		return time.Time{}, false
	}
	// need: a zone served has a plan to step, or will (zsk_lifetime):
	// only then does a fleet node campaign to drive (a lease of its own).
	need := false
	if ks.fleet != nil {
		defer func() { ks.fleet.plans.SetNeeded(need) }()
	}
	for i := range snap.Config.Zones {
		zc := &snap.Config.Zones[i]
		origin := dns.CanonicalName(zc.Origin)
		kz := ks.zones[origin]
		z := snap.Zones.Zone(origin)
		ks.adoptLocked(origin) // in a fleet, the store's plan
		kz = ks.zones[origin]
		if zc.DNSSEC != nil && (zc.DNSSEC.ZSKLifetime > 0 || (kz != nil && kz.plan != nil)) {
			need = true
		}
		if kz == nil || zc.DNSSEC == nil || z == nil || z.Failed != "" || z.Signer() == nil {
			continue
		}
		t := ks.timings(zc.DNSSEC, z, snap)
		drives := ks.drivesLocked()
		if drives && ks.fleet != nil && !ks.inStoreLocked(origin) {
			// The plan this node made before it drove (or before the
			// store answered) becomes the fleet's.
			if err := ks.keep(origin, kz.plan, false); err != nil {
				ks.log.Warn("DNSSEC key plan cannot be written to the fleet's store yet", "zone", origin, "err", err)
			}
		}
		p, events, err := kz.plan, []keyroll.Event(nil), error(nil)
		if drives {
			p, events, err = kz.plan.Next(now, t, ks.gen)
		} else {
			kz.held = "" // the driver holds it, and says so
		}
		switch {
		case err != nil:
			if msg := err.Error(); msg != kz.stepErr {
				kz.stepErr = msg
				ks.log.Error("DNSSEC key rollover cannot proceed; the zone is signed with its current keys", "zone", origin, "problem", msg)
			}
		case p != kz.plan:
			err := ks.keep(origin, p, false)
			if !errors.Is(err, errKeysHeld) {
				kz.stepErr, kz.held = "", ""
			}
			if errors.Is(err, errPlanMoved) {
				break // another node's plan is the one: nothing was made here
			} else if errors.Is(err, errKeysHeld) {
				// Once while held: each held step makes another
				// successor, so the text (which names it) changes.
				if kz.stepErr != stepHeld {
					kz.stepErr = stepHeld
					ks.log.Error("DNSSEC key rollover held; the zone is signed with its current keys", "zone", origin, "problem", kz.held)
				}
				break
			} else if err != nil {
				ks.log.Error("DNSSEC key rollover cannot proceed; the zone is signed with its current keys", "zone", origin, "problem", err)
				break
			}
			for _, e := range events {
				ks.log.Info("DNSSEC key event", "zone", origin, "tag", e.Tag, "role", string(e.Role), "event", string(e.Kind),
					"publish", ks.eventTime(p, e.Tag, keyroll.EventPublish), "activate", ks.eventTime(p, e.Tag, keyroll.EventActivate),
					"ipub", t.Ipub().String(), "iret", t.Iret().String())
			}
		}
		for _, e := range kz.plan.Events(kz.logged, now) {
			ks.log.Info("DNSSEC key event", "zone", origin, "tag", e.Tag, "role", string(e.Role), "event", string(e.Kind),
				"at", e.At.UTC().Format(time.RFC3339Nano))
		}
		if now.After(kz.logged) {
			kz.logged = now
		}
		st, err := kz.plan.At(now)
		if err != nil {
			continue // a build reports it
		}
		if !st.Next.IsZero() && (next.IsZero() || st.Next.Before(next)) {
			next = st.Next
		}
		s := z.Signer()
		stale = stale || !sameKeyTags(s.Keys(), st.Sign) || !sameKeyTags(s.Published(), st.Publish)
	}
	return next, stale
}

// eventTime is the time of key tag's event of kind in p, for the log.
func (ks *keyService) eventTime(p *keyroll.Plan, tag uint16, kind keyroll.EventKind) string {
	for _, e := range p.Events(time.Time{}, time.Unix(1<<40, 0)) {
		if e.Tag == tag && e.Kind == kind {
			return e.At.UTC().Format(time.RFC3339Nano)
		}
	}
	return ""
}

// sameKeyTags reports whether a and b are the same keys (tag, algorithm,
// withdrawal), in any order.
func sameKeyTags(a, b []*dnssec.Key) bool {
	if len(a) != len(b) {
		return false
	}
	id := func(k *dnssec.Key) string {
		return fmt.Sprintf("%d/%d/%t/%s", k.Tag, k.DNSKEY.Algorithm, k.Withdrawn, k.DNSKEY.PublicKey)
	}
	var ia, ib []string
	for i := range a {
		ia, ib = append(ia, id(a[i])), append(ib, id(b[i]))
	}
	slices.Sort(ia)
	slices.Sort(ib)
	return slices.Equal(ia, ib)
}

// keyLoop steps the key plans and has the served snapshot follow them,
// until Shutdown (see the comment at the top of this file).
func (n *Node) keyLoop() {
	defer n.loops.Done()
	ks := n.keys
	retry := time.Second
	for {
		now := time.Now()
		next, stale := ks.step(n.srv.Handler().Snapshot(), now)
		if stale {
			// A key event is due (or passed while the node was busy):
			// the served configuration built again applies it.
			var res Result
			select {
			case res = <-n.request(kindZones, "dnssec key event"):
			case <-n.ctx.Done():
				return
			}
			if res.Applied {
				retry = time.Second
				continue
			}
			// Rejected: the zones go on signed as they are; try again
			// later, not in a loop.
			next = time.Now().Add(retry)
			retry = min(2*retry, keyRetryMax)
		}
		// The plans are looked at again at least every keyLookMax, so
		// that a key event is never missed for long whatever happened
		// to the timer (a step that failed, a clock stepped).
		if next.IsZero() || time.Until(next) > keyLookMax {
			next = time.Now().Add(keyLookMax)
		}
		var wake <-chan time.Time
		var timer *time.Timer
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			wake = timer.C
			n.log.Debug("DNSSEC key plans: next event", "at", next.UTC().Format(time.RFC3339Nano))
		}
		select {
		case <-n.ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-ks.poked:
		case <-wake:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// next is when origin's next key event is due, by the plan in use (zero
// when none is scheduled, or the zone has no plan): the metric
// steer_dnssec_next_key_event_timestamp_seconds, read at a scrape.
func (ks *keyService) next(origin string, now time.Time) time.Time {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	kz := ks.zones[origin]
	if kz == nil || kz.plan == nil {
		return time.Time{}
	}
	if evs := kz.plan.Events(now, now.Add(100*365*24*time.Hour)); len(evs) > 0 {
		return evs[0].At
	}
	return time.Time{}
}
