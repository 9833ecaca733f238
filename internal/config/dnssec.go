package config

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
	"go.yaml.in/yaml/v3"
)

// This file holds the DNSSEC keys: a zone's dnssec section, decoded into
// dnssec.Config (validity from its duration string, defaults filled in),
// and the top-level signing section. The key files themselves are read by
// ZoneKeys (dnssec.LoadKeys), once per load, by the snapshot.
//
//	zones:
//	  - origin: example.com
//	    file: example.com.zone
//	    dnssec:
//	      keys: [keys/Kexample.com.+013+04565]  # base paths: .key and .private
//	      validity: 14d                          # or 336h; default 14d
//	      refresh: 0.75                          # default 0.75
//	      denial: nsec                           # or nsec3: what transfers out carry
//	signing:
//	  budget_per_core: 20000  # online signatures a second, per core
//	  cache_entries: 65536    # slots of the cache of online signatures

// Signing is the top-level signing section: the node-wide limits of
// signatures made on queries' behalf (denial of existence, answer sets
// health made reachable); signatures of zone data and of pre-signed
// steered answers are made off the query path and do not count.
type Signing struct {
	// BudgetPerCore caps online signatures per second and per core
	// (GOMAXPROCS); over it a UDP query needing one is answered TC=1.
	// Default dnssec.DefaultBudgetPerCore.
	BudgetPerCore int `yaml:"budget_per_core"`
	// CacheEntries is the number of slots of the cache of online
	// signatures (rounded up to a power of two). Default
	// dnssec.DefaultCacheSize.
	CacheEntries int `yaml:"cache_entries"`
}

// BudgetPerSecond is the node's cap on online signatures a second:
// budget_per_core times the cores the process may use (GOMAXPROCS), what
// dnssec.NewBudget takes.
func (s Signing) BudgetPerSecond() int { return s.BudgetPerCore * runtime.GOMAXPROCS(0) }

// Limits of the dnssec and signing keys.
const (
	// MaxValidity bounds a zone's validity: RRSIG times are serial
	// numbers (RFC 4034 §3.1.5), and a year is more than any operator
	// should want a stolen signature to live.
	MaxValidity = 366 * 24 * time.Hour
	// MaxBudgetPerCore and MaxCacheEntries bound the signing section.
	MaxBudgetPerCore = 10_000_000
	MaxCacheEntries  = 1 << 26
)

// dnssecConfigType is the type zones[i].dnssec decodes into; its
// validity key is decoded apart (decodeValidity), as dnssec.Config holds
// a time.Duration the YAML decoder cannot fill from "14d".
var dnssecConfigType = reflect.TypeFor[dnssec.Config]()

// extraFields are keys a type has besides its yaml-tagged fields: the
// key walker accepts them and records their lines; whoever decodes them
// says how.
var extraFields = map[reflect.Type]map[string]reflect.Type{
	dnssecConfigType: {"validity": reflect.TypeFor[string]()},
}

// Signed reports whether the zone is signed (it has a dnssec section).
func (z *Zone) Signed() bool { return z.DNSSEC != nil }

// ParseValidity parses a signature validity: a Go duration ("336h") or a
// whole number of days ("14d").
func ParseValidity(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(d, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("invalid validity %q (a whole number of days such as 14d, or a duration such as 336h)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid validity %q (a whole number of days such as 14d, or a duration such as 336h)", s)
	}
	return v, nil
}

// decodeValidity fills the Validity of each zone's dnssec section from
// its validity key; root is the file's top-level mapping, already decoded
// into c.
func (c *Config) decodeValidity(root *yaml.Node, probs *diag.Problems) {
	var shadow struct {
		Zones []struct {
			DNSSEC *struct {
				Validity yaml.Node `yaml:"validity"`
			} `yaml:"dnssec"`
		} `yaml:"zones"`
	}
	signed := false
	for i := range c.Zones {
		signed = signed || c.Zones[i].DNSSEC != nil
	}
	if !signed {
		return // nothing to fill in (decoding the tree again takes a while with 100,000 zones)
	}
	if root.Decode(&shadow) != nil {
		return // decoding c reported it
	}
	for i, z := range shadow.Zones {
		if z.DNSSEC == nil || z.DNSSEC.Validity.Kind == 0 || i >= len(c.Zones) || c.Zones[i].DNSSEC == nil {
			continue
		}
		n := &z.DNSSEC.Validity
		if n.Kind != yaml.ScalarNode {
			probs.Add(c.File, n.Line, "zones: %s: dnssec.validity: a validity must be a string such as 14d or 336h", c.Zones[i].Origin)
			continue
		}
		v, err := ParseValidity(n.Value)
		if err != nil {
			probs.Add(c.File, n.Line, "zones: %s: dnssec.validity: %v", c.Zones[i].Origin, err)
			continue
		}
		if v <= 0 {
			// Keep it negative so check reports the range, not a default.
			v = -1
		}
		c.Zones[i].DNSSEC.Validity = v
	}
	c.decodeKeyTimings(root, probs)
}

func (c *Config) applyDNSSECDefaults() {
	if c.Signing.BudgetPerCore == 0 {
		c.Signing.BudgetPerCore = dnssec.DefaultBudgetPerCore
	}
	if c.Signing.CacheEntries == 0 {
		c.Signing.CacheEntries = dnssec.DefaultCacheSize
	}
	for i := range c.Zones {
		d := c.Zones[i].DNSSEC
		if d == nil {
			continue
		}
		d.Line = c.Line(fmt.Sprintf("zones[%d].dnssec", i))
		if d.Validity == 0 {
			d.Validity = dnssec.DefaultValidity
		}
		if d.Denial == "" {
			d.Denial = dnssec.DenialNSEC
		}
		if !c.zoneKeyGiven(i, ".dnssec.refresh") {
			d.Refresh = dnssec.DefaultRefresh
		}
	}
}

// checkSigning checks the signing section.
func (c *Config) checkSigning(probs *diag.Problems) {
	s := &c.Signing
	if s.BudgetPerCore < 1 || s.BudgetPerCore > MaxBudgetPerCore {
		probs.Add(c.File, c.Line("signing.budget_per_core"), "signing.budget_per_core: %d is not between 1 and %d", s.BudgetPerCore, MaxBudgetPerCore)
	}
	if s.CacheEntries < 1 || s.CacheEntries > MaxCacheEntries {
		probs.Add(c.File, c.Line("signing.cache_entries"), "signing.cache_entries: %d is not between 1 and %d", s.CacheEntries, MaxCacheEntries)
	}
}

// checkDNSSEC checks the dnssec section of zones[i] (the key files are
// read by ZoneKeys, at build).
func (c *Config) checkDNSSEC(probs *diag.Problems, i int) {
	z := &c.Zones[i]
	d := z.DNSSEC
	if d == nil {
		return
	}
	pre := fmt.Sprintf("zones[%d].dnssec", i)
	bad := func(key, format string, args ...any) {
		ln := c.Line(pre + key)
		if ln == 0 {
			ln = d.Line
		}
		probs.Add(c.File, ln, "zones: %s: dnssec%s: %s", z.Origin, key, fmt.Sprintf(format, args...))
	}
	if len(d.Keys) == 0 && !d.Presigned {
		bad(".keys", "list the base paths of the zone's keys (K<zone>+<alg>+<tag>, as steer dnssec keygen writes them), or set presigned: true for a zone signed elsewhere")
	}
	seen := map[string]int{}
	for j, k := range d.Keys {
		key := fmt.Sprintf(".keys[%d]", j)
		switch {
		case strings.TrimSpace(k) == "":
			bad(key, "an empty key path")
		case strings.HasSuffix(k, ".key") || strings.HasSuffix(k, ".private"):
			bad(key, "%q: give the key's base path, without .key or .private", k)
		default:
			r := c.Resolve(k)
			if prev, dup := seen[r]; dup {
				bad(key, "%q is listed twice (line %d)", k, prev)
			}
			seen[r] = c.Line(pre + key)
		}
	}
	if d.Validity < 0 || d.Validity > MaxValidity {
		bad(".validity", "must be more than 0 and at most %dd", int(MaxValidity/(24*time.Hour)))
	}
	c.checkKeyTimings(probs, i)
	if d.Refresh <= 0 || d.Refresh >= 1 {
		bad(".refresh", "%v is not between 0 and 1 (exclusive): the share of the validity after which signatures are renewed", d.Refresh)
	}
	switch d.Denial {
	case dnssec.DenialNSEC, dnssec.DenialNSEC3:
	default:
		bad(".denial", "%q is not nsec or nsec3 (the denial of existence the zone's transfers to secondaries carry)", d.Denial)
	}
	// A zone transferred in (primaries) is signed at its primary; steer
	// may hold a ZSK of it only (multi-signer, see ZoneKeys), which
	// ZoneKeys checks once it has read the keys.
}

// MultiSigner reports whether keys, a zone's (ZoneKeys), are ZSKs only:
// the zone is signed elsewhere and steer signs its steered names' answers
// with them (RFC 8901 model 2), the signer's DNSKEY RRset holding them.
func MultiSigner(keys []*dnssec.Key) bool {
	for _, k := range keys {
		if k.SEP() {
			return false
		}
	}
	return len(keys) > 0
}

// KeyBases returns the base paths of zones[i]'s keys (the .key and
// .private files are these plus their extension), resolved against the
// configuration's directory (as Resolve), for dnssec.LoadKeys(c.FS, ...).
func (c *Config) KeyBases(i int) []string {
	d := c.Zones[i].DNSSEC
	if d == nil {
		return nil
	}
	out := make([]string, len(d.Keys))
	for j, k := range d.Keys {
		out[j] = c.Resolve(k)
	}
	return out
}

// ZoneKeys reads the keys of zones[i] (a zone with a dnssec section) and
// checks them against the zone, each problem at the line of the key's
// entry: a missing or unreadable .key or .private file, a private file
// that group or others can read, a private key that is not the public
// one's, an algorithm other than ECDSAP256SHA256, ED25519 or RSASHA256, a
// key for another zone, a key that is not a zone key, a key listed twice
// under two paths or sharing another's key tag, and, for the zone as a
// whole, a SEP key (a CSK or KSK) in a zone transferred in, whose signer
// holds the KSK. Keys without a SEP key are a ZSK-only (multi-signer)
// zone's: see MultiSigner. The keys come back only when there is no
// problem.
func (c *Config) ZoneKeys(i int) ([]*dnssec.Key, diag.Problems) {
	z := &c.Zones[i]
	var probs diag.Problems
	if z.DNSSEC == nil || z.DNSSEC.Presigned && len(z.DNSSEC.Keys) == 0 {
		return nil, nil
	}
	origin := dns.CanonicalName(z.Origin)
	pre := fmt.Sprintf("zones[%d].dnssec", i)
	keys := make([]*dnssec.Key, 0, len(z.DNSSEC.Keys))
	type keyAt struct {
		key  *dnssec.Key
		line int
	}
	seen := map[uint16]keyAt{}
	sep := false
	for j, base := range c.KeyBases(i) {
		ln := c.Line(fmt.Sprintf("%s.keys[%d]", pre, j))
		k, err := dnssec.LoadKey(c.FS, base)
		if err != nil {
			probs.Add(c.File, ln, "zones: %s: dnssec key %s: %v", z.Origin, z.DNSSEC.Keys[j], err)
			continue
		}
		if k.DNSKEY.Hdr.Name != origin {
			why := "another zone of this configuration"
			if !c.servesZone(k.DNSKEY.Hdr.Name) {
				why = "a zone this configuration does not serve"
			}
			probs.Add(c.File, ln, "zones: %s: dnssec key %s is a key for %s, not for %s (%s)", z.Origin, z.DNSSEC.Keys[j], k.DNSKEY.Hdr.Name, origin, why)
			continue
		}
		if prev, dup := seen[k.Tag]; dup {
			// The same DNSKEY twice would be a duplicate record in the
			// DNSKEY RRset, which validators reject; two keys of one tag
			// make every validator try both.
			what := "has the key tag of"
			if prev.key.DNSKEY.PublicKey == k.DNSKEY.PublicKey && prev.key.DNSKEY.Algorithm == k.DNSKEY.Algorithm {
				what = "is the same key as"
			}
			probs.Add(c.File, ln, "zones: %s: dnssec key %s %s %s (line %d)", z.Origin, z.DNSSEC.Keys[j], what, prev.key.File, prev.line)
			continue
		}
		seen[k.Tag] = keyAt{k, ln}
		sep = sep || k.SEP()
		keys = append(keys, k)
	}
	if len(probs) == 0 && sep && len(z.Primaries) > 0 {
		// A zone transferred in is signed at its primary, which holds
		// the KSK and publishes the DNSKEY RRset: steer signs only its
		// steered names' answers there, with a ZSK of its own.
		for j, k := range keys {
			if k.SEP() {
				probs.Add(c.File, c.Line(fmt.Sprintf("%s.keys[%d]", pre, j)), "zones: %s: dnssec key %s is a KSK or CSK (SEP flag), but the zone is transferred in (primaries): its signer holds the KSK; give steer a ZSK only (steer dnssec keygen %s --role zsk), whose DNSKEY the signer publishes (multi-signer, RFC 8901)", z.Origin, z.DNSSEC.Keys[j], origin)
			}
		}
	}
	// With no SEP key at all the zone is a multi-signer one: signed
	// elsewhere, steer signing its steered answers with its ZSKs; the
	// load checks that the zone carries the signer's DNSKEY RRset and
	// that it holds these keys (dnssec.Signer.PublishedIn).
	if len(probs) == 0 {
		c.zskLifetimeProblem(i, keys, &probs)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return keys, nil
}

// servesZone reports whether the configuration has a zone of origin
// (canonical).
func (c *Config) servesZone(origin string) bool {
	for i := range c.Zones {
		if dns.CanonicalName(c.Zones[i].Origin) == origin {
			return true
		}
	}
	return false
}
