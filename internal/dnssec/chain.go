package dnssec

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// This file builds a complete denial-of-existence chain for a zone's
// export (what a third-party secondary serves, which has no online
// signer): NSEC (RFC 4034 §4, RFC 4035 §2.3) or NSEC3 without opt-out
// (RFC 5155 §7.1), from the zone's names and types. The node's own
// answers keep compact denial (RFC 9824); this chain is built off the
// query path, when an export is.

// ChainName is one name a chain covers: an authoritative name of the
// zone or a delegation point (never glue or other occluded data), with
// the types of its RRsets.
type ChainName struct {
	// Name is the owner, absolute.
	Name string
	// Types are the types of its RRsets, RRSIG, NSEC and NSEC3 left out.
	Types []uint16
	// Signed says whether the name has RRSIGs of its own data: every
	// authoritative name; a delegation point only when it has a DS.
	Signed bool
}

// NSEC3Params are the parameters of an NSEC3 chain: SHA-1 (the only hash
// defined), no opt-out. RFC 9276 §3.1 wants 0 iterations and an empty
// salt, which the zero value is.
type NSEC3Params struct {
	Iterations uint16
	// Salt is hexadecimal ("" for none).
	Salt string
}

// CanonicalCompare orders two absolute names as RFC 4034 §6.1 does: by
// their labels from the root, each compared as lower-cased octets (a
// shorter label that is a prefix of the other first), a name before the
// names below it. It returns -1, 0 or +1.
func CanonicalCompare(a, b string) int {
	la, lb := nameLabels(a), nameLabels(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := bytes.Compare(la[i], lb[j]); c != 0 {
			return c
		}
	}
	switch {
	case len(la) < len(lb):
		return -1
	case len(la) > len(lb):
		return 1
	}
	return 0
}

// wireLabels returns the labels of name as lower-cased octets (escapes
// such as \. and \032 undone), the leftmost first.
func nameLabels(name string) [][]byte {
	buf := make([]byte, 256)
	off, err := dns.PackDomainName(dns.Fqdn(name), buf, 0, nil, false)
	if err != nil {
		// Not a valid name: order by its text, which is stable.
		return [][]byte{[]byte(strings.ToLower(name))}
	}
	var out [][]byte
	for i := 0; i < off && buf[i] != 0; {
		l := int(buf[i])
		out = append(out, bytes.ToLower(buf[i+1:i+1+l]))
		i += 1 + l
	}
	return out
}

// bitmap returns types with extra added, sorted, without duplicates.
func bitmap(types []uint16, extra ...uint16) []uint16 {
	out := append(append(make([]uint16, 0, len(types)+len(extra)), types...), extra...)
	slices.Sort(out)
	return slices.Compact(out)
}

// NSECChain returns the NSEC records of a zone whose names (any order,
// each once) are names, TTL ttl (RFC 9077: the minimum of the SOA's TTL
// and its MINIMUM field), in canonical order: each name's NSEC names the
// next name and lists its types, NSEC and RRSIG (the NSEC is signed, so
// every owner has an RRSIG); the last one's next is the apex, closing the
// chain. names must hold the apex.
func NSECChain(origin string, names []ChainName, ttl uint32) ([]dns.RR, error) {
	origin = dns.CanonicalName(origin)
	sorted := slices.Clone(names)
	slices.SortFunc(sorted, func(a, b ChainName) int { return CanonicalCompare(a.Name, b.Name) })
	if len(sorted) == 0 || !strings.EqualFold(sorted[0].Name, origin) {
		return nil, fmt.Errorf("dnssec: the NSEC chain of %s lacks its apex", origin)
	}
	out := make([]dns.RR, len(sorted))
	for i, n := range sorted {
		if i > 0 && CanonicalCompare(sorted[i-1].Name, n.Name) == 0 {
			return nil, fmt.Errorf("dnssec: %s is twice in the NSEC chain of %s", n.Name, origin)
		}
		next := origin
		if i+1 < len(sorted) {
			next = sorted[i+1].Name
		}
		out[i] = &dns.NSEC{
			Hdr:        dns.RR_Header{Name: n.Name, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: ttl},
			NextDomain: next,
			TypeBitMap: bitmap(n.Types, dns.TypeNSEC, dns.TypeRRSIG),
		}
	}
	return out, nil
}

// NSEC3Param returns the apex's NSEC3PARAM record for p, TTL 0 (as BIND
// and Knot publish it: only signers read it).
func NSEC3Param(origin string, p NSEC3Params) *dns.NSEC3PARAM {
	return &dns.NSEC3PARAM{
		Hdr:        dns.RR_Header{Name: dns.CanonicalName(origin), Rrtype: dns.TypeNSEC3PARAM, Class: dns.ClassINET},
		Hash:       dns.SHA1,
		Iterations: p.Iterations,
		SaltLength: uint8(len(p.Salt) / 2),
		Salt:       strings.ToUpper(p.Salt),
	}
}

// NSEC3Chain returns the NSEC3 records of a zone whose names (any order,
// each once) are names, TTL ttl, with parameters p and opt-out off (RFC
// 5155 §7.1): one per name and per empty non-terminal between a name and
// the apex, owned by the name's hash under the apex, in hash order, each
// naming the next hash (the last the first, closing the chain) and
// listing the name's types, with RRSIG when the name is signed (an empty
// non-terminal lists none). The apex's types should hold NSEC3PARAM.
// names must hold the apex; two names with the same hash are an error.
func NSEC3Chain(origin string, names []ChainName, ttl uint32, p NSEC3Params) ([]dns.RR, error) {
	origin = dns.CanonicalName(origin)
	if len(p.Salt)%2 != 0 || len(p.Salt) > 2*255 {
		return nil, fmt.Errorf("dnssec: NSEC3 salt %q is not up to 255 octets in hexadecimal", p.Salt)
	}
	type entry struct {
		hash string
		name ChainName
	}
	byName := map[string]ChainName{}
	apex := false
	for _, n := range names {
		key := dns.CanonicalName(n.Name)
		if _, dup := byName[key]; dup {
			return nil, fmt.Errorf("dnssec: %s is twice in the NSEC3 chain of %s", n.Name, origin)
		}
		byName[key] = n
		apex = apex || key == origin
	}
	if !apex {
		return nil, fmt.Errorf("dnssec: the NSEC3 chain of %s lacks its apex", origin)
	}
	// Empty non-terminals: every ancestor of a name, up to the apex, that
	// is not a name itself.
	for _, n := range names {
		key := dns.CanonicalName(n.Name)
		if !dns.IsSubDomain(origin, key) {
			return nil, fmt.Errorf("dnssec: %s is not in zone %s", n.Name, origin)
		}
		for a := parentName(key); a != "" && a != origin && dns.IsSubDomain(origin, a); a = parentName(a) {
			if _, ok := byName[a]; !ok {
				byName[a] = ChainName{Name: a}
			}
		}
	}
	entries := make([]entry, 0, len(byName))
	for key, n := range byName {
		h := dns.HashName(key, dns.SHA1, p.Iterations, p.Salt)
		if h == "" {
			return nil, fmt.Errorf("dnssec: cannot hash %s for NSEC3", n.Name)
		}
		entries = append(entries, entry{hash: h, name: n})
	}
	// Base32hex keeps the order of the octets it encodes: sorting the
	// text sorts the hashes (RFC 5155 §1.3's hash order).
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.hash, b.hash) })
	out := make([]dns.RR, len(entries))
	for i, e := range entries {
		if i > 0 && entries[i-1].hash == e.hash {
			return nil, fmt.Errorf("dnssec: %s and %s have the same NSEC3 hash in %s: choose another salt", entries[i-1].name.Name, e.name.Name, origin)
		}
		next := entries[(i+1)%len(entries)].hash
		var types []uint16
		if len(e.name.Types) > 0 || e.name.Signed {
			types = e.name.Types
			if e.name.Signed {
				types = bitmap(types, dns.TypeRRSIG)
			} else {
				types = bitmap(types)
			}
		}
		out[i] = &dns.NSEC3{
			Hdr:        dns.RR_Header{Name: strings.ToLower(e.hash) + "." + origin, Rrtype: dns.TypeNSEC3, Class: dns.ClassINET, Ttl: ttl},
			Hash:       dns.SHA1,
			Flags:      0, // no opt-out
			Iterations: p.Iterations,
			SaltLength: uint8(len(p.Salt) / 2),
			Salt:       strings.ToUpper(p.Salt),
			HashLength: 20,
			NextDomain: next,
			TypeBitMap: types,
		}
	}
	return out, nil
}

// parentName returns the name one label up from name (absolute), "" for
// the root.
func parentName(name string) string {
	if name == "." || name == "" {
		return ""
	}
	off, end := dns.NextLabel(name, 0)
	if end {
		return "."
	}
	return name[off:]
}

// DenialTTL is the TTL of a zone's NSEC and NSEC3 records (RFC 9077 §3):
// the minimum of the SOA's own TTL and its MINIMUM field.
func DenialTTL(soa *dns.SOA) uint32 { return min(soa.Hdr.Ttl, soa.Minttl) }
