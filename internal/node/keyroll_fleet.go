package node

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/keyroll"
)

// Key plans in a fleet. Every node must publish the same DNSKEY RRset and
// sign with the same ZSK at every instant, and a rollover must make one
// successor, not one per node; so in a fleet a zone's plan is the store's
// (P/dnssec/ORIGIN, fleetnode.KeyPlans). One node drives (it holds
// P/dnssec/leader under its lease): only it steps the plans (Next: the
// successor, its times; Sync: the configured keys) and writes them back,
// each write a compare-and-swap on the plan it stepped. Every node adopts
// the store's plan as soon as it sees it, keeps it 0600 in its state
// directory (keyroll.File) before using it, and serves from that copy
// after a restart until the store answers. When the driver dies its lease
// ends, another node takes the key and steps the plan as the store has
// it: the successor already made is the one that goes on. An operator's
// change (a KSK rollover) goes through any node, also as a
// compare-and-swap.

// errPlanMoved is keep's error when the store's plan changed under a
// driver's step (another node wrote first): the step is dropped, and the
// store's plan is the one in use.
var errPlanMoved = errors.New("the fleet's key plan changed meanwhile")

// errKeysHeld is keep's error when the plan would put a private key
// steer generated into a store that is not TLS and authenticated
// (keysMayGoLocked): the step or change is dropped, the key with it (it
// was never kept or published), and the zone goes on with the plan in
// use.
var errKeysHeld = errors.New("a generated private key may not go to this store")

// keyFleet is the keyService's part in a fleet.
type keyFleet struct {
	plans *fleetnode.KeyPlans
	// revs are the store revisions of the plans adopted, by origin.
	revs map[string]int64
}

// shareInFleet makes ks keep its plans in the fleet's store; changed
// plans and a new driver wake the key loop. Call it before Start.
func (ks *keyService) shareInFleet(m *fleetnode.Member) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.fleet = &keyFleet{revs: map[string]int64{}}
	ks.fleet.plans = m.ShareKeyPlans(ks.poke)
}

// drivesLocked reports whether this node may step plans: always on a
// single node; in a fleet when it holds the leader key and has read the
// store since it started.
func (ks *keyService) drivesLocked() bool {
	if ks.fleet == nil {
		return true
	}
	_, self := ks.fleet.plans.Driver()
	return self && ks.fleet.plans.Loaded()
}

// inStoreLocked reports whether the store holds a plan for origin.
func (ks *keyService) inStoreLocked(origin string) bool {
	if ks.fleet == nil {
		return false
	}
	_, _, ok := ks.fleet.plans.Plan(origin)
	return ok
}

// adoptLocked makes the store's plan of origin the one in use when it is
// one this node has not adopted yet, keeping its copy in the state
// directory first. A plan in the store that cannot be read is logged and
// not used: the zone goes on with the plan it has.
func (ks *keyService) adoptLocked(origin string) {
	if ks.fleet == nil {
		return
	}
	data, rev, ok := ks.fleet.plans.Plan(origin)
	if !ok || ks.fleet.revs[origin] == rev {
		return
	}
	p, err := keyroll.Decode(fleetnode.PlanKey("fleet store", origin), data)
	if err == nil && p.Zone != origin {
		err = fmt.Errorf("the fleet's key plan for %s is the plan of zone %s", origin, p.Zone)
	}
	if err != nil {
		ks.log.Error("DNSSEC key plan in the fleet's store cannot be used; keeping the plan in use", "zone", origin, "err", err)
		ks.fleet.revs[origin] = rev // logged once per revision
		return
	}
	kz := ks.zones[origin]
	if kz == nil {
		kz = &keyZone{logged: time.Now()}
		ks.zones[origin] = kz
	}
	if path := ks.path(origin); path != "" {
		if err := keyroll.Save(path, p); err != nil {
			ks.log.Error("DNSSEC key plan from the fleet's store cannot be kept in the state directory", "zone", origin, "err", err)
		}
	}
	fresh := kz.plan == nil
	kz.plan = p
	ks.fleet.revs[origin] = rev
	driver, _ := ks.fleet.plans.Driver()
	if fresh {
		ks.log.Info("DNSSEC key plan from the fleet's store", "zone", origin, "driver", driver, "keys", planKeys(p, time.Now()))
	} else {
		ks.log.Debug("DNSSEC key plan from the fleet's store", "zone", origin, "driver", driver, "revision", rev)
	}
}

// storeLocked writes p, stepped or changed from the plan in use, to the
// store (a step when driver, else an operator's change), on the revision
// adopted; false when the store's plan changed meanwhile (the caller
// adopts it) or the store failed (err).
func (ks *keyService) storeLocked(origin string, p *keyroll.Plan, driver bool) (bool, error) {
	data, err := p.Encode()
	if err != nil {
		return false, err
	}
	rev := ks.fleet.revs[origin]
	if !ks.inStoreLocked(origin) {
		rev = 0
	}
	var ok bool
	var newRev int64
	if driver {
		ok, newRev, err = ks.fleet.plans.Step(origin, data, rev)
	} else {
		ok, newRev, err = ks.fleet.plans.Change(origin, data, rev)
	}
	if err != nil || !ok {
		return false, err
	}
	ks.fleet.revs[origin] = newRev
	return true, nil
}

// keep makes p origin's plan: kept in the state directory and, in a
// fleet, written to the store first by the driver (by anyone when
// operator is set); a lost compare-and-swap adopts the store's plan
// instead, and is an error for an operator's change.
func (ks *keyService) keep(origin string, p *keyroll.Plan, operator bool) error {
	if ks.fleet != nil && (operator || ks.drivesLocked()) {
		if data, _, ok := ks.fleet.plans.Plan(origin); ok {
			// A step that moved nothing (Next and Sync return a copy) is
			// not written: every write wakes every node.
			if enc, err := p.Encode(); err == nil && bytes.Equal(enc, data) {
				ks.zones[origin].plan = p
				return nil
			}
		}
		if err := ks.keysMayGoLocked(origin, p); err != nil {
			return err
		}
		ok, err := ks.storeLocked(origin, p, !operator)
		switch {
		case err != nil && operator:
			return fmt.Errorf("writing the key plan to the fleet's store: %v", err)
		case err != nil:
			return fmt.Errorf("the fleet's store did not take the key plan: %v", err)
		case !ok:
			ks.adoptLocked(origin)
			if operator {
				return fmt.Errorf("zone %s: the key plan changed in the fleet's store meanwhile; look at steer dnssec status and try again", origin)
			}
			return errPlanMoved
		}
	}
	return ks.save(origin, p)
}

// keysMayGoLocked checks that p may be written to the fleet's store as
// origin's plan: a private key steer generated (a ZSK rollover's
// successor, a new KSK) that the plan in use does not hold goes only to
// a store that is TLS and authenticated, as steer fleet push asks of the
// pushed keys, unless the node's file allows it
// (fleet.allow_insecure_keys). The configured keys' private parts are
// not new there: they came through that store in the pushed bundle, on
// the push's own check. The reason a plan is held is kept for the status
// (kz.held) and returned as an errKeysHeld.
func (ks *keyService) keysMayGoLocked(origin string, p *keyroll.Plan) error {
	kz := ks.zones[origin]
	var cur *keyroll.Plan
	if kz != nil {
		cur = kz.plan
	}
	fresh := newGeneratedKeys(cur, p)
	if len(fresh) == 0 {
		return nil
	}
	prot := ks.fleet.plans.Protection()
	if prot.OK() {
		if kz != nil {
			kz.held = ""
		}
		return nil
	}
	if ks.fleet.plans.InsecureKeysAllowed() {
		ks.log.Warn("DNSSEC: writing a generated private key to the fleet's store, which is not both TLS and authenticated, as fleet.allow_insecure_keys allows: anyone who can read that etcd, or the network to it, has the key and can sign anything for the zone",
			"zone", origin, "keys", strings.Join(fresh, ", "), "missing", strings.Join(prot.Missing, "; "))
		return nil
	}
	why := fmt.Sprintf("zone %s: key rollover held, the zone stays signed with its current keys: it would write the private key of %s, generated here, to the fleet's store, which is not both TLS and authenticated (%s); protect etcd (README: \"DNSSEC keys in a fleet\"), or set fleet.allow_insecure_keys: true in the nodes' files to accept that anyone who can read that etcd, or the network to it, can sign for the zone",
		origin, strings.Join(fresh, ", "), strings.Join(prot.Missing, "; "))
	if kz != nil {
		kz.held = why
	}
	return fmt.Errorf("%w: %s", errKeysHeld, why)
}

// newGeneratedKeys names the keys of p that steer generated and whose
// private key p holds while cur (the plan in use; nil for none) does
// not.
func newGeneratedKeys(cur, p *keyroll.Plan) []string {
	had := map[string]bool{}
	if cur != nil {
		for _, k := range cur.Keys {
			if k.Private != "" {
				had[k.DNSKEY] = true
			}
		}
	}
	var out []string
	for _, k := range p.Keys {
		if k.Source == keyroll.SourceGenerated && k.Private != "" && !had[k.DNSKEY] {
			out = append(out, fmt.Sprintf("%s %d", strings.ToUpper(string(k.Role)), k.Tag))
		}
	}
	return out
}

// held says why origin's key rollover is held ("" when it is not).
func (ks *keyService) held(origin string) string {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if kz := ks.zones[origin]; kz != nil {
		return kz.held
	}
	return ""
}

// plan returns origin's plan in use (the store's in a fleet, once seen),
// nil when the zone has none yet.
func (ks *keyService) plan(origin string) *keyroll.Plan {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.adoptLocked(origin)
	if kz := ks.zones[origin]; kz != nil {
		return kz.plan
	}
	return nil
}

// change applies an operator's change f to origin's plan (made from the
// configured keys when the zone has none yet) and keeps it; in a fleet
// it needs the store.
func (ks *keyService) change(origin string, configured []*dnssec.Key, f func(*keyroll.Plan) (*keyroll.Plan, error)) (*keyroll.Plan, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.fleet != nil && !ks.fleet.plans.Loaded() {
		return nil, fmt.Errorf("zone %s: the fleet's store has not answered since this node started: its key plan cannot be changed now", origin)
	}
	ks.adoptLocked(origin)
	kz := ks.zones[origin]
	if kz == nil || kz.plan == nil {
		p, err := ks.load(origin)
		if errors.Is(err, fs.ErrNotExist) {
			p, err = keyroll.New(origin, configured, time.Now())
		}
		if err != nil {
			return nil, err
		}
		kz = &keyZone{plan: p, logged: time.Now()}
		ks.zones[origin] = kz
	}
	q, err := f(kz.plan)
	if err != nil {
		return nil, err
	}
	if err := ks.keep(origin, q, true); err != nil {
		return nil, err
	}
	return q, nil
}

// source says where the plans are kept and who drives them.
func (ks *keyService) source() (source, driver string) {
	if ks.fleet == nil {
		return "state directory", ""
	}
	d, _ := ks.fleet.plans.Driver()
	return "fleet", d
}
