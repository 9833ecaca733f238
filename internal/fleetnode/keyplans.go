package fleetnode

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
)

// KeyPlans shares the signed zones' key plans (package keyroll) across the
// fleet, so that every node publishes the same DNSKEY RRset and signs with
// the same ZSK at every instant, and a rollover makes one successor key,
// not one per node. Each zone has one key, P/dnssec/ORIGIN, holding its
// plan as keyroll encodes it (private keys included: the store must be
// reached over TLS with authentication). One node drives: it holds
// P/dnssec/leader under a lease of its own and is the only one that
// steps a plan (generates a successor, moves it on); every node follows
// the plans and applies them at the times they hold. A driver that dies
// loses its lease; another node takes the key and steps the plan as the
// store has it, so the rollover goes on with the successor already made.
// Every write is a compare-and-swap on the revision of the plan it was
// made from (and, for a driver's step, on the revision of its leader
// key), so two nodes that both believe they drive — one not yet aware its
// lease expired — never both write: the loser reads the winner's plan.
type KeyPlans struct {
	m       *Member
	changed func()

	mu     sync.Mutex
	plans  map[string]fleet.KV // by origin, as followed
	loaded bool                // the store has been read once
	driver string              // the node holding the leader key ("": none)
	// leading is the revision of the leader key this node wrote; 0 when
	// it does not drive.
	leading int64
	poke    chan struct{} // the leader key changed, or need did
	// need says whether the node campaigns to drive (SetNeeded): only
	// while it serves a zone with a key plan to step.
	need bool

	// prot is the store's protection as last asked (Protection), at
	// protAt.
	prot   fleet.Protection
	protAt time.Time
}

// dnssecPrefix is P/dnssec/, leaderKey P/dnssec/leader (no origin can be
// "leader": origins are canonical, with a final dot).
func dnssecPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/dnssec/" }

func leaderKey(prefix string) string { return dnssecPrefix(prefix) + "leader" }

// PlanKey is the store key of origin's plan under the fleet prefix.
func PlanKey(prefix, origin string) string { return dnssecPrefix(prefix) + origin }

// ShareKeyPlans makes the member follow the key plans and campaign to
// drive them; changed is called when a plan or the driver changes (the
// node's key service then looks again). Call it before Start.
func (m *Member) ShareKeyPlans(changed func()) *KeyPlans {
	k := &KeyPlans{m: m, changed: changed, plans: map[string]fleet.KV{}, poke: make(chan struct{}, 1)}
	m.keyPlans = k
	return k
}

// Plan returns origin's plan as the store holds it and the revision it
// was written at; ok is false when the store holds none (or has not been
// read yet: Loaded).
func (k *KeyPlans) Plan(origin string) (data []byte, rev int64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	kv, ok := k.plans[origin]
	return kv.Value, kv.Rev, ok
}

// Loaded reports whether the store has been read since the start: until
// then a node serves the copy of each plan kept in its state directory.
func (k *KeyPlans) Loaded() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loaded
}

// Driver returns the node that drives the plans ("" when none does now)
// and whether it is this one.
func (k *KeyPlans) Driver() (node string, self bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.driver, k.leading != 0
}

// protectionMaxAge is how long Protection's answer is kept: the store's
// protection is asked again at most once a minute (etcd's authentication
// may be turned on while the nodes run).
const protectionMaxAge = time.Minute

// Protection says how the store guards what is written to it
// (fleet.ProtectionOf): a plan holding a private key steer generated
// may go only to a store that is TLS and authenticated (or with
// fleet.allow_insecure_keys, InsecureKeysAllowed). Asked only when such
// a plan is to be written, and kept for a minute; it may block for the
// store's round trips (a TLS handshake with each member).
func (k *KeyPlans) Protection() fleet.Protection {
	k.mu.Lock()
	if !k.protAt.IsZero() && time.Since(k.protAt) < protectionMaxAge {
		defer k.mu.Unlock()
		return k.prot
	}
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	p := fleet.ProtectionOf(ctx, k.m.store)
	k.mu.Lock()
	k.prot, k.protAt = p, time.Now()
	k.mu.Unlock()
	return p
}

// InsecureKeysAllowed reports whether the node's file allows generated
// private keys into a store that is not TLS and authenticated
// (fleet.allow_insecure_keys).
func (k *KeyPlans) InsecureKeysAllowed() bool { return k.m.local.Fleet.AllowInsecureKeys }

// SetNeeded says whether the plans need a driver: while the node serves
// a signed zone with zsk_lifetime, or one whose plan is in the store. Only
// then does the node campaign, holding a lease of its own for the leader
// key; a fleet without such a zone holds no lease for it. Set false, a
// driver revokes its lease (another node that still needs one takes
// over). The plans are followed either way.
func (k *KeyPlans) SetNeeded(need bool) {
	k.mu.Lock()
	moved := k.need != need
	k.need = need
	k.mu.Unlock()
	if moved {
		select {
		case k.poke <- struct{}{}:
		default:
		}
	}
}

func (k *KeyPlans) needed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.need
}

// ErrNotDriver is Step's error when this node does not hold the leader
// key (it lost it, or never had it).
var ErrNotDriver = errors.New("this node does not drive the key plans")

// writeTimeout bounds one write of a plan.
const writeTimeout = 3 * time.Second

// Step writes origin's plan as the driver stepped it from the plan at
// rev (0: the store had none): it holds only while the store's plan is
// still the one at rev and this node still holds the leader key. ok is
// false when either changed (the caller reads the store's plan again).
func (k *KeyPlans) Step(origin string, data []byte, rev int64) (ok bool, newRev int64, err error) {
	k.mu.Lock()
	leading := k.leading
	k.mu.Unlock()
	if leading == 0 {
		return false, 0, ErrNotDriver
	}
	return k.put(origin, data, rev, []fleet.Cmp{fleet.ModRevIs(leaderKey(k.m.prefix), leading)})
}

// Change writes origin's plan as an operator changed it (a KSK rollover
// started or completed through any node's API) from the plan at rev: it
// holds only while the store's plan is still that one.
func (k *KeyPlans) Change(origin string, data []byte, rev int64) (ok bool, newRev int64, err error) {
	return k.put(origin, data, rev, nil)
}

func (k *KeyPlans) put(origin string, data []byte, rev int64, extra []fleet.Cmp) (bool, int64, error) {
	key := PlanKey(k.m.prefix, origin)
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	cmps := append([]fleet.Cmp{fleet.ModRevIs(key, rev)}, extra...)
	ok, newRev, err := k.m.store.Txn(ctx, cmps, []fleet.KV{{Key: key, Value: data}}, nil)
	if err != nil || !ok {
		return false, 0, err
	}
	// Seen here at once: the caller adopts what it wrote without waiting
	// for its own watch.
	k.mu.Lock()
	if cur, had := k.plans[origin]; !had || cur.Rev < newRev {
		k.plans[origin] = fleet.KV{Key: key, Value: data, Rev: newRev}
	}
	k.mu.Unlock()
	return true, newRev, nil
}

// follow keeps the view of the plans and of the leader key until ctx
// ends.
func (k *KeyPlans) follow(ctx context.Context) {
	prefix := dnssecPrefix(k.m.prefix)
	lk := leaderKey(k.m.prefix)
	apply := func(kvs []fleet.KV, deleted []string, snapshot bool) {
		k.mu.Lock()
		before := k.driver
		moved := snapshot && !k.loaded
		if snapshot {
			// A whole new view: a plan gone from it is gone.
			k.loaded = true
			old := k.plans
			k.plans = map[string]fleet.KV{}
			k.driver = ""
			for o := range old {
				if !slices.ContainsFunc(kvs, func(kv fleet.KV) bool { return kv.Key == prefix+o }) {
					moved = true
				}
			}
		}
		for _, kv := range kvs {
			if kv.Key == lk {
				k.driver = string(kv.Value)
				continue
			}
			origin := strings.TrimPrefix(kv.Key, prefix)
			if cur, ok := k.plans[origin]; !ok || cur.Rev != kv.Rev {
				moved = true
			}
			k.plans[origin] = kv
		}
		for _, key := range deleted {
			if key == lk {
				k.driver = ""
				continue
			}
			delete(k.plans, strings.TrimPrefix(key, prefix))
			moved = true
		}
		driverMoved := before != k.driver
		k.mu.Unlock()
		if driverMoved {
			select {
			case k.poke <- struct{}{}:
			default:
			}
		}
		if (moved || driverMoved) && k.changed != nil {
			k.changed()
		}
	}
	k.m.follow(ctx, prefix, fleet.Handler{
		Snapshot: func(kvs []fleet.KV, _ int64) { apply(kvs, nil, true) },
		Events: func(evs []fleet.Event, _ int64) {
			var puts []fleet.KV
			var dels []string
			for _, e := range evs {
				if e.Kind == fleet.EventDelete {
					dels = append(dels, e.KV.Key)
				} else {
					puts = append(puts, e.KV)
				}
			}
			apply(puts, dels, false)
		},
		Error: func(err error) { k.m.log.Warn("fleet: following the key plans", "err", err) },
	})
}

// campaign holds the leader key whenever no other node does, under a
// lease of its own (fleet.lease_ttl), until ctx ends; it then revokes
// the lease, so another node drives at once rather than after the TTL.
func (k *KeyPlans) campaign(ctx context.Context) {
	ttl := time.Duration(k.m.local.Fleet.LeaseTTL)
	node := k.m.local.Fleet.Node
	key := leaderKey(k.m.prefix)
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-k.poke:
		case <-t.C:
		}
		return true
	}
	for ctx.Err() == nil {
		if !k.needed() {
			// No plan to step here: no lease, until SetNeeded.
			select {
			case <-ctx.Done():
				return
			case <-k.poke:
			}
			continue
		}
		l, err := k.m.store.Grant(ctx, ttl)
		if err != nil {
			if !wait(250 * time.Millisecond) {
				return
			}
			continue
		}
		k.hold(ctx, l, key, node, ttl, wait)
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l.Close(cctx)
		cancel()
	}
}

// hold tries to take the leader key under l and drives while it holds
// it; it returns when ctx ends or l is lost.
func (k *KeyPlans) hold(ctx context.Context, l fleet.Lease, key, node string, ttl time.Duration, wait func(time.Duration) bool) {
	defer k.setLeading(0)
	for ctx.Err() == nil {
		select {
		case <-l.Done():
			k.m.log.Warn("fleet: the key plans' lease was lost", "err", l.Err())
			return
		default:
		}
		tctx, cancel := context.WithTimeout(ctx, writeTimeout)
		ok, rev, err := k.m.store.Txn(tctx, []fleet.Cmp{fleet.Absent(key)}, []fleet.KV{{Key: key, Value: []byte(node), Lease: l.ID()}}, nil)
		cancel()
		if err == nil && ok {
			k.m.log.Info("fleet: this node drives the key plans", "lease_ttl", ttl)
			k.setLeading(rev)
			for {
				select {
				case <-ctx.Done():
					return
				case <-l.Done():
					k.m.log.Warn("fleet: this node no longer drives the key plans: its lease was lost", "err", l.Err())
					return
				case <-k.poke:
				}
				if !k.needed() {
					k.m.log.Info("fleet: this node no longer drives the key plans: no zone it serves has one to step")
					return // the campaign revokes the lease
				}
			}
		}
		// Held by another node (or the store did not answer): look again
		// when the key changes, or after a third of the TTL.
		if !wait(ttl/3) || !k.needed() {
			return
		}
	}
}

func (k *KeyPlans) setLeading(rev int64) {
	k.mu.Lock()
	was := k.leading
	k.leading = rev
	if rev != 0 {
		k.driver = k.m.local.Fleet.Node
	}
	k.mu.Unlock()
	if (was == 0) != (rev == 0) && k.changed != nil {
		k.changed()
	}
}

// start runs the follower and the campaign under the member's wait
// group.
func (k *KeyPlans) start(ctx context.Context) {
	k.m.wg.Add(2)
	go func() {
		defer k.m.wg.Done()
		k.follow(ctx)
	}()
	go func() {
		defer k.m.wg.Done()
		k.campaign(ctx)
	}()
}
