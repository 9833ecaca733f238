package fleetnode

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/fleet"
)

// Serials agrees the serials of zones transferred out across the fleet
// (xfr.Agreement), so that every node exports the same content under the
// same serial and a secondary that transfers from several nodes never
// sees one serial with two contents. Each zone has one key,
// P/serials/ORIGIN, holding the serial the fleet agreed last and the
// digest of the content it was agreed for; a node whose export changed
// reads it and takes its serial when the content is the same, or writes
// the next serial with one compare-and-swap on the key's revision (a node
// losing the race reads again and finds the winner's). Every node
// follows the keys and takes a newer serial agreed for the content it
// exports. The store is written once per change of an exported zone's
// content, not per node: the others find it agreed.
type Serials struct {
	m       *Member
	changed func()

	mu   sync.Mutex
	view map[string]agreedSerial // by origin, as followed
}

// agreedSerial is the value of a P/serials/ORIGIN key.
type agreedSerial struct {
	Serial uint32 `json:"serial"`
	Sum    string `json:"sum"`
	// Node is the node that agreed it, for people reading the store.
	Node string `json:"node,omitempty"`
}

func serialsPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/serials/" }

// agreeTimeout bounds one agreement (its reads and its compare-and-swap):
// a node cut from the store exports its own serial rather than wait.
const agreeTimeout = 2 * time.Second

// AgreeSerials makes the member agree exported serials with the fleet;
// changed is called when the fleet's agreed serials change (the transfer
// service then looks again: xfr.Service.HealthChanged). Start follows
// them. Call it before Start.
func (m *Member) AgreeSerials(changed func()) *Serials {
	s := &Serials{m: m, changed: changed, view: map[string]agreedSerial{}}
	m.serials = s
	return s
}

// Agree is xfr.Agreement's.
func (s *Serials) Agree(origin, sum string, proposed uint32) (uint32, error) {
	key := serialsPrefix(s.m.prefix) + origin
	ctx, cancel := context.WithTimeout(context.Background(), agreeTimeout)
	defer cancel()
	for range 8 {
		kvs, _, err := s.m.store.Get(ctx, key)
		if err != nil {
			return 0, err
		}
		var cur agreedSerial
		var rev int64
		for _, kv := range kvs {
			if kv.Key == key { // a prefix read: other origins may start with this one
				if err := json.Unmarshal(kv.Value, &cur); err == nil {
					rev = kv.Rev
				}
			}
		}
		next := proposed
		switch {
		case rev != 0 && cur.Sum == sum:
			next = later(cur.Serial, proposed)
			if next == cur.Serial {
				s.seen(origin, cur)
				return next, nil // agreed already, by another node
			}
		case rev != 0:
			after := cur.Serial + 1
			if after == 0 {
				after = 1
			}
			next = later(after, proposed)
		}
		val := agreedSerial{Serial: next, Sum: sum, Node: s.m.local.Fleet.Node}
		data, _ := json.Marshal(val)
		ok, _, err := s.m.store.Txn(ctx, []fleet.Cmp{fleet.ModRevIs(key, rev)}, []fleet.KV{{Key: key, Value: data}}, nil)
		if err != nil {
			return 0, err
		}
		if ok {
			s.seen(origin, val)
			return next, nil
		}
		// Another node agreed meanwhile: read its serial.
	}
	return 0, errors.New("fleet: the zone's serial key kept changing under the compare-and-swap")
}

// later returns whichever of a and b is newer (RFC 1982; a when neither).
func later(a, b uint32) uint32 {
	if d := b - a; d != 0 && d < 1<<31 {
		return b
	}
	return a
}

// seen records an agreement this node made or read.
func (s *Serials) seen(origin string, a agreedSerial) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.view[origin]; !ok || later(cur.Serial, a.Serial) != cur.Serial {
		s.view[origin] = a
	}
}

// Agreed is xfr.Agreement's.
func (s *Serials) Agreed(origin string) (uint32, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.view[origin]
	return a.Serial, a.Sum, ok
}

// follow keeps the view of the agreed serials until ctx ends, calling
// changed when one changes.
func (s *Serials) follow(ctx context.Context) {
	prefix := serialsPrefix(s.m.prefix)
	s.m.followView(ctx, prefix, func(view map[string][]byte, _ int64) {
		s.mu.Lock()
		moved := false
		for key, data := range view {
			var a agreedSerial
			if json.Unmarshal(data, &a) != nil {
				continue
			}
			origin := strings.TrimPrefix(key, prefix)
			if s.view[origin] != a {
				s.view[origin] = a
				moved = true
			}
		}
		s.mu.Unlock()
		if moved && s.changed != nil {
			s.changed()
		}
	})
}
