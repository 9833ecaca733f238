package zone

import (
	"sort"

	"github.com/miekg/dns"
)

// SignedSet is one RRset of a zone with its signatures, as a signed export
// carries it (EachSet).
type SignedSet struct {
	Name string
	Type uint16
	RRs  []dns.RR
	// Sigs are the RRset's RRSIGs; nil for what is not signed (glue, a
	// delegation's NS) and in an unsigned zone.
	Sigs []dns.RR
	// Cut says the name is a delegation point; Occluded that it is at
	// or below one (or below a DNAME) and is not the cut itself: glue,
	// which no denial chain holds.
	Cut, Occluded bool
}

// EachSet yields every RRset of z with its signatures: the apex's first,
// its SOA leading (the served SOA, with the serial WithSerial gave it),
// then the other names' in text order. A steered name yields only what
// its file gives it (its answers are the export's to add). The sets are
// z's own and must not be modified.
func (z *Zone) EachSet(yield func(SignedSet) bool) {
	if z.Failed != "" || z.SOA == nil || z.apex == nil {
		return
	}
	each := func(n *node, first uint16) bool {
		// first goes first (the apex's SOA), the rest in type order.
		order := make([]int, 0, len(n.rrsets))
		for i := range n.rrsets {
			if n.rrsets[i].rtype == first {
				order = append([]int{i}, order...)
			} else {
				order = append(order, i)
			}
		}
		for _, i := range order {
			s := n.rrsets[i]
			out := SignedSet{Name: n.name, Type: s.rtype, RRs: s.records(n.name), Cut: n.cut, Occluded: n.occluded}
			if n.sig != nil && i < len(n.sig.sets) {
				out.Sigs = n.sig.sets[i]
			}
			if !yield(out) {
				return false
			}
		}
		return true
	}
	if !each(z.apex, dns.TypeSOA) {
		return
	}
	names := make([]string, 0, z.nodes.len())
	for name, n := range z.nodes.all {
		if name != z.Origin && len(n.rrsets) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if !each(z.nodes.get(name), 0) {
			return
		}
	}
}
