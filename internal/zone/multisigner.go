package zone

import (
	"fmt"
	"sort"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// This file makes a zone signed elsewhere a multi-signer zone (RFC 8901
// model 2): its data and signatures are the signer's (a Knot, BIND or
// OpenDNSSEC that holds the KSK and publishes the DNSKEY RRset, as
// hidden primary or through the file), served as they are, denial
// included; steer signs only the answers it makes itself, its steered
// names', with a ZSK of its own (a dnssec.Signer of ZSKs only) that the
// signer's DNSKEY RRset publishes.
//
// A steered name there has stand-in records in the signer's zone: A
// and/or AAAA (or a CNAME) that steer replaces by its steered answers.
// They are what makes the signer's NSEC or NSEC3 at the name list the
// types steer answers, so that its proof that other types do not exist
// there (NODATA) holds; and they are what the name answers should steer
// not be able to sign (Unsteer).

// SignedElsewhere reports whether z's data is signed already, by a
// signer steer is not (Presigned: its DNSKEY RRset, signatures and
// chain, checked at load).
func (z *Zone) SignedElsewhere() bool { return z.Presigned() }

// standIn reports whether an RRset of type t at a name steered with
// steerType (A or CNAME) is the signer's stand-in for the steered
// records, in a zone signed elsewhere (see MarkSteered).
func (z *Zone) standIn(t, steerType uint16) bool {
	if !z.SignedElsewhere() {
		return false
	}
	if steerType == dns.TypeCNAME {
		return t == dns.TypeCNAME
	}
	return t == dns.TypeA || t == dns.TypeAAAA
}

// SteeredSigner returns the signer of z's steered answers: the zone's
// signer when steer signs z, the ZSK-only signer of a multi-signer zone
// (SignSteered), nil when none is signed.
func (z *Zone) SteeredSigner() *dnssec.Signer {
	if z.signer != nil {
		return z.signer
	}
	return z.steerSigner
}

// MultiSigner reports whether z is a zone signed elsewhere whose steered
// answers steer signs (SignSteered).
func (z *Zone) MultiSigner() bool { return z.steerSigner != nil }

// SignSteered makes z, a zone signed elsewhere whose steered names are
// marked (MarkSteered, SteeredFamilies), a multi-signer zone whose
// steered answers s (a ZSK-only signer, dnssec.NewZSKSigner) signs: the
// snapshot pre-signs them (presign) with SteeredSigner. It checks that
// z carries the signer's DNSKEY RRset and signatures, that the DNSKEY
// RRset holds s's keys (dnssec.Signer.PublishedIn: validators find the
// key of every signature steer makes), and that each steered name has
// the signer's stand-ins for exactly the types it answers (the signer's
// NSEC or NSEC3 at the name lists them, so its NODATA proofs hold). On
// an error z is left as it is: its steered answers must not be served
// signed with s (see Unsteer).
func (z *Zone) SignSteered(s *dnssec.Signer) error {
	if z.Failed != "" || s == nil {
		return nil
	}
	if z.precompiled {
		return fmt.Errorf("zone %s is published already", z.Origin)
	}
	if s.Zone != z.Origin {
		return fmt.Errorf("signer for %s, not for zone %s", s.Zone, z.Origin)
	}
	if !s.ZSKOnly() {
		return fmt.Errorf("zone %s: SignSteered takes a ZSK-only signer", z.Origin)
	}
	if !z.SignedElsewhere() {
		return fmt.Errorf("zone %s carries no DNSKEY RRset and signatures, and no key has the SEP flag: a ZSK alone signs only the steered names of a zone signed elsewhere (multi-signer), whose signer publishes the DNSKEY RRset; to sign the zone itself give steer a CSK, or a KSK beside the ZSK", z.Origin)
	}
	if err := s.PublishedIn(z.apex.get(dns.TypeDNSKEY)); err != nil {
		return err
	}
	var bad []string
	for _, n := range z.nodes.all {
		if n.steered {
			if msg := z.standInProblem(n); msg != "" {
				bad = append(bad, msg)
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("zone %s is signed elsewhere: %s", z.Origin, strings.Join(bad, "; "))
	}
	z.steerSigner = s
	return nil
}

// standInProblem says what is wrong with the signer's stand-ins at the
// steered node n ("" when nothing is): each type n answers must be
// there, and no address type it denies.
func (z *Zone) standInProblem(n *node) string {
	has := func(t uint16) bool { return n.get(t) != nil }
	var missing, extra []string
	if n.steerType == dns.TypeCNAME {
		if !has(dns.TypeCNAME) {
			missing = append(missing, "CNAME")
		}
	} else {
		for _, f := range []struct {
			t    uint16
			none bool
		}{{dns.TypeA, n.steerNoV4}, {dns.TypeAAAA, n.steerNoV6}} {
			switch {
			case !f.none && !has(f.t):
				missing = append(missing, dns.TypeToString[f.t])
			case f.none && has(f.t):
				extra = append(extra, dns.TypeToString[f.t])
			}
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Sprintf("the steered name %s has no %s record in the signer's zone: give it one there (any address, steer answers in its place), so that the signer's NSEC or NSEC3 at the name lists the type and proves the others absent", n.name, strings.Join(missing, " or "))
	case len(extra) > 0:
		return fmt.Sprintf("the steered name %s has %s records in the signer's zone but no pool of that family: the signer's NSEC or NSEC3 claims a type steer denies there; remove them from the signer's zone", n.name, strings.Join(extra, " and "))
	}
	return ""
}

// Unsteer makes z's steered names plain names again, answered from the
// zone's own data: in a zone signed elsewhere whose steered answers steer
// cannot sign so that they validate (SignSteered failed), they answer
// with the signer's stand-ins, signed by the signer, rather than with
// steered answers signed by a key validators cannot find. It must be
// called before the zone is published.
func (z *Zone) Unsteer() {
	var made []string // names MarkSteered made: they do not exist
	for name, n := range z.nodes.all {
		if !n.steered {
			continue
		}
		if z.borrowed(n) {
			n = z.own(n)
		}
		n.steered, n.steerType, n.steerNoV4, n.steerNoV6 = false, 0, false, false
		if len(n.rrsets) == 0 {
			made = append(made, name)
		}
	}
	// Deleted after the loop (the table may not shrink under it), each
	// once nothing is below it, until none goes.
	for gone := true; gone; {
		gone = false
		for i, name := range made {
			if name != "" && !z.hasChildren(name) {
				z.nodes.del(name)
				made[i], gone = "", true
			}
		}
	}
}

// hasChildren reports whether some name of z is directly below name.
func (z *Zone) hasChildren(name string) bool {
	for other := range z.nodes.all {
		if parent(other, z.Origin) == name {
			return true
		}
	}
	return false
}

// SignerDenial is the denial chain of a zone signed elsewhere:
// dnssec.DenialNSEC or dnssec.DenialNSEC3 ("" for another zone).
func (z *Zone) SignerDenial() string {
	switch {
	case z.pre == nil:
		return ""
	case z.pre.nsec3:
		return dnssec.DenialNSEC3
	}
	return dnssec.DenialNSEC
}

// ChainTypes returns the types the signer's NSEC or NSEC3 at name
// (canonical) lists, in a zone signed elsewhere; ok is false when the
// chain has no NSEC or NSEC3 of name (another zone, or a name outside
// the chain: an RRset there could not be proven to be the only one, nor
// other types denied). A multi-signer export checks with it that each
// RRset it puts in place of a stand-in is one the chain lists.
func (z *Zone) ChainTypes(name string) (types []uint16, ok bool) {
	p := z.pre
	if p == nil {
		return nil, false
	}
	if p.nsec3 {
		i, match := p.findHash(name, false)
		if !match {
			return nil, false
		}
		return p.chain[i].rrs[0].(*dns.NSEC3).TypeBitMap, true
	}
	n := p.nsecAt(name, false)
	if n == nil || n.name != name {
		return nil, false
	}
	nsec := n.get(dns.TypeNSEC)
	if len(nsec) != 1 {
		return nil, false
	}
	return nsec[0].(*dns.NSEC).TypeBitMap, true
}

// AppendSignerRecords appends the records of z, a zone signed
// elsewhere, as its signer gave them (AppendRecords: the SOA first, the
// RRSIGs and the NSEC or NSEC3 chain with them), but for the RRsets
// leave lists by owner (canonical) and type, and the RRSIGs covering
// them: a multi-signer export puts steer's own signed RRsets in place of
// those stand-ins.
func (z *Zone) AppendSignerRecords(dst []dns.RR, leave map[string]map[uint16]bool) []dns.RR {
	for rr := range z.EachRecord {
		if len(leave) > 0 {
			h := rr.Header()
			if types := leave[dns.CanonicalName(h.Name)]; types != nil {
				t := h.Rrtype
				if sig, ok := rr.(*dns.RRSIG); ok {
					t = sig.TypeCovered
				}
				if types[t] {
					continue
				}
			}
		}
		dst = append(dst, rr)
	}
	return dst
}
