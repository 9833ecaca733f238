package zone

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// Denial of existence in a signed zone, for queries with DO: compact
// answers (RFC 9824), signed on demand and cached.
//
//   - A name that does not exist is answered as if it existed with no data:
//     NOERROR (NXDOMAIN when the query sets CO) and an NSEC at the name
//     whose next name is its immediate successor \000.name and whose types
//     are {RRSIG, NSEC, NXNAME}.
//   - NODATA: the NSEC at the name lists the types the name has (a steered
//     name's A and AAAA or CNAME among them); an empty non-terminal has
//     {RRSIG, NSEC}; a name a wildcard would answer, the wildcard's types.
//   - An answer synthesised from a wildcard carries an NSEC that proves the
//     next closer name does not exist (RFC 4035 §3.1.3.3), minimally
//     covering it (RFC 4470): from its immediate predecessor (RFC 4471) to
//     the first name after all of its subtree.
//   - A referral carries the delegation's DS and its RRSIGs, or, for an
//     unsigned delegation, the NSEC at the cut with {NS, RRSIG, NSEC}.
//   - Every negative answer carries the SOA and its RRSIGs.
//
// NSEC TTLs are the negative-caching TTL (RFC 9077). The NSECs are signed
// when first needed, if LookupOptions.Signing allows it (the signing
// budget), else the answer is marked NeedSignature; they are kept in the
// node's dnssec.Cache (see DenialCacher) under their name and a digest of
// their type bitmap and TTL (dnssec.DenialKey, the fast path's key), so
// that a hit costs neither a signature nor an allocation. A query of type
// NSEC gets the NSEC as its answer.

// clock is when signatures made on demand start; tests replace it.
var clock = time.Now

// DenialCacher is a Signing that says where the signatures of denials are
// kept: the node's cache (its signing.cache_entries), shared by its
// snapshots so that a reload keeps them.
type DenialCacher interface {
	DenialCache() *dnssec.Cache
}

// processCache keeps denials when neither the query's Signing nor the
// zone's Signer names a cache; made at the first signed denial.
var processCache = sync.OnceValue(func() *dnssec.Cache { return dnssec.NewCache(0) })

// denialCache returns the cache a signed zone's denials are kept in: the
// query's Signing's (a DenialCacher), else the Signer's, else the
// process's.
func denialCache(s *dnssec.Signer, sg Signing) *dnssec.Cache {
	if dc, ok := sg.(DenialCacher); ok {
		if c := dc.DenialCache(); c != nil {
			return c
		}
	}
	if s.Cache != nil {
		return s.Cache
	}
	return processCache()
}

// deny makes the negative answer for name (canonical): NXDOMAIN when n is
// nil, else NODATA for qtype at n, whose records (a wildcard's when
// synthesized) the NSEC lists. With DO in a signed zone the answer gets
// the SOA's RRSIGs and the NSEC that proves the denial, and a name that
// does not exist becomes NOERROR unless the query set CO.
func (z *Zone) deny(a *Answer, name string, n *node, qtype uint16, synthesized bool) {
	if !a.dnssecOK(z) {
		if n == nil {
			z.negative(a, dns.RcodeNameError)
		} else {
			z.negative(a, dns.RcodeSuccess)
		}
		return
	}
	if z.pre != nil {
		z.preDeny(a, name, n, synthesized)
		return
	}
	var buf [24]uint16
	a.NXName = n == nil
	if qtype == dns.TypeNSEC {
		// The NSEC a denial would carry lists NSEC: it is the answer
		// (as ldns-walk and other zone walkers ask), not a NODATA the
		// NSEC itself contradicts.
		a.Rcode = dns.RcodeSuccess
		types := append(buf[:0], dns.TypeRRSIG, dns.TypeNSEC, dnssec.TypeNXNAME)
		if n != nil {
			types = n.bitmap(buf[:0], qtype, synthesized)
		}
		z.addNSEC(a, &a.Answer, name, kindAt, types, nil)
		return
	}
	// Keep what earlier steps of a chain put in the authority section
	// (a wildcard's proof): the validator needs it too.
	a.Ns = append(a.Ns, z.NegSOA)
	a.Ns = append(a.Ns, z.negSigs...)
	types := buf[:0]
	if n == nil {
		a.Rcode = dns.RcodeSuccess
		if a.opts.CO {
			a.Rcode = dns.RcodeNameError // RFC 9824 §4
		}
		types = append(types, dns.TypeRRSIG, dns.TypeNSEC, dnssec.TypeNXNAME)
	} else {
		a.Rcode = dns.RcodeSuccess
		types = n.bitmap(types, qtype, synthesized)
	}
	z.addNSEC(a, &a.Ns, name, kindAt, types, nil)
}

// bitmap appends to types the types of n's NSEC, sorted: the RRsets n has
// (at a delegation point only NS and DS, RFC 4035 §2.3), a steered
// name's steered types but qtype, which it just did not answer, and
// RRSIG and NSEC.
func (n *node) bitmap(types []uint16, qtype uint16, synthesized bool) []uint16 {
	for i := range n.rrsets {
		t := n.rrsets[i].rtype
		if n.cut && t != dns.TypeNS && t != dns.TypeDS {
			continue
		}
		types = addType(types, t)
	}
	if n.steered && !synthesized {
		switch n.steerType {
		case dns.TypeCNAME:
			if qtype != dns.TypeCNAME {
				types = addType(types, dns.TypeCNAME)
			}
		default:
			// The families its pools have addresses of (both when not
			// told, SteeredFamilies): claiming a type the name lacks only
			// costs a resolver a query, leaving out one it has would let
			// it deny that type from its cache (RFC 8198).
			if qtype != dns.TypeA && qtype != dns.TypeANY && !n.steerNoV4 {
				types = addType(types, dns.TypeA)
			}
			if qtype != dns.TypeAAAA && !n.steerNoV6 {
				types = addType(types, dns.TypeAAAA)
			}
		}
	}
	types = addType(types, dns.TypeRRSIG)
	return addType(types, dns.TypeNSEC)
}

// addType inserts t into the sorted set types.
func addType(types []uint16, t uint16) []uint16 {
	i, found := slices.BinarySearch(types, t)
	if found {
		return types
	}
	return slices.Insert(types, i, t)
}

// The kinds of NSEC this file makes, mixed into their cache key.
const (
	kindAt    = 0   // at the name, next \000.name: dnssec.DenialKey's
	kindCover = 'c' // covering the name (a wildcard's proof)
	kindCut   = 'd' // at a delegation point
)

// addNSEC adds the NSEC of the given kind for name with types, and its
// RRSIGs, to dst (a's authority section, or its answer for a query of
// type NSEC): from the cache, or signed now when
// the query may have a signature made (else NeedSignature is set). build
// makes the NSEC on a miss (nil: at name, next \000.name).
func (z *Zone) addNSEC(a *Answer, dst *[]dns.RR, name string, kind byte, types []uint16, build func() *dns.NSEC) {
	s := z.signer
	now := clock()
	ttl := z.NegSOA.Hdr.Ttl
	key := dnssec.DenialKey(name, ttl, types)
	key.Sum ^= uint64(kind) // kindAt is 0: the key the fast path computes
	cache := denialCache(s, a.opts.Signing)
	if e := cache.Get(key, uint32(now.Unix())); e != nil && len(e.RRs) == 1 {
		// The cache may be shared by zones and outlive a key change:
		// the entry serves when this zone's keys made its signatures.
		if nsec, ok := e.RRs[0].(*dns.NSEC); ok && slices.Equal(nsec.TypeBitMap, types) && s.Fresh(e.Sigs, dns.TypeNSEC, now) {
			*dst = append(*dst, nsec)
			*dst = append(*dst, e.Sigs...)
			return
		}
	}
	if a.opts.Signing == nil || !a.opts.Signing.Allow() {
		a.NeedSignature = true
		return
	}
	var nsec *dns.NSEC
	if build != nil {
		nsec = build()
	} else {
		next, err := dnssec.Successor(name)
		if err != nil {
			return // no such name can be written (a name of 255 octets)
		}
		nsec = &dns.NSEC{NextDomain: next}
		nsec.Hdr.Name = name
	}
	if nsec == nil {
		return
	}
	nsec.Hdr.Rrtype, nsec.Hdr.Class, nsec.Hdr.Ttl = dns.TypeNSEC, dns.ClassINET, ttl
	nsec.TypeBitMap = slices.Clone(types)
	e, err := s.SignEntry(key, []dns.RR{nsec}, now, dnssec.ReasonDenial)
	if err != nil || len(e.Sigs) == 0 {
		a.NeedSignature = true
		return
	}
	cache.Put(e)
	*dst = append(*dst, nsec)
	*dst = append(*dst, e.Sigs...)
}

// delegation adds to a referral to cut of an unsigned child, with DO in a
// signed zone, the NSEC at the cut that proves there is no DS (RFC 4035
// §3.1.4; a signed child's DS and its RRSIGs referral adds).
func (z *Zone) delegation(a *Answer, cut *node) {
	if !a.dnssecOK(z) {
		return
	}
	if cut.get(dns.TypeDS) != nil {
		return // referral put the DS and its RRSIGs in
	}
	if z.pre != nil {
		z.preDelegation(a, cut)
		return
	}
	var buf [8]uint16
	z.addNSEC(a, &a.Ns, cut.name, kindCut, cut.bitmap(buf[:0], dns.TypeDS, false), nil)
}

// wildcardProof adds to an answer synthesised for name from the wildcard
// at *.ce the NSEC that proves the next closer name does not exist, so
// that no closer match could have answered (RFC 4035 §3.1.3.3).
func (z *Zone) wildcardProof(a *Answer, ce *node, name string) {
	if z.pre != nil {
		z.preWildcardProof(a, ce.name, name)
		return
	}
	nc := nextCloser(name, ce.name)
	if nc == "" {
		return
	}
	var buf [24]uint16
	types := append(buf[:0], dns.TypeRRSIG, dns.TypeNSEC)
	if strings.HasPrefix(nc, `\000.`) {
		// The predecessor of \000.ce is ce itself, whose NSEC lists
		// ce's own types.
		types = ce.bitmap(types[:0], 0, false)
	}
	z.addNSEC(a, &a.Ns, nc, kindCover, types, func() *dns.NSEC {
		n, err := dnssec.CoveringNSEC(nc, 0) // addNSEC sets the TTL and types
		if err != nil {
			return nil
		}
		return n
	})
}

// nextCloser returns the ancestor of name (or name itself) one label
// below ce, "" when name is not below ce.
func nextCloser(name, ce string) string {
	prev := ""
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		if name[off:] == ce {
			return prev
		}
		prev = name[off:]
	}
	if ce == "." {
		return prev
	}
	return ""
}
