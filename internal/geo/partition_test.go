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
	part, err := set.Partition(skip)
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
