package zone

import (
	"net"
	"unsafe"

	"github.com/miekg/dns"
)

// This file keeps a published zone's RRsets of the common types in wire
// form. Most of a large zone is A, AAAA and TXT records at plain names,
// and each was a miekg/dns structure of its own (a one-address A record
// is 56 bytes, plus 16 for its interface in the RRset, plus the address)
// beside the answer Precompile packs from it, which holds the very same
// data: type, class, TTL and rdata per record, the owner as a pointer to
// the question. Once a node is packed, such an RRset keeps only a pointer
// to that answer (inWire: rrset.p with capacity 0), and its records are
// made from it
// on the rare paths that want structures (a transfer, signing, the
// general lookup's additional data, explain, check); the fast path
// answers from the template as before and never needs them.
//
// What is kept so: the RRsets of the types in direct (A, AAAA, TXT, ...)
// at plain names of an unsigned zone; not a steered name's addresses,
// glue or occluded data, nor anything of a signed zone (whose signatures
// are checked against their very records).

// list returns the RRset's own records, nil when it is kept in wire form.
func (s *rrset) list() []dns.RR {
	if s.c == 0 {
		return nil
	}
	return unsafe.Slice((*dns.RR)(s.p), s.c)[:s.n]
}

// setList makes l the RRset's records.
func (s *rrset) setList(l []dns.RR) {
	if cap(l) == 0 {
		s.p, s.n, s.c = nil, 0, 0
		return
	}
	s.p, s.n, s.c = unsafe.Pointer(unsafe.SliceData(l)), uint32(len(l)), uint32(cap(l))
}

// inWire reports whether the RRset is kept in wire form: no slice of
// records (c is 0), a pointer to its answer.
func (s *rrset) inWire() bool { return s.c == 0 && s.p != nil }

// wireP returns the first byte of the answer the RRset is kept as, nil
// when it has a slice of records.
func (s *rrset) wireP() *byte {
	if !s.inWire() {
		return nil
	}
	return (*byte)(s.p)
}

// setWire makes the RRset kept as the answer starting at w.
func (s *rrset) setWire(w *byte) { s.p, s.n, s.c = unsafe.Pointer(w), 0, 0 }

// records returns the RRset's records: its own, or, kept in wire form,
// new ones made from the wire with the owner name owner.
func (s *rrset) records(owner string) []dns.RR {
	if !s.inWire() {
		return s.list()
	}
	return unpackSet(owner, s.wireBytes())
}

// count returns the number of records in the RRset.
func (s *rrset) count() int {
	if !s.inWire() {
		return int(s.n)
	}
	h := unsafe.Slice(s.wireP(), 12)
	return int(h[6])<<8 | int(h[7])
}

// wireBytes returns the answer the RRset is kept as (see store): the
// 12-byte header, then each record as a pointer to the question, type,
// class, TTL, length and data. Its length is found by walking it, each
// step within the one block the answer was cut from.
func (s *rrset) wireBytes() []byte {
	w := s.wireP()
	if w == nil {
		return nil
	}
	h := unsafe.Slice(w, 12)
	count := int(h[6])<<8 | int(h[7])
	off := 12
	for range count {
		f := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(w), off)), 12)
		off += 12 + (int(f[10])<<8 | int(f[11]))
	}
	return unsafe.Slice(w, off)
}

// sameSet reports whether a and b hold the very same records: the same
// wire, or the same slice of records.
func sameSet(a, b *rrset) bool {
	if a == nil || b == nil {
		return false
	}
	if a.inWire() || b.inWire() {
		return a.p == b.p
	}
	return sameSlice(a.list(), b.list())
}

// unpackSet makes the records of the answer w (see wireBytes), each
// named owner, as the parser makes them: addresses of 4 and 16 bytes
// (pointing into w, which is never written), Rdlength 0.
func unpackSet(owner string, w []byte) []dns.RR {
	count := int(w[6])<<8 | int(w[7])
	out := make([]dns.RR, 0, count)
	off := 12
	var as []dns.A
	var aaaas []dns.AAAA
	for range count {
		if off+12 > len(w) {
			break
		}
		f := w[off : off+12]
		rtype := uint16(f[2])<<8 | uint16(f[3])
		hdr := dns.RR_Header{Name: owner, Rrtype: rtype, Class: uint16(f[4])<<8 | uint16(f[5]),
			Ttl: uint32(f[6])<<24 | uint32(f[7])<<16 | uint32(f[8])<<8 | uint32(f[9])}
		rdlen := int(f[10])<<8 | int(f[11])
		rd := off + 12
		end := rd + rdlen
		if end > len(w) {
			break
		}
		off = end
		switch {
		case rtype == dns.TypeA && rdlen == net.IPv4len:
			if as == nil {
				as = make([]dns.A, 0, count)
			}
			as = append(as, dns.A{Hdr: hdr, A: net.IP(w[rd:end:end])})
			out = append(out, &as[len(as)-1])
			continue
		case rtype == dns.TypeAAAA && rdlen == net.IPv6len:
			if aaaas == nil {
				aaaas = make([]dns.AAAA, 0, count)
			}
			aaaas = append(aaaas, dns.AAAA{Hdr: hdr, AAAA: net.IP(w[rd:end:end])})
			out = append(out, &aaaas[len(aaaas)-1])
			continue
		}
		hdr.Rdlength = uint16(rdlen)
		rr, _, err := dns.UnpackRRWithHeader(hdr, w[:end], rd)
		if err != nil {
			continue // packed from a record the parser made: does not happen
		}
		rr.Header().Rdlength = 0
		out = append(out, rr)
	}
	return out
}

// equalToWire reports whether rrs are the records of the answer w (see
// wireBytes), in that order, TTLs included: a reload's parse of a name
// against the served zone's RRset kept in wire form.
func equalToWire(owner string, rrs []dns.RR, w []byte) bool {
	if len(w) < 12 || int(w[6])<<8|int(w[7]) != len(rrs) {
		return false
	}
	off := 12
	for _, rr := range rrs {
		if off+12 > len(w) {
			return false
		}
		f := w[off : off+12]
		h := rr.Header()
		rdlen := int(f[10])<<8 | int(f[11])
		rd, end := off+12, off+12+rdlen
		if end > len(w) || h.Rrtype != uint16(f[2])<<8|uint16(f[3]) ||
			h.Ttl != uint32(f[6])<<24|uint32(f[7])<<16|uint32(f[8])<<8|uint32(f[9]) {
			return false
		}
		switch r := rr.(type) {
		case *dns.A:
			if string(r.A.To4()) != string(w[rd:end]) {
				return false
			}
		case *dns.AAAA:
			if string(r.AAAA.To16()) != string(w[rd:end]) || r.AAAA.To4() != nil {
				return false
			}
		default:
			one := append(make([]byte, 0, 12+end-off), 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0)
			got := unpackSet(owner, append(one, w[off:end]...))
			if len(got) != 1 || !dns.IsDuplicate(got[0], rr) {
				return false
			}
		}
		off = end
	}
	return true
}

// storeNode keeps n's RRsets that its templates hold whole in wire form
// (see the top of this file). It writes n, which must be z's own (not
// the served zone's) and precompiled; the RRsets slice is copied first
// when it is the served zone's node's.
func (z *Zone) storeNode(n *node) {
	if !n.plain || n.sig != nil || n.ntpl == 0 {
		return
	}
	copied := false
	for i := range n.rrsets {
		rs := &n.rrsets[i]
		if rs.list() == nil || !direct[rs.rtype] || n.steered && (rs.rtype == dns.TypeA || rs.rtype == dns.TypeAAAA) {
			continue
		}
		w := n.Template(rs.rtype)
		if len(w) < 12 || int(w[6])<<8|int(w[7]) != len(rs.list()) {
			continue
		}
		if !copied {
			copied = true
			if z.prev != nil {
				if pn := z.prev.nodes.get(n.name); pn != nil && len(pn.rrsets) > 0 && &pn.rrsets[0] == &n.rrsets[0] {
					n.rrsets = append([]rrset(nil), n.rrsets...)
					rs = &n.rrsets[i]
				}
			}
		}
		rs.setWire(&w[0])
	}
}
