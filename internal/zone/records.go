package zone

import (
	"fmt"
	"sort"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
)

// AppendRecords appends every record of the zone to dst, for a zone
// transfer: the SOA first, then the others, names in a fixed order and
// RRsets by type. Glue and occluded data are included (they are the
// zone's data); steered names hold no records of their own. The closing
// SOA of a transfer is the caller's. A failed zone appends nothing.
func (z *Zone) AppendRecords(dst []dns.RR) []dns.RR {
	if z.Failed != "" || z.SOA == nil {
		return dst
	}
	dst = append(dst, z.SOA)
	names := make([]string, 0, len(z.nodes))
	for name, n := range z.nodes {
		if len(n.rrsets) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		for _, s := range z.nodes[name].rrsets {
			if s.rtype == dns.TypeSOA && name == z.Origin {
				continue
			}
			dst = append(dst, s.rrs...)
		}
	}
	return dst
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
// name's fallback answer). It parses the records again, so it costs a
// load of the zone; it is only called when that serial changes.
func (z *Zone) WithSerial(serial uint32) (*Zone, diag.Problems) {
	if z.Failed != "" || z.SOA == nil {
		return nil, diag.Problems{{File: z.File, Msg: fmt.Sprintf("zone %s has no SOA to change", z.Origin)}}
	}
	soa := dns.Copy(z.SOA).(*dns.SOA)
	soa.Serial = serial
	text := []byte(soa.String() + "\n")
	rrs := z.AppendRecords(nil)
	for _, rr := range rrs[1:] {
		text = append(text, rr.String()...)
		text = append(text, '\n')
	}
	nz, errs, _ := Parse(nil, z.Origin, z.File, text)
	if len(errs) > 0 {
		return nil, errs
	}
	nz.fileSerial = z.FileSerial()
	nz.fromFile = false
	return nz, nil
}
