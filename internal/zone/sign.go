package zone

import (
	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// LookupOptions are a query's DNSSEC wishes (RFC 4035 §3.1): with DO, the
// answer from a signed zone carries RRSIGs and proofs of denial.
type LookupOptions struct {
	// DO is the query's DNSSEC OK bit.
	DO bool
	// CO is the query's Compact Answers OK bit (RFC 9824 §4): a compact
	// denial of a name that does not exist keeps the rcode NXDOMAIN.
	CO bool
	// Signing makes the signatures an answer needs that were not made
	// ahead of time; nil: none are made (NeedSignature is set instead).
	Signing Signing
}

// Signing is what a lookup asks of the server for signatures it cannot
// find made: whether one may be made now (the signing budget; always
// over TCP), and the signatures of a steered RRset, which the snapshot
// pre-signs per answer set.
type Signing interface {
	// Allow reports whether one more signature may be made on this
	// query's behalf now, and counts it.
	Allow() bool
	// Steered returns the RRSIGs over rrs, the RRset the steered name
	// (canonical) of zone z answers qtype with, or nil when it has none
	// and may not make one now.
	Steered(z *Zone, name string, qtype uint16, rrs []dns.RR) []dns.RR
}

// Signer returns the signer of a signed zone, nil for an unsigned one.
func (z *Zone) Signer() *dnssec.Signer { return z.signer }

// dnssecOK reports whether the answer being built for zone z must carry
// DNSSEC records.
func (a *Answer) dnssecOK(z *Zone) bool {
	return a.opts != nil && a.opts.DO && (z.signer != nil || z.pre != nil)
}
