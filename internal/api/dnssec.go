package api

import "time"

// ZoneDNSSEC is a signed zone's signing state in GET /v1/status.
type ZoneDNSSEC struct {
	// Keys are the zone's keys, the SEP keys (KSK or CSK) first.
	Keys []DNSSECKey `json:"keys"`
	// Validity is how long a signature holds ("336h0m0s"), and Refresh
	// the share of it after which the node renews a signature.
	Validity string  `json:"validity"`
	Refresh  float64 `json:"refresh"`
	// EarliestExpiry is when the first of the zone's signatures expires;
	// NextRenewal is when the first falls due for renewal, which the node
	// does then in the background. Both are zero before the zone holds a
	// signature (SERVFAIL while it fails).
	EarliestExpiry time.Time `json:"earliest_expiry"`
	NextRenewal    time.Time `json:"next_renewal"`
	// Made counts the signatures made with the zone's keys since they
	// were loaded, by reason: load, renew, steered, online, denial.
	Made map[string]uint64 `json:"signatures_made"`
	// Expiring says, when set, that a signature expires within 48 hours
	// (a seventh of the validity when that is shorter): renewal is not
	// keeping up. The node logs the same at ERROR.
	Expiring string `json:"expiring,omitempty"`
}

// DNSSECKey is one key of a signed zone.
type DNSSECKey struct {
	Tag       uint16 `json:"tag"`
	Algorithm string `json:"algorithm"`
	// Role is CSK (one key signs everything), KSK or ZSK.
	Role string `json:"role"`
	// File is the key pair's base path (.key and .private).
	File string `json:"file"`
	// DS is the DS record (SHA-256) the parent publishes, for a SEP key.
	DS string `json:"ds,omitempty"`
}
