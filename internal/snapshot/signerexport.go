package snapshot

import (
	"fmt"
	"slices"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/zone"
)

// This file builds what a multi-signer zone transfers out (a zone signed
// elsewhere whose steered answers steer signs with its own ZSK:
// zone.SignSteered). Its data, signatures, DNSKEY RRset (steer's ZSK
// among the signer's keys) and NSEC or NSEC3 chain are the signer's and
// go out as they came in; each steered name goes as its fallback answer
// signed with steer's ZSK, in place of the signer's stand-in of the same
// type (and the stand-in's RRSIGs), never beside it: a secondary would
// merge the two into one RRset that neither signature covers. The
// signer's chain lists the stand-ins' types at the steered name, so it
// proves the fallback's RRsets are the name's only ones; that is checked
// here for every RRset the export adds, and an export the chain does not
// cover is refused rather than sent.
//
// The SOA is the signer's, signed by it: its serial cannot move when a
// fallback does. So the export is the signer's serial's: the fallbacks
// and steer's signatures over them are those of the first export of the
// serial, kept until the signer's next serial (unless the signer's chain
// no longer takes them: a reload with other steered names, under a
// serial the signer did not move). steer's own answers steer meanwhile.

// BuildSignerExport returns the export of z, a multi-signer zone
// (z.MultiSigner()), whose steered names are exported with fallbacks, at
// now; prev is the zone's previous export (or nil): while z has the same
// serial, its fallbacks and signatures are kept (see above).
func BuildSignerExport(z *zone.Zone, fallbacks []dns.RR, prev *SignedExport, now time.Time) (*SignedExport, error) {
	signer := z.SteeredSigner()
	if !z.MultiSigner() || signer == nil || z.Failed != "" || z.SOA == nil {
		return nil, fmt.Errorf("zone %s is not a multi-signer zone served", z.Origin)
	}
	var old map[string][]dns.RR
	if prev != nil && prev.Zone != nil && prev.Zone.Origin == z.Origin {
		old = prev.sigs
		if prev.Zone.Serial() == z.Serial() {
			if prev.Zone == z {
				return prev, nil
			}
			// The serial's export again (a reload that changed the
			// steered names): the same fallbacks and signatures, where
			// the signer's chain still takes them.
			if e, err := buildSignerExport(z, prev.steered, old, true, now); err == nil {
				return e, nil
			}
		}
	}
	return buildSignerExport(z, fallbacks, old, false, now)
}

// buildSignerExport is BuildSignerExport with fallbacks and the
// signatures old of the previous export, which it keeps when fresh, or
// when frozen (the export of the same serial) whatever their age.
func buildSignerExport(z *zone.Zone, fallbacks []dns.RR, old map[string][]dns.RR, frozen bool, now time.Time) (*SignedExport, error) {
	signer := z.SteeredSigner()
	e := &SignedExport{Zone: z, fallbacks: rrText(fallbacks), steered: fallbacks, sigs: map[string][]dns.RR{}}

	// The fallbacks, one RRset per name and type, each of a type the
	// signer's chain lists at the name.
	type nameType struct {
		name string
		t    uint16
	}
	sets := map[nameType][]dns.RR{}
	var order []nameType
	leave := map[string]map[uint16]bool{}
	for _, rr := range fallbacks {
		k := nameType{dns.CanonicalName(rr.Header().Name), rr.Header().Rrtype}
		if _, ok := sets[k]; !ok {
			order = append(order, k)
			types, ok := z.ChainTypes(k.name)
			switch {
			case !ok:
				return nil, fmt.Errorf("zone %s: the steered name %s has no NSEC or NSEC3 in the signer's chain: a secondary could not prove its answer is the name's only one; give it its stand-ins in the signer's zone", z.Origin, k.name)
			case !slices.Contains(types, k.t):
				return nil, fmt.Errorf("zone %s: the steered name %s is exported with %s records, but the signer's NSEC or NSEC3 there lists %s: a secondary's answer would contradict the signer's proof; give the name a %s stand-in in the signer's zone", z.Origin, k.name, dns.TypeToString[k.t], typeNames(types), dns.TypeToString[k.t])
			}
			if leave[k.name] == nil {
				leave[k.name] = map[uint16]bool{}
			}
			leave[k.name][k.t] = true
		}
		sets[k] = append(sets[k], rr)
	}

	rrs := z.AppendSignerRecords(make([]dns.RR, 0, z.Records*2+len(fallbacks)*2), leave)
	for _, k := range order {
		set := sets[k]
		key := rrText(set)
		sigs, ok := old[key]
		if ok && (frozen || signer.Fresh(sigs, k.t, now)) {
			e.Kept += len(sigs)
		} else {
			var err error
			if sigs, err = signer.Sign(set, now, dnssec.ReasonLoad); err != nil {
				return nil, fmt.Errorf("zone %s: signing the fallback of %s with steer's ZSK: %w", z.Origin, k.name, err)
			}
			e.Made += len(sigs)
		}
		e.sigs[key] = sigs
		for _, rr := range sigs {
			at := time.Unix(int64(rr.(*dns.RRSIG).Expiration), 0)
			if e.Expires.IsZero() || at.Before(e.Expires) {
				e.Expires = at
			}
		}
		rrs = append(rrs, set...)
		rrs = append(rrs, sigs...)
	}
	e.RRs = rrs
	return e, nil
}

// typeNames is the types' mnemonics, as a set.
func typeNames(types []uint16) string {
	s := "{"
	for i, t := range types {
		if i > 0 {
			s += " "
		}
		s += dns.TypeToString[t]
	}
	return s + "}"
}
