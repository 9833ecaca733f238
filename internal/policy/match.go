package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/steer-dns/steer/internal/geo"
)

// Match is a compiled match: keys ANDed, values within a key ORed. Its
// keys are rows of the key table (keys.go).
type Match struct {
	keys []keyMatch // in the table's order
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
	for i := range m.keys {
		km := &m.keys[i]
		switch km.k.kind {
		case keyFact:
			check(km.k.name, km.k.fact(info), km.strs)
		case keyNode:
			check(km.k.name, km.have, km.strs)
		case keyASN:
			hit := info.ASN != 0 && slices.Contains(km.asns, info.ASN)
			switch {
			case hit:
				note("asn AS%d is listed", info.ASN)
			case info.ASN == 0:
				note("asn unknown is not listed")
			default:
				note("asn AS%d is not listed", info.ASN)
			}
			ok = ok && hit
		case keyCIDR:
			hit := false
			for _, c := range km.cidrs {
				if c.Contains(p.Addr()) && c.Bits() <= p.Bits() {
					note("address is inside %s", c)
					hit = true
					break
				}
			}
			if !hit {
				if why != nil {
					note("address is in none of %s", prefixList(km.cidrs))
				}
				ok = false
			}
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
	for i := range m.keys {
		out = append(out, m.keys[i].cidrs...)
	}
	if m.Not != nil {
		out = m.Not.cidrs(out)
	}
	return out
}

// onNodeKeys reports whether m (or its negation) matches on the node.
func (m *Match) onNodeKeys() bool {
	for i := range m.keys {
		if m.keys[i].k.kind == keyNode {
			return true
		}
	}
	return m.Not != nil && m.Not.onNodeKeys()
}

// onNode reports whether m's node keys hold on this node.
func (m *Match) onNode() bool {
	for i := range m.keys {
		km := &m.keys[i]
		if km.k.kind == keyNode && (km.have == "" || !slices.Contains(km.strs, km.have)) {
			return false
		}
	}
	return true
}

// usesLocation reports whether m (or its negation) reads the client's
// geo facts.
func (m *Match) usesLocation() bool {
	for i := range m.keys {
		if k := m.keys[i].k.kind; k == keyFact || k == keyASN {
			return true
		}
	}
	return m.Not != nil && m.Not.usesLocation()
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
