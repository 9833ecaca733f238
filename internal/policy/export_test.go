package policy

import "net/netip"

// IsAnycastResolver reports whether addr is in ecs.anycast_resolvers
// (only kept with ecs.unknown_client: node), as Decide asks of each
// client; tests check the list on its own.
func (t *Table) IsAnycastResolver(addr netip.Addr) bool {
	return t != nil && t.nodeIn != nil && t.nodeIn.anycast.contains(addr)
}

// WalkAhead walks r's partition ahead for client as the UDP reader does
// (Ahead, then Step until it stops) and returns the outcome of the leaf it
// reached and the steps it took; ok is false when it had nothing to walk
// or stopped short of a leaf.
func WalkAhead(r *Record, client netip.Addr) (outcome uint32, steps int, ok bool) {
	a := r.Ahead(client)
	if a.t == nil {
		return 0, 0, false
	}
	for a.t != nil && steps <= 129 {
		a.Step()
		steps++
	}
	if a.ref&leafBit == 0 {
		return 0, steps, false
	}
	return a.ref &^ leafBit, steps, true
}

// LookupOutcome is the outcome index a decision for client reads from r's
// partition.
func LookupOutcome(r *Record, client netip.Addr) uint32 {
	t := &r.v4
	if client.Is6() {
		t = &r.v6
	}
	o, _, _ := t.lookup(client)
	return o
}
