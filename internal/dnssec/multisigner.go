package dnssec

import (
	"errors"
	"fmt"

	"github.com/miekg/dns"
)

// This file is the signer of a multi-signer zone (RFC 8901 model 2): the
// zone is signed elsewhere (a signer such as Knot, BIND or OpenDNSSEC,
// which holds the KSK and publishes the DNSKEY RRset), and steer signs
// only the answers it makes itself, its steered names', with a ZSK of its
// own that the operator has added to the signer's DNSKEY RRset. Such a
// signer publishes nothing at the apex and signs no key RRset.

// NewZSKSigner returns a signer for zone with keys, which must all be
// ZSKs (no SEP flag): the signer of the steered answers of a zone signed
// elsewhere. Its Apex is empty; it signs every RRset type but DNSKEY,
// CDS and CDNSKEY with every key.
func NewZSKSigner(zone string, keys []*Key, o Options) (*Signer, error) {
	zone = dns.CanonicalName(zone)
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	s := &Signer{Zone: zone, opts: o.withDefaults(), zskOnly: true}
	for _, k := range keys {
		if k.DNSKEY.Hdr.Name != zone {
			return nil, fmt.Errorf("%s: key for %s, not for zone %s", k.File, k.DNSKEY.Hdr.Name, zone)
		}
		if k.SEP() {
			return nil, fmt.Errorf("%s: key %d has the SEP flag (a KSK or CSK): in a zone signed elsewhere, the signer holds the KSK and steer a ZSK only", k.File, k.Tag)
		}
		s.zsk = append(s.zsk, k)
	}
	s.forData = s.zsk
	return s, nil
}

// ZSKOnly reports whether s is a ZSK-only signer (NewZSKSigner): it signs
// the steered answers of a zone another signer signs.
func (s *Signer) ZSKOnly() bool { return s.zskOnly }

// PublishedIn checks that the DNSKEY RRset dnskeys, the zone signer's,
// holds each of s's keys, so that validators find the key of every
// signature s makes; the error names the first missing key and gives the
// record to add to the signer's set. It also checks that the set has no
// algorithm s lacks a key of: RFC 8901 §2 has every signer of a zone use
// the same algorithm (RFC 4035 §2.2 wants each RRset signed with every
// algorithm of the DNSKEY RRset).
func (s *Signer) PublishedIn(dnskeys []dns.RR) error {
	if len(dnskeys) == 0 {
		return fmt.Errorf("zone %s has no DNSKEY RRset: a ZSK alone signs only the steered names of a zone signed elsewhere, whose signer publishes it (for a zone steer signs itself, give it a CSK, or a KSK beside the ZSK)", s.Zone)
	}
	algs := map[uint8]bool{}
	for _, k := range s.zsk {
		algs[k.DNSKEY.Algorithm] = true
	}
	for _, k := range s.zsk {
		found := false
		for _, rr := range dnskeys {
			d, ok := rr.(*dns.DNSKEY)
			if ok && d.Flags == k.DNSKEY.Flags && d.Protocol == k.DNSKEY.Protocol && d.Algorithm == k.DNSKEY.Algorithm && samePublicKey(d.PublicKey, k.DNSKEY.PublicKey) {
				found = true
				break
			}
		}
		if !found {
			d := *k.DNSKEY
			d.Hdr = dns.RR_Header{Name: s.Zone, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: dnskeys[0].Header().Ttl}
			return fmt.Errorf("the signer's DNSKEY RRset of %s does not hold steer's ZSK %d (%s): validators would not find the key of steered answers' signatures; add this DNSKEY to the signer's set: %s", s.Zone, k.Tag, k.File, d.String())
		}
	}
	for _, rr := range dnskeys {
		if d, ok := rr.(*dns.DNSKEY); ok && !algs[d.Algorithm] {
			return fmt.Errorf("the signer's DNSKEY RRset of %s has a key of algorithm %d (%s, key %d), steer's ZSK none: every signer of a multi-signer zone uses the same algorithm (RFC 8901 §2)", s.Zone, d.Algorithm, dns.AlgorithmToString[d.Algorithm], d.KeyTag())
		}
	}
	return nil
}

// samePublicKey compares two base64 public keys, ignoring the spaces a
// zone file may break them with.
func samePublicKey(a, b string) bool {
	strip := func(s string) string {
		out := make([]byte, 0, len(s))
		for i := 0; i < len(s); i++ {
			if c := s[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				out = append(out, c)
			}
		}
		return string(out)
	}
	return strip(a) == strip(b)
}
