package policy

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/geo"
)

// The answering node as an input. The node's identity (node.name,
// node.region) is fixed for the process, so match keys on it (node,
// node_region) are decided when a record is compiled: a rule that cannot
// match on this node is never in an outcome's mask, and the query path
// pays nothing for them.
//
// With ecs.unknown_client: node, a query with no usable ECS whose resolver
// is in ecs.anycast_resolvers, or is not placed by the geo databases, is
// steered as if the client were at the node (its location and country).
// Compiling such a record builds, next to its client partition, a pair of
// unknown-client tries whose leaves hold the outcome of a virtual client
// with the node's geo facts in that piece of address space (its twin:
// CIDR matches still see the real address) and whether the geo databases
// place nobody there (no country, no location). They are apart from the
// client partition so that a subnet's scope is exactly what it is without
// them. Deciding a query without ECS then walks that trie too and, for an
// unknown client, takes the twin instead of the client's outcome; the
// answer depends on no client bits, so its scope is 0.

// Input says which input a decision steered by.
type Input uint8

// The inputs.
const (
	// InputClient: the client subnet (ECS) or, without one, the
	// resolver's address.
	InputClient Input = iota
	// InputNodeAnycast: the node's location, because the resolver is in
	// ecs.anycast_resolvers.
	InputNodeAnycast
	// InputNodeUnplaced: the node's location, because the geo databases
	// do not place the resolver.
	InputNodeUnplaced
)

// nodeInput is the answering node as the policies of one table see it.
type nodeInput struct {
	name, region string
	// info is the virtual client at the node: its country (and
	// continent) and location, or the country's centroid.
	info geo.Info
	// steer is set with ecs.unknown_client: node and a node that has a
	// location or a country.
	steer bool
	// key describes info for compile keys.
	key     string
	anycast prefixSet
	// placed4 and placed6 say, per leaf, whether the geo databases place
	// nobody there (1) or somebody (0): the unknown-client tries of every
	// record without CIDR matches, whose twin is one outcome (placedTries).
	placed4, placed6 trie
	geo              *geo.Set // what they were compiled against
}

// placedTries compiles the shared placed tries when a record of recs
// needs them, or takes prev's, compiled against the same databases.
func (n *nodeInput) placedTries(recs []built, g *geo.Set, part *geo.Partition, prev *Table) error {
	need := false
	for _, br := range recs {
		need = need || br.r.nodeTwins && !br.reused && !br.r.hasCIDRs()
	}
	if !need {
		return nil
	}
	if prev != nil && prev.nodeIn != nil && prev.nodeIn.geo == g {
		n.placed4, n.placed6, n.geo = prev.nodeIn.placed4, prev.nodeIn.placed6, g
		return nil
	}
	c := &compiler{geo: g, part: part, unknown: true, placedOnly: true}
	if part != nil {
		c.cur = part.Cursor()
	}
	var err error
	if n.placed4, err = c.build(netip.PrefixFrom(netip.IPv4Unspecified(), 0), false); err != nil {
		return err
	}
	if n.placed6, err = c.build(netip.PrefixFrom(netip.IPv6Unspecified(), 0), false); err != nil {
		return err
	}
	n.geo = g
	return nil
}

// hasCIDRs reports whether a rule of r matches on CIDRs (the outcome of a
// client at the node then depends on the address).
func (r *Record) hasCIDRs() bool {
	for _, rule := range r.Rules {
		if rule.Match != nil && len(rule.Match.cidrs(nil)) > 0 {
			return true
		}
	}
	return false
}

// newNodeInput reads the node and ecs sections of cfg.
func newNodeInput(cfg *config.Config) *nodeInput {
	n := &nodeInput{}
	if nc := cfg.Node; nc != nil {
		n.name, n.region = nc.Name, nc.Region
		if c, ok := geo.LookupCountry(nc.Country); ok && nc.Country != "" {
			n.info.Country, n.info.Continent = c.Code, c.Continent
			n.info.Lat, n.info.Lon, n.info.HasLocation, n.info.LocationIsCentroid = c.Lat, c.Lon, true, true
		}
		if l := nc.Location; l != nil {
			n.info.Lat, n.info.Lon, n.info.HasLocation, n.info.LocationIsCentroid = l.Lat, l.Lon, true, false
		}
	}
	n.steer = cfg.ECS.UnknownClient == config.UnknownClientNode && placed(&n.info)
	if n.steer {
		n.key = n.info.Country + " " + n.info.Continent + " " + strconv.FormatFloat(n.info.Lat, 'g', -1, 64) + "," + strconv.FormatFloat(n.info.Lon, 'g', -1, 64)
		n.anycast = newPrefixSet(cfg.ECS.AnycastResolverPrefixes())
	}
	return n
}

// placed reports whether info says where a client is.
func placed(info *geo.Info) bool { return info.Country != "" || info.HasLocation }

// Node returns the node's name and the geo facts of the virtual client at
// it, and whether ecs.unknown_client: node steers by them.
func (t *Table) Node() (name string, info geo.Info, steer bool) {
	if t == nil || t.nodeIn == nil {
		return "", geo.Info{}, false
	}
	return t.nodeIn.name, t.nodeIn.info, t.nodeIn.steer
}

// nodeDependent reports whether what r compiles to depends on the node:
// it matches on the node, or could be steered by the node's location.
func (r *Record) nodeDependent() bool {
	for _, rule := range r.Rules {
		if rule.Match != nil && rule.Match.onNodeKeys() {
			return true
		}
	}
	return r.geoDependent()
}

// geoDependent reports whether r's answers depend on the client's geo
// facts (not only on its address): only such records get node twins.
func (r *Record) geoDependent() bool {
	if len(r.proximity) > 0 || len(r.latencyActs) > 0 {
		return true
	}
	for _, rule := range r.Rules {
		if rule.Match != nil && !rule.Match.Resolver && rule.Match.usesLocation() {
			return true
		}
	}
	return false
}

// prefixSet is a small set of prefixes as sorted, merged address ranges:
// a membership test is a binary search that does not allocate.
type prefixSet struct {
	v4 [][2]uint32  // first, last
	v6 [][2]uint128 // first, last
}

type uint128 struct{ hi, lo uint64 }

func (a uint128) less(b uint128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func u128(a netip.Addr) uint128 {
	b := a.As16()
	return uint128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func newPrefixSet(ps []netip.Prefix) prefixSet {
	var s prefixSet
	for _, p := range ps {
		p = p.Masked()
		if p.Addr().Is4() {
			a := p.Addr().As4()
			first := binary.BigEndian.Uint32(a[:])
			last := first | uint32(uint64(1)<<(32-p.Bits())-1)
			s.v4 = append(s.v4, [2]uint32{first, last})
			continue
		}
		first := u128(p.Addr())
		last := first
		if h := 128 - p.Bits(); h >= 64 {
			last.lo = ^uint64(0)
			if h > 64 {
				last.hi |= uint64(1)<<(h-64) - 1
			}
			if h == 128 {
				last.hi = ^uint64(0)
			}
		} else if h > 0 {
			last.lo |= uint64(1)<<h - 1
		}
		s.v6 = append(s.v6, [2]uint128{first, last})
	}
	slices.SortFunc(s.v4, func(a, b [2]uint32) int { return int(int64(a[0]) - int64(b[0])) })
	slices.SortFunc(s.v6, func(a, b [2]uint128) int {
		switch {
		case a[0].less(b[0]):
			return -1
		case b[0].less(a[0]):
			return 1
		}
		return 0
	})
	// Merge overlapping ranges (prefixes nest or are disjoint).
	m4 := s.v4[:0]
	for _, r := range s.v4 {
		if n := len(m4); n > 0 && r[0] <= m4[n-1][1] {
			m4[n-1][1] = max(m4[n-1][1], r[1])
			continue
		}
		m4 = append(m4, r)
	}
	s.v4 = m4
	m6 := s.v6[:0]
	for _, r := range s.v6 {
		if n := len(m6); n > 0 && !m6[n-1][1].less(r[0]) {
			if m6[n-1][1].less(r[1]) {
				m6[n-1][1] = r[1]
			}
			continue
		}
		m6 = append(m6, r)
	}
	s.v6 = m6
	return s
}

// contains reports whether addr (unmapped first) is in the set.
func (s *prefixSet) contains(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.Is4() {
		if len(s.v4) == 0 {
			return false
		}
		a4 := addr.As4()
		x := binary.BigEndian.Uint32(a4[:])
		lo, hi := 0, len(s.v4)
		for lo < hi { // the first range starting after x
			m := int(uint(lo+hi) >> 1)
			if s.v4[m][0] <= x {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo > 0 && x <= s.v4[lo-1][1]
	}
	if len(s.v6) == 0 || !addr.Is6() {
		return false
	}
	x := u128(addr)
	lo, hi := 0, len(s.v6)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !x.less(s.v6[m][0]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && !s.v6[lo-1][1].less(x)
}

// DescribeInput says in words what a decision with input in steered by
// for a query from resolver (explain); "" for InputClient.
func (t *Table) DescribeInput(in Input, resolver netip.Addr) string {
	name := ""
	if t != nil && t.nodeIn != nil {
		name = t.nodeIn.name
	}
	switch in {
	case InputNodeAnycast:
		return fmt.Sprintf("node %s's location (resolver %s is in ecs.anycast_resolvers)", name, resolver)
	case InputNodeUnplaced:
		return fmt.Sprintf("node %s's location (resolver %s is not placed by the geo database)", name, resolver)
	}
	return ""
}
