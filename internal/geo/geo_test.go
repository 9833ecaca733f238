package geo

import (
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// testdataGeo returns the absolute path of a file in the repository's
// testdata/geo directory (see its README for what the files hold).
func testdataGeo(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openTestDB(t testing.TB, name string) *Database {
	t.Helper()
	d, err := Open(testdataGeo(t, name))
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	return d
}

// writeMMDB builds a database with mmdbwriter from network -> record pairs
// and returns its path.
func writeMMDB(t testing.TB, dbType string, ipVersion int, records map[string]mmdbtype.Map) string {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType:            dbType,
		IPVersion:               ipVersion,
		RecordSize:              24,
		IncludeReservedNetworks: true, // the documentation ranges are reserved
		BuildEpoch:              1767225600,
	})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, rec := range records {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(n, rec); err != nil {
			t.Fatalf("insert %s: %v", cidr, err)
		}
	}
	return writeDB(t, w, strings.ToLower(dbType)+".mmdb")
}

// ipinfoLitePath writes a database in IPinfo Lite's layout.
func ipinfoLitePath(t testing.TB) string {
	rec := func(cc, country, cont, contName, asn, asName string) mmdbtype.Map {
		return mmdbtype.Map{
			"country_code":   mmdbtype.String(cc),
			"country":        mmdbtype.String(country),
			"continent_code": mmdbtype.String(cont),
			"continent":      mmdbtype.String(contName),
			"asn":            mmdbtype.String(asn),
			"as_name":        mmdbtype.String(asName),
			"as_domain":      mmdbtype.String("example.net"),
		}
	}
	return writeMMDB(t, "ipinfo lite.mmdb", 6, map[string]mmdbtype.Map{
		"192.0.2.0/28":    rec("IN", "India", "AS", "Asia", "AS64496", "LARKBOOK-TEST-IN-WEST"),
		"192.0.2.48/28":   rec("DE", "Germany", "EU", "Europe", "as64498", "LARKBOOK-TEST-DE"),
		"2001:db8:7::/48": rec("US", "United States", "NA", "North America", "AS64500", "LARKBOOK-TEST-US"),
		"198.51.100.0/24": rec("SG", "Singapore", "AS", "Asia", "", ""),
		"203.0.113.0/26":  rec("FR", "France", "EU", "Europe", "AS64999", "LARKBOOK-TEST-FR"),
	})
}

// flatCityPath writes a database in ip-location-db's city layout: float32
// coordinates and a subdivision name (not a code) in state1.
func flatCityPath(t testing.TB) string {
	rec := func(cc, state, city string, lat, lon float32) mmdbtype.Map {
		return mmdbtype.Map{
			"country_code": mmdbtype.String(cc),
			"state1":       mmdbtype.String(state),
			"city":         mmdbtype.String(city),
			"latitude":     mmdbtype.Float32(lat),
			"longitude":    mmdbtype.Float32(lon),
			"postcode":     mmdbtype.String(""),
			"timezone":     mmdbtype.String("Asia/Kolkata"),
		}
	}
	return writeMMDB(t, "dbip-city-ipv4", 6, map[string]mmdbtype.Map{
		"192.0.2.0/28":    rec("IN", "Maharashtra", "Pune", 18.5204, 73.8567),
		"192.0.2.32/28":   rec("IN", "Assam", "Guwahati", 26.1445, 91.7362),
		"2001:db8:1::/48": rec("IN", "Maharashtra", "Pune", 18.5204, 73.8567),
	})
}

func TestLayoutDetection(t *testing.T) {
	ipinfoCountry := writeMMDB(t, "ipinfo country.mmdb", 6, map[string]mmdbtype.Map{
		"192.0.2.0/24": {"country": mmdbtype.String("IN"), "continent": mmdbtype.String("AS"), "country_name": mmdbtype.String("India")},
	})
	tests := []struct {
		name string
		path string
		want Layout
		typ  string
	}{
		{"city", testdataGeo(t, "larkbook-city.mmdb"), LayoutGeoIP2, "Larkbook-Test-City"},
		{"asn", testdataGeo(t, "larkbook-asn.mmdb"), LayoutASN, "Larkbook-Test-ASN"},
		{"flat country", testdataGeo(t, "larkbook-country-flat.mmdb"), LayoutFlat, "Larkbook-Test-Country-Flat"},
		{"ipinfo lite", ipinfoLitePath(t), LayoutIPinfo, "ipinfo lite.mmdb"},
		{"flat city", flatCityPath(t), LayoutFlat, "dbip-city-ipv4"},
		{"ipinfo country", ipinfoCountry, LayoutIPinfoCountry, "ipinfo country.mmdb"},
		{"embedded", EmbeddedName, LayoutFlat, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Open(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if d.Layout != tt.want {
				t.Errorf("Layout = %v, want %v", d.Layout, tt.want)
			}
			if tt.typ != "" && d.Type != tt.typ {
				t.Errorf("Type = %q, want %q", d.Type, tt.typ)
			}
			if d.IPVersion != 6 {
				t.Errorf("IPVersion = %d, want 6", d.IPVersion)
			}
			if tt.path == EmbeddedName {
				if d.Name != EmbeddedName || !d.ModTime.IsZero() {
					t.Errorf("embedded: Name %q ModTime %v", d.Name, d.ModTime)
				}
			} else {
				if d.Name != tt.path {
					t.Errorf("Name = %q, want %q", d.Name, tt.path)
				}
				if d.ModTime.IsZero() {
					t.Error("ModTime is zero")
				}
				if d.Built.Unix() != 1767225600 {
					t.Errorf("Built = %v, want 2026-01-01", d.Built)
				}
			}
		})
	}
}

func TestLayoutString(t *testing.T) {
	want := map[Layout]string{
		LayoutGeoIP2: "geoip2", LayoutASN: "asn", LayoutFlat: "flat",
		LayoutIPinfo: "ipinfo", LayoutIPinfoCountry: "ipinfo-country", 0: "unknown", 99: "unknown",
	}
	for l, s := range want {
		if l.String() != s {
			t.Errorf("Layout(%d).String() = %q, want %q", int(l), l.String(), s)
		}
	}
}

func TestOpenRejectsUnusableDatabases(t *testing.T) {
	dir := t.TempDir()
	// Random bytes: no metadata section.
	rnd := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, 8192)
	for i := range junk {
		junk[i] = byte(rnd.Uint32())
	}
	junkPath := filepath.Join(dir, "junk.mmdb")
	if err := os.WriteFile(junkPath, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	// A real file cut short: the metadata at its end is gone.
	city, err := os.ReadFile(testdataGeo(t, "larkbook-city.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	cutPath := filepath.Join(dir, "cut.mmdb")
	if err := os.WriteFile(cutPath, city[:len(city)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	emptyPath := filepath.Join(dir, "empty.mmdb")
	if err := os.WriteFile(emptyPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{junkPath, cutPath, emptyPath, filepath.Join(dir, "missing.mmdb")} {
		d, err := Open(p)
		if err == nil {
			t.Errorf("Open(%s) = %v, want an error", filepath.Base(p), d)
			continue
		}
		if !strings.Contains(err.Error(), filepath.Base(p)) {
			t.Errorf("Open(%s): error %q does not name the file", filepath.Base(p), err)
		}
	}

	// A well-formed database whose records are in no known layout.
	unknown := writeMMDB(t, "odd", 6, map[string]mmdbtype.Map{
		"192.0.2.0/24": {"where": mmdbtype.String("somewhere")},
	})
	if _, err := Open(unknown); err == nil || !strings.Contains(err.Error(), "unknown record layout") {
		t.Errorf("Open(unknown layout) error = %v, want unknown record layout", err)
	}
	// A database with no records at all.
	none := writeMMDB(t, "none", 6, map[string]mmdbtype.Map{})
	if _, err := Open(none); err == nil || !strings.Contains(err.Error(), "no records") {
		t.Errorf("Open(no records) error = %v, want holds no records", err)
	}
}

type probe struct {
	addr  string
	want  Info // Networks ignored
	bits  int
	found []bool // per database of the set: whether it had a record
}

func checkProbe(t *testing.T, s *Set, p probe) {
	t.Helper()
	info, bits, err := s.Lookup(netip.MustParseAddr(p.addr))
	if err != nil {
		t.Fatalf("Lookup(%s): %v", p.addr, err)
	}
	got := info
	got.Networks = nil
	if got.Country != p.want.Country || got.Continent != p.want.Continent || got.Subdivision != p.want.Subdivision ||
		got.City != p.want.City || got.ASN != p.want.ASN || got.HasLocation != p.want.HasLocation || got.LocationIsCentroid != p.want.LocationIsCentroid ||
		math.Abs(got.Lat-p.want.Lat) > 1e-4 || math.Abs(got.Lon-p.want.Lon) > 1e-4 {
		t.Errorf("Lookup(%s) = %+v, want %+v", p.addr, got, p.want)
	}
	if bits != p.bits {
		t.Errorf("Lookup(%s) uniform prefix = %d, want %d", p.addr, bits, p.bits)
	}
	if len(info.Networks) != len(s.DBs) {
		t.Fatalf("Lookup(%s): %d networks for %d databases", p.addr, len(info.Networks), len(s.DBs))
	}
	for i, n := range info.Networks {
		if p.found != nil && n.IsValid() != p.found[i] {
			t.Errorf("Lookup(%s): database %d network %v, want found=%v", p.addr, i, n, p.found[i])
		}
		if n.IsValid() && (!n.Contains(netip.MustParseAddr(p.addr).Unmap()) || n.Bits() > bits) {
			t.Errorf("Lookup(%s): database %d network %v does not hold the address within /%d", p.addr, i, n, bits)
		}
	}
	ginfo, gbits, err := s.LookupInfo(netip.MustParseAddr(p.addr))
	if err != nil || gbits != bits || ginfo.Networks != nil {
		t.Errorf("LookupInfo(%s) = %+v, %d, %v; want no networks and prefix %d", p.addr, ginfo, gbits, err, bits)
	}
	ginfo.Networks = info.Networks
	if !equalInfo(ginfo, info) {
		t.Errorf("LookupInfo(%s) = %+v, Lookup = %+v", p.addr, ginfo, info)
	}
}

func equalInfo(a, b Info) bool {
	if a.Country != b.Country || a.Continent != b.Continent || a.Subdivision != b.Subdivision || a.City != b.City || a.ASN != b.ASN ||
		a.Lat != b.Lat || a.Lon != b.Lon || a.HasLocation != b.HasLocation || a.LocationIsCentroid != b.LocationIsCentroid ||
		len(a.Networks) != len(b.Networks) {
		return false
	}
	for i := range a.Networks {
		if a.Networks[i] != b.Networks[i] {
			return false
		}
	}
	return true
}

func larkbookSet(t testing.TB, names ...string) *Set {
	s := &Set{}
	for _, n := range names {
		s.DBs = append(s.DBs, openTestDB(t, "larkbook-"+n+".mmdb"))
	}
	return s
}

func TestLookupCityASN(t *testing.T) {
	s := larkbookSet(t, "city", "asn")
	in, _ := LookupCountry("IN")
	probes := []probe{
		{"192.0.2.5", Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Pune", ASN: 64496, Lat: 18.5204, Lon: 73.8567, HasLocation: true}, 28, []bool{true, true}},
		{"192.0.2.20", Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Mumbai", ASN: 64496, Lat: 19.0760, Lon: 72.8777, HasLocation: true}, 28, []bool{true, true}},
		// Guwahati: subdivision AS (Assam) next to continent AS (Asia).
		{"192.0.2.40", Info{Country: "IN", Continent: "AS", Subdivision: "IN-AS", City: "Guwahati", ASN: 64497, Lat: 26.1445, Lon: 91.7362, HasLocation: true}, 28, []bool{true, true}},
		{"192.0.2.50", Info{Country: "DE", Continent: "EU", Subdivision: "DE-BE", City: "Berlin", ASN: 64498, Lat: 52.52, Lon: 13.405, HasLocation: true}, 28, nil},
		{"192.0.2.85", Info{Country: "PT", Continent: "EU", Subdivision: "PT-11", City: "Lisbon", ASN: 64499, Lat: 38.7223, Lon: -9.1393, HasLocation: true}, 28, nil},
		{"192.0.2.150", Info{Country: "SG", Continent: "AS", City: "Singapore", ASN: 64502, Lat: 1.3521, Lon: 103.8198, HasLocation: true}, 28, nil},
		{"192.0.2.239", Info{Country: "JP", Continent: "AS", Subdivision: "JP-13", City: "Tokyo", ASN: 64506, Lat: 35.6762, Lon: 139.6503, HasLocation: true}, 28, nil},
		// Continent only: no country, no ASN, no location.
		{"203.0.113.64", Info{Continent: "EU"}, 26, []bool{true, false}},
		{"203.0.113.127", Info{Continent: "EU"}, 26, []bool{true, false}},
		// Country only: the centroid stands in for the location.
		{"198.51.100.5", Info{Country: "IN", Continent: "AS", ASN: 64507, Lat: in.Lat, Lon: in.Lon, HasLocation: true, LocationIsCentroid: true}, 26, []bool{true, true}},
		// Its more specific child is Pune.
		{"198.51.100.70", Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Pune", ASN: 64496, Lat: 18.5204, Lon: 73.8567, HasLocation: true}, 26, nil},
		// Coordinates but no subdivision.
		{"203.0.113.130", Info{Country: "US", Continent: "NA", ASN: 64510, Lat: 37.751, Lon: -97.822, HasLocation: true}, 26, nil},
		// Not found anywhere.
		{"192.0.2.241", Info{}, 28, []bool{false, false}},
		{"203.0.113.200", Info{}, 26, []bool{false, false}},
		{"10.1.2.3", Info{}, 7, []bool{false, false}},
		// IPv6.
		{"2001:db8:1::1", Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Pune", ASN: 64496, Lat: 18.5204, Lon: 73.8567, HasLocation: true}, 48, nil},
		{"2001:db8:2:ff::1", Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Mumbai", ASN: 64496, Lat: 19.0760, Lon: 72.8777, HasLocation: true}, 48, nil},
		{"2001:db8:3::1", Info{Country: "IN", Continent: "AS", Subdivision: "IN-AS", City: "Guwahati", ASN: 64497, Lat: 26.1445, Lon: 91.7362, HasLocation: true}, 48, nil},
		{"2001:db8:1aa::53", Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Mumbai", ASN: 64496, Lat: 19.0760, Lon: 72.8777, HasLocation: true}, 48, nil},
		{"2001:db8:ffff::1", Info{}, 33, []bool{false, false}}, // 2001:db8:8000::/33 holds nothing
		{"3fff:0:5::1", Info{Country: "DE", Continent: "EU", Subdivision: "DE-HE", City: "Frankfurt am Main", ASN: 64498, Lat: 50.1109, Lon: 8.6821, HasLocation: true}, 48, nil},
		// Real-looking rows.
		{"8.8.8.8", Info{Country: "US", Continent: "NA", Subdivision: "US-CA", City: "Mountain View", ASN: 15169, Lat: 37.3861, Lon: -122.0839, HasLocation: true}, 24, nil},
		{"1.1.1.1", Info{Country: "AU", Continent: "OC", Subdivision: "AU-NSW", City: "Sydney", ASN: 13335, Lat: -33.8688, Lon: 151.2093, HasLocation: true}, 24, nil},
		{"49.37.1.1", Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Mumbai", ASN: 55836, Lat: 19.0760, Lon: 72.8777, HasLocation: true}, 14, nil},
	}
	for _, p := range probes {
		t.Run(p.addr, func(t *testing.T) { checkProbe(t, s, p) })
	}
}

// TestLookupMapped: an IPv4-mapped IPv6 address answers like the IPv4
// address, in every database and in a set.
func TestLookupMapped(t *testing.T) {
	emb, err := OpenEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]*Set{
		"city+asn": larkbookSet(t, "city", "asn"),
		"flat":     larkbookSet(t, "country-flat"),
		"embedded": {DBs: []*Database{emb}},
	}
	for name, s := range sets {
		for _, a := range []string{"192.0.2.5", "192.0.2.40", "198.51.100.5", "192.0.2.241", "8.8.8.8", "203.0.113.70"} {
			v4 := netip.MustParseAddr(a)
			mapped := netip.AddrFrom16(v4.As16())
			if !mapped.Is4In6() {
				t.Fatal("not mapped")
			}
			i4, b4, err4 := s.Lookup(v4)
			i6, b6, err6 := s.Lookup(mapped)
			if err4 != nil || err6 != nil {
				t.Fatalf("%s: errors %v %v", name, err4, err6)
			}
			if !equalInfo(i4, i6) || b4 != b6 {
				t.Errorf("%s: Lookup(%s) = %+v /%d, Lookup(%s) = %+v /%d", name, v4, i4, b4, mapped, i6, b6)
			}
		}
	}
}

// TestUniformPrefix: the prefix length is that of the database network,
// and with several databases the longest of theirs.
func TestUniformPrefix(t *testing.T) {
	tests := []struct {
		dbs  []string
		addr string
		bits int
	}{
		{[]string{"city"}, "192.0.2.5", 28},
		{[]string{"asn"}, "192.0.2.5", 27}, // Pune and Mumbai share AS64496
		{[]string{"city", "asn"}, "192.0.2.5", 28},
		{[]string{"asn", "city"}, "192.0.2.5", 28},
		{[]string{"country-flat"}, "192.0.2.5", 27},
		{[]string{"country-flat"}, "198.51.100.5", 24}, // IN at the /24 and its /26 child
		{[]string{"city"}, "198.51.100.5", 26},
		{[]string{"country-flat", "asn"}, "198.51.100.5", 26},
		{[]string{"city"}, "2001:db8:2::1", 48},
		{[]string{"country-flat"}, "2001:db8:2::1", 47},
		{[]string{"country-flat", "city"}, "2001:db8:2::1", 48},
		{[]string{"city"}, "49.38.0.1", 14},
		{[]string{"city"}, "10.200.0.1", 7},
	}
	for _, tt := range tests {
		s := larkbookSet(t, tt.dbs...)
		_, bits, err := s.Lookup(netip.MustParseAddr(tt.addr))
		if err != nil {
			t.Fatal(err)
		}
		if bits != tt.bits {
			t.Errorf("%v Lookup(%s) prefix = %d, want %d", tt.dbs, tt.addr, bits, tt.bits)
		}
	}
}

// TestUniformPrefixHolds samples addresses and checks that every address in
// the reported prefix gets the same answer, and that the prefix one bit
// shorter holds an address with a different answer in some database.
func TestUniformPrefixHolds(t *testing.T) {
	s := larkbookSet(t, "city", "asn", "country-flat")
	rnd := rand.New(rand.NewPCG(7, 7))
	bases := []string{"192.0.2.0", "198.51.100.0", "203.0.113.0", "2001:db8::", "49.36.0.0", "8.8.8.0"}
	for i := 0; i < 400; i++ {
		base := netip.MustParseAddr(bases[rnd.IntN(len(bases))])
		addr := randomWithin(rnd, base, base.BitLen()-16)
		info, bits, err := s.Lookup(addr)
		if err != nil {
			t.Fatal(err)
		}
		pfx, _ := addr.Prefix(bits)
		for j := 0; j < 8; j++ {
			other := randomWithin(rnd, pfx.Addr(), bits)
			oinfo, obits, err := s.Lookup(other)
			if err != nil {
				t.Fatal(err)
			}
			if obits != bits || !sameAnswer(info, oinfo) {
				t.Fatalf("%s is in %s (from %s) but gets %+v /%d, not %+v /%d", other, pfx, addr, oinfo, obits, info, bits)
			}
		}
	}
}

func sameAnswer(a, b Info) bool {
	a.Networks, b.Networks = nil, nil
	return equalInfo(a, b)
}

// randomWithin returns a random address inside base/bits.
func randomWithin(rnd *rand.Rand, base netip.Addr, bits int) netip.Addr {
	b := base.AsSlice()
	for i := bits; i < len(b)*8; i++ {
		if rnd.IntN(2) == 1 {
			b[i/8] |= 0x80 >> (i % 8)
		} else {
			b[i/8] &^= 0x80 >> (i % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestFirstDatabaseWins: each field comes from the first database in the
// set that knows it.
func TestFirstDatabaseWins(t *testing.T) {
	in, _ := LookupCountry("IN")
	// The flat file has the country only; the city file adds subdivision,
	// city and coordinates behind it.
	checkProbe(t, larkbookSet(t, "country-flat", "city"), probe{"192.0.2.5",
		Info{Country: "IN", Continent: "AS", Subdivision: "IN-MH", City: "Pune", Lat: 18.5204, Lon: 73.8567, HasLocation: true}, 28, []bool{true, true}})
	// The flat file alone: continent from the country table, centroid.
	checkProbe(t, larkbookSet(t, "country-flat"), probe{"192.0.2.5",
		Info{Country: "IN", Continent: "AS", Lat: in.Lat, Lon: in.Lon, HasLocation: true, LocationIsCentroid: true}, 27, []bool{true}})
	// Continent only in the city file, missing from the flat one.
	checkProbe(t, larkbookSet(t, "country-flat", "city"), probe{"203.0.113.64", Info{Continent: "EU"}, 26, []bool{false, true}})
	// Generated layouts behind the city file.
	ipinfo, err := Open(ipinfoLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	flatCity, err := Open(flatCityPath(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &Set{DBs: []*Database{ipinfo}}
	checkProbe(t, s, probe{"192.0.2.5", Info{Country: "IN", Continent: "AS", ASN: 64496, Lat: in.Lat, Lon: in.Lon, HasLocation: true, LocationIsCentroid: true}, 28, []bool{true}})
	de, _ := LookupCountry("DE")
	checkProbe(t, s, probe{"192.0.2.49", Info{Country: "DE", Continent: "EU", ASN: 64498, Lat: de.Lat, Lon: de.Lon, HasLocation: true, LocationIsCentroid: true}, 28, nil})
	us, _ := LookupCountry("US")
	checkProbe(t, s, probe{"2001:db8:7::9", Info{Country: "US", Continent: "NA", ASN: 64500, Lat: us.Lat, Lon: us.Lon, HasLocation: true, LocationIsCentroid: true}, 48, nil})
	sg, _ := LookupCountry("SG")
	checkProbe(t, s, probe{"198.51.100.9", Info{Country: "SG", Continent: "AS", Lat: sg.Lat, Lon: sg.Lon, HasLocation: true, LocationIsCentroid: true}, 24, nil})

	// Two databases with an ASN: the first that knows one wins, field by
	// field (the larkbook files say DE, AS64508 for 203.0.113.0/26).
	asn := openTestDB(t, "larkbook-asn.mmdb")
	city := openTestDB(t, "larkbook-city.mmdb")
	fr, _ := LookupCountry("FR")
	checkProbe(t, &Set{DBs: []*Database{ipinfo, asn, city}}, probe{"203.0.113.5", Info{Country: "FR", Continent: "EU", ASN: 64999, Lat: fr.Lat, Lon: fr.Lon, HasLocation: true, LocationIsCentroid: true}, 26, []bool{true, true, true}})
	checkProbe(t, &Set{DBs: []*Database{asn, city, ipinfo}}, probe{"203.0.113.5", Info{Country: "DE", Continent: "EU", ASN: 64508, Lat: de.Lat, Lon: de.Lon, HasLocation: true, LocationIsCentroid: true}, 26, nil})
	// An empty asn field is no ASN: the next database's counts.
	checkProbe(t, &Set{DBs: []*Database{ipinfo, asn}}, probe{"198.51.100.9", Info{Country: "SG", Continent: "AS", ASN: 64507, Lat: sg.Lat, Lon: sg.Lon, HasLocation: true, LocationIsCentroid: true}, 26, nil})

	// float32 coordinates of the ip-location-db city layout.
	s = &Set{DBs: []*Database{flatCity, ipinfo}}
	checkProbe(t, s, probe{"192.0.2.33", Info{Country: "IN", Continent: "AS", ASN: 0, Lat: 26.1445, Lon: 91.7362, HasLocation: true}, 28, []bool{true, false}})
	checkProbe(t, s, probe{"192.0.2.3", Info{Country: "IN", Continent: "AS", ASN: 64496, Lat: 18.5204, Lon: 73.8567, HasLocation: true}, 28, []bool{true, true}})
	checkProbe(t, s, probe{"2001:db8:1:2::3", Info{Country: "IN", Continent: "AS", Lat: 18.5204, Lon: 73.8567, HasLocation: true}, 48, nil})
}

// TestIPv4OnlyDatabase: an IPv4 database knows nothing about IPv6 and does
// not narrow the IPv6 prefix.
func TestIPv4OnlyDatabase(t *testing.T) {
	p := writeMMDB(t, "v4-only", 4, map[string]mmdbtype.Map{
		"192.0.2.0/25": {"country_code": mmdbtype.String("JP")},
	})
	d, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if d.IPVersion != 4 || d.Layout != LayoutFlat {
		t.Fatalf("IPVersion %d Layout %v", d.IPVersion, d.Layout)
	}
	s := &Set{DBs: []*Database{d, openTestDB(t, "larkbook-city.mmdb")}}
	info, bits, err := s.Lookup(netip.MustParseAddr("2001:db8:4::1"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Country != "DE" || bits != 48 || info.Networks[0].IsValid() {
		t.Errorf("IPv6 lookup through an IPv4-only database: %+v /%d", info, bits)
	}
	info, bits, err = s.Lookup(netip.MustParseAddr("192.0.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Country != "JP" || info.Subdivision != "IN-MH" || bits != 28 {
		t.Errorf("IPv4 lookup: %+v /%d", info, bits)
	}
	_, bits, _ = (&Set{DBs: []*Database{d}}).Lookup(netip.MustParseAddr("192.0.2.3"))
	if bits != 25 {
		t.Errorf("IPv4-only database prefix = %d, want 25", bits)
	}
}

func TestOpenEmbedded(t *testing.T) {
	d, err := OpenEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != EmbeddedName || d.Layout == 0 {
		t.Fatalf("embedded: name %q layout %v", d.Name, d.Layout)
	}
	d2, err := Open(EmbeddedName)
	if err != nil || d2.Layout != d.Layout || d2.Type != d.Type {
		t.Fatalf("Open(embedded) = %+v, %v", d2, err)
	}
	s := &Set{DBs: []*Database{d}}
	us, _ := LookupCountry("US")
	for _, a := range []string{"8.8.8.8", "2001:4860:4860::8888"} {
		info, bits, err := s.Lookup(netip.MustParseAddr(a))
		if err != nil {
			t.Fatal(err)
		}
		if info.Country != "US" || info.Continent != "NA" || !info.HasLocation || !info.LocationIsCentroid || info.Lat != us.Lat {
			t.Errorf("embedded Lookup(%s) = %+v", a, info)
		}
		if bits < 8 || bits > netip.MustParseAddr(a).BitLen() {
			t.Errorf("embedded Lookup(%s) prefix %d", a, bits)
		}
	}
	// Documentation space is in no real database.
	info, _, err := s.Lookup(netip.MustParseAddr("192.0.2.5"))
	if err != nil || info.Country != "" || info.HasLocation {
		t.Errorf("embedded Lookup(192.0.2.5) = %+v, %v", info, err)
	}
	if !s.DBs[0].r.Lookup(netip.MustParseAddr("8.8.8.8")).Found() {
		t.Error("maxminddb Lookup(8.8.8.8) not found")
	}
	if sum := s.Summary(); !strings.Contains(sum, "embedded") || !strings.Contains(sum, d.Layout.String()) {
		t.Errorf("Summary = %q", sum)
	}
}

func TestRawLookupAndSummary(t *testing.T) {
	s := larkbookSet(t, "city", "asn")
	if !s.DBs[0].r.Lookup(netip.MustParseAddr("192.0.2.5")).Found() {
		t.Error("maxminddb Lookup(192.0.2.5) not found")
	}
	if s.DBs[0].r.Lookup(netip.MustParseAddr("192.0.2.241")).Found() {
		t.Error("maxminddb Lookup(192.0.2.241) found")
	}
	sum := s.Summary()
	for _, want := range []string{"larkbook-city.mmdb", "Larkbook-Test-City", "geoip2", "larkbook-asn.mmdb", "asn", "built 2026-01-01"} {
		if !strings.Contains(sum, want) {
			t.Errorf("Summary %q lacks %q", sum, want)
		}
	}
}

// TestLookupConcurrent runs lookups from several goroutines (the decode
// cache is shared); run with -race.
func TestLookupConcurrent(t *testing.T) {
	s := larkbookSet(t, "city", "asn")
	want, _, _ := s.Lookup(netip.MustParseAddr("192.0.2.40"))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 200; i++ {
				a := randomWithin(rnd, netip.MustParseAddr("192.0.2.0"), 24)
				if _, _, err := s.Lookup(a); err != nil {
					t.Error(err)
					return
				}
				got, _, _ := s.Lookup(netip.MustParseAddr("192.0.2.40"))
				if !equalInfo(got, want) {
					t.Errorf("concurrent Lookup = %+v, want %+v", got, want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// The embedded database's bytes are shared while a Database holds them
// and given back once none does: a reload that removes the last steered
// record frees them.
func TestEmbeddedFreedWhenUnused(t *testing.T) {
	d1, err := OpenEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := OpenEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	if d1.keep == nil || d1.keep != d2.keep || d1.Sum != d2.Sum {
		t.Fatal("two databases opened at once do not share the decompressed bytes")
	}
	sum := d1.Sum
	runtime.KeepAlive(d1)
	runtime.KeepAlive(d2)
	d1, d2 = nil, nil
	runtime.GC()
	if embeddedData.Value() != nil {
		t.Fatal("the embedded database is still held with no Database using it")
	}
	d3, err := OpenEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	if d3.Sum != sum {
		t.Fatalf("reopened: sum %x, was %x", d3.Sum, sum)
	}
	info, _, err := (&Set{DBs: []*Database{d3}}).Lookup(netip.MustParseAddr("8.8.8.8"))
	if err != nil || info.Country != "US" {
		t.Errorf("reopened database: Lookup(8.8.8.8) = %+v, %v", info, err)
	}
}

// writeDB writes the database w into a file name in a test directory and
// returns its path.
func writeDB(t testing.TB, w *mmdbwriter.Tree, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
