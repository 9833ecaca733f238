package keyroll

import (
	"fmt"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// KSK rollover, operator-driven: the double-signature rollover of RFC
// 6781 §4.1.2 (RFC 7583 §3.3.3's "double-KSK"), chosen over double-DS
// because it needs nothing of the parent before it starts and the CDS
// and CDNSKEY RRsets (RFC 7344, RFC 8078) can carry the change:
//
//  1. StartKSKRoll publishes a new KSK and makes it sign the DNSKEY,
//     CDS and CDNSKEY RRsets beside the old one at once. The CDS names
//     both, so a parent that takes it adds the new DS beside the old one
//     (safe at any time: a resolver holding the old DNSKEY RRset still
//     validates through the old DS).
//  2. The parent publishes the new DS (by hand, or from the CDS).
//  3. CompleteKSKRoll, called once the parent's DS is checked to name
//     the new KSK, withdraws the old one: the CDS names the new KSK
//     alone (the parent drops the old DS), the old KSK goes on signing
//     the DNSKEY RRset for the resolvers still holding the old DS, and
//     leaves the zone after the delay given (the parent's DS TTL plus
//     the propagation delay): retired and removed at once.
//
// At no instant does the zone lack a SEP key the parent's DS names: the
// old key signs until the caches of the old DS have expired, the new one
// from the start.

// KSKRoll is a KSK rollover under way: New replaces Old.
type KSKRoll struct {
	New *Key
	Old []*Key
}

// RollingKSK returns the KSK rollover under way at now, nil when none:
// more than one KSK published and not withdrawn, the newest replacing the
// others.
func (p *Plan) RollingKSK(now time.Time) *KSKRoll {
	var ksks []*Key
	for _, k := range p.Keys {
		if k.Role == RoleKSK && k.Published(now) && k.Withdraw.IsZero() {
			ksks = append(ksks, k)
		}
	}
	if len(ksks) < 2 {
		return nil
	}
	r := &KSKRoll{New: ksks[len(ksks)-1]}
	for _, k := range ksks {
		if k.Created.After(r.New.Created) {
			r.New = k
		}
	}
	for _, k := range ksks {
		if k != r.New {
			r.Old = append(r.Old, k)
		}
	}
	return r
}

// ParentKeys returns the SEP keys whose DS the parent should publish at
// now: those published and not withdrawn (the CDS RRset's keys).
func (p *Plan) ParentKeys(now time.Time) []*Key {
	var out []*Key
	for _, k := range p.Keys {
		if k.Role != RoleZSK && k.Published(now) && k.Withdraw.IsZero() {
			out = append(out, k)
		}
	}
	return out
}

// DNSKEYRecord returns the key's public record.
func (k *Key) DNSKEYRecord() (*dns.DNSKEY, error) {
	rr, err := dns.NewRR(k.DNSKEY)
	if err != nil {
		return nil, err
	}
	d, ok := rr.(*dns.DNSKEY)
	if !ok {
		return nil, fmt.Errorf("key %d: not a DNSKEY record", k.Tag)
	}
	return d, nil
}

// StartKSKRoll returns the plan with a new KSK of algorithm alg (0: the
// current KSK's) made with gen (nil: dnssec.GenerateKey), published and
// signing the DNSKEY RRset from now beside the current KSK, and the new
// key. It refuses a zone signed by a CSK (it has no KSK to roll beside a
// ZSK), a zone with no active KSK, and a rollover already under way.
func (p *Plan) StartKSKRoll(now time.Time, alg uint8, gen Generator) (*Plan, *Key, error) {
	if gen == nil {
		gen = dnssec.GenerateKey
	}
	if r := p.RollingKSK(now); r != nil {
		return p, nil, fmt.Errorf("zone %s: a KSK rollover is under way: %s replaces %s; complete it first (steer dnssec roll-ksk %s --complete --parent-ns ADDR)",
			p.Zone, r.New.Name(), names(r.Old), p.Zone)
	}
	var cur *Key
	for _, k := range p.Keys {
		switch {
		case k.Role == RoleCSK && !k.Removed(now):
			return p, nil, fmt.Errorf("zone %s is signed by a CSK (%s): roll-ksk rolls a KSK that signs beside ZSKs; make the zone KSK+ZSK first (steer dnssec keygen --ksk-zsk)", p.Zone, k.Name())
		case k.Role == RoleKSK && k.Signing(now) && k.Withdraw.IsZero():
			cur = k
		}
	}
	if cur == nil {
		return p, nil, fmt.Errorf("zone %s: key plan has no active KSK to roll", p.Zone)
	}
	if alg == 0 {
		alg = cur.Algorithm
	}
	var nk *dnssec.Key
	for range 8 {
		k, err := gen(p.Zone, alg, true)
		if err != nil {
			return p, nil, fmt.Errorf("zone %s: generating the new KSK: %v", p.Zone, err)
		}
		if !k.SEP() || k.DNSKEY.Hdr.Name != p.Zone {
			return p, nil, fmt.Errorf("zone %s: the key generator made %s for %s, not a KSK of the zone", p.Zone, k.BaseName(), k.DNSKEY.Hdr.Name)
		}
		taken := false
		for _, o := range p.Keys {
			taken = taken || o.Tag == k.Tag && !o.Removed(now)
		}
		if !taken {
			nk = k
			break
		}
	}
	if nk == nil {
		return p, nil, fmt.Errorf("zone %s: every KSK generated had the tag of a key of the plan", p.Zone)
	}
	q := p.clone()
	k := fromKey(nk, RoleKSK, SourceGenerated, now)
	q.Keys = append(q.Keys, k)
	if _, err := q.At(now); err != nil {
		return p, nil, err
	}
	return q, k, nil
}

// CompleteKSKRoll returns the plan with the rollover under way completed
// at now: the old KSKs withdrawn from the CDS and CDNSKEY RRsets from
// now, signing until now + linger (the parent's DS TTL and the
// propagation delay: the caches of the old DS) and removed then. The
// caller has checked that the parent's DS names the new KSK. It refuses
// when no rollover is under way.
func (p *Plan) CompleteKSKRoll(now time.Time, linger time.Duration) (*Plan, *KSKRoll, error) {
	r := p.RollingKSK(now)
	if r == nil {
		return p, nil, fmt.Errorf("zone %s: no KSK rollover is under way (steer dnssec roll-ksk %s starts one)", p.Zone, p.Zone)
	}
	q := p.clone()
	end := now.Add(linger)
	var old []*Key
	for _, k := range q.Keys {
		for _, o := range r.Old {
			if k.Tag == o.Tag && k.DNSKEY == o.DNSKEY {
				k.Withdraw = now
				if k.Retire.IsZero() || k.Retire.After(end) {
					k.Retire = end
				}
				if k.Remove.IsZero() || k.Remove.After(end) {
					k.Remove = end
				}
				old = append(old, k)
			}
		}
	}
	if _, err := q.At(now); err != nil {
		return p, nil, err
	}
	if _, err := q.At(end); err != nil {
		return p, nil, fmt.Errorf("%v (once the old KSK is removed)", err)
	}
	return q, &KSKRoll{New: r.New, Old: old}, nil
}

func names(keys []*Key) string {
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += k.Name()
	}
	return s
}
