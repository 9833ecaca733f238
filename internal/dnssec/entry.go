package dnssec

import (
	"github.com/miekg/dns"
)

// NewEntry returns the cache or table entry for the RRset rrs signed by
// sigs, served until refresh (Unix seconds): Wire holds each RRSIG's
// RDATA as miekg/dns packs it in a message (uncompressed: RFC 4034 §3.1.7
// forbids compressing the signer's name), so the fast path can write an
// RRSIG as owner (a compression pointer), type, class, TTL, RDLENGTH
// (len(Wire[i])) and Wire[i], with no allocation. A signature that does
// not pack (malformed base64) gets a nil Wire; Signer-made ones always
// pack.
func NewEntry(key CacheKey, rrs, sigs []dns.RR, refresh uint32) *Entry {
	e := &Entry{Key: key, RRs: rrs, Sigs: sigs, Refresh: refresh, Wire: make([][]byte, len(sigs))}
	size := 0
	for _, s := range sigs {
		size += dns.Len(s)
	}
	// One backing array for every RRSIG: the wire forms live as long as
	// the entry.
	buf := make([]byte, size)
	off := 0
	for i, s := range sigs {
		w, n := rdataWire(s, buf[off:])
		if w == nil {
			continue
		}
		e.Wire[i] = w[:len(w):len(w)]
		off += n
	}
	return e
}

// rdataWire packs rr (owner uncompressed) into buf and returns the part of
// buf that holds its RDATA and the length of the whole record, or nil
// when rr does not pack into buf.
func rdataWire(rr dns.RR, buf []byte) ([]byte, int) {
	n, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil || n < 11 {
		return nil, 0
	}
	start := nameWireLen(buf) + 10
	if start > n {
		return nil, 0
	}
	rdlen := int(buf[start-2])<<8 | int(buf[start-1])
	if start+rdlen != n {
		return nil, 0
	}
	return buf[start:n], n
}

// nameWireLen returns the length of the uncompressed wire-form name at the
// start of b.
func nameWireLen(b []byte) int {
	off := 0
	for off < len(b) {
		l := int(b[off])
		off += 1 + l
		if l == 0 {
			break
		}
	}
	return off
}

// RefreshOf returns when (Unix seconds) the RRset signed by sigs is due
// for renewal under the signer's options: the earliest RefreshAt of its
// RRSIGs (0 when sigs holds none).
func (s *Signer) RefreshOf(sigs []dns.RR) uint32 {
	var at uint32
	for _, rr := range sigs {
		sig, ok := rr.(*dns.RRSIG)
		if !ok {
			continue
		}
		if r := RefreshAt(sig, s.opts.Refresh); at == 0 || r < at {
			at = r
		}
	}
	return at
}
