package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/steer-dns/steer/internal/geo"
)

// Match is a compiled match: keys ANDed, values within a key ORed.
type Match struct {
	Countries    []string
	Continents   []string
	Subdivisions []string
	ASNs         []uint32
	CIDRs        []netip.Prefix
	// Nodes and NodeRegions match the answering node's name and region,
	// which are node and region (the table's node identity).
	Nodes, NodeRegions []string
	node, region       string
	// Resolver makes the match look at the resolver's address, not the
	// client subnet.
	Resolver bool
	// Not negates a nested match.
	Not *Match
}

// matches evaluates m for a client whose geo record is info and whose
// network is p (p lies wholly inside or outside every CIDR of m: the
// compiler splits the address space at CIDR boundaries). When why is non-nil
// it receives one line per key saying how it decided.
func (m *Match) matches(info *geo.Info, p netip.Prefix, why *[]string) bool {
	ok := true
	note := func(s string, args ...any) {
		if why != nil {
			*why = append(*why, fmt.Sprintf(s, args...))
		}
	}
	check := func(key, have string, want []string) {
		if len(want) == 0 {
			return
		}
		hit := have != "" && slices.Contains(want, have)
		if !hit {
			ok = false
		}
		if why == nil {
			return
		}
		if have == "" {
			have = "unknown"
		}
		if hit {
			note("%s %s is in [%s]", key, have, strings.Join(want, " "))
		} else {
			note("%s %s is not in [%s]", key, have, strings.Join(want, " "))
		}
	}
	check("country", info.Country, m.Countries)
	check("continent", info.Continent, m.Continents)
	check("subdivision", info.Subdivision, m.Subdivisions)
	check("node", m.node, m.Nodes)
	check("node_region", m.region, m.NodeRegions)
	if len(m.ASNs) > 0 && why == nil {
		if info.ASN == 0 || !slices.Contains(m.ASNs, info.ASN) {
			ok = false
		}
	} else if len(m.ASNs) > 0 {
		if info.ASN != 0 && slices.Contains(m.ASNs, info.ASN) {
			note("asn AS%d is listed", info.ASN)
		} else {
			if info.ASN == 0 {
				note("asn unknown is not listed")
			} else {
				note("asn AS%d is not listed", info.ASN)
			}
			ok = false
		}
	}
	if len(m.CIDRs) > 0 {
		hit := false
		for _, c := range m.CIDRs {
			if c.Contains(p.Addr()) && c.Bits() <= p.Bits() {
				if why != nil {
					note("address is inside %s", c)
				}
				hit = true
				break
			}
		}
		if !hit {
			if why != nil {
				note("address is in none of %s", prefixList(m.CIDRs))
			}
			ok = false
		}
	}
	if m.Not != nil {
		var sub []string
		var subWhy *[]string
		if why != nil {
			subWhy = &sub
		}
		if m.Not.matches(info, p, subWhy) {
			note("not: matched (%s)", strings.Join(sub, "; "))
			ok = false
		} else {
			note("not: did not match (%s)", strings.Join(sub, "; "))
		}
	}
	return ok
}

// cidrs appends every CIDR m (and its negation) mentions.
func (m *Match) cidrs(out []netip.Prefix) []netip.Prefix {
	out = append(out, m.CIDRs...)
	if m.Not != nil {
		out = m.Not.cidrs(out)
	}
	return out
}

// onNodeKeys reports whether m (or its negation) matches on the node.
func (m *Match) onNodeKeys() bool {
	return len(m.Nodes)+len(m.NodeRegions) > 0 || m.Not != nil && m.Not.onNodeKeys()
}

// onNode reports whether m's node keys hold on this node.
func (m *Match) onNode() bool {
	return (len(m.Nodes) == 0 || m.node != "" && slices.Contains(m.Nodes, m.node)) &&
		(len(m.NodeRegions) == 0 || m.region != "" && slices.Contains(m.NodeRegions, m.region))
}

func (m *Match) usesLocation() bool {
	return len(m.Countries)+len(m.Continents)+len(m.Subdivisions)+len(m.ASNs) > 0 ||
		(m.Not != nil && m.Not.usesLocation())
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
