package dnssec

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Defaults for Options left zero.
const (
	DefaultValidity = 14 * 24 * time.Hour
	DefaultBackdate = time.Hour
	DefaultRefresh  = 0.75
	// DefaultJitter is the share of the validity a signature's
	// expiration is moved earlier by, at most, varying per RRset, so that
	// the signatures of a zone signed at once are not all renewed at once.
	DefaultJitter = 0.1
)

// Options say how long signatures hold.
type Options struct {
	// Validity is from inception-less-backdate... the span from signing
	// to expiration (before jitter); 0 means DefaultValidity.
	Validity time.Duration
	// Backdate is how far before now the inception is set (clock skew
	// between us and validators); 0 means DefaultBackdate.
	Backdate time.Duration
	// Refresh is the share of a signature's validity after which it is
	// renewed; 0 means DefaultRefresh.
	Refresh float64
	// Jitter is the largest share of Validity taken off an RRset's
	// expiration; 0 means DefaultJitter, a negative value none.
	Jitter float64
	// KeyTTL is the TTL of the apex's DNSKEY, CDS and CDNSKEY RRsets
	// (the zone's dnskey_ttl); 0: the SOA's TTL. A key rollover's
	// publication interval counts on it.
	KeyTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.Validity <= 0 {
		o.Validity = DefaultValidity
	}
	if o.Backdate <= 0 {
		o.Backdate = DefaultBackdate
	}
	// Refresh is a share of the span from inception to expiration, which
	// the backdate is part of: an hour's backdate on a validity of
	// minutes (tests) would make a signature due for renewal as soon as
	// it is made. An eighth of the validity at most keeps a signature
	// fresh for most of the time it is served.
	o.Backdate = min(o.Backdate, o.Validity/8)
	if o.Refresh <= 0 || o.Refresh >= 1 {
		o.Refresh = DefaultRefresh
	}
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case o.Jitter < 0:
		o.Jitter = 0
	}
	return o
}

// Reason says why a signature was made, for metrics.
type Reason uint8

// The reasons a signature is made.
const (
	ReasonLoad    Reason = iota // a zone's RRset at load or reload
	ReasonRenew                 // a signature past its refresh point
	ReasonSteered               // a steered answer set, pre-signed
	ReasonOnline                // on a query's behalf (a cache miss)
	ReasonDenial                // a denial-of-existence NSEC
	numReasons
)

var reasonNames = [numReasons]string{"load", "renew", "steered", "online", "denial"}

func (r Reason) String() string { return reasonNames[r] }

// Signer signs the RRsets of one zone with its keys: DNSKEY, CDS and
// CDNSKEY with the keys that have the SEP flag (the KSKs, or the CSK),
// everything else with the others (the ZSKs, or the CSK). It is safe for
// concurrent use.
type Signer struct {
	// Zone is the zone's origin, canonical: every signature's signer name.
	Zone string
	ksk  []*Key
	zsk  []*Key
	opts Options
	csk  bool // one key signs everything
	// zskOnly is set on a signer of ZSKs alone (NewZSKSigner): the
	// steered answers of a zone another signer signs (multi-signer).
	zskOnly bool
	// forKeys and forData are the keys that sign the apex's key RRsets
	// (DNSKEY, CDS, CDNSKEY) and every other RRset (see keysFor).
	forKeys, forData []*Key
	// publish are keys in the DNSKEY RRset that sign nothing: a ZSK's
	// successor before it is active, a retired ZSK until every signature
	// it made has left the caches (a rollover, internal/keyroll).
	publish []*Key
	// Budget caps signatures made on queries' behalf; nil: no cap.
	Budget *Budget
	// Cache keeps signatures made on demand; nil: none.
	Cache *Cache

	made [numReasons]atomic.Uint64
}

// NewSigner returns a signer for zone with keys: one CSK (a SEP key used
// for everything), or KSKs (SEP) and ZSKs.
func NewSigner(zone string, keys []*Key, o Options) (*Signer, error) {
	zone = dns.CanonicalName(zone)
	s := &Signer{Zone: zone, opts: o.withDefaults()}
	for _, k := range keys {
		if k.DNSKEY.Hdr.Name != zone {
			return nil, fmt.Errorf("%s: key for %s, not for zone %s", k.File, k.DNSKEY.Hdr.Name, zone)
		}
		if k.SEP() {
			s.ksk = append(s.ksk, k)
		} else {
			s.zsk = append(s.zsk, k)
		}
	}
	switch {
	case len(s.ksk) == 0:
		return nil, errors.New("no key with the SEP flag (a KSK or CSK, dnssec-keygen -f KSK)")
	case len(s.zsk) == 0:
		s.zsk, s.csk = s.ksk, true // a CSK signs everything
	}
	s.forKeys = withEveryAlgorithm(s.ksk, s.zsk)
	s.forData = withEveryAlgorithm(s.zsk, s.ksk)
	return s, nil
}

// NewSignerPublishing is NewSigner with keys that sign and publish, keys
// that are only published in the DNSKEY RRset (see Published): what a
// ZSK rollover needs (RFC 6781 §4.1.1.1). A key may not be in both, nor
// twice.
func NewSignerPublishing(zone string, keys, publish []*Key, o Options) (*Signer, error) {
	s, err := NewSigner(zone, keys, o)
	if err != nil {
		return nil, err
	}
	for i, k := range publish {
		if k.DNSKEY.Hdr.Name != s.Zone {
			return nil, fmt.Errorf("%s: key for %s, not for zone %s", k.File, k.DNSKEY.Hdr.Name, s.Zone)
		}
		for _, others := range [][]*Key{keys, publish[:i]} {
			for _, o := range others {
				if o.Tag == k.Tag && o.DNSKEY.Algorithm == k.DNSKEY.Algorithm && o.DNSKEY.PublicKey == k.DNSKEY.PublicKey {
					return nil, fmt.Errorf("%s: key %d is listed twice", k.File, k.Tag)
				}
			}
		}
	}
	s.publish = publish
	return s, nil
}

// withEveryAlgorithm returns the keys of first and, for each algorithm
// only others have, the first of others with it: RFC 4035 §2.2 wants each
// RRset signed by at least one key of every algorithm in the DNSKEY RRset
// (so an RSASHA256 KSK beside an ECDSA ZSK, as in an algorithm rollover,
// signs the data too, and the ZSK signs the DNSKEY RRset). With one
// algorithm, it is first.
func withEveryAlgorithm(first, others []*Key) []*Key {
	out := first
	for _, k := range others {
		have := false
		for _, o := range out {
			have = have || o.DNSKEY.Algorithm == k.DNSKEY.Algorithm
		}
		if !have {
			out = append(append([]*Key(nil), out...), k)
		}
	}
	return out
}

// Published returns the keys the zone publishes without signing with
// them (NewSignerPublishing).
func (s *Signer) Published() []*Key { return s.publish }

// Keys returns every key the zone signs with, the SEP keys first.
func (s *Signer) Keys() []*Key {
	out := append([]*Key(nil), s.ksk...)
	if !s.csk {
		out = append(out, s.zsk...)
	}
	return out
}

// Options returns the signer's options, defaults filled in.
func (s *Signer) Options() Options { return s.opts }

// Made returns how many signatures were made for reason.
func (s *Signer) Made(r Reason) uint64 { return s.made[r].Load() }

// keysFor returns the keys that sign an RRset of type t: the SEP keys for
// the apex's DNSKEY, CDS and CDNSKEY RRsets, the others (or the CSK) for
// the rest, each list with a key of every algorithm of the zone's keys
// (withEveryAlgorithm).
func (s *Signer) keysFor(t uint16) []*Key {
	switch t {
	case dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY:
		return s.forKeys
	}
	return s.forData
}

// Sign returns the RRSIGs over rrs, one RRset (same owner, type and
// class), one per signing key: inception now − Backdate, expiration now +
// Validity less the RRset's jitter, original TTL and RRSIG TTL that of
// the RRset. A wildcard owner's label count leaves the "*" out (RFC 4034
// §3.1.3).
func (s *Signer) Sign(rrs []dns.RR, now time.Time, why Reason) ([]dns.RR, error) {
	return s.sign(rrs, now, why, nil, nil)
}

// SignEntry signs rrs as Sign does and returns them as the entry for key,
// with each RRSIG's RDATA in wire form (see NewEntry) made from the
// signature's octets, and served until the signatures' refresh point.
func (s *Signer) SignEntry(key CacheKey, rrs []dns.RR, now time.Time, why Reason) (*Entry, error) {
	var wire []byte
	var ends []int
	sigs, err := s.sign(rrs, now, why, &wire, &ends)
	if err != nil {
		return nil, err
	}
	e := &Entry{Key: key, RRs: rrs, Sigs: sigs, Refresh: s.RefreshOf(sigs), Wire: make([][]byte, len(sigs))}
	off := 0
	for i, end := range ends {
		e.Wire[i] = wire[off:end:end]
		off = end
	}
	return e, nil
}

// sign makes the RRSIGs over rrs; with wire set, it appends each one's
// RDATA to *wire and the offset where it ends to *ends.
func (s *Signer) sign(rrs []dns.RR, now time.Time, why Reason, wire *[]byte, ends *[]int) ([]dns.RR, error) {
	if len(rrs) == 0 {
		return nil, errors.New("dnssec: empty RRset")
	}
	h := rrs[0].Header()
	keys := s.keysFor(h.Rrtype)
	if len(keys) == 0 {
		// A ZSK-only signer has no key for the apex's key RRsets: the
		// zone's own signer signs those.
		return nil, fmt.Errorf("dnssec: no key signs %s %s here (the zone's signer holds its KSK)", h.Name, dns.TypeToString[h.Rrtype])
	}
	inc := now.Add(-s.opts.Backdate)
	exp := now.Add(s.opts.Validity - s.jitter(h.Name, h.Rrtype))
	labels := uint8(dns.CountLabel(h.Name))
	if len(h.Name) >= 2 && h.Name[0] == '*' && h.Name[1] == '.' {
		labels--
	}
	out := make([]dns.RR, len(keys))
	sigs := make([]dns.RRSIG, len(keys))
	for i, k := range keys {
		sig := &sigs[i]
		*sig = dns.RRSIG{
			Hdr:         dns.RR_Header{Name: h.Name, Rrtype: dns.TypeRRSIG, Class: h.Class, Ttl: h.Ttl},
			TypeCovered: h.Rrtype,
			Algorithm:   k.DNSKEY.Algorithm,
			Labels:      labels,
			OrigTtl:     h.Ttl,
			Expiration:  uint32(exp.Unix()),
			Inception:   uint32(inc.Unix()),
			KeyTag:      k.Tag,
			SignerName:  s.Zone,
		}
		if err := signRRset(k, sig, rrs, wire); err != nil {
			return nil, fmt.Errorf("dnssec: signing %s %s with key %d: %v", h.Name, dns.TypeToString[h.Rrtype], k.Tag, err)
		}
		s.made[why].Add(1)
		out[i] = sig
		if wire != nil {
			*ends = append(*ends, len(*wire))
		}
	}
	return out, nil
}

// jitter is how much earlier than now+Validity the signatures of the
// RRset (name, t) expire: the same for the same RRset, spread over
// [0, Jitter×Validity) across RRsets.
func (s *Signer) jitter(name string, t uint16) time.Duration {
	span := time.Duration(float64(s.opts.Validity) * s.opts.Jitter)
	if span <= 0 {
		return 0
	}
	// FNV-1a over the name's octets and the type's two.
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * prime
	}
	h = (h ^ uint64(t>>8)) * prime
	h = (h ^ uint64(t&0xff)) * prime
	return time.Duration(h % uint64(span))
}

// Fresh reports whether sigs, the RRSIGs of one RRset, may still be
// served at now without renewal: one from each of the signer's keys for
// that type, none past its refresh point (Refresh of the way from
// inception to expiration).
func (s *Signer) Fresh(sigs []dns.RR, t uint16, now time.Time) bool {
	keys := s.keysFor(t)
	if len(sigs) != len(keys) {
		return false
	}
	n := uint32(now.Unix())
	for i, rr := range sigs {
		sig, ok := rr.(*dns.RRSIG)
		if !ok || sig.KeyTag != keys[i].Tag || sig.Algorithm != keys[i].DNSKEY.Algorithm || sig.SignerName != s.Zone {
			return false
		}
		if n < sig.Inception || n >= RefreshAt(sig, s.opts.Refresh) {
			return false
		}
	}
	return true
}

// RefreshAt is the time (Unix seconds) at which sig is due for renewal:
// refresh of the way from its inception to its expiration.
func RefreshAt(sig *dns.RRSIG, refresh float64) uint32 {
	span := sig.Expiration - sig.Inception
	return sig.Inception + uint32(float64(span)*refresh)
}

// Apex returns the records the zone's apex publishes for its keys, TTL
// ttl (Options.KeyTTL instead when set): the DNSKEY RRset (every key
// that signs, then every key only published), and CDS (SHA-256) and
// CDNSKEY for the SEP keys that sign (RFC 7344, RFC 8078), for the parent
// to pick up, but for those Withdrawn.
func (s *Signer) Apex(ttl uint32) (dnskey, cds, cdnskey []dns.RR) {
	if s.zskOnly {
		return nil, nil, nil // the zone's signer publishes its keys, ours among them
	}
	if s.opts.KeyTTL > 0 {
		ttl = uint32(s.opts.KeyTTL / time.Second)
	}
	signing := len(s.Keys())
	for i, k := range append(s.Keys(), s.publish...) {
		d := *k.DNSKEY
		d.Hdr = dns.RR_Header{Name: s.Zone, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: ttl}
		dnskey = append(dnskey, &d)
		if !k.SEP() || k.Withdrawn || i >= signing {
			continue
		}
		ds := k.DNSKEY.ToDS(dns.SHA256)
		if ds != nil {
			c := &dns.CDS{DS: *ds}
			c.Hdr = dns.RR_Header{Name: s.Zone, Rrtype: dns.TypeCDS, Class: dns.ClassINET, Ttl: ttl}
			cds = append(cds, c)
		}
		cd := &dns.CDNSKEY{DNSKEY: d}
		cd.Hdr.Rrtype = dns.TypeCDNSKEY
		cdnskey = append(cdnskey, cd)
	}
	return dnskey, cds, cdnskey
}
