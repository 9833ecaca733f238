package config

import (
	"fmt"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/keyroll"
	"go.yaml.in/yaml/v3"
)

// The automatic ZSK rollover's keys of a zone's dnssec section
// (internal/keyroll), each a duration written like validity ("30d" or a
// Go duration such as "720h", "5m"):
//
//	dnssec:
//	  keys: [keys/Kexample.com.+013+11111, keys/Kexample.com.+013+22222]  # a KSK and a ZSK
//	  zsk_lifetime: 30d        # roll the ZSK every 30 days
//	  dnskey_ttl: 1h           # default: the SOA's TTL
//	  propagation_delay: 5m    # default 5m: how long a change takes to reach every server
//	  max_zone_ttl: 1d         # default: the zone's longest TTL
//
// The ZSK's successor is published a DNSKEY TTL plus the propagation
// delay before it signs, and the old ZSK stays published the longest TTL
// plus the propagation delay (plus the time to sign) after it stops.

// keyTimings are the rollover keys, by YAML name, and where each decodes.
var keyTimings = []struct {
	name string
	dst  func(*dnssec.Config) *time.Duration
}{
	{"zsk_lifetime", func(d *dnssec.Config) *time.Duration { return &d.ZSKLifetime }},
	{"dnskey_ttl", func(d *dnssec.Config) *time.Duration { return &d.DNSKEYTTL }},
	{"propagation_delay", func(d *dnssec.Config) *time.Duration { return &d.PropagationDelay }},
	{"max_zone_ttl", func(d *dnssec.Config) *time.Duration { return &d.MaxZoneTTL }},
}

func init() {
	for _, k := range keyTimings {
		extraFields[dnssecConfigType][k.name] = extraFields[dnssecConfigType]["validity"]
	}
}

// Limits of the rollover keys.
const (
	// MaxKeyTTL bounds dnskey_ttl and max_zone_ttl: RFC 2181 §8 caps a
	// TTL at 2^31-1 seconds, and validators cap far lower (a day or a
	// week), so a week is plenty.
	MaxKeyTTL = 7 * 24 * time.Hour
	// MaxZSKLifetime bounds zsk_lifetime.
	MaxZSKLifetime = 5 * 366 * 24 * time.Hour
)

// decodeKeyTimings fills each zone's dnssec rollover durations from its
// keys (see keyTimings); root is the file's top-level mapping.
func (c *Config) decodeKeyTimings(root *yaml.Node, probs *diag.Problems) {
	var shadow struct {
		Zones []struct {
			DNSSEC map[string]yaml.Node `yaml:"dnssec"`
		} `yaml:"zones"`
	}
	if root.Decode(&shadow) != nil {
		return // decoding c reported it
	}
	for i, z := range shadow.Zones {
		if z.DNSSEC == nil || i >= len(c.Zones) || c.Zones[i].DNSSEC == nil {
			continue
		}
		for _, k := range keyTimings {
			n, ok := z.DNSSEC[k.name]
			if !ok {
				continue
			}
			if n.Kind != yaml.ScalarNode {
				probs.Add(c.File, n.Line, "zones: %s: dnssec.%s: must be a duration such as 30d, 1h or 90s", c.Zones[i].Origin, k.name)
				continue
			}
			v, err := parseDaysOrDuration(n.Value)
			if err != nil {
				probs.Add(c.File, n.Line, "zones: %s: dnssec.%s: invalid duration %q (a whole number of days such as 30d, or a duration such as 1h or 90s)", c.Zones[i].Origin, k.name, n.Value)
				continue
			}
			if v <= 0 {
				v = -1 // check reports the range, not a default
			}
			*k.dst(c.Zones[i].DNSSEC) = v
		}
	}
}

// parseDaysOrDuration parses "30d" or a Go duration (as validity).
func parseDaysOrDuration(s string) (time.Duration, error) { return ParseValidity(s) }

// checkKeyTimings checks the rollover keys of zones[i]'s dnssec section
// (a KSK beside the ZSK is checked by ZoneKeys, which reads the keys).
func (c *Config) checkKeyTimings(probs *diag.Problems, i int) {
	z := &c.Zones[i]
	d := z.DNSSEC
	bad := func(key, format string, args ...any) {
		ln := c.Line(fmt.Sprintf("zones[%d].dnssec.%s", i, key))
		if ln == 0 {
			ln = d.Line
		}
		probs.Add(c.File, ln, "zones: %s: dnssec.%s: %s", z.Origin, key, fmt.Sprintf(format, args...))
	}
	if d.ZSKLifetime < 0 || d.ZSKLifetime > MaxZSKLifetime {
		bad("zsk_lifetime", "must be more than 0 and at most %dd", int(MaxZSKLifetime/(24*time.Hour)))
	}
	for _, k := range []struct {
		name string
		v    time.Duration
	}{{"dnskey_ttl", d.DNSKEYTTL}, {"max_zone_ttl", d.MaxZoneTTL}} {
		if k.v < 0 || k.v > MaxKeyTTL || k.v%time.Second != 0 {
			bad(k.name, "must be a whole number of seconds, more than 0 and at most %dd", int(MaxKeyTTL/(24*time.Hour)))
		}
	}
	if d.PropagationDelay < 0 || d.PropagationDelay > MaxKeyTTL {
		bad("propagation_delay", "must be more than 0 and at most %dd", int(MaxKeyTTL/(24*time.Hour)))
	}
	if d.ZSKLifetime == 0 {
		for _, k := range keyTimings[1:] {
			if k.name == "dnskey_ttl" {
				continue // a DNSKEY TTL is of use without a rollover
			}
			if ln := c.Line(fmt.Sprintf("zones[%d].dnssec.%s", i, k.name)); ln != 0 {
				probs.Add(c.File, ln, "zones: %s: dnssec.%s is a ZSK rollover timing: set zsk_lifetime too, or remove it", z.Origin, k.name)
			}
		}
	}
	// The lifetime against the rollover's intervals is checked where the
	// zone's TTLs are known (internal/keyroll Timings.Check, when the
	// node steps the plan); known TTLs are checked here already.
	if d.ZSKLifetime > 0 && d.DNSKEYTTL > 0 && d.MaxZoneTTL > 0 && d.PropagationDelay >= 0 {
		t := keyroll.Timings{ZSKLifetime: d.ZSKLifetime, DNSKEYTTL: d.DNSKEYTTL, MaxZoneTTL: d.MaxZoneTTL, PropagationDelay: d.PropagationDelay}
		if err := t.Check(); err != nil {
			bad("zsk_lifetime", "%v", err)
		}
	}
}

// zskLifetimeProblem is the problem of a zone with a zsk_lifetime whose
// keys have no ZSK to roll (a CSK alone), at the zsk_lifetime line.
func (c *Config) zskLifetimeProblem(i int, keys []*dnssec.Key, probs *diag.Problems) {
	d := c.Zones[i].DNSSEC
	if d == nil || d.ZSKLifetime <= 0 {
		return
	}
	ln := c.Line(fmt.Sprintf("zones[%d].dnssec.zsk_lifetime", i))
	if ln == 0 {
		ln = d.Line
	}
	if MultiSigner(keys) {
		probs.Add(c.File, ln, "zones: %s: dnssec.zsk_lifetime: the zone is signed elsewhere (its keys are ZSKs alone): its signer must publish each new ZSK, so steer does not roll it; remove zsk_lifetime", c.Zones[i].Origin)
		return
	}
	for _, k := range keys {
		if !k.SEP() {
			return
		}
	}
	probs.Add(c.File, ln, "zones: %s: dnssec.zsk_lifetime needs a KSK and a ZSK; the zone's keys are a CSK only (make a ZSK with steer dnssec keygen --role zsk and list it under keys, or remove zsk_lifetime)", c.Zones[i].Origin)
}
