package geo

import (
	"math/big"
	"net/netip"
	"testing"
)

// Networks covers IPv4 and IPv6 (above ::/96, which holds IPv4) without
// gaps or overlaps, in address order, and each network's Info is what a
// lookup of its first and last address says.
func TestNetworksCoverTheSpace(t *testing.T) {
	for name, set := range map[string]*Set{
		"city":     larkbookSet(t, "city"),
		"city+asn": larkbookSet(t, "city", "asn"),
	} {
		t.Run(name, func(t *testing.T) {
			next4 := new(big.Int)
			var next6 *big.Int
			countries := map[string]int{}
			n := 0
			err := set.Networks(nil, func(p netip.Prefix, info Info) bool {
				n++
				start := new(big.Int).SetBytes(p.Addr().AsSlice())
				size := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
				next := next4
				if p.Addr().Is6() {
					if next6 == nil {
						next6 = new(big.Int).Set(start) // IPv6 starts where the partition does
					}
					next = next6
				}
				if p.Masked() != p || start.Cmp(next) != 0 {
					t.Fatalf("network %s does not start at the end of the last one (%x)", p, next)
				}
				next.Add(next, size)
				for _, a := range []netip.Addr{p.Addr(), lastAddr(p)} {
					want, _, err := set.LookupInfo(a)
					if err != nil {
						t.Fatal(err)
					}
					if want.Country != info.Country || want.ASN != info.ASN || want.City != info.City {
						t.Fatalf("%s: Networks says %s/%d/%s, a lookup of %s %s/%d/%s", p, info.Country, info.ASN, info.City, a, want.Country, want.ASN, want.City)
					}
				}
				if p.Addr().Is4() {
					countries[info.Country]++
				}
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if next4.Cmp(new(big.Int).Lsh(big.NewInt(1), 32)) != 0 || next6 == nil || next6.Cmp(new(big.Int).Lsh(big.NewInt(1), 128)) != 0 {
				t.Errorf("the networks end at %x and %x, not at the end of each space", next4, next6)
			}
			if countries["IN"] == 0 || countries["US"] == 0 || countries[""] == 0 {
				t.Errorf("IPv4 networks by country: %v, want IN, US and unknown space", countries)
			}
			t.Logf("%d networks; IPv4 by country %v", n, countries)
		})
	}
}

// Skipping IPv6 leaves it one network (with two databases, which are
// walked; one database's list is read whole).
func TestNetworksSkip(t *testing.T) {
	var v6 []netip.Prefix
	err := larkbookSet(t, "city", "asn").Networks(func(netip.Prefix) bool { return true }, func(p netip.Prefix, _ Info) bool {
		if p.Addr().Is6() {
			v6 = append(v6, p)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(v6) != 1 || v6[0] != netip.MustParsePrefix("::/0") {
		t.Errorf("IPv6 skipped: %v, want ::/0", v6)
	}
}

// Networks stops when yield returns false.
func TestNetworksStops(t *testing.T) {
	n := 0
	if err := larkbookSet(t, "city").Networks(nil, func(netip.Prefix, Info) bool { n++; return n < 3 }); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("yield called %d times after returning false at the 3rd", n)
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
