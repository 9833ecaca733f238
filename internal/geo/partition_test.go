package geo

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// The partition answers every address outside the skipped space exactly
// as the databases do: the same facts and the same uniform prefix length.
func TestPartitionMatchesLookup(t *testing.T) {
	emb, err := OpenEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("city+asn", func(t *testing.T) {
		testPartition(t, &Set{DBs: []*Database{openTestDB(t, "larkbook-city.mmdb"), openTestDB(t, "larkbook-asn.mmdb")}})
	})
	t.Run("embedded", func(t *testing.T) { testPartition(t, &Set{DBs: []*Database{emb}}) })
}

func testPartition(t *testing.T, set *Set) {
	skip := func(p netip.Prefix) bool { return p.Bits() >= 16 && p.Overlaps(netip.MustParsePrefix("2002::/16")) }
	part, err := set.Partition(skip, 2)
	if err != nil {
		t.Fatal(err)
	}
	// A cursor answers as LookupInfo, in ascending order and after a jump
	// back.
	cur := part.Cursor()
	for _, s := range []string{"0.0.0.0", "1.0.0.0", "1.0.0.1", "49.36.0.0", "200.1.2.3", "8.8.8.8", "::", "2001:db8::", "2a00::", "2400::1"} {
		a := netip.MustParseAddr(s)
		want, wu := part.LookupInfo(a)
		got, _, gu := cur.Lookup(a)
		if got.Country != want.Country || gu != wu {
			t.Fatalf("cursor at %s: %+v /%d, want %+v /%d", a, *got, gu, want, wu)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		var a netip.Addr
		if i%2 == 0 {
			a = netip.AddrFrom4([4]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		} else {
			var b [16]byte
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			b[0] = 0x20
			if b[1] == 0x02 {
				continue // skipped space
			}
			a = netip.AddrFrom16(b)
		}
		want, wu, err := set.LookupInfo(a)
		if err != nil {
			t.Fatal(err)
		}
		got, gu := part.LookupInfo(a)
		if got.Country != want.Country || got.ASN != want.ASN || got.Lat != want.Lat || got.Subdivision != want.Subdivision || gu != wu {
			t.Fatalf("%s: partition %+v /%d, databases %+v /%d", a, got, gu, want, wu)
		}
	}
	v4, v6 := part.Leaves()
	t.Logf("%d IPv4 and %d IPv6 networks, %d distinct infos", v4, v6, len(part.infos))
}

// A one-database partition is read from the database's own list of
// networks (its tree, or the reader's listing, which the tree's must
// equal); it must answer exactly as the walk over lookups does, at
// every network start the walk finds (the addresses a compile asks) and
// at random addresses.
func TestNetworksPartitionMatchesWalk(t *testing.T) {
	emb, err := OpenEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Database{openTestDB(t, "larkbook-city.mmdb"), openTestDB(t, "larkbook-asn.mmdb"),
		openTestDB(t, "larkbook-country-flat.mmdb"), emb} {
		t.Run(d.Name, func(t *testing.T) {
			set := &Set{DBs: []*Database{d}}
			fast, ok, err := d.networksPartition()
			if err != nil || !ok {
				t.Fatalf("networksPartition: ok %v, %v", ok, err)
			}
			sameAsListing(t, d, fast) // and so is the one read from the tree
			walk, err := set.buildPartition(nil)
			if err != nil {
				t.Fatal(err)
			}
			check := func(a netip.Addr) {
				t.Helper()
				want, wu := walk.LookupInfo(a)
				got, gu := fast.LookupInfo(a)
				real, ru, _ := set.LookupInfo(a)
				if got.Country != want.Country || got.Continent != want.Continent || got.Subdivision != want.Subdivision ||
					got.ASN != want.ASN || got.Lat != want.Lat || got.Lon != want.Lon || got.HasLocation != want.HasLocation || gu != ru || wu != ru {
					t.Fatalf("%s: networks %+v /%d, walk %+v /%d, lookup %+v /%d", a, got, gu, want, wu, real, ru)
				}
			}
			for _, l := range walk.v4 {
				check(netip.AddrFrom4([4]byte{byte(l.start >> 24), byte(l.start >> 16), byte(l.start >> 8), byte(l.start)}))
			}
			for i, l := range walk.v6 {
				if i%7 != 0 && len(walk.v6) > 100000 {
					continue // the embedded database: a seventh of them
				}
				var b [16]byte
				for j := 0; j < 8; j++ {
					b[j], b[8+j] = byte(l.hi>>(56-8*j)), byte(l.lo>>(56-8*j))
				}
				check(netip.AddrFrom16(b))
			}
			for _, s := range []string{"::", "::1", "::0.0.0.1", "::1.2.3.4", "::ffff:1.2.3.4", "2002::", "2002:c000:201::", "2001::", "64:ff9b::1.2.3.4"} {
				check(netip.MustParseAddr(s))
			}
			t.Logf("%d+%d networks from the list, %d+%d from the walk", len(fast.v4), len(fast.v6), len(walk.v4), len(walk.v6))
		})
	}
}
