package policy

import "net/netip"

// IsAnycastResolver reports whether addr is in ecs.anycast_resolvers
// (only kept with ecs.unknown_client: node), as Decide asks of each
// client; tests check the list on its own.
func (t *Table) IsAnycastResolver(addr netip.Addr) bool {
	return t != nil && t.nodeIn != nil && t.nodeIn.anycast.contains(addr)
}

// TableDepthsOK reports whether every first-level table entry of r's
// partitions that leads to an inner node is strideBits deep, as lookup
// takes it without reading the depth; tables reports how many tables
// there were.
func TableDepthsOK(r *Record) (ok bool, tables int) {
	for _, t := range []*trie{&r.v4, &r.v6} {
		if t.table == nil {
			continue
		}
		tables++
		for i, ref := range t.table {
			if !isLeaf(ref) && t.depth[i] != strideBits {
				return false, tables
			}
		}
	}
	return true, tables
}
