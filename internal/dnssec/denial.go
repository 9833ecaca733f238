package dnssec

import (
	"errors"
	"fmt"
	"slices"

	"github.com/miekg/dns"
)

// This file builds the NSEC records of denial of existence signed online:
// compact answers (RFC 9824) and minimally covering NSECs (RFC 4470) with
// the epsilon functions of RFC 4471. They are pure functions of a name;
// package zone decides which to give.

// TypeNXNAME is the NXNAME meta type (RFC 9824): in a compact answer's NSEC
// bitmap it says that the name does not exist at all.
const TypeNXNAME = dns.TypeNXNAME

// NSECTypes returns the type bitmap of an NSEC at a name with types:
// those, RRSIG and NSEC, sorted and without duplicates (the order
// miekg/dns needs to pack it).
func NSECTypes(types ...uint16) []uint16 {
	out := make([]uint16, 0, len(types)+2)
	out = append(out, types...)
	out = append(out, dns.TypeRRSIG, dns.TypeNSEC)
	slices.Sort(out)
	return slices.Compact(out)
}

// CompactNSEC returns the NSEC of a compact answer (RFC 9824) at owner:
// next name \000.owner (the immediate successor: nothing exists between
// them), bitmap NSECTypes(types). For a name that does not exist, types
// is TypeNXNAME alone; for NODATA, the types the name has; for an empty
// non-terminal, none. ttl is the zone's negative TTL (the SOA's minimum
// and TTL, whichever is lower, RFC 9077). The owner is lower-cased: a
// query's 0x20 case is not what is signed and cached.
func CompactNSEC(owner string, ttl uint32, types ...uint16) *dns.NSEC {
	owner = dns.CanonicalName(owner)
	return &dns.NSEC{
		Hdr:        dns.RR_Header{Name: owner, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: ttl},
		NextDomain: zeroChild(owner),
		TypeBitMap: NSECTypes(types...),
	}
}

// zeroChild returns \000.name, name's first child in canonical order.
func zeroChild(name string) string {
	if name == "." || name == "" {
		return `\000.`
	}
	return `\000.` + name
}

// TypesSum is the digest of the bitmap NSECTypes(types), for
// CacheKey.Sum: it does not depend on the order of types nor on
// duplicates, and it does not allocate for up to 30 types.
func TypesSum(types []uint16) uint64 {
	var a [32]uint16
	s := a[:0]
	if len(types)+2 > len(a) {
		s = make([]uint16, 0, len(types)+2)
	}
	s = append(s, types...)
	s = append(s, dns.TypeRRSIG, dns.TypeNSEC)
	// Insertion sort: a handful of types, no allocation.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i, t := range s {
		if i > 0 && t == s[i-1] {
			continue
		}
		h = (h ^ uint64(t>>8)) * prime
		h = (h ^ uint64(t&0xff)) * prime
	}
	return h | 1
}

// DenialKey is the cache key of the signed NSEC CompactNSEC(owner, ttl,
// types...) or any other NSEC at owner with that bitmap and TTL: the
// TTL is part of what is signed (the RRSIG's original TTL), so a zone
// whose negative TTL changed does not get the old signature. owner must
// be canonical (lower case) for entries to be shared between queries
// that differ in case only; Cache compares names case-insensitively.
func DenialKey(owner string, ttl uint32, types []uint16) CacheKey {
	return CacheKey{Name: owner, Type: dns.TypeNSEC, Sum: TypesSum(types) ^ uint64(ttl)<<32}
}

// CoveringNSEC returns a minimally covering NSEC for name, a name that
// does not exist (RFC 4470): owner Predecessor(name), next
// SubtreeSuccessor(name), bitmap {RRSIG, NSEC}. It proves that name and
// every name below it do not exist, and only that: the next closer name's
// proof of a wildcard-expanded answer. ttl is the zone's negative TTL.
// name must be strictly below its zone's apex.
//
// The next name is not Successor(name), \000.name: validators take the
// closest encloser to be the longest name the NSEC's owner or next name
// shares with the query name (BIND's dns_nsec_noexistnodata, Unbound's
// nsec_closest_encloser), and for a wildcard's proof it must be the
// wildcard's parent, not name; delv rejects \000.name ("no valid NSEC").
func CoveringNSEC(name string, ttl uint32) (*dns.NSEC, error) {
	p, err := Predecessor(name)
	if err != nil {
		return nil, err
	}
	s, err := SubtreeSuccessor(name)
	if err != nil {
		return nil, err
	}
	return &dns.NSEC{
		Hdr:        dns.RR_Header{Name: p, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: ttl},
		NextDomain: s,
		TypeBitMap: []uint16{dns.TypeRRSIG, dns.TypeNSEC},
	}, nil
}

// maxName and maxLabel are the longest name and label in wire form
// (RFC 1035 §2.3.4), counting a name's length octets and its root.
const (
	maxName  = 255
	maxLabel = 63
)

var errName = errors.New("dnssec: not a domain name")

// wireName returns the wire form of name, lower-cased (length octets are
// at most 63, below 'A', so the whole form lower-cases bytewise).
func wireName(name string) ([]byte, error) {
	buf := make([]byte, maxName+1)
	n, err := dns.PackDomainName(dns.Fqdn(name), buf, 0, nil, false)
	if err != nil || n == 0 || n > maxName {
		return nil, errName
	}
	buf = buf[:n]
	for i, c := range buf {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return buf, nil
}

func presentation(wire []byte) (string, error) {
	s, _, err := dns.UnpackDomainName(wire, 0)
	return s, err
}

// firstLabel is name in wire form, lower-cased, with its first label and
// the rest after it; the root, which has no what (predecessor, successor)
// below an apex, is an error.
func firstLabel(name, what string) (w, label, rest []byte, err error) {
	if w, err = wireName(name); err != nil {
		return nil, nil, nil, err
	}
	if len(w) == 1 {
		return nil, nil, nil, fmt.Errorf("dnssec: the root has no %s below an apex", what)
	}
	l := int(w[0])
	return w, w[1 : 1+l], w[1+l:], nil
}

// Predecessor returns the immediate predecessor of name in canonical
// order (RFC 4034 §6.1), by the absolute method of RFC 4471 §3.1.1: no
// name can exist between the two. The name is lower-cased first; it must
// be strictly below its zone's apex (the apex's predecessor is the end of
// the zone, which no covering NSEC needs).
//
// When name's first label is the single octet \000, its predecessor is
// its parent, a name that exists: an NSEC there must carry the parent's
// real types.
func Predecessor(name string) (string, error) {
	_, label, rest, err := firstLabel(name, "predecessor")
	if err != nil {
		return "", err
	}
	l := len(label)
	switch {
	case l == 1 && label[0] == 0:
		// Step 2: \000.parent follows parent directly.
		return presentation(rest)
	case label[l-1] == 0:
		// Step 3: drop the trailing \000 octet, then step 5.
		label = label[:l-1]
	default:
		// Step 4: decrement the last octet (skipping upper case, which
		// sorts as lower case), then fill the label with \255.
		c := label[l-1] - 1
		if 'A' <= c && c <= 'Z' {
			c = 'A' - 1
		}
		nl := append([]byte(nil), label[:l-1]...)
		nl = append(nl, c)
		for len(nl) < maxLabel && 1+len(nl)+1+len(rest) <= maxName {
			nl = append(nl, 0xff)
		}
		label = nl
	}
	out := make([]byte, 0, maxName)
	// Step 5: prepend labels of \255 octets, as long as possible, until
	// the name is as long as a name can be: a name below the new first
	// label sorts before name too.
	size := 1 + len(label) + len(rest)
	var prefix [][]byte
	for room := maxName - size; room >= 2; {
		n := min(maxLabel, room-1)
		prefix = append(prefix, nil)
		copy(prefix[1:], prefix)
		prefix[0] = make([]byte, n)
		for i := range prefix[0] {
			prefix[0][i] = 0xff
		}
		room -= n + 1
	}
	for _, p := range prefix {
		out = append(out, byte(len(p)))
		out = append(out, p...)
	}
	out = append(out, byte(len(label)))
	out = append(out, label...)
	out = append(out, rest...)
	return presentation(out)
}

// Successor returns the immediate successor of name in canonical order,
// by the absolute method of RFC 4471 §3.1.2: \000.name, or, for a name
// too long for one more label, the next name at its own depth or above.
// The name is lower-cased first; it must be strictly below its zone's
// apex.
func Successor(name string) (string, error) {
	w, err := wireName(name)
	if err != nil {
		return "", err
	}
	if len(w)+2 <= maxName {
		// Step 1: prepend a label of one \000 octet.
		return presentation(append([]byte{1, 0}, w...))
	}
	l := int(w[0])
	if len(w)+1 <= maxName && l < maxLabel {
		// Step 2: append a \000 octet to the first label.
		out := append([]byte{byte(l + 1)}, w[1:1+l]...)
		out = append(out, 0)
		return presentation(append(out, w[1+l:]...))
	}
	// Steps 3 and 4: increment the last octet of the first label that is
	// below \255 (skipping upper case) and drop what follows it; a label
	// of \255 octets only is removed and the next one incremented.
	for len(w) > 1 {
		l = int(w[0])
		if out, ok := incremented(w[1:1+l], w[1+l:]); ok {
			return presentation(out)
		}
		w = w[1+l:]
	}
	return "", errors.New("dnssec: no successor below the root")
}

// SubtreeSuccessor returns the first name after name and every name below
// it in canonical order: name's first label with a \000 octet appended,
// or, when that label or the name is as long as can be, with its last
// octet below \255 increased (skipping upper case) and the octets after it
// dropped. The name is lower-cased first; it must be strictly below its
// zone's apex.
func SubtreeSuccessor(name string) (string, error) {
	w, label, rest, err := firstLabel(name, "successor")
	if err != nil {
		return "", err
	}
	l := len(label)
	if l < maxLabel && len(w)+1 <= maxName {
		out := append([]byte{byte(l + 1)}, label...)
		out = append(out, 0)
		return presentation(append(out, rest...))
	}
	if out, ok := incremented(label, rest); ok {
		return presentation(out)
	}
	return "", errors.New("dnssec: no name after a label of \\255 octets only")
}

// incremented is the wire name label.rest with the last octet of label
// below \255 increased (skipping upper case, which sorts as lower case)
// and the octets after it dropped; false when label is \255 octets only.
func incremented(label, rest []byte) ([]byte, bool) {
	for i := len(label) - 1; i >= 0; i-- {
		if label[i] == 0xff {
			continue
		}
		c := label[i] + 1
		if 'A' <= c && c <= 'Z' {
			c = 'Z' + 1
		}
		out := append([]byte{byte(i + 1)}, label[:i]...)
		out = append(out, c)
		return append(out, rest...), true
	}
	return nil, false
}
