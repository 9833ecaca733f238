package keyroll

import (
	"errors"
	"fmt"
	"time"

	"github.com/steer-dns/steer/internal/dnssec"
)

// DefaultPropagationDelay is Dprp when the configuration sets none: how
// long a change of the zone takes to reach every server that answers for
// it (RFC 7583 §3.2.1). A steer fleet follows its store within seconds;
// five minutes also covers third-party secondaries fed by NOTIFY.
const DefaultPropagationDelay = 5 * time.Minute

// DefaultSignDelay is Dsgn when Timings sets none: how long after a ZSK
// becomes active the zone is signed with it everywhere. Steer re-signs a
// zone in one rebuild when its keys change, within seconds.
const DefaultSignDelay = 10 * time.Second

// Timings are the intervals of RFC 7583 §3.2 a ZSK rollover follows.
type Timings struct {
	// ZSKLifetime is how long a ZSK signs (Lzsk); 0: no rollover.
	ZSKLifetime time.Duration
	// DNSKEYTTL is the DNSKEY RRset's TTL (TTLkey).
	DNSKEYTTL time.Duration
	// MaxZoneTTL is the longest TTL of a signed RRset of the zone, which
	// is its signatures' TTL (TTLsig).
	MaxZoneTTL time.Duration
	// PropagationDelay is Dprp; 0 means DefaultPropagationDelay.
	PropagationDelay time.Duration
	// SignDelay is Dsgn; 0 means DefaultSignDelay.
	SignDelay time.Duration
}

func (t Timings) withDefaults() Timings {
	if t.PropagationDelay <= 0 {
		t.PropagationDelay = DefaultPropagationDelay
	}
	if t.SignDelay <= 0 {
		t.SignDelay = DefaultSignDelay
	}
	return t
}

// Ipub is the publication interval: the successor is published Ipub
// before it signs, so that every validator's copy of the DNSKEY RRset
// holds it by then (Dprp + TTLkey).
func (t Timings) Ipub() time.Duration {
	t = t.withDefaults()
	return t.PropagationDelay + t.DNSKEYTTL
}

// Iret is the retire interval: the predecessor stays published Iret
// after it stops signing, so that every signature it made has left the
// caches (Dsgn + Dprp + TTLsig).
func (t Timings) Iret() time.Duration {
	t = t.withDefaults()
	return t.SignDelay + t.PropagationDelay + t.MaxZoneTTL
}

// Check reports timings a rollover cannot follow: a lifetime that is not
// longer than Ipub + Iret (the next rollover would start before the
// previous one ends), or a negative interval.
func (t Timings) Check() error {
	switch {
	case t.ZSKLifetime < 0 || t.DNSKEYTTL < 0 || t.MaxZoneTTL < 0:
		return errors.New("negative key timing")
	case t.ZSKLifetime == 0:
		return nil
	case t.ZSKLifetime <= t.Ipub()+t.Iret():
		t = t.withDefaults()
		return fmt.Errorf("zsk_lifetime %s is not longer than the rollover it needs: publication %s (DNSKEY TTL %s + propagation %s) + retirement %s (max zone TTL %s + propagation %s + signing %s)",
			t.ZSKLifetime, t.Ipub(), t.DNSKEYTTL, t.PropagationDelay, t.Iret(), t.MaxZoneTTL, t.PropagationDelay, t.SignDelay)
	}
	return nil
}

// historyKeep is how many removed generated keys a plan remembers (for
// status); removed configured keys are remembered while configured, so
// that Sync does not bring them back.
const historyKeep = 4

// Next returns the plan stepped at now with timings t: when a ZSK is
// active and has no successor yet, it generates one with gen (of the
// same algorithm; nil gen: dnssec.GenerateKey) and schedules the swap
// (RFC 7583 §3.2, see the package comment); a successor not yet
// published is rescheduled to the timings in force; a published one's
// activation and its predecessor's removal are only ever moved later (a
// validator may already hold the DNSKEY RRset that was published). Keys
// removed by now lose their private keys. events are the keys
// generated. Next fails, and p stays, when the timings are inconsistent,
// the plan has no active ZSK (a CSK-only zone has none to roll), or the
// stepped plan would at some instant have no signing key or sign with a
// key not published for Ipub. With t.ZSKLifetime 0 it only forgets what
// is removed.
func (p *Plan) Next(now time.Time, t Timings, gen Generator) (*Plan, []Event, error) {
	if err := t.Check(); err != nil {
		return p, nil, fmt.Errorf("zone %s: %v", p.Zone, err)
	}
	if gen == nil {
		gen = dnssec.GenerateKey
	}
	t = t.withDefaults()
	q := p.clone()
	var events []Event
	if t.ZSKLifetime > 0 {
		ev, err := q.roll(now, t, gen)
		if err != nil {
			return p, nil, err
		}
		events = ev
	}
	q.forget(now)
	if err := q.Check(now, t); err != nil {
		return p, nil, err
	}
	return q, events, nil
}

// roll schedules the rollover of q's newest ZSK (see Next).
func (q *Plan) roll(now time.Time, t Timings, gen Generator) ([]Event, error) {
	// last is the ZSK activated last (or to be): the head of the chain.
	var last *Key
	for _, k := range q.Keys {
		if k.Role == RoleZSK && !k.Removed(now) && !k.Active.IsZero() && (last == nil || !k.Active.Before(last.Active)) {
			last = k
		}
	}
	if last == nil {
		for _, k := range q.Keys {
			if k.Role == RoleCSK && !k.Removed(now) {
				return nil, fmt.Errorf("zone %s: zsk_lifetime needs a KSK and a ZSK; the zone has a CSK only (%s)", q.Zone, k.Name())
			}
		}
		return nil, fmt.Errorf("zone %s: key plan has no ZSK to roll", q.Zone)
	}
	L, ipub, iret := t.ZSKLifetime, t.Ipub(), t.Iret()
	// Every ZSK retired by now keeps at least Iret after its retirement
	// (the timings may have grown: a slower rebuild, a longer TTL).
	for _, k := range q.Keys {
		if k.Role == RoleZSK && !k.Retire.IsZero() && !k.Retire.After(now) && !k.Removed(now) {
			k.Remove = maxTime(k.Remove, k.Retire.Add(iret))
		}
	}
	if last.Active.After(now) {
		// A successor is scheduled: last. Its predecessor is the key
		// it replaces.
		var pred *Key
		for _, k := range q.Keys {
			if k != last && k.Role == RoleZSK && k.Retire.Equal(last.Active) && !k.Active.IsZero() {
				pred = k
			}
		}
		if pred == nil {
			return nil, fmt.Errorf("zone %s: key plan: %s is scheduled to sign at %s but replaces no key", q.Zone, last.Name(), stamp(last.Active))
		}
		act := last.Active
		if last.Publish.After(now) {
			// Not yet published: nobody has seen it, follow the
			// timings in force.
			pub := maxTime(now, pred.Active.Add(L-ipub))
			last.Publish = pub
			act = maxTime(pub.Add(ipub), pred.Active.Add(L))
		} else {
			act = maxTime(act, last.Publish.Add(ipub))
		}
		if pred.Retire.After(now) {
			pred.Remove = act.Add(iret) // still signing: nothing to keep
		} else {
			pred.Remove = maxTime(pred.Remove, act.Add(iret))
		}
		last.Active, pred.Retire = act, act
		return nil, nil
	}
	if !last.Retire.IsZero() {
		return nil, nil // retired without successor: check refuses it
	}
	pub := maxTime(now, last.Active.Add(L-ipub))
	act := maxTime(pub.Add(ipub), last.Active.Add(L))
	nk, err := gen(q.Zone, last.Algorithm, false)
	if err != nil {
		return nil, fmt.Errorf("zone %s: generating the successor of %s: %v", q.Zone, last.Name(), err)
	}
	if nk.SEP() || nk.DNSKEY.Hdr.Name != q.Zone {
		return nil, fmt.Errorf("zone %s: the key generator made %s for %s, not a ZSK of the zone", q.Zone, nk.BaseName(), nk.DNSKEY.Hdr.Name)
	}
	for _, k := range q.Keys {
		if k.Tag == nk.Tag && k.Algorithm == nk.DNSKEY.Algorithm && !k.Removed(now) {
			// Two keys of one tag make validators try both; a fresh
			// key on the next step is cheap.
			return nil, fmt.Errorf("zone %s: the generated key's tag %d collides with %s; retrying on the next step", q.Zone, nk.Tag, k.Name())
		}
	}
	s := fromKey(nk, RoleZSK, SourceGenerated, now)
	s.Publish, s.Active = pub, act
	last.Retire, last.Remove = act, act.Add(iret)
	q.Keys = append(q.Keys, s)
	return []Event{{Tag: s.Tag, Role: RoleZSK, Kind: EventGenerate, At: now}}, nil
}

// forget clears the private keys of the keys removed by now and drops
// all but the last historyKeep removed generated keys.
func (q *Plan) forget(now time.Time) {
	removed := 0
	for i := len(q.Keys) - 1; i >= 0; i-- {
		k := q.Keys[i]
		if !k.Removed(now) {
			continue
		}
		k.Private, k.key = "", nil
		if k.Source == SourceGenerated {
			removed++
			if removed > historyKeep {
				q.Keys = append(q.Keys[:i], q.Keys[i+1:]...)
			}
		}
	}
}

// Check verifies that q holds from now on with timings t: at now and at every event
// after it a KSK (or CSK) and a ZSK (or CSK) sign and every signing key
// is published (At); every generated ZSK is published Ipub before it
// signs; every retired ZSK stays published Iret after it stops.
func (q *Plan) Check(now time.Time, t Timings) error {
	t = t.withDefaults()
	if _, err := q.At(now); err != nil {
		return err
	}
	for _, e := range q.Events(now, time.Unix(1<<40, 0)) {
		if _, err := q.At(e.At); err != nil {
			return fmt.Errorf("%v (after %s)", err, e)
		}
	}
	ipub, iret := t.Ipub(), t.Iret()
	for _, k := range q.Keys {
		if k.Role != RoleZSK || k.Removed(now) {
			continue
		}
		if k.Source == SourceGenerated && !k.Active.IsZero() && k.Active.Sub(k.Publish) < ipub {
			return fmt.Errorf("zone %s: key plan: %s would sign %s after it is published, less than the publication interval %s",
				q.Zone, k.Name(), k.Active.Sub(k.Publish), ipub)
		}
		if !k.Retire.IsZero() && (k.Remove.IsZero() || k.Remove.Sub(k.Retire) < iret) {
			return fmt.Errorf("zone %s: key plan: %s would leave the DNSKEY RRset %s after it stops signing, less than the retire interval %s",
				q.Zone, k.Name(), k.Remove.Sub(k.Retire), iret)
		}
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
