package zone

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
)

// AppendRecords appends every record of the zone to dst, for a zone
// transfer: the SOA first, then the others, names in a fixed order and
// RRsets by type. Glue and occluded data are included (they are the
// zone's data); steered names hold no records of their own. The closing
// SOA of a transfer is the caller's. A failed zone appends nothing.
func (z *Zone) AppendRecords(dst []dns.RR) []dns.RR {
	for rr := range z.EachRecord {
		dst = append(dst, rr)
	}
	return dst
}

// EachRecord yields the records AppendRecords appends, in its order,
// without copying them out: a transfer streams them from the zone (it
// costs a sorted list of the names, not of the records).
func (z *Zone) EachRecord(yield func(dns.RR) bool) {
	if z.Failed != "" || z.SOA == nil {
		return
	}
	if !yield(z.SOA) {
		return
	}
	names := make([]string, 0, z.nodes.len())
	for name, n := range z.nodes.all {
		if len(n.rrsets) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		for _, s := range z.nodes.get(name).rrsets {
			if s.rtype == dns.TypeSOA && name == z.Origin {
				continue
			}
			for _, rr := range s.records(name) {
				if !yield(rr) {
					return
				}
			}
		}
	}
	if z.pre != nil {
		for _, rr := range z.pre.records {
			if !yield(rr) {
				return
			}
		}
	}
}

// FileSerial is the serial of the SOA as read, before WithSerial
// changed it (the same as Serial for a zone it did not make).
func (z *Zone) FileSerial() uint32 {
	if z.fileSerial != 0 {
		return z.fileSerial
	}
	return z.Serial()
}

// WithSerial returns a new, unpublished zone holding z's records with
// the SOA serial set to serial: the serial steer exports when what it
// transfers out changed without the file's serial changing (a steered
// name's fallback answer). z is left as it is. The new zone shares every
// node with z but the apex, which it copies with the new SOA; for a
// published (precompiled) z it shares z's index too, and Set.Precompile
// packs only its apex, so a new serial costs the apex, not the zone.
// It keeps z's source (the file's text, with the file's serial) and so
// is known as unchanged from the same file (Unchanged).
func (z *Zone) WithSerial(serial uint32) (*Zone, diag.Problems) {
	if z.Failed != "" || z.SOA == nil || z.apex == nil {
		return nil, diag.Problems{{File: z.File, Msg: fmt.Sprintf("zone %s has no SOA to change", z.Origin)}}
	}
	if z.pre != nil {
		// Its SOA is signed by the zone's signer, whose serial it is.
		return nil, diag.Problems{{File: z.File, Msg: fmt.Sprintf("zone %s is pre-signed: its SOA serial is its signer's", z.Origin)}}
	}
	soa := dns.Copy(z.SOA).(*dns.SOA)
	soa.Serial = serial
	apex := *z.apex
	apex.setTemplates(nil)
	apex.rrsets = append([]rrset(nil), z.apex.rrsets...)
	for i := range apex.rrsets {
		if apex.rrsets[i].rtype == dns.TypeSOA {
			apex.rrsets[i].setList([]dns.RR{soa})
		}
	}
	nz := *z
	nz.SOA, nz.apex, nz.fileSerial, nz.base = soa, &apex, z.FileSerial(), z.Base()
	if z.NegSOA != nil {
		neg := dns.Copy(z.NegSOA).(*dns.SOA)
		neg.Serial = serial
		nz.NegSOA = neg
	}
	if z.signer != nil && apex.sig != nil {
		// A new SOA needs its own signatures; the apex's others stay.
		sig := nodeSigs{sets: slices.Clone(apex.sig.sets)}
		for i := range apex.rrsets {
			if apex.rrsets[i].rtype == dns.TypeSOA && i < len(sig.sets) {
				sigs, err := z.signer.Sign(apex.rrsets[i].records(apex.name), time.Now(), dnssec.ReasonLoad)
				if err != nil {
					return nil, diag.Problems{{File: z.File, Msg: fmt.Sprintf("zone %s: %v", z.Origin, err)}}
				}
				sig.sets[i] = sigs
			}
		}
		apex.sig = &sig
		nz.negSigs = negSOASigs(&nz)
	}
	if z.precompiled {
		// The index stays z's, whose entry for the apex is z's apex:
		// every lookup starts at Zone.apex, and other names reach the
		// apex only for its addresses, which are the same.
		nz.precompiled, nz.apexOnly = false, true
	} else {
		nz.nodes = z.nodes.clone()
		nz.nodes.put(&apex)
	}
	return &nz, nil
}

// Base returns the zone whose records z holds: z itself, or for a zone
// WithSerial made, the zone it was made from (its base). Zones with the
// same base differ in their SOA serial only.
func (z *Zone) Base() *Zone {
	if z.base != nil {
		return z.base
	}
	return z
}
