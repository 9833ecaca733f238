package policy

import "net/netip"

// IsAnycastResolver reports whether addr is in ecs.anycast_resolvers
// (only kept with ecs.unknown_client: node), as Decide asks of each
// client; tests check the list on its own.
func (t *Table) IsAnycastResolver(addr netip.Addr) bool {
	return t != nil && t.nodeIn != nil && t.nodeIn.anycast.contains(addr)
}
