package dnssec

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/miekg/dns"
)

// This file makes the signature over an RRset without miekg/dns's
// RRSIG.Sign, which copies every record, splits and joins its owner name
// as strings, re-parses each packed record on every comparison of its
// sort and decodes ECDSA signatures through big.Int. Here the signed data
// of RFC 4034 §3.1.8.1 (the RRSIG RDATA less the signature, then each
// record in canonical form and order, §6) is written straight into a
// pooled buffer: the records are packed once (a record whose RDATA
// names must be lower case, §6.2 as miekg/dns lists the types, is copied
// and lowered first, only when one has an upper-case letter), sorted by
// RDATA and written under the canonical owner. RRSIG.Verify of
// miekg/dns stays the oracle of the tests.

// signBuf is the scratch of one signature.
type signBuf struct {
	data  []byte // the signed data
	pack  []byte // one record packed
	rdata []byte // the records' canonical RDATA, back to back
	spans []span // each record's RDATA in rdata
	owner []byte // the canonical owner name
}

type span struct{ off, end int }

var signBufs = sync.Pool{New: func() any {
	return &signBuf{data: make([]byte, 0, 1024), pack: make([]byte, 512), rdata: make([]byte, 0, 512), owner: make([]byte, 256)}
}}

// signedData writes into b.data the data sig signs over rrs (RFC 4034
// §3.1.8.1) and returns the length of its first part, the RRSIG RDATA
// without the signature: with the signature appended, that part is the
// RRSIG's RDATA as a message carries it. sig's signer name must be
// canonical (lower case).
func (b *signBuf) signedData(sig *dns.RRSIG, rrs []dns.RR) (int, error) {
	d := b.data[:0]
	d = append(d, byte(sig.TypeCovered>>8), byte(sig.TypeCovered), sig.Algorithm, sig.Labels)
	d = be32(d, sig.OrigTtl)
	d = be32(d, sig.Expiration)
	d = be32(d, sig.Inception)
	d = append(d, byte(sig.KeyTag>>8), byte(sig.KeyTag))
	var err error
	if d, err = appendName(d, sig.SignerName); err != nil {
		return 0, err
	}
	prefix := len(d)

	// The canonical owner: lower case; a wildcard's is its own name, "*"
	// included (the label count leaves the "*" out).
	n, err := dns.PackDomainName(rrs[0].Header().Name, b.owner, 0, nil, false)
	if err != nil {
		return 0, err
	}
	owner := lower(b.owner[:n])

	b.rdata, b.spans = b.rdata[:0], b.spans[:0]
	for _, rr := range rrs {
		rr = canonicalRdata(rr)
		n, err := dns.PackRR(rr, b.pack, 0, nil, false)
		if err != nil {
			b.pack = make([]byte, dns.Len(rr)+64)
			if n, err = dns.PackRR(rr, b.pack, 0, nil, false); err != nil {
				return 0, err
			}
		}
		start := nameWireLen(b.pack[:n]) + 10
		if start > n {
			return 0, errors.New("dnssec: record does not pack")
		}
		off := len(b.rdata)
		b.rdata = append(b.rdata, b.pack[start:n]...)
		b.spans = append(b.spans, span{off, len(b.rdata)})
	}
	// RFC 4034 §6.3: by RDATA as left-justified octets; duplicates once.
	rd := b.rdata
	if len(b.spans) > 1 {
		slices.SortFunc(b.spans, func(x, y span) int { return bytes.Compare(rd[x.off:x.end], rd[y.off:y.end]) })
	}
	h := rrs[0].Header()
	for i, s := range b.spans {
		r := rd[s.off:s.end]
		if i > 0 && bytes.Equal(r, rd[b.spans[i-1].off:b.spans[i-1].end]) {
			continue
		}
		d = append(d, owner...)
		d = append(d, byte(h.Rrtype>>8), byte(h.Rrtype), byte(h.Class>>8), byte(h.Class))
		d = be32(d, sig.OrigTtl)
		d = append(d, byte(len(r)>>8), byte(len(r)))
		d = append(d, r...)
	}
	b.data = d
	return prefix, nil
}

func be32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendName appends name's uncompressed wire form, lower-cased.
func appendName(b []byte, name string) ([]byte, error) {
	var buf [256]byte
	n, err := dns.PackDomainName(name, buf[:], 0, nil, false)
	if err != nil {
		return b, err
	}
	return append(b, lower(buf[:n])...), nil
}

// lower lower-cases a wire-form name in place: its length octets are at
// most 63, below 'A'.
func lower(w []byte) []byte {
	for i, c := range w {
		if 'A' <= c && c <= 'Z' {
			w[i] = c + 'a' - 'A'
		}
	}
	return w
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// canonicalRdata returns rr, or a copy of it with the names of its RDATA
// lower-cased when RFC 4034 §6.2 (as miekg/dns applies it) wants them so
// and one has an upper-case letter.
func canonicalRdata(rr dns.RR) dns.RR {
	var names []*string
	switch x := rr.(type) {
	case *dns.NS:
		names = []*string{&x.Ns}
	case *dns.CNAME:
		names = []*string{&x.Target}
	case *dns.DNAME:
		names = []*string{&x.Target}
	case *dns.PTR:
		names = []*string{&x.Ptr}
	case *dns.MX:
		names = []*string{&x.Mx}
	case *dns.SRV:
		names = []*string{&x.Target}
	case *dns.SOA:
		names = []*string{&x.Ns, &x.Mbox}
	case *dns.NAPTR:
		names = []*string{&x.Replacement}
	case *dns.MD, *dns.MF, *dns.MB, *dns.MG, *dns.MR, *dns.MINFO, *dns.RP, *dns.AFSDB, *dns.RT, *dns.SIG, *dns.PX, *dns.KX:
		return rareCanonical(rr)
	default:
		return rr
	}
	upper := false
	for _, n := range names {
		upper = upper || hasUpper(*n)
	}
	if !upper {
		return rr
	}
	c := dns.Copy(rr)
	return canonicalCopy(c)
}

// canonicalCopy lower-cases the RDATA names of c, a copy.
func canonicalCopy(c dns.RR) dns.RR {
	switch x := c.(type) {
	case *dns.NS:
		x.Ns = dns.CanonicalName(x.Ns)
	case *dns.CNAME:
		x.Target = dns.CanonicalName(x.Target)
	case *dns.DNAME:
		x.Target = dns.CanonicalName(x.Target)
	case *dns.PTR:
		x.Ptr = dns.CanonicalName(x.Ptr)
	case *dns.MX:
		x.Mx = dns.CanonicalName(x.Mx)
	case *dns.SRV:
		x.Target = dns.CanonicalName(x.Target)
	case *dns.SOA:
		x.Ns, x.Mbox = dns.CanonicalName(x.Ns), dns.CanonicalName(x.Mbox)
	case *dns.NAPTR:
		x.Replacement = dns.CanonicalName(x.Replacement)
	case *dns.MD:
		x.Md = dns.CanonicalName(x.Md)
	case *dns.MF:
		x.Mf = dns.CanonicalName(x.Mf)
	case *dns.MB:
		x.Mb = dns.CanonicalName(x.Mb)
	case *dns.MG:
		x.Mg = dns.CanonicalName(x.Mg)
	case *dns.MR:
		x.Mr = dns.CanonicalName(x.Mr)
	case *dns.MINFO:
		x.Rmail, x.Email = dns.CanonicalName(x.Rmail), dns.CanonicalName(x.Email)
	case *dns.RP:
		x.Mbox, x.Txt = dns.CanonicalName(x.Mbox), dns.CanonicalName(x.Txt)
	case *dns.AFSDB:
		x.Hostname = dns.CanonicalName(x.Hostname)
	case *dns.RT:
		x.Host = dns.CanonicalName(x.Host)
	case *dns.SIG:
		x.SignerName = dns.CanonicalName(x.SignerName)
	case *dns.PX:
		x.Map822, x.Mapx400 = dns.CanonicalName(x.Map822), dns.CanonicalName(x.Mapx400)
	case *dns.KX:
		x.Exchanger = dns.CanonicalName(x.Exchanger)
	}
	return c
}

// rareCanonical is canonicalRdata for the types zones hardly hold: always
// a lowered copy.
func rareCanonical(rr dns.RR) dns.RR { return canonicalCopy(dns.Copy(rr)) }

// rawSign signs data with k as RFC 4034 (RSA), RFC 6605 (ECDSA: r and s,
// 32 octets each for P-256) and RFC 8080 (Ed25519) say, returning the
// signature's octets. ECDSA signatures are deterministic (RFC 6979).
func rawSign(k *Key, data []byte) ([]byte, error) {
	switch k.DNSKEY.Algorithm {
	case dns.ED25519:
		return k.Signer.Sign(rand.Reader, data, crypto.Hash(0))
	case dns.RSASHA256:
		sum := sha256.Sum256(data)
		return k.Signer.Sign(rand.Reader, sum[:], crypto.SHA256)
	case dns.ECDSAP256SHA256:
		sum := sha256.Sum256(data)
		// A key of crypto/ecdsa signs deterministically (RFC 6979, a nil
		// reader), as Ed25519 always does: a fifth less CPU than the
		// hedged nonce, whose SHA-512 DRBG is a third of a signature.
		var rnd io.Reader = rand.Reader
		if _, ok := k.Signer.(*ecdsa.PrivateKey); ok {
			rnd = nil
		}
		der, err := k.Signer.Sign(rnd, sum[:], crypto.SHA256)
		if err != nil {
			return nil, err
		}
		return ecdsaRaw(der, 32)
	}
	return nil, errUnsupported
}

var (
	errUnsupported = errors.New("dnssec: algorithm not supported by the fast signer")
	errECDSA       = errors.New("dnssec: malformed ECDSA signature")
)

// ecdsaRaw turns an ASN.1 DER ECDSA signature, SEQUENCE { INTEGER r,
// INTEGER s }, into r and s as size-octet big-endian integers.
func ecdsaRaw(der []byte, size int) ([]byte, error) {
	bad := errECDSA
	if len(der) < 8 || der[0] != 0x30 || int(der[1]) != len(der)-2 || der[1] >= 0x80 {
		return nil, bad
	}
	out := make([]byte, 2*size)
	rest := der[2:]
	for i := range 2 {
		if len(rest) < 2 || rest[0] != 0x02 || rest[1] >= 0x80 || int(rest[1]) > len(rest)-2 {
			return nil, bad
		}
		v := rest[2 : 2+int(rest[1])]
		rest = rest[2+int(rest[1]):]
		for len(v) > 0 && v[0] == 0 {
			v = v[1:]
		}
		if len(v) > size {
			return nil, bad
		}
		copy(out[i*size+size-len(v):(i+1)*size], v)
	}
	if len(rest) != 0 {
		return nil, bad
	}
	return out, nil
}

// signRRset fills sig's Signature over rrs with key k and, when wire is
// not nil, appends the RRSIG's RDATA as a message carries it to *wire.
func signRRset(k *Key, sig *dns.RRSIG, rrs []dns.RR, wire *[]byte) error {
	b := signBufs.Get().(*signBuf)
	defer func() {
		if cap(b.data) <= 64<<10 {
			signBufs.Put(b)
		}
	}()
	prefix, err := b.signedData(sig, rrs)
	if err != nil {
		return err
	}
	raw, err := rawSign(k, b.data)
	if err == errUnsupported {
		if err := sig.Sign(k.Signer, rrs); err != nil {
			return err
		}
		if wire != nil {
			buf := make([]byte, dns.Len(sig)+64)
			w, _ := rdataWire(sig, buf)
			*wire = append(*wire, w...)
		}
		return nil
	}
	if err != nil {
		return err
	}
	sig.Signature = base64.StdEncoding.EncodeToString(raw)
	if wire != nil {
		*wire = append(append(*wire, b.data[:prefix]...), raw...)
	}
	return nil
}
