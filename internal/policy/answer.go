package policy

import (
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// AppendAnswer appends the records of decision d for qtype to dst: every
// address of the chosen pools (only those set in masks, per pool, when
// masks is not nil), shuffled; with d.Limit (multivalue), d.Limit
// consecutive ones of them in the record's order, from a random start and
// wrapping (a rotation window, so that every set answered can be signed
// ahead of time), shuffled; for a CNAME record, one target. The records
// are made for the call, with r's TTL: the caller may change them.
func (r *Record) AppendAnswer(dst []dns.RR, d *Decision, qtype uint16, masks []uint64) []dns.RR {
	return r.appendAnswer(dst, d, qtype, masks, true)
}

// AppendStable is AppendAnswer giving the same records in the same order
// every time: the chosen pools' addresses in the record's order (pools as
// configured, each pool's addresses as listed), not shuffled, the first
// d.Limit of them (the window that starts at the first). A transfer's exported fallback is answered so.
func (r *Record) AppendStable(dst []dns.RR, d *Decision, qtype uint16, masks []uint64) []dns.RR {
	return r.appendAnswer(dst, d, qtype, masks, false)
}

func (r *Record) appendAnswer(dst []dns.RR, d *Decision, qtype uint16, masks []uint64, shuffle bool) []dns.RR {
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
			if p.Target != "" {
				dst = append(dst, r.cnameRR(p.Target))
			}
		case qtype == dns.TypeA:
			for j, a := range p.V4 {
				if masks == nil || masks[p.Index]&(1<<j) != 0 {
					dst = append(dst, r.addrRR(a))
				}
			}
		case qtype == dns.TypeAAAA:
			for j, a := range p.V6 {
				if masks == nil || masks[p.Index]&(1<<(len(p.V4)+j)) != 0 {
					dst = append(dst, r.addrRR(a))
				}
			}
		}
	}
	added := dst[start:]
	limit := d.Limit
	if r.Type == dns.TypeCNAME {
		limit = 1 // one CNAME per name (RFC 2181 §10.1)
	}
	if limit > 0 && len(added) > limit {
		// A window of limit records in the record's order, from a
		// random start (wrapping): n possible sets rather than
		// n-choose-limit, so that each can be signed ahead of time
		// (AnswerSets). Every address is still in limit of n answers.
		if shuffle {
			rotate(added, rand.IntN(len(added)))
		}
		added = added[:limit]
		dst = dst[:start+limit]
	}
	if shuffle && len(added) > 1 {
		rand.Shuffle(len(added), func(i, j int) { added[i], added[j] = added[j], added[i] })
	}
	return dst
}

// The answer records are made for each answer from the pools' addresses,
// not kept: only the general path and signing ahead of time use them (the
// fast path writes addresses as wire, AppendWire), and kept they were 88
// bytes an address of every steered name (issue 31).

// aRR and aaaaRR are an address record with its address's bytes: one
// allocation.
type aRR struct {
	dns.A
	ip [4]byte
}

type aaaaRR struct {
	dns.AAAA
	ip [16]byte
}

// addrRR returns a new A or AAAA record of r for a, with r's TTL.
func (r *Record) addrRR(a netip.Addr) dns.RR {
	if a.Is4() {
		rr := &aRR{A: dns.A{Hdr: dns.RR_Header{Name: r.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: r.TTL}}, ip: a.As4()}
		rr.A.A = rr.ip[:]
		return &rr.A
	}
	rr := &aaaaRR{AAAA: dns.AAAA{Hdr: dns.RR_Header{Name: r.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: r.TTL}}, ip: a.As16()}
	rr.AAAA.AAAA = rr.ip[:]
	return &rr.AAAA
}

// cnameRR returns a new CNAME record of r to target, with r's TTL.
func (r *Record) cnameRR(target string) dns.RR {
	return &dns.CNAME{Hdr: dns.RR_Header{Name: r.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: r.TTL}, Target: target}
}

// PoolRecords returns the answer records of pool p of r: its A records,
// then its AAAA records, or its CNAME record; made for the call.
func (r *Record) PoolRecords(p *Pool) []dns.RR {
	var out []dns.RR
	for _, a := range p.V4 {
		out = append(out, r.addrRR(a))
	}
	for _, a := range p.V6 {
		out = append(out, r.addrRR(a))
	}
	if p.Target != "" {
		out = append(out, r.cnameRR(p.Target))
	}
	return out
}

// rotate moves s[k:] to the front of s, in place (three reversals).
func rotate[T any](s []T, k int) {
	if k <= 0 || k >= len(s) {
		return
	}
	slices.Reverse(s[:k])
	slices.Reverse(s[k:])
	slices.Reverse(s)
}

// maxWireAddrs bounds the addresses AppendWire writes in one answer.
const maxWireAddrs = 32

// AppendWire appends the answer records of decision d for qtype to a DNS
// message being built in out, in wire form with the owner compressed to the
// question name (offset 12), and returns the number of records. It is the
// allocation-free twin of AppendAnswer for A and AAAA records; ok is false
// when it cannot (CNAME records, more than 32 addresses): the caller then
// answers through AppendAnswer. masks is as for AppendAnswer; ttl is the
// TTL to write (Live.TTL).
//
// The records are written where they go and then windowed and shuffled
// there, as fixed-size blocks: no array of addresses to zero and copy
// (768 bytes, a third of this function's time in the pinned benchmark's
// profile), and only the chosen pools are read (pool i of r.Pools has
// Index i, which build guarantees and TestPoolIndexIsPosition checks).
func (r *Record) AppendWire(out []byte, d *Decision, qtype uint16, masks []uint64, ttl uint32) (_ []byte, n int, ok bool) {
	if r.Type == dns.TypeCNAME || (qtype != dns.TypeA && qtype != dns.TypeAAAA) {
		return out, 0, false
	}
	start := len(out)
	size := wireA
	if qtype == dns.TypeAAAA {
		size = wireAAAA
	}
	for m := d.Pools; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if i >= len(r.Pools) {
			break // group bits follow the pools'
		}
		p := r.Pools[i]
		src, base := p.V4, 0
		if qtype == dns.TypeAAAA {
			src, base = p.V6, len(p.V4)
		}
		for j, a := range src {
			if masks != nil && masks[i]&(1<<(base+j)) == 0 {
				continue
			}
			if n == maxWireAddrs {
				return out[:start], 0, false
			}
			out = append(out, 0xC0, 0x0C, byte(qtype>>8), byte(qtype), 0, 1,
				byte(ttl>>24), byte(ttl>>16), byte(ttl>>8), byte(ttl))
			if qtype == dns.TypeA {
				b := a.As4()
				out = append(out, 0, 4)
				out = append(out, b[:]...)
			} else {
				b := a.As16()
				out = append(out, 0, 16)
				out = append(out, b[:]...)
			}
			n++
		}
	}
	if n <= 1 {
		return out, n, true
	}
	rrs := out[start:]
	if d.Limit > 0 && n > d.Limit {
		rotate(rrs, rand.IntN(n)*size) // a window, as appendAnswer
		n = d.Limit
		rrs = rrs[:n*size]
		out = out[:start+n*size]
	}
	var tmp [wireAAAA]byte
	for i := n - 1; i > 0; i-- {
		if j := rand.IntN(i + 1); j != i {
			a, b := rrs[i*size:(i+1)*size], rrs[j*size:(j+1)*size]
			copy(tmp[:], a)
			copy(a, b)
			copy(b, tmp[:size])
		}
	}
	return out, n, true
}

// The sizes of an A and an AAAA record as AppendWire writes them: the
// owner as a pointer, type, class, TTL, length and address.
const (
	wireA    = 2 + 2 + 2 + 4 + 2 + 4
	wireAAAA = 2 + 2 + 2 + 4 + 2 + 16
)
