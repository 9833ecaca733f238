package node

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/keyroll"
	"github.com/steer-dns/steer/internal/snapshot"
	zonedata "github.com/steer-dns/steer/internal/zone"
)

// Signatures in the background. A signed zone's signatures are made when
// it is loaded and hold for the zone's validity (14 days by default); each
// falls due for renewal at a share of it (75 %), jittered per RRset. The
// steered answers' pre-signed sets count with their zone. The node keeps
// one timer (renewLoop): it sleeps until the first signature of the
// served snapshot falls due, then asks the reload path for a renewal
// (kindResign), which makes the served snapshot again with the signatures
// due made anew (snapshot.Resigned: every zone's renewal step, sharing
// what is fresh, and the steered sets' table; no file is read, so a
// pending edit or a key file gone does not matter) and swaps it in
// through the one swap. Renewals are at least renewGap apart, so the
// signatures a jittered zone has falling due one after the other are
// renewed in a few batches, not one rebuild each. The timer is derived
// from the signatures themselves: a validity of seconds (tests) renews
// within seconds. When a signature would expire within expiryAlarm
// (renewal is not keeping up: it fails, or the node was stopped for long),
// the node logs an ERROR and the zone's status says so.

// expiryAlarm is how close to its expiration a signature makes the node
// log an ERROR and the zone's status say so.
const expiryAlarm = 48 * time.Hour

// alarmWindow is expiryAlarm, or a seventh of validity when that is
// shorter: a validity chosen that short must not keep the alarm on.
func alarmWindow(validity time.Duration) time.Duration { return min(expiryAlarm, validity/7) }

// renewGap is the least time between two renewals: a two-hundredth of
// the validity, between a second and an hour (14 days: an hour).
func renewGap(validity time.Duration) time.Duration {
	return min(max(validity/200, time.Second), time.Hour)
}

// zoneSigs is the state of one signed zone's signatures as served.
type zoneSigs struct {
	z *zonedata.Zone
	// refresh is when the first of them falls due for renewal, expire
	// when the first expires; zero when the zone holds none.
	refresh, expire time.Time
}

// sigView is the signatures of one served snapshot, the zone's own and
// its steered answers', computed once per snapshot (a walk of every
// signed zone that changed, and of the steered answers' table).
type sigView struct {
	snap  *snapshot.Snapshot
	zones []zoneSigs
	// validity is the shortest validity among the signed zones.
	validity time.Duration
	// presignedExpiry is the first expiration among the zones signed
	// elsewhere (no renewal here: past it, the renewal step answers the
	// zone SERVFAIL, see snapshot.Resigned); zero when none.
	presignedExpiry time.Time
}

// viewOf computes the signature state of snap, reusing prev's for the
// zones both serve.
func viewOf(snap *snapshot.Snapshot, prev *sigView) *sigView {
	v := &sigView{snap: snap}
	if snap == nil || snap.Zones == nil {
		return v
	}
	known := map[*zonedata.Zone]zoneSigs{}
	if prev != nil {
		for _, zs := range prev.zones {
			known[zs.z] = zs
		}
	}
	// The steered answers' signatures count with their zone's.
	steered := map[string][2]uint32{}
	snap.Presigned.SignatureTimes(func(zone string, refresh, expire uint32) {
		steered[zone] = [2]uint32{refresh, expire}
	})
	sameTable := prev != nil && prev.snap != nil && prev.snap.Presigned == snap.Presigned
	for _, z := range snap.Zones.Zones() {
		if e := unixTime(z.PresignedExpiry()); !e.IsZero() && (v.presignedExpiry.IsZero() || e.Before(v.presignedExpiry)) {
			v.presignedExpiry = e
		}
		s := z.SteeredSigner()
		if s == nil {
			continue
		}
		if val := s.Options().Validity; v.validity == 0 || val < v.validity {
			v.validity = val
		}
		zs, ok := known[z]
		if !ok || !sameTable {
			r, e := z.SignatureTimes()
			if st, ok := steered[z.Origin]; ok {
				r, e = earlier(r, st[0]), earlier(e, st[1])
			}
			zs = zoneSigs{z: z, refresh: unixTime(r), expire: unixTime(e)}
		}
		v.zones = append(v.zones, zs)
	}
	return v
}

// earlier is the earlier of two Unix times, 0 being none.
func earlier(a, b uint32) uint32 {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

func unixTime(t uint32) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(int64(t), 0)
}

// earliest returns the first refresh point and the first expiration
// among the view's zones (zero when none holds a signature).
func (v *sigView) earliest() (refresh, expire time.Time) {
	for _, zs := range v.zones {
		if !zs.refresh.IsZero() && (refresh.IsZero() || zs.refresh.Before(refresh)) {
			refresh = zs.refresh
		}
		if !zs.expire.IsZero() && (expire.IsZero() || zs.expire.Before(expire)) {
			expire = zs.expire
		}
	}
	return refresh, expire
}

// expiring says why zs is in the alarm window at now ("" when it is not).
func (zs *zoneSigs) expiring(now time.Time) string {
	if zs.expire.IsZero() {
		return ""
	}
	w := alarmWindow(zs.z.SteeredSigner().Options().Validity)
	left := zs.expire.Sub(now)
	if left >= w {
		return ""
	}
	if left <= 0 {
		return fmt.Sprintf("a signature expired at %s: validators reject the zone's answers", zs.expire.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("a signature expires at %s, in %s (less than %s): renewal is not keeping up",
		zs.expire.UTC().Format(time.RFC3339), left.Round(time.Second), w)
}

// signatures returns the signature state of the served snapshot.
func (n *Node) signatures() *sigView {
	snap := n.srv.Handler().Snapshot()
	prev := n.sigs.Load()
	if prev != nil && prev.snap == snap {
		return prev
	}
	v := viewOf(snap, prev)
	n.sigs.Store(v)
	return v
}

// renewLoop renews the served snapshot's signatures as they fall due,
// until Shutdown (see the comment at the top of this file).
func (n *Node) renewLoop() {
	defer n.loops.Done()
	var last time.Time // the last renewal started
	logged := map[string]time.Time{}
	for {
		v := n.signatures()
		now := time.Now()
		n.alarm(v, now, logged)
		refresh, expire := v.earliest()
		if pe := v.presignedExpiry; !pe.IsZero() && (refresh.IsZero() || pe.Before(refresh)) {
			refresh = pe // a zone signed elsewhere expires: stop serving it
		}
		var wake <-chan time.Time
		var timer *time.Timer
		if !refresh.IsZero() {
			at := refresh
			if next := last.Add(renewGap(v.validity)); at.Before(next) {
				at = next
			}
			// Wake when the first signature enters the alarm window, to
			// say so, if that comes first.
			if a := expire.Add(-alarmWindow(v.validity)); a.After(now) && a.Before(at) {
				at = a
			}
			timer = time.NewTimer(time.Until(at))
			wake = timer.C
			n.log.Debug("DNSSEC renewal timer", "wake", at.UTC().Format(time.RFC3339Nano), "first_due", refresh.UTC().Format(time.RFC3339))
		}
		select {
		case <-n.ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-n.sigKick: // a new snapshot is served
			if timer != nil {
				timer.Stop()
			}
			continue
		case <-wake:
		}
		if time.Now().Before(refresh) {
			continue // the alarm's wake-up
		}
		last = time.Now()
		select {
		case <-n.request(kindResign, "signature renewal"):
		case <-n.ctx.Done():
			return
		}
	}
}

// alarm logs an ERROR for each zone of v with a signature in the alarm
// window, at most every alarmEvery per zone.
func (n *Node) alarm(v *sigView, now time.Time, logged map[string]time.Time) {
	for i := range v.zones {
		zs := &v.zones[i]
		why := zs.expiring(now)
		if why == "" {
			delete(logged, zs.z.Origin)
			continue
		}
		every := min(time.Hour, alarmWindow(zs.z.SteeredSigner().Options().Validity)/4)
		if t, ok := logged[zs.z.Origin]; ok && now.Sub(t) < every {
			continue
		}
		logged[zs.z.Origin] = now
		n.log.Error("DNSSEC signatures about to expire", "zone", zs.z.Origin, "problem", why,
			"expires", zs.expire.UTC().Format(time.RFC3339))
	}
}

// renew swaps in the served snapshot with the signatures due made anew
// (snapshot.Resigned): no file is read, and nothing but signatures
// changes.
func (n *Node) renew(res *Result) {
	old := n.srv.Handler().Snapshot()
	before := madeBy(n.signatures())
	snap, err := old.Resigned(time.Now())
	if snap != old {
		if serr := n.swap(old, snap, false); serr != nil {
			err = serr
			snap = old
			old.Presigned.Watch(old.Live) // health signs into the served table again
		}
	}
	if err != nil {
		n.reject(res, err)
		n.log.Error("DNSSEC signature renewal failed; the signatures served until now stay until they expire",
			"problem", strings.Join(res.Problems, "; "))
	}
	if snap == old {
		n.log.Debug("DNSSEC renewal: no signature due")
		return
	}
	after := n.signatures()
	refresh, expire := after.earliest()
	for _, z := range expiredZones(old, snap) {
		// Signed elsewhere, and not renewed by its signer in time: what
		// happened is an expiry, not a renewal.
		at := time.Unix(int64(z.PresignedExpiry()), 0).UTC().Format(time.RFC3339)
		n.log.Error("DNSSEC signatures expired: zone answered SERVFAIL until its signer renews them", "zone", z.Origin,
			"expired", at, "signatures", z.PresignedSummary())
		res.Changed = append(res.Changed, fmt.Sprintf("zone %s: signatures expired at %s, answered SERVFAIL", z.Origin, at))
	}
	if r := renewed(before, after); len(r) > 0 {
		res.Changed = append(res.Changed, r...)
		n.log.Info("DNSSEC signatures renewed", "zones", strings.Join(r, "; "),
			"next_renewal", refresh.UTC().Format(time.RFC3339), "earliest_expiry", expire.UTC().Format(time.RFC3339))
	}
}

// expiredZones returns the zones of old, signed elsewhere, that snap (its
// renewal) answers SERVFAIL because their signatures expired.
func expiredZones(old, snap *snapshot.Snapshot) []*zonedata.Zone {
	var out []*zonedata.Zone
	for _, z := range old.Zones.Zones() {
		if z.Failed != "" || z.PresignedExpiry() == 0 {
			continue
		}
		if nz := snap.Zones.Zone(z.Origin); nz != nil && nz.Failed != "" {
			out = append(out, z)
		}
	}
	return out
}

// madeBy returns how many signatures each zone of v has made renewing
// its data and signing steered answer sets.
func madeBy(v *sigView) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for _, zs := range v.zones {
		s := zs.z.SteeredSigner()
		out[zs.z.Origin] = [2]uint64{s.Made(dnssec.ReasonRenew), s.Made(dnssec.ReasonSteered)}
	}
	return out
}

// renewed says, per zone whose signatures a renewal changed, how many it
// made (was: madeBy before it); the steered answers' table signs its due
// sets again as "steered" signatures.
func renewed(was map[string][2]uint64, after *sigView) []string {
	var out []string
	for zone, now := range madeBy(after) {
		d, st := now[0]-was[zone][0], now[1]-was[zone][1]
		if d+st == 0 {
			continue
		}
		line := fmt.Sprintf("zone %s: %d signatures renewed", zone, d+st)
		if st > 0 {
			line += fmt.Sprintf(" (%d of steered answers)", st)
		}
		for _, zs := range after.zones {
			if zs.z.Origin == zone {
				line += ", next due " + zs.refresh.UTC().Format(time.RFC3339)
			}
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// dnssecStatus is the signing state of z (nil for an unsigned zone).
func dnssecStatus(z *zonedata.Zone, v *sigView, now time.Time) *api.ZoneDNSSEC {
	s := z.SteeredSigner()
	if s == nil {
		return nil
	}
	o := s.Options()
	st := &api.ZoneDNSSEC{Validity: o.Validity.String(), Refresh: o.Refresh, Made: map[string]uint64{}}
	keys := s.Keys()
	csk := true
	for _, k := range keys {
		if !k.SEP() {
			csk = false
		}
	}
	signing := len(keys)
	for i, k := range append(slices.Clip(keys), s.Published()...) {
		ks := api.DNSSECKey{Tag: k.Tag, Algorithm: dns.AlgorithmToString[k.DNSKEY.Algorithm], File: k.File, Role: "ZSK", State: keyroll.StateActive}
		if i >= signing {
			ks.State = keyroll.StatePublished // a rollover's successor, or a retired key
		}
		if k.SEP() {
			ks.Role = "KSK"
			if csk {
				ks.Role = "CSK"
			}
			if ds := k.DS(); ds != nil {
				ks.DS = dnssec.DSLine(ds) // as steer dnssec ds prints it
			}
		}
		st.Keys = append(st.Keys, ks)
	}
	for r := dnssec.ReasonLoad; r <= dnssec.ReasonDenial; r++ {
		st.Made[r.String()] = s.Made(r)
	}
	for i := range v.zones {
		if zs := &v.zones[i]; zs.z == z {
			st.EarliestExpiry, st.NextRenewal = zs.expire, zs.refresh
			st.Expiring = zs.expiring(now)
		}
	}
	return st
}

// keyStatus adds to st, z's signing state, what z's key plan says (none
// for a zone without one): each key's state in the plan, the next key
// event, and why a rollover is held.
func (n *Node) keyStatus(st *api.ZoneDNSSEC, z *zonedata.Zone, now time.Time) {
	p := n.keys.plan(z.Origin)
	if p == nil {
		return
	}
	v := planView(p, now)
	st.NextKeyEvent = v.Next
	st.RolloverHeld = n.keys.held(z.Origin)
	for _, pk := range v.Keys {
		if pk.State == keyroll.StateRemoved {
			continue
		}
		i := slices.IndexFunc(st.Keys, func(k api.DNSSECKey) bool { return k.Tag == pk.Tag && k.Algorithm == pk.Algorithm })
		if i < 0 {
			// Not in the DNSKEY RRset served: a successor generated,
			// published later.
			st.Keys = append(st.Keys, api.DNSSECKey{Tag: pk.Tag, Algorithm: pk.Algorithm, Role: strings.ToUpper(pk.Role), DS: pk.DS})
			i = len(st.Keys) - 1
		}
		st.Keys[i].State = pk.State
	}
}

// dnssecSource is what the signing metrics read at a scrape: each signed
// zone's signer and earliest expiry, from the served snapshot's view.
func (n *Node) dnssecSource() dnssec.Source {
	var src dnssec.Source
	now := time.Now()
	for _, zs := range n.signatures().zones {
		var exp uint32
		if !zs.expire.IsZero() {
			exp = uint32(zs.expire.Unix())
		}
		src.Zones = append(src.Zones, dnssec.ZoneState{Signer: zs.z.SteeredSigner(), Expiry: exp, NextKeyEvent: n.keys.next(zs.z.Origin, now)})
	}
	return src
}
