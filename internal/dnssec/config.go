package dnssec

import "time"

// Config is a zone's dnssec section, which decodes into this type
// (internal/config decodes Validity from its duration string and checks
// the keys, see steer check).
//
//	zones:
//	  - origin: example.com
//	    file: example.com.zone
//	    dnssec:
//	      keys: [keys/Kexample.com.+013+04565]  # base paths: .key and .private
//	      validity: 336h                         # 14 days
//	      refresh: 0.75
//	      zsk_lifetime: 30d                      # automatic ZSK rollover (KSK+ZSK only)
//	      dnskey_ttl: 1h                         # default: the SOA's TTL
//	      propagation_delay: 5m                  # default keyroll.DefaultPropagationDelay
//	      max_zone_ttl: 1d                       # default: the zone's longest TTL
//	      denial: nsec                           # or nsec3: what transfers to secondaries carry
type Config struct {
	// Keys are the base paths (relative to the configuration file's
	// directory) of BIND dnssec-keygen pairs: one CSK, or KSKs and ZSKs.
	Keys []string `yaml:"keys"`
	// Validity is how long a signature holds; 0 means DefaultValidity.
	Validity time.Duration `yaml:"-"`
	// Refresh is the share of the validity after which a signature is
	// renewed; 0 means DefaultRefresh.
	Refresh float64 `yaml:"refresh"`
	// ZSKLifetime (zsk_lifetime) is how long a ZSK signs before steer
	// rolls it over (pre-publication, internal/keyroll); 0: no rollover.
	ZSKLifetime time.Duration `yaml:"-"`
	// DNSKEYTTL (dnskey_ttl) is the TTL of the apex's DNSKEY, CDS and
	// CDNSKEY RRsets; 0: the SOA's TTL.
	DNSKEYTTL time.Duration `yaml:"-"`
	// PropagationDelay (propagation_delay) is how long a change takes to
	// reach every server of the zone; 0: keyroll's default.
	PropagationDelay time.Duration `yaml:"-"`
	// MaxZoneTTL (max_zone_ttl) is the longest TTL of the zone's signed
	// data, signatures included; 0: computed from the zone served.
	MaxZoneTTL time.Duration `yaml:"-"`
	// Presigned says the zone comes signed by another signer (its file
	// or its primary carries the DNSKEY RRset, RRSIGs and an NSEC or
	// NSEC3 chain): steer serves its signatures and needs no key. A
	// pre-signed zone is found without it; set, a copy that arrives
	// unsigned fails rather than being served unsigned under the DS its
	// parent has. With Keys (ZSKs only), steer signs its steered names
	// in the zone (multi-signer).
	Presigned bool `yaml:"presigned"`
	// Denial is the denial of existence a signed export (a transfer to
	// secondaries) carries: DenialNSEC (a complete NSEC chain) or
	// DenialNSEC3 (RFC 5155, no opt-out, RFC 9276's parameters). The
	// node's own answers use compact denial (RFC 9824) either way. ""
	// means DenialNSEC.
	Denial string `yaml:"denial"`
	// Line is where the section starts in the configuration file.
	Line int `yaml:"-"`
}

// The denials of a signed export.
const (
	DenialNSEC  = "nsec"
	DenialNSEC3 = "nsec3"
)

// Options returns the signer options the section sets.
func (c *Config) Options() Options {
	return Options{Validity: c.Validity, Refresh: c.Refresh, KeyTTL: c.DNSKEYTTL}
}
