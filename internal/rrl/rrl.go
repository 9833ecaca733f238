// Package rrl owns response rate limiting (RRL) for UDP answers: which
// responses are "identical" (the bucket key), how much credit each bucket
// has (BIND's token-bucket semantics: responses-per-second, window, slip),
// the aggregate per-source cap (BIND's all-per-second), exemptions by
// prefix, log-only mode, the fixed-size table the buckets live in, and the
// counters the metrics layer reads.
//
// What is new against BIND, NSD and Knot is that the key understands EDNS
// Client Subnet (RFC 7871): a resolver that honours ECS legitimately asks
// the same name many times a second from one address, once per client
// block and TTL, so the key includes the ECS scope block of the answer
// (the ECS address masked to the scope prefix length the response
// returns). Each scope block gets its own budget; answers that do not
// depend on the client (scope 0) share one. An attacker that varies ECS to
// multiply budgets gets at most (distinct scope blocks the policy can
// produce) × ResponsesPerSecond from the per-key buckets, and never more
// than AllPerSecond a second in total from one source prefix (after one
// initial burst of as many), because the aggregate bucket ignores ECS,
// name, type and class.
//
// As in BIND, every response debits its buckets, the limited ones too: a
// source that keeps asking faster than the rate gets its initial burst and
// then only slips, until it slows down; a bucket cannot owe more than
// Window seconds of credit, and forgets its history after Window seconds
// of silence.
//
// The package decides; it does not build or send anything. The DNS handler
// calls [Limiter.Decide] once per UDP response it is about to send and
// drops it, sends a slipped (truncated, or BADCOOKIE) answer, or sends the
// answer, as the [Verdict] says. What the caller must do itself:
//
//   - Exempt TCP: never call Decide for a TCP response (a TCP client has
//     proved its address).
//   - Exempt UDP queries with a valid server cookie (RFC 7873), as BIND and
//     Knot do: never call Decide for them either.
//   - Classify the response ([Classify]) and pass the name BIND keys on:
//     the query name, folded to the wildcard owner for wildcard answers
//     (so a wildcard cannot be used to evade per-name limits), and the
//     zone apex for NXDOMAIN (so random subdomains share one budget).
//   - Pass names in one canonical form, lower-case (either wire format or
//     presentation format, but always the same): the limiter hashes the
//     bytes as given, and a caller that passes mixed case lets an attacker
//     multiply budgets with 0x20 case changes.
//
// Decide does not allocate and is safe for concurrent use.
//
// Its metrics (steer_rrl_*, metrics.go) are read from Stats at scrape time
// by a Collector.
package rrl

import (
	"fmt"
	"net/netip"
)

// Class is the kind of a response for rate limiting, as in BIND: responses
// of different classes are never "identical", and the class decides which
// parts of the query are in the key.
type Class uint8

// The response classes.
const (
	// Positive is a NOERROR answer with data (including CNAME chains).
	// Keyed on name and qtype.
	Positive Class = iota
	// NoData is a NOERROR answer with no data for the type. Keyed on the
	// name only: there is no type in an empty answer, so every type counts
	// against the same budget (BIND).
	NoData
	// NXDomain is an NXDOMAIN answer. Keyed on the name the caller passes,
	// which should be the zone apex, so random subdomains of one zone share
	// a budget (BIND).
	NXDomain
	// Referral is a delegation to another server. Keyed on the name only
	// (BIND).
	Referral
	// Error is any other rcode (SERVFAIL, REFUSED, FORMERR, NOTIMP, ...).
	// Keyed on the source prefix alone: name and type are ignored. Limited
	// error responses are always dropped, never slipped (BIND: some error
	// responses cannot be slipped, so none are).
	Error

	// NumClasses is the number of classes, for arrays indexed by Class.
	NumClasses = 5
)

var classNames = [NumClasses]string{"positive", "nodata", "nxdomain", "referral", "error"}

// String returns the class's lower-case name, as used in metric labels:
// positive, nodata, nxdomain, referral, error.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Classify returns the class of a response from its rcode (RFC 1035
// numbers: 0 NOERROR, 3 NXDOMAIN), whether its answer section has any
// records, and whether it is a referral.
func Classify(rcode int, hasAnswer, referral bool) Class {
	switch {
	case rcode == 3:
		return NXDomain
	case rcode != 0:
		return Error
	case hasAnswer:
		return Positive
	case referral:
		return Referral
	default:
		return NoData
	}
}

// Response describes the response being rate limited: what makes two
// responses "identical" apart from the source prefix.
type Response struct {
	// Class is the response's class (see [Classify]).
	Class Class
	// Name is the name the response is keyed on, lower-case, in one form
	// (wire or presentation) for every call: the query name; the wildcard
	// owner (e.g. "*.example.com.") for a wildcard answer; the zone apex
	// for NXDOMAIN. Ignored for Error. Decide does not keep it.
	Name []byte
	// Qtype is the query type. Only Positive responses are keyed on it.
	Qtype uint16
	// ECS is the ADDRESS of the query's EDNS Client Subnet option, the
	// zero Addr when the query had none. With Config.ECSAware, the key
	// includes ECS masked to Scope bits.
	ECS netip.Addr
	// Scope is the SCOPE PREFIX-LENGTH the response carries. 0 (or less)
	// means the answer holds for every client: such responses share one
	// bucket whatever the ECS, the same bucket as queries without ECS.
	Scope int
	// Cookie says the query carried a client cookie (alone, or with a
	// server cookie that did not verify). Its limited responses are
	// always slipped, never dropped — the slip is BADCOOKIE with a fresh
	// server cookie, about the size of the query, and the client's retry
	// with that cookie is exempt, so a real client is never left waiting
	// for a timeout — except over AllPerSecond, which drops as always.
	Cookie bool
}

// Verdict is what the caller does with a response.
type Verdict uint8

// The verdicts. LogSlip and LogDrop occur only in log-only mode: the
// response would have been limited, and is answered in full.
const (
	// Pass: send the response.
	Pass Verdict = iota
	// Slip: send a slipped response instead: TC=1 with empty sections, or
	// BADCOOKIE with a fresh server cookie when the query had a client
	// cookie, so a legitimate client retries over TCP or with the cookie.
	Slip
	// Drop: send nothing.
	Drop
	// LogSlip: log-only mode; would have slipped. Send the response.
	LogSlip
	// LogDrop: log-only mode; would have dropped. Send the response.
	LogDrop
)

var verdictNames = [...]string{"pass", "slip", "drop", "log-slip", "log-drop"}

// String returns the verdict's name: pass, slip, drop, log-slip, log-drop.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Answer reports whether the full response is sent: Pass, LogSlip, LogDrop.
func (v Verdict) Answer() bool { return v == Pass || v == LogSlip || v == LogDrop }

// Limited reports whether the response was (or, in log-only mode, would
// have been) rate limited: anything but Pass. The caller logs or counts it.
func (v Verdict) Limited() bool { return v != Pass }
