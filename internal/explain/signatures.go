package explain

import (
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Signature is one RRSIG an answer carries and what it covers, with the
// outcome of checking it against the served zone's key.
type Signature struct {
	// Section is answer, authority or additional.
	Section    string    `json:"section"`
	Name       string    `json:"name"`
	Covers     string    `json:"covers"`
	Algorithm  string    `json:"algorithm"`
	KeyTag     uint16    `json:"key_tag"`
	Signer     string    `json:"signer"`
	TTL        uint32    `json:"ttl"`
	Inception  time.Time `json:"inception"`
	Expiration time.Time `json:"expiration"`
	// ExpiresIn is the time left ("13d4h5m"), or "expired".
	ExpiresIn string `json:"expires_in"`
	// Verified says the signature verifies over the RRset it covers in
	// its section, with the DNSKEY the served zone publishes, and holds
	// now; Check says so or why not.
	Verified bool   `json:"verified"`
	Check    string `json:"check"`
}

// keyFinder returns the DNSKEY of zone signer with tag and algorithm and
// its role there (CSK, KSK or ZSK), nil when the served zone has none.
type keyFinder func(signer string, tag uint16, alg uint8) (*dns.DNSKEY, string)

// zoneKeys finds keys among the signed zones of snap.
func zoneKeys(snap *snapshot.Snapshot) keyFinder {
	return func(signer string, tag uint16, alg uint8) (*dns.DNSKEY, string) {
		if snap == nil {
			return nil, ""
		}
		z := snap.Zones.Zone(dns.CanonicalName(signer))
		if z == nil {
			return nil, ""
		}
		if s := z.SteeredSigner(); s != nil {
			keys := s.Keys()
			csk := !s.ZSKOnly()
			for _, k := range keys {
				csk = csk && k.SEP()
			}
			for _, k := range keys {
				if k.Tag == tag && k.DNSKEY.Algorithm == alg {
					switch {
					case csk:
						return k.DNSKEY, "CSK"
					case k.SEP():
						return k.DNSKEY, "KSK"
					}
					return k.DNSKEY, "ZSK"
				}
			}
		}
		if z.Signer() != nil {
			return nil, ""
		}
		// A zone signed elsewhere: the key is its signer's, in the
		// DNSKEY RRset the zone serves.
		a := snap.Zones.Lookup(z.Origin, dns.TypeDNSKEY)
		for _, rr := range a.Answer {
			if k, ok := rr.(*dns.DNSKEY); ok && k.KeyTag() == tag && k.Algorithm == alg {
				if k.Flags&dns.SEP != 0 {
					return k, "KSK"
				}
				return k, "ZSK"
			}
		}
		return nil, ""
	}
}

// signatures lists the RRSIGs of resp, each verified over its RRset with
// the key keys finds, at now.
func signatures(resp *dns.Msg, keys keyFinder, now time.Time) []Signature {
	var out []Signature
	for _, sec := range []struct {
		name string
		rrs  []dns.RR
	}{{"answer", resp.Answer}, {"authority", resp.Ns}, {"additional", resp.Extra}} {
		for _, rr := range sec.rrs {
			sig, ok := rr.(*dns.RRSIG)
			if !ok {
				continue
			}
			s := Signature{Section: sec.name, Name: sig.Hdr.Name, Covers: typeString(sig.TypeCovered),
				Algorithm: dns.AlgorithmToString[sig.Algorithm], KeyTag: sig.KeyTag, Signer: sig.SignerName, TTL: sig.Hdr.Ttl,
				Inception: sigTime(sig.Inception, now), Expiration: sigTime(sig.Expiration, now)}
			if s.Algorithm == "" {
				s.Algorithm = fmt.Sprint(sig.Algorithm)
			}
			s.ExpiresIn = "expired"
			if left := s.Expiration.Sub(now); left > 0 {
				s.ExpiresIn = duration(left)
			}
			s.Verified, s.Check = verify(sig, covered(sig, sec.rrs), keys, now)
			out = append(out, s)
		}
	}
	return out
}

// covered is the RRset sig covers among rrs.
func covered(sig *dns.RRSIG, rrs []dns.RR) []dns.RR {
	var set []dns.RR
	for _, rr := range rrs {
		h := rr.Header()
		if h.Rrtype == sig.TypeCovered && h.Class == sig.Hdr.Class && strings.EqualFold(h.Name, sig.Hdr.Name) {
			set = append(set, rr)
		}
	}
	return set
}

func verify(sig *dns.RRSIG, set []dns.RR, keys keyFinder, now time.Time) (bool, string) {
	if len(set) == 0 {
		return false, "the " + typeString(sig.TypeCovered) + " RRset it covers is not in the section"
	}
	k, role := keys(sig.SignerName, sig.KeyTag, sig.Algorithm)
	if k == nil {
		return false, fmt.Sprintf("no DNSKEY %d of %s is served", sig.KeyTag, sig.SignerName)
	}
	if err := sig.Verify(k, set); err != nil {
		return false, fmt.Sprintf("does not verify with DNSKEY %d: %v", sig.KeyTag, err)
	}
	if !sig.ValidityPeriod(now) {
		return false, fmt.Sprintf("verifies with DNSKEY %d but is not valid now", sig.KeyTag)
	}
	return true, fmt.Sprintf("verified with DNSKEY %d (%s)", sig.KeyTag, role)
}

// unsigned notes what a DO answer from a signed zone lacks: signatures
// the server could not make (the signing budget spent: TC=1 over UDP).
func unsigned(resp *dns.Msg, snap *snapshot.Snapshot, req Request) []string {
	if snap == nil || snap.Zones == nil {
		return nil
	}
	z := snap.Zones.Find(dns.CanonicalName(req.Name))
	if z == nil || z.SteeredSigner() == nil {
		return nil
	}
	for _, sec := range [][]dns.RR{resp.Answer, resp.Ns} {
		for _, rr := range sec {
			if rr.Header().Rrtype == dns.TypeRRSIG {
				return nil
			}
		}
	}
	if resp.Rcode == dns.RcodeRefused || resp.Rcode == dns.RcodeServerFailure {
		return nil
	}
	return []string{fmt.Sprintf("zone %s is signed but this answer carries no signature", z.Origin)}
}

// sigTime is the RRSIG time t (serial-number arithmetic, RFC 4034 §3.1.5)
// nearest to now.
func sigTime(t uint32, now time.Time) time.Time {
	d := int64(int32(t - uint32(now.Unix())))
	return time.Unix(now.Unix()+d, 0).UTC()
}

// duration prints d as days, hours and minutes ("13d4h5m", "2h0m",
// "45s").
func duration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	s := fmt.Sprintf("%dh%dm", d/time.Hour, (d%time.Hour)/time.Minute)
	if days > 0 {
		s = fmt.Sprintf("%dd", days) + s
	}
	return s
}

func typeString(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return fmt.Sprintf("TYPE%d", t)
}
