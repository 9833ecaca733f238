package zone

import (
	"strings"

	"github.com/miekg/dns"
)

// Set is an immutable collection of zones served together. Lookups pick the
// most specific zone for a name and follow CNAME and DNAME chains across
// the zones of the set.
type Set struct {
	zones map[string]*Zone
	list  []*Zone
}

// NewSet indexes zones. Origins must be distinct (config checks that).
func NewSet(zones []*Zone) *Set {
	s := &Set{zones: make(map[string]*Zone, len(zones)), list: zones}
	for _, z := range zones {
		s.zones[z.Origin] = z
	}
	return s
}

// Zones returns the zones of the set in configuration order, failed
// zones included.
func (s *Set) Zones() []*Zone { return s.list }

// Zone returns the zone whose origin is exactly origin (canonical), or nil.
func (s *Set) Zone(origin string) *Zone {
	if s == nil {
		return nil
	}
	return s.zones[origin]
}

// Find returns the most specific zone that contains name (canonical form),
// or nil when name is in no served zone.
func (s *Set) Find(name string) *Zone {
	if s == nil || len(s.zones) == 0 {
		return nil
	}
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		if z := s.zones[name[off:]]; z != nil {
			return z
		}
	}
	return s.zones["."]
}

// Answer is the outcome of a lookup: an rcode, the AA flag, and the three
// sections. The RRs are shared with the zone and must not be modified.
type Answer struct {
	Rcode         int
	Authoritative bool
	Answer        []dns.RR
	Ns            []dns.RR
	Extra         []dns.RR
	// Zone is the zone that answered the query name, nil when refused.
	Zone *Zone
	// Referral is true when the answer delegates to another server.
	Referral bool
	// Scope is the ECS scope of a steered answer: the widest client prefix
	// over which its steering decision holds; -1 when no steered record
	// took part.
	Scope int
	// Steered names the steered records that answered, in chain order.
	Steered []string
	// Wildcard is the owner of the wildcard the query name's own answer
	// was synthesised from (RFC 4592), "" when none: rate limiting counts
	// every name a wildcard answers as one.
	Wildcard string
	// NXName is set when the query name does not exist but a compact
	// denial (RFC 9824) answers NOERROR (or NXDOMAIN with CO): rate
	// limiting counts it as the NXDOMAIN it is, per zone, so that a
	// random-subdomain flood with DO is limited as one without.
	NXName bool
	// NeedSignature is set when a DNSSEC answer needed a signature made
	// on the query's behalf and LookupOptions.Signing refused it (the
	// signing budget): over UDP the server answers TC=1, so only a
	// client that comes back over TCP costs a signature.
	NeedSignature bool

	steer Steering
	opts  *LookupOptions // nil: no DNSSEC records
}

// Steering answers the names a zone marks as steered (see MarkSteered):
// their records are chosen per query rather than read from the zone.
type Steering interface {
	// Steer appends the answer for the steered name (canonical) and qtype
	// to a. It returns handled false when the record has no data of that
	// type, so the zone answers NODATA, and next, a CNAME target to follow.
	Steer(a *Answer, name string, qtype uint16) (next string, handled bool)
}

// maxChain bounds how many CNAME/DNAME steps a lookup follows.
const maxChain = 12

// Lookup answers qname (any case) and qtype from the set. Names in no served
// zone get REFUSED, and names in a failed zone (see NewFailed) SERVFAIL.
// CNAME and DNAME chains are followed while they stay in served zones that
// loaded; a loop or an over-long chain stops with what was found.
func (s *Set) Lookup(qname string, qtype uint16) Answer {
	var a Answer
	s.LookupInto(&a, qname, qtype)
	return a
}

// LookupInto is Lookup that reuses a's slices.
func (s *Set) LookupInto(a *Answer, qname string, qtype uint16) {
	s.LookupSteered(a, qname, qtype, nil)
}

// LookupSteered is LookupInto with steered names answered by st.
func (s *Set) LookupSteered(a *Answer, qname string, qtype uint16, st Steering) {
	s.LookupWith(a, qname, qtype, st, nil)
}

// LookupWith is LookupSteered for a query whose DNSSEC wishes o gives
// (nil: none, as LookupSteered).
func (s *Set) LookupWith(a *Answer, qname string, qtype uint16, st Steering, o *LookupOptions) {
	*a = Answer{Answer: a.Answer[:0], Ns: a.Ns[:0], Extra: a.Extra[:0], Steered: a.Steered[:0], Scope: -1, steer: st, opts: o}
	name := canonical(qname)
	z := s.answering(name, qtype)
	if z == nil {
		a.Rcode = dns.RcodeRefused
		return
	}
	a.Zone = z
	if z.Failed != "" {
		// The zone is ours but has no data: neither REFUSED (a resolver
		// would give up on us) nor a parent zone's answer (which would
		// deny names that exist), but a server failure, so resolvers
		// try another server (RFC 1035 §4.1.1, RFC 2308 §7.1).
		a.Rcode = dns.RcodeServerFailure
		return
	}
	a.Authoritative = true
	var visited [maxChain]string
	for step := 0; step < maxChain; step++ {
		visited[step] = name
		start := len(a.Answer)
		next := z.lookup(a, name, qtype)
		z.additional(a, a.Answer[start:])
		if next == "" {
			break
		}
		for _, v := range visited[:step+1] {
			if v == next {
				next = "" // CNAME loop: stop here, as BIND does
				break
			}
		}
		if next == "" {
			break
		}
		nz := s.answering(next, qtype) // a DS restart at a child apex too
		if nz == nil || nz.Failed != "" {
			// Out of our zones, or into one that failed to load: the
			// resolver follows the chain (and gets SERVFAIL there).
			break
		}
		name, z = next, nz
	}
}

// answering returns the zone that answers name (canonical) and qtype: the
// most specific zone that holds name, except that DS for a child zone's
// apex comes from its parent zone, when that is served (RFC 4035
// §3.1.4.1). It is nil when no zone holds name.
func (s *Set) answering(name string, qtype uint16) *Zone {
	z := s.Find(name)
	if qtype == dns.TypeDS && z != nil && name == z.Origin && name != "." {
		off, _ := dns.NextLabel(name, 0)
		parent := name[off:]
		if parent == "" { // name is a TLD: its parent is the root
			parent = "."
		}
		if pz := s.Find(parent); pz != nil {
			z = pz
		}
	}
	return z
}

// canonical lower-cases name without allocating when it already is.
func canonical(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			return dns.CanonicalName(name)
		}
	}
	return dns.Fqdn(name)
}

// lookup answers name (canonical, inside z) into a. It returns the next name
// to follow when the answer ends in a CNAME or a DNAME-synthesized CNAME.
func (z *Zone) lookup(a *Answer, name string, qtype uint16) string {
	cur := z.apex
	if name != z.Origin {
		idx := dns.Split(name)
		below := len(idx) - dns.CountLabel(z.Origin) // labels below the apex
		for i := below - 1; i >= 0; i-- {
			if cur != z.apex && cur.cut {
				z.referral(a, cur)
				return ""
			}
			if cur.hasDNAME {
				next := z.synthesizeDNAME(a, cur, name)
				if qtype == dns.TypeCNAME {
					// The synthesized CNAME is the answer asked for: it is
					// not followed (RFC 6672 §3.4; RFC 1034 §4.3.2 step
					// 3a), as a CNAME is not when one is asked for.
					return ""
				}
				return next
			}
			n := z.nodes.get(name[idx[i]:])
			if n == nil {
				return z.wildcard(a, cur, name, qtype)
			}
			cur = n
		}
	}
	if cur != z.apex && cur.cut && qtype != dns.TypeDS {
		z.referral(a, cur)
		return ""
	}
	return z.answerAt(a, cur, name, qtype, false)
}

// answerAt answers from node n, whose owner is name. synthesized means n is
// a wildcard and its records are rewritten to name.
func (z *Zone) answerAt(a *Answer, n *node, name string, qtype uint16, synthesized bool) string {
	signed := a.dnssecOK(z)
	add := func(rrs []dns.RR) {
		for _, rr := range rrs {
			if synthesized {
				rr = dns.Copy(rr)
				rr.Header().Name = name
			}
			a.Answer = append(a.Answer, rr)
		}
		if signed && len(rrs) > 0 {
			// RFC 4035 §3.1.1: each RRset with its RRSIGs; a wildcard's
			// under the name they answer (§3.1.3.3).
			sigs := n.sigsOf(rrs[0].Header().Rrtype)
			if synthesized {
				sigs = sigsFor(sigs, name)
			}
			a.Answer = append(a.Answer, sigs...)
		}
	}
	if n.steered && a.steer != nil && !synthesized {
		q := qtype
		if q == dns.TypeANY {
			q = dns.TypeA // RFC 8482: one RRset; the steered one
		}
		start := len(a.Answer)
		if next, ok := a.steer.Steer(a, n.name, q); ok {
			a.Steered = append(a.Steered, n.name)
			if signed {
				z.steeredSigs(a, n.name, a.Answer[start:])
			}
			return next
		}
		if len(n.rrsets) == 0 || qtype == dns.TypeANY {
			z.deny(a, name, n, qtype, synthesized)
			return ""
		}
	}
	if qtype == dns.TypeANY {
		// RFC 8482: answer ANY with one RRset rather than all of them.
		if len(n.rrsets) == 0 {
			z.deny(a, name, n, qtype, synthesized)
			return ""
		}
		add(n.rrsets[0].records(name))
		return ""
	}
	if qtype == dns.TypeRRSIG && signed && z.answerRRSIG(a, n, name, synthesized) {
		return ""
	}
	if rrs := n.get(qtype); rrs != nil {
		add(rrs)
		return ""
	}
	if n.hasCNAME && qtype != dns.TypeCNAME {
		cname := n.set(dns.TypeCNAME).records(n.name)
		add(cname)
		return dns.CanonicalName(cname[0].(*dns.CNAME).Target)
	}
	z.deny(a, name, n, qtype, synthesized)
	return ""
}

// negative makes a NODATA (rcode NOERROR) or NXDOMAIN answer: the SOA with
// the negative-caching TTL goes in the authority section (RFC 2308).
func (z *Zone) negative(a *Answer, rcode int) {
	a.Rcode = rcode
	a.Ns = append(a.Ns[:0], z.NegSOA)
}

// wildcard handles a name that does not exist below the closest encloser ce
// (RFC 4592 §3.3.1): the source of synthesis is *.ce, if it exists.
func (z *Zone) wildcard(a *Answer, ce *node, name string, qtype uint16) string {
	wname := "*." + ce.name
	if ce.name == "." {
		wname = "*."
	}
	w := z.nodes.get(wname)
	if w == nil || w.occluded {
		z.deny(a, name, nil, qtype, false)
		return ""
	}
	if len(a.Answer) == 0 && a.Wildcard == "" {
		a.Wildcard = wname
	}
	start := len(a.Answer)
	next := z.answerAt(a, w, name, qtype, true)
	if len(a.Answer) > start && a.dnssecOK(z) {
		z.wildcardProof(a, ce, name)
	}
	return next
}

// referral delegates to the NS set at cut, with in-zone glue (RFC 1034 §4.3.2 step 3b).
func (z *Zone) referral(a *Answer, cut *node) {
	if len(a.Answer) == 0 {
		a.Authoritative = false
	}
	a.Referral = true
	ns := cut.get(dns.TypeNS)
	a.Ns = append(a.Ns, ns...)
	if a.dnssecOK(z) {
		// RFC 4035 §3.1.4: a signed zone's referral carries the DS RRset
		// and its RRSIGs (the proof that there is no DS is denial's).
		if ds := cut.get(dns.TypeDS); ds != nil {
			a.Ns = append(a.Ns, ds...)
			a.Ns = append(a.Ns, cut.sigsOf(dns.TypeDS)...)
		}
	}
	for _, rr := range ns {
		target := dns.CanonicalName(rr.(*dns.NS).Ns)
		if !isSubDomain(z.Origin, target) {
			continue
		}
		if n := z.nodes.get(target); n != nil {
			a.Extra = append(a.Extra, n.get(dns.TypeA)...)
			a.Extra = append(a.Extra, n.get(dns.TypeAAAA)...)
		}
	}
	z.delegation(a, cut)
}

// synthesizeDNAME rewrites name, which lies below the DNAME at d, and
// returns the new name to follow (RFC 6672 §3.3).
func (z *Zone) synthesizeDNAME(a *Answer, d *node, name string) string {
	dn := d.set(dns.TypeDNAME).records(d.name)[0].(*dns.DNAME)
	a.Answer = append(a.Answer, dn)
	if a.dnssecOK(z) {
		// The DNAME's RRSIGs prove the CNAME synthesised from it, which
		// has none (RFC 6672 §5.3.1).
		a.Answer = append(a.Answer, d.sigsOf(dns.TypeDNAME)...)
	}
	target := dns.CanonicalName(dn.Target)
	prefix := name[:len(name)-len(d.name)]
	var next string
	if target == "." {
		next = prefix
	} else {
		next = prefix + target
	}
	if len(next) > 254 { // the wire form would exceed 255 octets
		a.Rcode = dns.RcodeYXDomain
		return ""
	}
	a.Answer = append(a.Answer, &dns.CNAME{
		Hdr:    dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: dn.Hdr.Ttl},
		Target: next,
	})
	return next
}

// additional adds the addresses of the NS, MX, SRV, SVCB and HTTPS targets
// of rrs, which z answered, to the additional section (RFC 1034 §4.3.2 step
// 6, RFC 9460 §4.1). Only z's own authoritative data is used, as Knot and
// NSD do: never another served zone's (whose records a resolver would not
// take from this answer), and never a node at or below a zone cut, whose
// addresses are glue.
func (z *Zone) additional(a *Answer, rrs []dns.RR) {
	for _, rr := range rrs {
		var target string
		switch rr := rr.(type) {
		case *dns.NS:
			target = rr.Ns
		case *dns.MX:
			target = rr.Mx
		case *dns.SRV:
			target = rr.Target
		case *dns.SVCB:
			z.additionalSVCB(a, rr, dns.TypeSVCB)
			continue
		case *dns.HTTPS:
			z.additionalSVCB(a, &rr.SVCB, dns.TypeHTTPS)
			continue
		default:
			continue
		}
		z.addAddresses(a, dns.CanonicalName(target))
	}
}

// additionalSVCB adds what RFC 9460 §4.1 says an authoritative server
// SHOULD add for an SVCB or HTTPS record (of type rtype): the addresses
// of its target and, in AliasMode, the target's own records of that type
// and their targets' addresses (PowerDNS's svcb-aliasmode test and Knot
// do the same). All from z's own authoritative data, as for the others.
func (z *Zone) additionalSVCB(a *Answer, rr *dns.SVCB, rtype uint16) {
	target := dns.CanonicalName(svcbTarget(rr))
	z.addAddresses(a, target)
	if rr.Priority != 0 || target == "." || !isSubDomain(z.Origin, target) {
		return
	}
	n := z.nodes.get(target)
	if n == nil || n.occluded || n.cut {
		return
	}
	for _, x := range a.Extra {
		if x.Header().Rrtype == rtype && strings.EqualFold(x.Header().Name, target) {
			return // already there
		}
	}
	rrs := n.get(rtype)
	a.Extra = append(a.Extra, rrs...)
	if a.dnssecOK(z) {
		a.Extra = append(a.Extra, n.sigsOf(rtype)...)
	}
	for _, t := range rrs {
		var s *dns.SVCB
		switch t := t.(type) {
		case *dns.SVCB:
			s = t
		case *dns.HTTPS:
			s = &t.SVCB
		}
		if s != nil && s.Priority != 0 {
			z.addAddresses(a, dns.CanonicalName(svcbTarget(s)))
		}
	}
}

// svcbTarget is the name whose addresses an SVCB or HTTPS record points to
// (RFC 9460 §4.1: the server SHOULD add them): its TargetName, or, for "."
// in ServiceMode, its owner; "." in AliasMode, which says the service does
// not exist.
func svcbTarget(rr *dns.SVCB) string {
	if rr.Target != "." {
		return rr.Target
	}
	if rr.Priority == 0 {
		return "."
	}
	return rr.Hdr.Name
}

// addAddresses adds the A and AAAA records of target when z holds them
// authoritatively.
func (z *Zone) addAddresses(a *Answer, target string) {
	if target == "." || !isSubDomain(z.Origin, target) {
		return
	}
	for _, rr := range a.Extra {
		if t := rr.Header().Rrtype; (t == dns.TypeA || t == dns.TypeAAAA) && strings.EqualFold(rr.Header().Name, target) {
			return // already there
		}
	}
	n := z.nodes.get(target)
	if n == nil || n.occluded || n.cut {
		return // absent, or glue (at or below a delegation point)
	}
	a.Extra = append(a.Extra, n.get(dns.TypeA)...)
	a.Extra = append(a.Extra, n.get(dns.TypeAAAA)...)
	if a.dnssecOK(z) {
		// RFC 4035 §3.1.1: the additional section's RRsets with theirs.
		a.Extra = append(a.Extra, n.sigsOf(dns.TypeA)...)
		a.Extra = append(a.Extra, n.sigsOf(dns.TypeAAAA)...)
	}
}
