package snapshot

import (
	"fmt"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/zone"
)

// This file signs the zones that have a dnssec section: each gets a
// Signer for its keys (the served zone's own when the keys and options
// are the same, so that its signatures stay fresh across the reload and
// its counters go on), and is signed after its steered names are marked
// and before it is precompiled (zone.Sign). A zone whose signing fails
// is treated as a zone that failed to load: it is served from a last
// good copy signed with the keys that copy was signed with, or answered
// SERVFAIL, never unsigned.

// zoneSigner returns the signer of the zone origin with keys and the
// options of its dnssec section dc (nil: the zone is not signed), drawing
// on the node's online signing state sg: the signer of the zone prev
// serves for origin when it has the same keys, options and state (a
// published signer is never written), else a new one.
func zoneSigner(origin string, dc *dnssec.Config, keys, publish []*dnssec.Key, prev *Snapshot, sg *Signing) (*dnssec.Signer, error) {
	if dc == nil {
		return nil, nil
	}
	var s *dnssec.Signer
	var err error
	if config.MultiSigner(keys) {
		// ZSKs alone: the zone is signed elsewhere and steer signs its
		// steered answers only (zone.SignSteered).
		s, err = dnssec.NewZSKSigner(origin, keys, dc.Options())
	} else {
		s, err = dnssec.NewSignerPublishing(origin, keys, publish, dc.Options())
	}
	if err != nil {
		return nil, err
	}
	s.Budget, s.Cache = sg.Budget, sg.Cache
	if pz := previousZone(prev, origin); pz != nil && sameSigner(pz.SteeredSigner(), s) {
		return pz.SteeredSigner(), nil
	}
	return s, nil
}

// sameSigner reports whether a and b sign alike: the same keys, each
// with the same DNSKEY, the same keys only published, the same options,
// budget and cache.
func sameSigner(a, b *dnssec.Signer) bool {
	if a == nil || b == nil || a.Zone != b.Zone || a.ZSKOnly() != b.ZSKOnly() || a.Options() != b.Options() || a.Budget != b.Budget || a.Cache != b.Cache {
		return false
	}
	return sameKeys(a.Keys(), b.Keys()) && sameKeys(a.Published(), b.Published())
}

// sameKeys reports whether ka and kb are the same keys in the same order.
func sameKeys(ka, kb []*dnssec.Key) bool {
	if len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if ka[i].Tag != kb[i].Tag || ka[i].File != kb[i].File || ka[i].Withdrawn != kb[i].Withdrawn || !dns.IsDuplicate(ka[i].DNSKEY, kb[i].DNSKEY) {
			return false
		}
	}
	return true
}

// signZone signs z (marked, not published) with s at now; nil s leaves
// it unsigned. A ZSK-only signer signs the steered answers of a zone
// signed elsewhere (zone.SignSteered), which it checks.
func signZone(z *zone.Zone, s *dnssec.Signer, now time.Time, workers int) error {
	if s == nil || z == nil {
		return nil
	}
	if s.ZSKOnly() {
		if err := z.SignSteered(s); err != nil {
			return fmt.Errorf("zones: %s: dnssec: %v", z.Origin, err)
		}
		return nil
	}
	if err := z.Sign(s, now, workers); err != nil {
		return fmt.Errorf("signing zone %s: %v", z.Origin, err)
	}
	return nil
}

// presignedChecks are the problems of z, loaded from file for the zone
// zc, as a zone signed elsewhere: a zone whose dnssec section says
// presigned must arrive signed (a signer that stopped signing, or a
// primary that is not the signer, would otherwise have it served
// unsigned under the DS its parent publishes: bogus for every
// validating resolver).
func presignedChecks(cfg *config.Config, zc *config.Zone, z *zone.Zone, file string) diag.Problems {
	var errs diag.Problems
	if zc != nil && zc.DNSSEC != nil && zc.DNSSEC.Presigned && !z.Presigned() {
		errs.Add(file, 0, "zone %s has no RRSIGs at its apex, but dnssec.presigned (%s:%d) says it comes signed: refusing to serve it unsigned", z.Origin, cfg.File, zc.DNSSEC.Line)
	}
	if zc != nil && zc.DNSSEC != nil && z.Presigned() && zc.DNSSEC.Denial != z.SignerDenial() {
		// Its transfers out carry the signer's chain as it came (steer
		// cannot build one: it holds no key that signs the zone's
		// data), so a denial asked of them that is not the signer's
		// cannot be given.
		for i := range cfg.Zones {
			if dns.CanonicalName(cfg.Zones[i].Origin) != z.Origin {
				continue
			}
			if ln := cfg.Line(fmt.Sprintf("zones[%d].dnssec.denial", i)); ln != 0 {
				errs.Add(cfg.File, ln, "zones: %s: dnssec.denial: %s, but the zone is signed elsewhere with %s: its transfers out carry the signer's chain as it came, which steer cannot replace; remove denial (or have the signer use %s)",
					z.Origin, zc.DNSSEC.Denial, z.SignerDenial(), zc.DNSSEC.Denial)
			}
		}
	}
	return errs
}

// presignedExpired reports whether z, a zone signed elsewhere, holds a
// signature that has expired at now: it is then loaded again (and
// fails), not kept as served.
func presignedExpired(z *zone.Zone, now time.Time) bool {
	exp := z.PresignedExpiry()
	return exp != 0 && int32(exp-uint32(now.Unix())) <= 0
}

// zoneConfig returns cfg's zone section for origin (canonical), or nil.
func zoneConfig(cfg *config.Config, origin string) *config.Zone {
	for i := range cfg.Zones {
		if dns.CanonicalName(cfg.Zones[i].Origin) == origin {
			return &cfg.Zones[i]
		}
	}
	return nil
}
