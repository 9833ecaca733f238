package geo

import (
	"math/bits"
	"net/netip"
)

// Networks calls yield with every network of the set's address space and
// what the databases say about it (as LookupInfo would, without
// Info.Networks), IPv4 then IPv6, each in address order, until yield
// returns false. The networks cover the space without overlapping (IPv6
// from ::1:0:0 when the databases keep IPv4 in ::/96); a range over which
// the answer is the same may come as several networks. Space the
// databases know nothing of comes with an empty Info. The IPv6 networks
// include those a database aliases to its IPv4 ones (::ffff:0:0/96,
// 2002::/16). skip, as for Partition, names IPv6 space not looked into
// (it may come as one network); a caller that wants only IPv4 skips all
// of it. It compiles a Partition (a walk over every database) for the
// call.
func (s *Set) Networks(skip func(netip.Prefix) bool, yield func(netip.Prefix, Info) bool) error {
	p, err := s.Partition(skip, 1)
	if err != nil {
		return err
	}
	p.Networks(yield)
	return nil
}

// Networks is Set.Networks over the partition.
func (p *Partition) Networks(yield func(netip.Prefix, Info) bool) {
	for i, l := range p.v4 {
		end := uint64(1) << 32
		if i+1 < len(p.v4) {
			end = uint64(p.v4[i+1].start)
		}
		for a := uint64(l.start); a < end; {
			n := min(bits.TrailingZeros64(a|1<<32), 63-bits.LeadingZeros64(end-a))
			pfx := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), 32-n)
			if !yield(pfx, p.infos[l.info]) {
				return
			}
			a += 1 << n
		}
	}
	for i, l := range p.v6 {
		a := u128{l.hi, l.lo}
		end, last := u128{}, true // last: the range runs to the end of the space
		if i+1 < len(p.v6) {
			end, last = u128{p.v6[i+1].hi, p.v6[i+1].lo}, false
		}
		for last || a.less(end) {
			n := a.trailingZeros()
			if !last {
				n = min(n, end.sub(a).log2())
			}
			if !yield(netip.PrefixFrom(a.addr(), 128-n), p.infos[l.info]) {
				return
			}
			var carry bool
			a, carry = a.addPow2(n)
			if carry {
				break // the end of the space
			}
		}
	}
}

// u128 is a 128-bit unsigned integer (an IPv6 address).
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a u128) sub(b u128) u128 {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, borrow)
	return u128{hi, lo}
}

// log2 is the position of the highest bit set (a must not be 0).
func (a u128) log2() int {
	if a.hi != 0 {
		return 127 - bits.LeadingZeros64(a.hi)
	}
	return 63 - bits.LeadingZeros64(a.lo)
}

// trailingZeros is 128 for 0.
func (a u128) trailingZeros() int {
	if a.lo != 0 {
		return bits.TrailingZeros64(a.lo)
	}
	if a.hi != 0 {
		return 64 + bits.TrailingZeros64(a.hi)
	}
	return 128
}

// addPow2 returns a + 2^n and whether it overflowed.
func (a u128) addPow2(n int) (u128, bool) {
	var b u128
	switch {
	case n >= 128:
		return u128{}, true
	case n >= 64:
		b.hi = 1 << (n - 64)
	default:
		b.lo = 1 << n
	}
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, c := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}, c != 0
}

func (a u128) addr() netip.Addr {
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(a.hi >> (56 - 8*i))
		b[8+i] = byte(a.lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}
