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
type Config struct {
	// Keys are the base paths (relative to the configuration file's
	// directory) of BIND dnssec-keygen pairs: one CSK, or KSKs and ZSKs.
	Keys []string `yaml:"keys"`
	// Validity is how long a signature holds; 0 means DefaultValidity.
	Validity time.Duration `yaml:"-"`
	// Refresh is the share of the validity after which a signature is
	// renewed; 0 means DefaultRefresh.
	Refresh float64 `yaml:"refresh"`
	// Line is where the section starts in the configuration file.
	Line int `yaml:"-"`
}

// Options returns the signer options the section sets.
func (c *Config) Options() Options {
	return Options{Validity: c.Validity, Refresh: c.Refresh}
}
