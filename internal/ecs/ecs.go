// Package ecs owns EDNS Client Subnet (RFC 7871): reading and validating
// the option a query carries, privacy truncation of the source prefix,
// choosing the address steering looks at, and the option a response echoes
// with its scope.
package ecs

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// Address families (IANA Address Family Numbers) used by ECS.
const (
	FamilyIPv4 = 1
	FamilyIPv6 = 2
)

// Subnet is a validated ECS option from a query.
type Subnet struct {
	Family uint16
	// SourceBits is the SOURCE PREFIX-LENGTH as sent.
	SourceBits int
	// Addr is the ADDRESS as sent (bits beyond SourceBits are zero).
	Addr netip.Addr
	// Prefix is the subnet steering uses: Addr/SourceBits truncated to the
	// configured maximum source prefix. Invalid when SourceBits is 0.
	Prefix netip.Prefix
}

// Errors that make a query a FORMERR (RFC 7871 §7.2.1).
var (
	ErrFamily  = errors.New("ecs: unknown address family")
	ErrLength  = errors.New("ecs: option length does not match the source prefix")
	ErrSource  = errors.New("ecs: source prefix too long for the family")
	ErrScope   = errors.New("ecs: scope prefix must be 0 in a query")
	ErrAddress = errors.New("ecs: address bits set beyond the source prefix")
)

// Parse validates the data of an ECS option (option code 8) from a query,
// and truncates its prefix to maxV4 or maxV6 bits. It does not allocate.
func Parse(data []byte, maxV4, maxV6 int) (Subnet, error) {
	var s Subnet
	err := ParseInto(&s, data, maxV4, maxV6)
	return s, err
}

// ParseInto is Parse writing into s, which it zeroes first: the fast
// path's subnet, in place (the 72-byte Subnet returned in registers and
// stored back was a tenth of the fast path's own samples, a store
// forwarding stall on the copy).
func ParseInto(s *Subnet, data []byte, maxV4, maxV6 int) error {
	*s = Subnet{}
	if len(data) < 4 {
		return ErrLength
	}
	s.Family = binary.BigEndian.Uint16(data)
	s.SourceBits = int(data[2])
	scope := data[3]
	addr := data[4:]
	if len(addr) != (s.SourceBits+7)/8 {
		return ErrLength
	}
	if scope != 0 {
		return ErrScope
	}
	var limit, max int
	switch s.Family {
	case FamilyIPv4:
		limit, max = 32, maxV4
	case FamilyIPv6:
		limit, max = 128, maxV6
	default:
		// RFC 7871 §7.2.1: an unknown FAMILY is a malformed option, FAMILY
		// 0 with a /0 source included (gdnsd does the same; a client with
		// no subnet to give sends its transport's family with /0).
		return ErrFamily
	}
	if s.SourceBits > limit {
		return ErrSource
	}
	var b [16]byte
	copy(b[:], addr)
	if s.SourceBits%8 != 0 && len(addr) > 0 {
		if addr[len(addr)-1]&(0xFF>>(s.SourceBits%8)) != 0 {
			return ErrAddress
		}
	}
	if s.Family == FamilyIPv4 {
		s.Addr = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		s.Addr = netip.AddrFrom16(b)
	}
	if s.SourceBits > 0 {
		s.Prefix = netip.PrefixFrom(s.Addr, min(s.SourceBits, max))
		if s.SourceBits > max {
			// Cut to the maximum. Uncut, the address is already masked:
			// its bits past the source length were checked zero above.
			s.Prefix = s.Prefix.Masked()
		}
	}
	return nil
}

// Truncated reports whether the source prefix was cut to the maximum.
func (s *Subnet) Truncated() bool {
	return s.Prefix.IsValid() && s.Prefix.Bits() < s.SourceBits
}

// Scope returns the SCOPE PREFIX-LENGTH to answer with, given the scope of
// the steering decision (-1 when the answer does not depend on the client).
// It is 0 for answers that do not depend on the client and for a /0
// source. When steer used fewer bits than the client sent (privacy
// truncation) the scope is capped there: the answer was chosen for that
// shorter prefix, and asking with more bits would not change it.
func (s *Subnet) Scope(decision int) int {
	if decision <= 0 || s.SourceBits == 0 {
		return 0
	}
	if s.Truncated() && decision > s.Prefix.Bits() {
		return s.Prefix.Bits()
	}
	limit := 32
	if s.Family == FamilyIPv6 {
		limit = 128
	}
	return min(decision, limit)
}

// Option builds the response's ECS option: the query's FAMILY, SOURCE
// PREFIX-LENGTH and ADDRESS, with scope.
func (s *Subnet) Option(scope int) *dns.EDNS0_SUBNET {
	o := &dns.EDNS0_SUBNET{
		Code:          dns.EDNS0SUBNET,
		Family:        s.Family,
		SourceNetmask: uint8(s.SourceBits),
		SourceScope:   uint8(scope),
	}
	switch s.Family {
	case FamilyIPv4:
		a := s.Addr.As4()
		o.Address = net.IP(a[:])
	case FamilyIPv6:
		a := s.Addr.As16()
		o.Address = net.IP(a[:])
	default:
		o.Address = net.IPv4zero
	}
	return o
}

// Client returns the address and prefix length steering looks at: the
// subnet when the query carried one (has) with a non-zero source prefix,
// otherwise the resolver's address (from). bySubnet says which.
func Client(s *Subnet, has bool, from netip.Addr) (addr netip.Addr, bits int, bySubnet bool) {
	if has && s.Prefix.IsValid() {
		return s.Prefix.Addr(), s.Prefix.Bits(), true
	}
	from = from.Unmap()
	return from, from.BitLen(), false
}
