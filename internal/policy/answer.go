package policy

import (
	"math/rand/v2"

	"github.com/miekg/dns"
)

// AppendAnswer appends the records of decision d for qtype to dst: every
// address of the chosen pools, shuffled, at most d.Limit of them; for a
// CNAME record, one target.
func (r *Record) AppendAnswer(dst []dns.RR, d *Decision, qtype uint16) []dns.RR {
	if d.Pools == 0 {
		return dst
	}
	start := len(dst)
	for _, p := range r.Pools {
		if d.Pools&(1<<p.Index) == 0 {
			continue
		}
		switch {
		case r.Type == dns.TypeCNAME:
			dst = append(dst, p.CNAME...)
		case qtype == dns.TypeA:
			dst = append(dst, p.A...)
		case qtype == dns.TypeAAAA:
			dst = append(dst, p.AAAA...)
		}
	}
	added := dst[start:]
	if len(added) > 1 {
		rand.Shuffle(len(added), func(i, j int) { added[i], added[j] = added[j], added[i] })
	}
	limit := d.Limit
	if r.Type == dns.TypeCNAME {
		limit = 1 // one CNAME per name (RFC 2181 §10.1)
	}
	if limit > 0 && len(added) > limit {
		dst = dst[:start+limit]
	}
	return dst
}
