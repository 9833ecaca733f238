// Package cookie owns DNS Cookies (RFC 7873) with interoperable server
// cookies (RFC 9018, version 1, SipHash-2-4): reading the COOKIE option a
// query carries, classifying its server cookie (valid under the current or
// previous secret, within the timestamp window, or not), minting the
// client+server cookie a response carries, and the server secrets
// themselves (a file of one or two hex lines, or a random one).
//
// A cookie minted here is byte-identical to one minted by BIND
// (cookie-algorithm siphash24), NSD (answer-cookie) and Knot (mod-cookies)
// given the same secret, client cookie, client address and second, so
// nodes of different implementations behind one anycast address accept each
// other's cookies. What to do with a result (FORMERR, BADCOOKIE, rate-limit
// exemption, metrics) is the DNS server's business, not this package's.
package cookie

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/dchest/siphash"
)

// Sizes of the option's parts (RFC 7873 §4, RFC 9018 §4).
const (
	// ClientLen is the length of a client cookie.
	ClientLen = 8
	// ServerLen is the length of the server cookie this package mints.
	ServerLen = 16
	// MintLen is what Mint appends: client cookie and server cookie.
	MintLen = ClientLen + ServerLen
	// MinServerLen and MaxServerLen bound any server cookie RFC 7873
	// allows; outside them the option is malformed.
	MinServerLen = 8
	MaxServerLen = 32
)

// Version is the server cookie version this package mints and verifies.
const Version = 1

// The validity window of a server cookie's timestamp and the age after
// which a valid one is replaced (RFC 9018 §4.3; Knot's values).
const (
	// MaxAge is how old a timestamp may be and still be valid.
	MaxAge = 3600 * time.Second
	// MaxSkew is how far in the future a timestamp may be.
	MaxSkew = 300 * time.Second
	// RemintAge is the age past which a valid cookie is replaced.
	RemintAge = 1800 * time.Second
)

const (
	maxAge    = int64(MaxAge / time.Second)
	maxSkew   = int64(MaxSkew / time.Second)
	remintAge = int64(RemintAge / time.Second)
)

// Option is a COOKIE option payload split into its parts.
type Option struct {
	// Client is the client cookie.
	Client [ClientLen]byte
	// Server is the server cookie, nil when the query carried only a
	// client cookie. It aliases the payload given to ParseOption.
	Server []byte
}

// ParseOption splits a COOKIE option payload (the option data, without
// code and length). It reports false when the payload is malformed (RFC
// 7873 §5.2.2: shorter than a client cookie, or a server cookie shorter
// than 8 or longer than 32 bytes), which the server answers with FORMERR.
func ParseOption(opt []byte) (Option, bool) {
	var o Option
	n := len(opt) - ClientLen
	if n < 0 || (n > 0 && n < MinServerLen) || n > MaxServerLen {
		return o, false
	}
	copy(o.Client[:], opt)
	if n > 0 {
		o.Server = opt[ClientLen:]
	}
	return o, true
}

// Status is what Check found in a COOKIE option.
type Status uint8

const (
	// Absent is the zero Status: the query had no COOKIE option. Check
	// never returns it; it is here for the caller's counting.
	Absent Status = iota
	// ClientOnly: a client cookie and no server cookie.
	ClientOnly
	// Valid: a server cookie this jar minted, within the window.
	Valid
	// Invalid: a well-formed server cookie that does not verify: wrong
	// length or version, timestamp out of the window, or a hash neither
	// secret gives (another server's, a forgery, one for another address).
	Invalid
	// Malformed: the option cannot be read (RFC 7873 §5.2.2: FORMERR).
	Malformed
)

var statusNames = [...]string{"absent", "client_only", "valid", "invalid", "malformed"}

// String returns the status as a metric label value: absent, client_only,
// valid, invalid or malformed.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// Result is the classification of one COOKIE option.
type Result struct {
	Status Status
	// Client is the query's client cookie (all but Malformed).
	Client [ClientLen]byte
	// Remint, for Valid, says the response should carry a fresh cookie
	// rather than echo this one: it is older than RemintAge, only the
	// previous secret verifies it, or its reserved bytes are not zero
	// (RFC 9018 §4.2: a fresh one has them zero).
	Remint bool
}

// Jar holds the server secrets: the current one, which mints and
// verifies, and optionally the previous one, which only verifies (during a
// rollover). A Jar is immutable and safe for concurrent use; replace it
// whole to change secrets.
type Jar struct {
	cur     key
	prev    key
	hasPrev bool
}

// key is a secret as SipHash's two 64-bit halves (little-endian, as the
// reference implementation reads its 16-byte key).
type key struct{ k0, k1 uint64 }

func keyOf(s Secret) key {
	return key{binary.LittleEndian.Uint64(s[:8]), binary.LittleEndian.Uint64(s[8:])}
}

// NewJar returns a jar minting and verifying with current and, when
// previous is not nil, also verifying with previous.
func NewJar(current Secret, previous *Secret) *Jar {
	j := &Jar{cur: keyOf(current)}
	if previous != nil {
		j.prev, j.hasPrev = keyOf(*previous), true
	}
	return j
}

// Mint appends to dst the 24-byte COOKIE option payload for a response:
// the client cookie and a version 1 server cookie (RFC 9018 §4: version,
// three reserved zero bytes, the 32-bit timestamp now, and SipHash-2-4
// under the current secret of client cookie ‖ version ‖ reserved ‖
// timestamp ‖ client address). An IPv4-mapped IPv6 address is hashed as
// the 4-byte IPv4 address; an invalid (zero) address hashes as no bytes.
func (j *Jar) Mint(dst []byte, client [ClientLen]byte, clientIP netip.Addr, now time.Time) []byte {
	var hdr [8]byte
	hdr[0] = Version
	binary.BigEndian.PutUint32(hdr[4:], uint32(now.Unix()))
	h := j.cur.hash(&client, &hdr, clientIP)
	dst = append(dst, client[:]...)
	dst = append(dst, hdr[:]...)
	return binary.LittleEndian.AppendUint64(dst, h)
}

// hash is the RFC 9018 §4.4 hash: client cookie ‖ the server cookie's
// first 8 bytes (version, reserved, timestamp) ‖ client address.
func (k key) hash(client *[ClientLen]byte, hdr *[8]byte, ip netip.Addr) uint64 {
	var in [ClientLen + 8 + 16]byte
	copy(in[:], client[:])
	copy(in[ClientLen:], hdr[:])
	n := ClientLen + 8
	ip = ip.Unmap()
	switch {
	case ip.Is4():
		a := ip.As4()
		n += copy(in[n:], a[:])
	case ip.Is6():
		a := ip.As16()
		n += copy(in[n:], a[:])
	}
	return siphash.Hash(k.k0, k.k1, in[:n])
}

// Check classifies the COOKIE option payload opt of a query from clientIP
// received at now. A server cookie is Valid when it is version 1, its
// timestamp is within [now−MaxAge, now+MaxSkew] (serial arithmetic, so
// the 2106 wrap is harmless), and its hash matches under the current or
// previous secret. The hash covers the reserved bytes as the query sent
// them (RFC 9018 Appendix A.3).
func (j *Jar) Check(opt []byte, clientIP netip.Addr, now time.Time) Result {
	o, ok := ParseOption(opt)
	if !ok {
		return Result{Status: Malformed}
	}
	r := Result{Status: Invalid, Client: o.Client}
	switch {
	case o.Server == nil:
		r.Status = ClientOnly
		return r
	case len(o.Server) != ServerLen || o.Server[0] != Version:
		return r
	}
	hdr := [8]byte(o.Server[:8])
	age := int64(int32(uint32(now.Unix()) - binary.BigEndian.Uint32(hdr[4:])))
	if age > maxAge || age < -maxSkew {
		return r
	}
	got := binary.LittleEndian.Uint64(o.Server[8:])
	switch {
	case j.cur.hash(&o.Client, &hdr, clientIP) == got:
		r.Status, r.Remint = Valid, age > remintAge || hdr[1]|hdr[2]|hdr[3] != 0
	case j.hasPrev && j.prev.hash(&o.Client, &hdr, clientIP) == got:
		r.Status, r.Remint = Valid, true
	}
	return r
}

// Reply appends to dst the COOKIE option payload a response to the query
// should carry, given the query's payload opt and r = Check(opt, ...):
// opt itself for a Valid cookie that needs no remint, a fresh Mint for
// ClientOnly, Invalid and Valid-but-Remint, nothing for Malformed (the
// FORMERR carries no cookie) or Absent.
func (j *Jar) Reply(dst, opt []byte, r Result, clientIP netip.Addr, now time.Time) []byte {
	switch r.Status {
	case Valid:
		if !r.Remint {
			return append(dst, opt...)
		}
	case ClientOnly, Invalid:
	default:
		return dst
	}
	return j.Mint(dst, r.Client, clientIP, now)
}
