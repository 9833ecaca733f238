package zone

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
)

// This file serves a zone signed elsewhere (Knot, OpenDNSSEC, BIND's
// dnssec-policy as a hidden primary, dnssec-signzone): its file or
// transfer carries the DNSKEY RRset, an RRSIG for every authoritative
// RRset and an NSEC or NSEC3 chain. steer holds no key of it: it serves
// the zone's own signatures with DO and proves what does not exist with
// the zone's own chain (RFC 4035 §3.1.3, RFC 5155 §7.2).
//
// A zone is pre-signed when its apex has RRSIGs; nothing needs to be
// configured. At load (ParseWith) the chain and the signatures are
// checked, and a zone that would not validate fails alone, each problem
// at file:line: an NSEC or NSEC3 chain that does not close, an
// authoritative name the chain skips or whose bitmap disagrees with its
// data, NSEC3 records with mixed parameters, an RRset without an RRSIG,
// an RRSIG by a key the DNSKEY RRset does not hold, an expired or not yet
// valid RRSIG, and DNSKEY or SOA signatures that do not verify.
//
// Everything the query path needs is made here: each node's RRSIGs split
// by the type they cover (nodeSigs, as a zone steer signs has them), the
// NSEC owners in canonical order, and the NSEC3 chain sorted by hash. A
// lookup then finds a covering or matching record by binary search over
// keys it writes into stack buffers (canonicalKey, nsec3Hash): no lock,
// and no allocation.

// presigned is what a pre-signed zone adds to the zone's nodes.
type presigned struct {
	// nsec3 says the zone's denial is NSEC3 (else NSEC).
	nsec3 bool
	// nsecKeys are the canonical keys (canonicalKey) of the names that
	// own an NSEC, sorted; nsecNodes the nodes, in the same order.
	nsecKeys  [][]byte
	nsecNodes []*node
	// salt and iterations are the NSEC3 parameters (the NSEC3PARAM's).
	salt       []byte
	iterations uint16
	// chain is the NSEC3 chain sorted by hash.
	chain []nsec3Link
	// records are the NSEC3 records and their RRSIGs, which are not in
	// the zone's nodes (their owners are no names of the zone's), in
	// the order of chain: transfers and Source write them.
	records []dns.RR
	// expire is the earliest expiration among the zone's RRSIGs, and
	// expireWhat says whose (owner, type, file:line).
	expire     uint32
	expireWhat string
	expireLoc  func() (string, int)
	// found says what the check found, for logs and steer check.
	found string
}

// nsec3Link is one NSEC3 of the chain with its RRSIGs.
type nsec3Link struct {
	hash   [sha1.Size]byte
	rrs    []dns.RR // the NSEC3, then its RRSIGs
	optOut bool
}

// Presigned reports whether z was signed elsewhere: its data carries
// the DNSKEY RRset, RRSIGs and an NSEC or NSEC3 chain, checked at load.
func (z *Zone) Presigned() bool { return z.pre != nil }

// PresignedSummary says what the load found in a pre-signed zone (keys,
// chain, earliest expiration), "" for another zone.
func (z *Zone) PresignedSummary() string {
	if z.pre == nil {
		return ""
	}
	return z.pre.found
}

// PresignedExpiry returns the earliest expiration (Unix seconds) of a
// pre-signed zone's signatures, 0 for another zone: past it, the zone no
// longer validates and must not be served (a reload fails it).
func (z *Zone) PresignedExpiry() uint32 {
	if z.pre == nil {
		return 0
	}
	return z.pre.expire
}

// maxPresignedProblems bounds the problems reported for one zone: a
// chain broken at the start would otherwise report every name.
const maxPresignedProblems = 20

// loadPresigned checks the zone signed elsewhere and builds what its
// answers need (see the file's comment). It runs at the end of a parse
// whose apex has RRSIGs, at now.
func (z *Zone) loadPresigned(now time.Time, errs, warns *diag.Problems) {
	count := 0
	bad := func(file string, line int, format string, args ...any) {
		count++
		if count <= maxPresignedProblems {
			errs.Add(file, line, format, args...)
		} else if count == maxPresignedProblems+1 {
			errs.Add(file, line, "more problems with the zone's DNSSEC data are not listed")
		}
	}
	at := func(n *node, t uint16) (string, int) {
		if s := n.set(t); s != nil {
			return z.files[s.file], z.line(n.name, s)
		}
		return z.File, 0
	}
	apex := z.apex
	p := &presigned{}
	dnskeys := apex.get(dns.TypeDNSKEY)
	if len(dnskeys) == 0 {
		f, l := at(apex, dns.TypeRRSIG)
		bad(f, l, "zone %s has RRSIGs at its apex but no DNSKEY RRset: a pre-signed zone carries its signer's keys", z.Origin)
		return
	}
	keys := map[[2]uint16][]*dns.DNSKEY{} // by key tag and algorithm
	for _, rr := range dnskeys {
		k := rr.(*dns.DNSKEY)
		if k.Flags&dns.ZONE == 0 || k.Flags&dns.REVOKE != 0 {
			continue
		}
		id := [2]uint16{k.KeyTag(), uint16(k.Algorithm)}
		keys[id] = append(keys[id], k)
	}

	// The NSEC3 records are moved out of the nodes: their owners are
	// hashes, not names of the zone, and a query for one is answered
	// as for any name that does not exist (RFC 5155 §7.2.8).
	type n3 struct {
		n    *node
		rr   *dns.NSEC3
		hash [sha1.Size]byte
	}
	var links []n3
	var params *dns.NSEC3
	nsecs := 0
	for name, n := range z.nodes.all {
		if n.set(dns.TypeNSEC) != nil {
			nsecs++
		}
		s := n.set(dns.TypeNSEC3)
		if s == nil {
			continue
		}
		loc := func() (string, int) { return z.files[s.file], z.line(name, s) }
		if parent(name, z.Origin) != z.Origin {
			f, l := loc()
			bad(f, l, "NSEC3 at %s: an NSEC3's owner is a hash one label below the apex %s", name, z.Origin)
			continue
		}
		for _, o := range n.rrsets {
			if o.rtype != dns.TypeNSEC3 && o.rtype != dns.TypeRRSIG {
				f, l := loc()
				bad(f, l, "%s holds an NSEC3 and %s records (line %d): an NSEC3 owner is a hash, no name of the zone", name, dns.TypeToString[o.rtype], z.line(name, &o))
			}
		}
		if len(s.list()) != 1 {
			f, l := loc()
			bad(f, l, "%s has %d NSEC3 records; a hash owns one", name, len(s.list()))
			continue
		}
		rr := s.list()[0].(*dns.NSEC3)
		off, _ := dns.NextLabel(name, 0)
		h, ok := decodeHash(name[:off-1])
		if !ok || rr.Hash != dns.SHA1 {
			f, l := loc()
			bad(f, l, "NSEC3 at %s: the owner is no base32hex SHA-1 hash (hash algorithm %d)", name, rr.Hash)
			continue
		}
		if params == nil {
			params = rr
		} else if rr.Iterations != params.Iterations || !strings.EqualFold(rr.Salt, params.Salt) || rr.Hash != params.Hash {
			pf, pl := at(z.nodes.get(params.Hdr.Name), dns.TypeNSEC3)
			f, l := loc()
			bad(f, l, "NSEC3 at %s has parameters (hash %d, iterations %d, salt %s) other than those at %s:%d (hash %d, iterations %d, salt %s): a chain has one set (RFC 5155 §7.1)",
				name, rr.Hash, rr.Iterations, saltText(rr.Salt), pf, pl, params.Hash, params.Iterations, saltText(params.Salt))
			continue
		}
		links = append(links, n3{n, rr, h})
	}
	for _, l := range links {
		z.nodes.del(l.n.name)
	}
	param := apex.get(dns.TypeNSEC3PARAM)
	switch {
	case len(links) > 0 && nsecs > 0:
		f, l := at(apex, dns.TypeRRSIG)
		bad(f, l, "zone %s has both NSEC (%d names) and NSEC3 records (%d): its denial would be ambiguous; a zone has one chain", z.Origin, nsecs, len(links))
		return
	case len(links) == 0 && nsecs == 0:
		f, l := at(apex, dns.TypeRRSIG)
		bad(f, l, "zone %s has RRSIGs but no NSEC or NSEC3 chain: nothing could prove a name or type does not exist", z.Origin)
		return
	case len(links) > 0 && len(param) == 0:
		f, l := at(apex, dns.TypeSOA)
		bad(f, l, "zone %s has NSEC3 records but no NSEC3PARAM at its apex", z.Origin)
		return
	case len(links) > 0:
		np := param[0].(*dns.NSEC3PARAM)
		if np.Hash != params.Hash || np.Iterations != params.Iterations || !strings.EqualFold(np.Salt, params.Salt) {
			f, l := at(apex, dns.TypeNSEC3PARAM)
			bad(f, l, "NSEC3PARAM of %s (hash %d, iterations %d, salt %s) is not the chain's (hash %d, iterations %d, salt %s)",
				z.Origin, np.Hash, np.Iterations, saltText(np.Salt), params.Hash, params.Iterations, saltText(params.Salt))
			return
		}
		p.nsec3 = true
		p.iterations = params.Iterations
		if params.Salt != "-" && params.Salt != "" {
			salt, err := hex.DecodeString(params.Salt)
			if err != nil {
				f, l := at(apex, dns.TypeNSEC3PARAM)
				bad(f, l, "NSEC3PARAM of %s: salt %s is not hex", z.Origin, params.Salt)
				return
			}
			p.salt = salt
		}
	}

	// Each node's RRSIGs by the type they cover, checked.
	p.expire = 0
	for name, n := range z.nodes.all {
		n = z.splitSigs(n)
		for i := range n.rrsets {
			s := &n.rrsets[i]
			if s.rtype != dns.TypeRRSIG {
				continue
			}
			loc := func() (string, int) { return z.files[s.file], z.line(name, s) }
			for _, rr := range s.list() {
				sig := rr.(*dns.RRSIG)
				if n.set(sig.TypeCovered) == nil {
					f, l := loc()
					bad(f, l, "RRSIG at %s covers %s, which %s does not have", name, dns.TypeToString[sig.TypeCovered], name)
					continue
				}
				z.checkSig(sig, keys, now, loc, p, bad)
			}
		}
		if n.occluded {
			continue // glue: not signed (RFC 4035 §2.2)
		}
		for i := range n.rrsets {
			s := &n.rrsets[i]
			if s.rtype == dns.TypeRRSIG || n.cut && s.rtype != dns.TypeDS && s.rtype != dns.TypeNSEC {
				continue
			}
			if len(n.sig.sets[i]) == 0 {
				bad(z.files[s.file], z.line(name, s), "%s %s has no RRSIG: validators would reject it (the zone must come fully signed)", name, dns.TypeToString[s.rtype])
			}
		}
	}
	for i := range links {
		l := &links[i]
		rrs := []dns.RR{l.rr}
		for _, rr := range l.n.get(dns.TypeRRSIG) {
			if rr.(*dns.RRSIG).TypeCovered == dns.TypeNSEC3 {
				rrs = append(rrs, rr)
			}
		}
		loc := func() (string, int) { return at(l.n, dns.TypeNSEC3) }
		if len(rrs) == 1 {
			f, line := loc()
			bad(f, line, "NSEC3 at %s has no RRSIG", l.n.name)
		}
		for _, rr := range l.n.get(dns.TypeRRSIG) {
			z.checkSig(rr.(*dns.RRSIG), keys, now, loc, p, bad)
		}
		p.chain = append(p.chain, nsec3Link{hash: l.hash, rrs: rrs, optOut: l.rr.Flags&1 != 0})
	}
	// The signatures of the DNSKEY and SOA RRsets are verified: a file
	// whose keys are not those that signed it fails here, for the cost
	// of a few verifications, not one per RRset.
	for _, t := range []uint16{dns.TypeDNSKEY, dns.TypeSOA} {
		rrs, sigs := apex.get(t), apex.sigsOf(t)
		ok := false
		var why error
		for _, rr := range sigs {
			sig := rr.(*dns.RRSIG)
			for _, k := range keys[[2]uint16{sig.KeyTag, uint16(sig.Algorithm)}] {
				if why = sig.Verify(k, rrs); why == nil {
					ok = true
				}
			}
		}
		if !ok && len(sigs) > 0 {
			f, l := at(apex, t)
			bad(f, l, "no RRSIG of %s %s verifies with the zone's DNSKEYs (%v): the zone's keys did not sign it", z.Origin, dns.TypeToString[t], why)
		}
	}
	if count > 0 {
		return
	}
	if p.nsec3 {
		z.checkNSEC3(p, bad)
	} else {
		z.checkNSEC(p, bad)
	}
	if count > 0 {
		return
	}
	z.pre = p
	z.negSigs = negSOASigs(z)
	kind := "NSEC"
	if p.nsec3 {
		kind = fmt.Sprintf("NSEC3 (%d hashes, %d iterations, salt %s)", len(p.chain), p.iterations, saltText(params.Salt))
	} else {
		kind = fmt.Sprintf("NSEC (%d names)", len(p.nsecKeys))
	}
	if p.expireLoc != nil {
		f, l := p.expireLoc()
		p.expireWhat += fmt.Sprintf(", %s:%d", f, l)
		p.expireLoc = nil
	}
	exp := time.Unix(int64(p.expire), 0).UTC()
	p.found = fmt.Sprintf("pre-signed: %d DNSKEYs, %s, signatures valid until %s (earliest: %s)", len(dnskeys), kind, exp.Format(time.RFC3339), p.expireWhat)
	// The signer must renew before the signatures run out; a secondary
	// learns of it at the next refresh (or a NOTIFY). Warn when that is
	// too late.
	if refresh := time.Duration(z.SOA.Refresh) * time.Second; exp.Before(now.Add(refresh)) {
		f, l := at(apex, dns.TypeSOA)
		warns.Add(f, l, "zone %s: signatures expire at %s (%s), before the next refresh from the primary (SOA refresh %s): unless the signer renews them and notifies, the zone will fail then",
			z.Origin, exp.Format(time.RFC3339), p.expireWhat, refresh)
	}
}

// splitSigs sets n.sig from n's RRSIG RRset: the RRSIGs of each RRset
// beside it, as Sign does for a zone steer signs. A node shared with the
// served zone (ParseOptions.Previous) has them already.
func (z *Zone) splitSigs(n *node) *node {
	if n.sig != nil && len(n.sig.sets) == len(n.rrsets) {
		return n
	}
	if z.borrowed(n) {
		n = z.own(n)
	}
	sets := make([][]dns.RR, len(n.rrsets))
	for _, rr := range n.get(dns.TypeRRSIG) {
		c := rr.(*dns.RRSIG).TypeCovered
		for i := range n.rrsets {
			if n.rrsets[i].rtype == c {
				sets[i] = append(sets[i], rr)
			}
		}
	}
	n.sig = &nodeSigs{sets: sets}
	return n
}

// checkSig checks one RRSIG of the zone at now: by a zone key of the
// DNSKEY RRset, for this zone, within its validity. It keeps the
// earliest expiration in p.
func (z *Zone) checkSig(sig *dns.RRSIG, keys map[[2]uint16][]*dns.DNSKEY, now time.Time, loc func() (string, int), p *presigned, bad func(string, int, string, ...any)) {
	name, t := sig.Hdr.Name, dns.TypeToString[sig.TypeCovered]
	switch {
	case dns.CanonicalName(sig.SignerName) != z.Origin:
		f, l := loc()
		bad(f, l, "RRSIG %s at %s is signed by %s, not by the zone %s", t, name, sig.SignerName, z.Origin)
	case keys[[2]uint16{sig.KeyTag, uint16(sig.Algorithm)}] == nil:
		f, l := loc()
		bad(f, l, "RRSIG %s at %s is made by key %d (algorithm %d), which the zone's DNSKEY RRset does not hold: validators cannot check it", t, name, sig.KeyTag, sig.Algorithm)
	case !sig.ValidityPeriod(now):
		when := "expired at " + dns.TimeToString(sig.Expiration)
		if serialBefore(uint32(now.Unix()), sig.Inception) {
			when = "not valid before " + dns.TimeToString(sig.Inception)
		}
		f, l := loc()
		bad(f, l, "RRSIG %s at %s %s (now %s): the zone would not validate; it needs signing again", t, name, when, dns.TimeToString(uint32(now.Unix())))
	}
	if p.expire == 0 || serialBefore(sig.Expiration, p.expire) {
		p.expire = sig.Expiration
		p.expireLoc = loc
		p.expireWhat = fmt.Sprintf("RRSIG %s at %s", t, name)
	}
}

// serialBefore compares RRSIG times (RFC 4034 §3.1.5: serial numbers).
func serialBefore(a, b uint32) bool { return int32(a-b) < 0 }

// nodeTypes returns the types an NSEC or NSEC3 at n must list: its
// RRsets, at a delegation point the authoritative ones (NS, DS, and the
// NSEC and RRSIGs of those).
func nodeTypes(n *node) []uint16 {
	var types []uint16
	for _, s := range n.rrsets {
		if n.cut && s.rtype != dns.TypeNS && s.rtype != dns.TypeDS && s.rtype != dns.TypeNSEC && s.rtype != dns.TypeRRSIG {
			continue
		}
		types = append(types, s.rtype)
	}
	return types
}

func typeList(ts []uint16) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(dns.TypeToString[t])
	}
	return "{" + b.String() + "}"
}

// checkNSEC checks the NSEC chain (every authoritative name with data,
// in canonical order, each pointing to the next, the last to the apex,
// each listing its name's types) and sorts it for lookups.
func (z *Zone) checkNSEC(p *presigned, bad func(string, int, string, ...any)) {
	type entry struct {
		key []byte
		n   *node
	}
	var list []entry
	var wb [256]byte
	for name, n := range z.nodes.all {
		s := n.set(dns.TypeNSEC)
		if s == nil {
			if !n.occluded && len(n.rrsets) > 0 {
				f, l := z.files[n.rrsets[0].file], z.line(name, &n.rrsets[0])
				bad(f, l, "%s has data but no NSEC: the NSEC chain skips it", name)
			}
			continue
		}
		loc := func() (string, int) { return z.files[s.file], z.line(name, s) }
		if n.occluded {
			f, l := loc()
			bad(f, l, "NSEC at %s, which is below a delegation or DNAME (occluded): the chain has only authoritative names", name)
			continue
		}
		if len(s.list()) != 1 {
			f, l := loc()
			bad(f, l, "%s has %d NSEC records; a name owns one", name, len(s.list()))
			continue
		}
		nsec := s.list()[0].(*dns.NSEC)
		types := slices.Clone(nsec.TypeBitMap)
		slices.Sort(types)
		if want := nodeTypes(n); !slices.Equal(types, want) {
			f, l := loc()
			bad(f, l, "NSEC at %s lists %s but %s has %s: the chain is stale", name, typeList(types), name, typeList(want))
		}
		key, ok := canonicalKey(nil, wb[:], name, false)
		if !ok {
			f, l := loc()
			bad(f, l, "NSEC at %s: the name cannot be ordered", name)
			continue
		}
		list = append(list, entry{key, n})
	}
	sort.Slice(list, func(i, j int) bool { return bytes.Compare(list[i].key, list[j].key) < 0 })
	if len(list) == 0 || list[0].n != z.apex && list[0].n.name != z.Origin {
		bad(z.File, 0, "zone %s has no NSEC at its apex", z.Origin)
		return
	}
	for i, e := range list {
		next := list[(i+1)%len(list)].n.name
		nsec := e.n.get(dns.TypeNSEC)[0].(*dns.NSEC)
		if got := dns.CanonicalName(nsec.NextDomain); got != next {
			s := e.n.set(dns.TypeNSEC)
			what := "no name of the zone owns an NSEC there"
			if on := z.nodes.get(got); on != nil && on.set(dns.TypeNSEC) != nil {
				what = "which is not the next name in canonical order"
			}
			bad(z.files[s.file], z.line(e.n.name, s), "NSEC chain does not close: NSEC at %s points to %s (%s), but the next name with an NSEC is %s", e.n.name, got, what, next)
		}
		p.nsecKeys = append(p.nsecKeys, e.key)
		p.nsecNodes = append(p.nsecNodes, e.n)
	}
}

// checkNSEC3 checks the NSEC3 chain (sorted by hash, each pointing to the
// next, the last to the first; every authoritative name, empty
// non-terminals included, matching an NSEC3 that lists its types, but an
// unsigned delegation, or an empty non-terminal above only such, under
// an opt-out NSEC3) and keeps it sorted for lookups.
func (z *Zone) checkNSEC3(p *presigned, bad func(string, int, string, ...any)) {
	slices.SortFunc(p.chain, func(a, b nsec3Link) int { return bytes.Compare(a.hash[:], b.hash[:]) })
	where := func(l *nsec3Link) (string, int) {
		name := l.rrs[0].Header().Name
		return z.File, z.lineOf(name, dns.TypeNSEC3)
	}
	for i := range p.chain {
		l := &p.chain[i]
		if i > 0 && p.chain[i-1].hash == l.hash {
			f, line := where(l)
			bad(f, line, "two NSEC3 records for hash %s", l.rrs[0].Header().Name)
			continue
		}
		next := &p.chain[(i+1)%len(p.chain)]
		nh, ok := decodeHash(strings.ToLower(l.rrs[0].(*dns.NSEC3).NextDomain))
		if !ok || nh != next.hash {
			f, line := where(l)
			bad(f, line, "NSEC3 chain does not close: NSEC3 at %s points to %s, but the next hash in the chain is %s", l.rrs[0].Header().Name,
				strings.ToLower(l.rrs[0].(*dns.NSEC3).NextDomain), next.rrs[0].Header().Name[:32])
		}
	}
	for _, rr := range p.chain {
		p.records = append(p.records, rr.rrs...)
	}
	for name, n := range z.nodes.all {
		if n.occluded {
			continue
		}
		i, match := p.findHash(name, false)
		want := nodeTypes(n)
		if !match {
			// Opt-out (RFC 5155 §6): an unsigned delegation, and an
			// empty non-terminal that exists only for such, may be
			// left out of the chain, under an NSEC3 with opt-out set.
			unsigned := n.cut && n.get(dns.TypeDS) == nil || len(n.rrsets) == 0
			if i >= 0 && p.chain[i].optOut && unsigned {
				continue
			}
			f, l := z.File, 0
			if len(n.rrsets) > 0 {
				f, l = z.files[n.rrsets[0].file], z.line(name, &n.rrsets[0])
			}
			bad(f, l, "%s has no NSEC3 (its hash is not in the chain): the NSEC3 chain skips it", name)
			continue
		}
		nsec3 := p.chain[i].rrs[0].(*dns.NSEC3)
		types := slices.Clone(nsec3.TypeBitMap)
		slices.Sort(types)
		if !slices.Equal(types, want) {
			f, l := where(&p.chain[i])
			bad(f, l, "NSEC3 of %s (%s) lists %s but %s has %s: the chain is stale", name, nsec3.Hdr.Name, typeList(types), name, typeList(want))
		}
	}
}

// lineOf is the line of name's RRset of type t as read (for records no
// longer in a node), or 0.
func (z *Zone) lineOf(name string, t uint16) int {
	text := z.source
	if text == nil {
		return 0
	}
	zp := dns.NewZoneParser(bytes.NewReader(svcbKeys(text)), z.Origin, z.File)
	i := 0
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if h := rr.Header(); h.Rrtype == t && dns.CanonicalName(h.Name) == name {
			if pos := recordPositions(nil, z.File, svcbKeys(text), 0, i+1); len(pos) == i+1 {
				return pos[i].Line
			}
			return 0
		}
		i++
	}
	return 0
}

var hashEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

// decodeHash decodes an NSEC3 owner label (or next hashed owner),
// base32hex in any case, into a SHA-1 hash.
func decodeHash(label string) (h [sha1.Size]byte, ok bool) {
	var buf [64]byte
	if len(label) != 32 {
		return h, false
	}
	up := []byte(strings.ToUpper(label))
	n, err := hashEncoding.Decode(buf[:], up)
	if err != nil || n != sha1.Size {
		return h, false
	}
	copy(h[:], buf[:n])
	return h, true
}

func saltText(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// wireName writes name (presentation form, absolute, escapes allowed),
// with the label "*" in front when star, as lower-case wire format into
// buf, and returns its length; false when it is no valid name.
func wireName(buf []byte, name string, star bool) (int, bool) {
	n := 0
	if star {
		buf[0], buf[1] = 1, '*'
		n = 2
	}
	if name == "." {
		buf[n] = 0
		return n + 1, true
	}
	lenAt := n
	n++
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '.' {
			l := n - lenAt - 1
			if l == 0 || l > 63 {
				return 0, false
			}
			buf[lenAt] = byte(l)
			lenAt = n
			n++
			if n > len(buf) {
				return 0, false
			}
			continue
		}
		if c == '\\' && i+1 < len(name) {
			if i+3 < len(name) && isDigit(name[i+1]) && isDigit(name[i+2]) && isDigit(name[i+3]) {
				v := int(name[i+1]-'0')*100 + int(name[i+2]-'0')*10 + int(name[i+3]-'0')
				if v > 255 {
					return 0, false
				}
				c = byte(v)
				i += 3
			} else {
				c = name[i+1]
				i++
			}
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if n >= len(buf) {
			return 0, false
		}
		buf[n] = c
		n++
	}
	if lenAt >= len(buf) || n-1 != lenAt {
		return 0, false // not absolute
	}
	buf[lenAt] = 0
	return n, n <= 255
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// canonicalKey appends to dst a key of name (with "*." in front when
// star) whose byte order is the canonical DNS name order (RFC 4034
// §6.1): the labels from the root down, lower-cased, each ended by 0x00,
// with the octets 0x00 and 0x01 written 0x01 0x01 and 0x01 0x02 so that
// no label's octets compare with an end. wb is scratch for the wire form.
func canonicalKey(dst, wb []byte, name string, star bool) ([]byte, bool) {
	n, ok := wireName(wb, name, star)
	if !ok {
		return dst, false
	}
	var offs [128]uint8
	labels := 0
	for off := 0; wb[off] != 0; off += int(wb[off]) + 1 {
		offs[labels] = uint8(off)
		labels++
	}
	_ = n
	for i := labels - 1; i >= 0; i-- {
		off := int(offs[i])
		for _, c := range wb[off+1 : off+1+int(wb[off])] {
			switch c {
			case 0:
				dst = append(dst, 1, 1)
			case 1:
				dst = append(dst, 1, 2)
			default:
				dst = append(dst, c)
			}
		}
		dst = append(dst, 0)
	}
	return dst, true
}

// nsec3Hash is the NSEC3 hash of name (with "*." in front when star)
// under the chain's salt and iterations (RFC 5155 §5), made without
// allocating (dns.HashName allocates its wire form, its hex and its
// base32 text).
func (p *presigned) nsec3Hash(name string, star bool) (h [sha1.Size]byte, ok bool) {
	var buf [255 + 255]byte
	n, ok := wireName(buf[:255], name, star)
	if !ok {
		return h, false
	}
	n += copy(buf[n:], p.salt)
	h = sha1.Sum(buf[:n])
	var in [sha1.Size + 255]byte
	m := sha1.Size + copy(in[sha1.Size:], p.salt)
	for range p.iterations {
		copy(in[:], h[:])
		h = sha1.Sum(in[:m])
	}
	return h, true
}

// findHash returns the index of the NSEC3 whose hash is name's (match),
// else of the one that covers it (the last hash before it, wrapping to
// the last of the chain); -1 when name cannot be hashed.
func (p *presigned) findHash(name string, star bool) (int, bool) {
	h, ok := p.nsec3Hash(name, star)
	if !ok || len(p.chain) == 0 {
		return -1, false
	}
	lo, hi := 0, len(p.chain)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(p.chain[m].hash[:], h[:]) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo - 1
	if i >= 0 && p.chain[i].hash == h {
		return i, true
	}
	if i < 0 {
		i = len(p.chain) - 1 // before the first hash: the last covers it
	}
	return i, false
}

// nsecAt returns the node whose NSEC matches or covers name (with "*."
// in front when star): the last NSEC owner at or before it in canonical
// order. nil when name cannot be ordered.
func (p *presigned) nsecAt(name string, star bool) *node {
	var wb [256]byte
	var kb [512]byte
	key, ok := canonicalKey(kb[:0], wb[:], name, star)
	if !ok || len(p.nsecKeys) == 0 {
		return nil
	}
	lo, hi := 0, len(p.nsecKeys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(p.nsecKeys[m], key) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		lo = len(p.nsecKeys)
	}
	return p.nsecNodes[lo-1]
}

// addRRs appends rrs to a's authority section unless its first record is
// there already (two proofs may share an NSEC).
func addRRs(a *Answer, rrs []dns.RR) {
	if len(rrs) == 0 {
		return
	}
	for _, rr := range a.Ns {
		if rr == rrs[0] {
			return
		}
	}
	a.Ns = append(a.Ns, rrs...)
}

// addNSECOf appends the NSEC of n and its RRSIGs.
func addNSECOf(a *Answer, n *node) {
	if n == nil {
		return
	}
	nsec := n.get(dns.TypeNSEC)
	if len(nsec) == 0 {
		return
	}
	for _, rr := range a.Ns {
		if rr == nsec[0] {
			return
		}
	}
	a.Ns = append(a.Ns, nsec...)
	a.Ns = append(a.Ns, n.sigsOf(dns.TypeNSEC)...)
}

// closestEncloser returns the longest ancestor of name (not name itself)
// the zone holds, the apex at least.
func (z *Zone) closestEncloser(name string) string {
	for p := parent(name, z.Origin); p != ""; p = parent(p, z.Origin) {
		if n := z.nodes.get(p); n != nil {
			return p
		}
	}
	return z.Origin
}

// preDeny makes the negative answer of a pre-signed zone with DO from its
// own chain: NXDOMAIN when n is nil, else NODATA at n (a wildcard
// answering name when synthesized). The SOA and its RRSIGs go first.
func (z *Zone) preDeny(a *Answer, name string, n *node, synthesized bool) {
	p := z.pre
	a.Ns = append(a.Ns, z.NegSOA)
	a.Ns = append(a.Ns, z.negSigs...)
	a.Rcode = dns.RcodeSuccess
	if n == nil {
		a.Rcode = dns.RcodeNameError
		a.NXName = true
		ce := z.closestEncloser(name)
		if p.nsec3 {
			// RFC 5155 §7.2.2: the closest encloser proof and the NSEC3
			// covering the wildcard at the closest encloser.
			z.nsec3Encloser(a, name, ce, true)
			return
		}
		// RFC 4035 §3.1.3.2: the NSEC covering the name and the one
		// covering the wildcard that could have answered it.
		addNSECOf(a, p.nsecAt(name, false))
		addNSECOf(a, p.nsecAt(ce, true))
		return
	}
	if synthesized {
		// NODATA from a wildcard (RFC 4035 §3.1.3.4, RFC 5155 §7.2.5):
		// the wildcard's own record, and the proof that name does not
		// exist.
		ce := n.name[2:]
		if p.nsec3 {
			z.nsec3Encloser(a, name, ce, false)
			if i, ok := p.findHash(n.name, false); ok {
				addRRs(a, p.chain[i].rrs)
			}
			return
		}
		addNSECOf(a, p.nsecAt(name, false))
		addNSECOf(a, n)
		return
	}
	if p.nsec3 {
		// RFC 5155 §7.2.3 and §7.2.4: the NSEC3 matching the name, or
		// (an opt-out delegation or empty non-terminal, DS asked) the
		// closest provable encloser proof.
		if i, ok := p.findHash(name, false); ok {
			addRRs(a, p.chain[i].rrs)
			return
		}
		z.nsec3Encloser(a, name, z.closestEncloser(name), false)
		return
	}
	if n.get(dns.TypeNSEC) != nil {
		addNSECOf(a, n)
		return
	}
	// An empty non-terminal owns no NSEC: the one that covers it
	// proves it has no data (RFC 4035 §3.1.3.2 for NODATA at an ENT).
	addNSECOf(a, p.nsecAt(name, false))
}

// nsec3Encloser adds the closest (provable) encloser proof of name (RFC
// 5155 §7.2.1): the NSEC3 matching the closest encloser, starting at ce
// and going up past names the chain opted out, the one covering the next
// closer name, and, with wild, the one covering the wildcard at the
// closest encloser.
func (z *Zone) nsec3Encloser(a *Answer, name, ce string, wild bool) {
	p := z.pre
	for enc := ce; enc != ""; enc = parent(enc, z.Origin) {
		i, ok := p.findHash(enc, false)
		if !ok {
			continue
		}
		addRRs(a, p.chain[i].rrs)
		if nc := nextCloser(name, enc); nc != "" {
			if j, _ := p.findHash(nc, false); j >= 0 {
				addRRs(a, p.chain[j].rrs)
			}
		}
		if wild {
			if j, _ := p.findHash(enc, true); j >= 0 {
				addRRs(a, p.chain[j].rrs)
			}
		}
		return
	}
}

// preWildcardProof adds to an answer synthesised for name from the
// wildcard at *.ce the proof that name itself does not exist: the NSEC
// covering it (RFC 4035 §3.1.3.3), or the NSEC3 covering the next closer
// name (RFC 5155 §7.2.6).
func (z *Zone) preWildcardProof(a *Answer, ce, name string) {
	p := z.pre
	if p.nsec3 {
		if nc := nextCloser(name, ce); nc != "" {
			if j, _ := p.findHash(nc, false); j >= 0 {
				addRRs(a, p.chain[j].rrs)
			}
		}
		return
	}
	addNSECOf(a, p.nsecAt(name, false))
}

// preDelegation adds to a referral to the unsigned child at cut the
// proof that it has no DS: the NSEC at the cut (RFC 4035 §3.1.4.1), the
// NSEC3 matching it (RFC 5155 §7.2.7), or under opt-out the closest
// provable encloser proof.
func (z *Zone) preDelegation(a *Answer, cut *node) {
	p := z.pre
	if !p.nsec3 {
		addNSECOf(a, cut)
		return
	}
	if i, ok := p.findHash(cut.name, false); ok {
		addRRs(a, p.chain[i].rrs)
		return
	}
	z.nsec3Encloser(a, cut.name, z.closestEncloser(cut.name), false)
}

// refuseSigner is Sign's answer for a zone signed elsewhere: steer would
// publish keys of its own and sign the zone's data over its signer's.
// Such a zone takes a ZSK-only signer for its steered names instead
// (SignSteered, multi-signer).
func (z *Zone) refuseSigner() error {
	return fmt.Errorf("zone %s is signed elsewhere (%s): steer would sign its data over its signer's with keys of its own; remove dnssec.keys to serve it as its signer signed it, or give steer a ZSK only, published in the signer's DNSKEY RRset, to sign its steered names (multi-signer)", z.Origin, z.pre.found)
}
