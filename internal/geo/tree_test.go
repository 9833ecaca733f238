package geo

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// The partition read from a database's tree, on one goroutine and on two,
// is exactly the one listed with the reader's Networks iterator: the same
// leaves in the same order, the same infos at the same indexes. On
// databases mmdbwriter writes in every record size, IPv4 and IPv6, with
// and without the IPv4 aliases; TestNetworksPartitionMatchesWalk checks
// the same on the test databases and the embedded one.
func TestTreePartitionIsTheListing(t *testing.T) {
	t.Parallel()
	for _, w := range []struct {
		version, size int
		aliases       bool
	}{{6, 24, true}, {6, 28, false}, {6, 32, true}, {4, 28, false}} {
		d, err := Open(writeTreeDB(t, w.version, w.size, w.aliases))
		if err != nil {
			t.Fatal(err)
		}
		d.Name = fmt.Sprintf("IPv%d, %d-bit records, aliases %v", w.version, w.size, w.aliases)
		want, ok, err := d.networksPartition()
		if err != nil || !ok {
			t.Fatalf("%s: networksPartition: ok %v, %v", d.Name, ok, err)
		}
		sameAsListing(t, d, want)
		t.Logf("%s: %d+%d networks, %d infos", d.Name, len(want.v4), len(want.v6), len(want.infos))
	}
}

// sameAsListing fails t unless d's tree partition, on one goroutine and
// on two, is want (d's networksPartition).
func sameAsListing(t *testing.T, d *Database, want *Partition) {
	t.Helper()
	for _, workers := range []int{1, 2} {
		got, ok, err := d.treePartition(workers)
		if err != nil || !ok {
			t.Fatalf("%s: treePartition(%d): ok %v, %v", d.Name, workers, ok, err)
		}
		if !reflect.DeepEqual(got.infos, want.infos) || got.v4in6 != want.v4in6 {
			t.Fatalf("%s, %d workers: infos %v (v4in6 %v), want %v (%v)", d.Name, workers, got.infos, got.v4in6, want.infos, want.v4in6)
		}
		if !slices.Equal(got.v4, want.v4) || !slices.Equal(got.v6, want.v6) {
			t.Fatalf("%s, %d workers: %d+%d leaves, want %d+%d (first difference: %s)", d.Name, workers,
				len(got.v4), len(got.v6), len(want.v4), len(want.v6), firstDifference(got, want))
		}
	}
}

func firstDifference(a, b *Partition) string {
	for i := range min(len(a.v4), len(b.v4)) {
		if a.v4[i] != b.v4[i] {
			return fmt.Sprintf("IPv4 leaf %d: %+v, want %+v", i, a.v4[i], b.v4[i])
		}
	}
	for i := range min(len(a.v6), len(b.v6)) {
		if a.v6[i] != b.v6[i] {
			return fmt.Sprintf("IPv6 leaf %d: %+v, want %+v", i, a.v6[i], b.v6[i])
		}
	}
	return "a list is a prefix of the other"
}

// A database whose tree is not of the shape read directly (here: an
// IPv6 tree with data above ::/96, so no IPv4 subtree) is listed with
// the reader instead, and answers the same.
func TestTreePartitionFallsBack(t *testing.T) {
	t.Parallel()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Steer-Test-Country", IPVersion: 6, RecordSize: 24,
		IncludeReservedNetworks: true, DisableIPv4Aliasing: true})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, cc := range map[string]string{"::/64": "FR", "2400:cb00::/32": "IN", "2a00:1450::/32": "IE", "2001:67c:4e8::/48": "NL"} {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(n, mmdbtype.Map{"country_code": mmdbtype.String(cc)}); err != nil {
			t.Fatal(err)
		}
	}
	path := writeDB(t, w, "no-ipv4.mmdb")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d.treePartition(2); ok || err != nil {
		t.Fatalf("treePartition: ok %v, %v; want it to decline", ok, err)
	}
	p, err := (&Set{DBs: []*Database{d}}).Partition(nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := p.LookupInfo(netip.MustParseAddr("2400:cb00::1")); info.Country != "IN" {
		t.Fatalf("2400:cb00::1: %+v, want IN", info)
	}
}

// writeTreeDB writes a country database of 400 random networks a family
// (many sharing a record, some nested in others) with mmdbwriter.
func writeTreeDB(t *testing.T, version, recordSize int, aliases bool) string {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Steer-Test-Country", IPVersion: version, RecordSize: recordSize,
		IncludeReservedNetworks: true, DisableIPv4Aliasing: !aliases, BuildEpoch: 1767225600})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(version), uint64(recordSize)))
	countries := []string{"IN", "DE", "US", "BR", "JP", "FR", "ZA", "AU"}
	rec := func() mmdbtype.Map {
		c := countries[rng.IntN(len(countries))]
		return mmdbtype.Map{"country_code": mmdbtype.String(c)}
	}
	for range 400 {
		ip := make(net.IP, 4)
		for j := range ip {
			ip[j] = byte(rng.IntN(256))
		}
		bits := 8 + rng.IntN(25)
		if err := w.Insert(&net.IPNet{IP: ip.Mask(net.CIDRMask(bits, 32)), Mask: net.CIDRMask(bits, 32)}, rec()); err != nil {
			t.Fatal(err)
		}
		if version == 6 {
			ip6 := make(net.IP, 16)
			ip6[0] = 0x24 + byte(rng.IntN(8)) // outside the aliases (2001::/32, 2002::/16)
			for j := 1; j < 8; j++ {
				ip6[j] = byte(rng.IntN(256))
			}
			bits := 16 + rng.IntN(49)
			if err := w.Insert(&net.IPNet{IP: ip6.Mask(net.CIDRMask(bits, 128)), Mask: net.CIDRMask(bits, 128)}, rec()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return writeDB(t, w, fmt.Sprintf("v%d-%d.mmdb", version, recordSize))
}
