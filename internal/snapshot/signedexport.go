package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/zone"
)

// This file builds what a signed zone transfers out: a fully signed
// zone a third-party secondary (Knot, NSD, BIND) serves and that
// validates on its own. The zone's RRsets go with the signatures the
// zone holds (zone.Sign made them), each steered name goes as its
// fallback answer (Fallback) signed with the zone's keys, and a complete
// NSEC chain, or NSEC3 without opt-out (dnssec section, denial: nsec3),
// is built over the export and signed. The node's own answers keep
// compact denial (RFC 9824): the chain is only the export's, made here,
// off the query path.
//
// The signatures the export makes itself (fallbacks, chain) are kept
// from the previous export of the zone while their RRset is the same
// and they are fresh, so a reload changing one RRset signs that RRset
// (in the zone) and the one or two NSEC records around it (here), not
// the zone.

// SignedExport is the signed export of one zone.
type SignedExport struct {
	// Zone is the zone it was built from.
	Zone *zone.Zone
	// RRs are the records, the SOA first (no closing SOA).
	RRs []dns.RR
	// Refresh is when the first signature the export made (a fallback's,
	// an NSEC's) is due for renewal: the export must be built again by
	// then (zero when it made none).
	Refresh time.Time
	// Made counts the signatures building it made; Kept those it took
	// from the previous export.
	Made, Kept int

	// Expires is, for a multi-signer zone's export (BuildSignerExport),
	// when the first signature steer made in it expires: the export is
	// the signer's serial's and is not renewed before the signer's next
	// serial (zero for other exports).
	Expires time.Time

	// fallbacks is the text of the fallbacks it was built with.
	fallbacks string
	// steered are the fallbacks a multi-signer zone's export carries,
	// kept for the exports of the same serial.
	steered []dns.RR
	// sigs are the signatures it made or kept, by the text of their
	// RRset.
	sigs map[string][]dns.RR
}

// Fallbacks returns the fallback records the steered names of z are
// exported with (Fallback of each).
func (s *Snapshot) Fallbacks(z *zone.Zone) []dns.RR {
	var out []dns.RR
	for _, r := range s.marks[z] {
		out = append(out, s.Fallback(r)...)
	}
	return out
}

// Denial returns the denial a signed export of the zone origin carries
// (its dnssec section's), dnssec.DenialNSEC for a zone without one.
func (s *Snapshot) Denial(origin string) string {
	if s.Config != nil {
		for _, zc := range s.Config.Zones {
			if dns.CanonicalName(zc.Origin) == origin && zc.DNSSEC != nil && zc.DNSSEC.Denial != "" {
				return zc.DNSSEC.Denial
			}
		}
	}
	return dnssec.DenialNSEC
}

// Reusable reports whether e is still z's export with fallbacks at now:
// built from z with the same fallbacks, and no signature it made due.
func (e *SignedExport) Reusable(z *zone.Zone, fallbacks []dns.RR, now time.Time) bool {
	return e != nil && e.Zone == z && e.fallbacks == rrText(fallbacks) && (e.Refresh.IsZero() || now.Before(e.Refresh))
}

// rrText is the text of rrs, one record a line, which identifies them
// (TTLs included).
func rrText(rrs []dns.RR) string {
	var b strings.Builder
	for _, rr := range rrs {
		b.WriteString(rr.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// BuildSignedExport returns the signed export of z, a signed zone whose
// steered names are exported with fallbacks, with the denial chain
// denial (dnssec.DenialNSEC or DenialNSEC3), at now, taking the
// signatures prev (the zone's previous export, or nil) made where their
// RRset is the same and they are fresh.
func BuildSignedExport(z *zone.Zone, fallbacks []dns.RR, denial string, prev *SignedExport, now time.Time) (*SignedExport, error) {
	signer := z.Signer()
	if signer == nil || z.Failed != "" || z.SOA == nil {
		return nil, fmt.Errorf("zone %s is not a signed zone served", z.Origin)
	}
	e := &SignedExport{Zone: z, fallbacks: rrText(fallbacks), sigs: map[string][]dns.RR{}}
	var old map[string][]dns.RR
	if prev != nil {
		old = prev.sigs
	}
	opts := signer.Options()
	// sign returns the signatures of rrs, kept from prev when fresh.
	sign := func(rrs []dns.RR) ([]dns.RR, error) {
		key := rrText(rrs)
		t := rrs[0].Header().Rrtype
		if sigs, ok := e.sigs[key]; ok {
			return sigs, nil
		}
		sigs, ok := old[key]
		if ok && signer.Fresh(sigs, t, now) {
			e.Kept += len(sigs)
		} else {
			var err error
			if sigs, err = signer.Sign(rrs, now, dnssec.ReasonLoad); err != nil {
				return nil, err
			}
			e.Made += len(sigs)
		}
		e.sigs[key] = sigs
		for _, rr := range sigs {
			at := time.Unix(int64(dnssec.RefreshAt(rr.(*dns.RRSIG), opts.Refresh)), 0)
			if e.Refresh.IsZero() || at.Before(e.Refresh) {
				e.Refresh = at
			}
		}
		return sigs, nil
	}

	// The steered names' fallbacks, one RRset per name and type.
	type nameType struct {
		name string
		t    uint16
	}
	fb := map[nameType][]dns.RR{}
	var fbOrder []nameType
	for _, rr := range fallbacks {
		k := nameType{dns.CanonicalName(rr.Header().Name), rr.Header().Rrtype}
		if _, ok := fb[k]; !ok {
			fbOrder = append(fbOrder, k)
		}
		fb[k] = append(fb[k], rr)
	}

	// The zone's RRsets, with the signatures it holds; the chain's
	// names and types as they go.
	types := map[string]*dnssec.ChainName{}
	var order []string
	note := func(name string, t uint16, signed bool) {
		n := types[name]
		if n == nil {
			n = &dnssec.ChainName{Name: name}
			types[name] = n
			order = append(order, name)
		}
		n.Types = append(n.Types, t)
		n.Signed = n.Signed || signed
	}
	rrs := make([]dns.RR, 0, z.Records*2+len(fallbacks)*2)
	var err error
	z.EachSet(func(s zone.SignedSet) bool {
		if _, steered := fb[nameType{s.Name, s.Type}]; steered {
			return true // the fallback stands for it
		}
		if (s.Type == dns.TypeNSEC || s.Type == dns.TypeNSEC3 || s.Type == dns.TypeNSEC3PARAM || s.Type == dns.TypeRRSIG) && !s.Occluded {
			err = fmt.Errorf("zone %s has %s records at %s: a zone steer signs must not carry its own denial chain or signatures", z.Origin, dns.TypeToString[s.Type], s.Name)
			return false
		}
		signed := !s.Occluded && (!s.Cut || s.Type == dns.TypeDS)
		if signed && len(s.Sigs) == 0 {
			err = fmt.Errorf("zone %s: %s %s has no signatures", z.Origin, s.Name, dns.TypeToString[s.Type])
			return false
		}
		rrs = append(rrs, s.RRs...)
		rrs = append(rrs, s.Sigs...)
		if !s.Occluded {
			note(s.Name, s.Type, signed)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	for _, k := range fbOrder {
		set := fb[k]
		sigs, err := sign(set)
		if err != nil {
			return nil, fmt.Errorf("zone %s: signing the fallback of %s: %w", z.Origin, k.name, err)
		}
		rrs = append(rrs, set...)
		rrs = append(rrs, sigs...)
		note(k.name, k.t, true)
	}

	ttl := dnssec.DenialTTL(z.SOA)
	names := make([]dnssec.ChainName, 0, len(order))
	for _, name := range order {
		names = append(names, *types[name])
	}
	var chain []dns.RR
	switch denial {
	case dnssec.DenialNSEC3:
		param := dnssec.NSEC3Param(z.Origin, dnssec.NSEC3Params{})
		sigs, err := sign([]dns.RR{param})
		if err != nil {
			return nil, fmt.Errorf("zone %s: signing NSEC3PARAM: %w", z.Origin, err)
		}
		rrs = append(rrs, param)
		rrs = append(rrs, sigs...)
		for i := range names {
			if names[i].Name == z.Origin {
				names[i].Types = append(names[i].Types, dns.TypeNSEC3PARAM)
			}
		}
		chain, err = dnssec.NSEC3Chain(z.Origin, names, ttl, dnssec.NSEC3Params{})
	case dnssec.DenialNSEC, "":
		chain, err = dnssec.NSECChain(z.Origin, names, ttl)
	default:
		err = errors.New("unknown denial " + denial)
	}
	if err != nil {
		return nil, fmt.Errorf("zone %s: %w", z.Origin, err)
	}
	for _, rr := range chain {
		sigs, err := sign([]dns.RR{rr})
		if err != nil {
			return nil, fmt.Errorf("zone %s: signing the denial chain: %w", z.Origin, err)
		}
		rrs = append(rrs, rr)
		rrs = append(rrs, sigs...)
	}
	e.RRs = rrs
	return e, nil
}
