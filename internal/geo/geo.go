// Package geo owns IP geolocation: opening MaxMind DB (mmdb) files in the
// layouts operators bring (GeoIP2/GeoLite2 City and Country, GeoLite2 ASN,
// the flat ip-location-db country and city files, IPinfo Lite), detecting
// the layout once at load, the embedded default database, and the built-in
// country table (continents and centroids).
//
// Lookups here are for compiling policies and for explain; the query path
// never decodes a database record (see package policy).
//
// A Collector (metrics.go) exposes each loaded database's build time.
package geo

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/oschwald/maxminddb-golang/v2"
)

// Layout is the shape of a database's records.
type Layout int

// The record layouts steer reads.
const (
	// LayoutGeoIP2 is GeoIP2/GeoLite2 City or Country (and DB-IP's own
	// downloads): {continent:{code}, country:{iso_code}, subdivisions:[{iso_code}], city:{names:{en}}, location:{latitude,longitude}}.
	LayoutGeoIP2 Layout = iota + 1
	// LayoutASN is GeoLite2 ASN: {autonomous_system_number}.
	LayoutASN
	// LayoutFlat is ip-location-db: {country_code} and, in city files,
	// {latitude, longitude, state1 (a name, not a code)}.
	LayoutFlat
	// LayoutIPinfo is IPinfo Lite: {country_code, continent_code, asn: "AS15169"}.
	LayoutIPinfo
	// LayoutIPinfoCountry is IPinfo's older country.mmdb: {country, continent} as codes.
	LayoutIPinfoCountry
)

func (l Layout) String() string {
	switch l {
	case LayoutGeoIP2:
		return "geoip2"
	case LayoutASN:
		return "asn"
	case LayoutFlat:
		return "flat"
	case LayoutIPinfo:
		return "ipinfo"
	case LayoutIPinfoCountry:
		return "ipinfo-country"
	}
	return "unknown"
}

// EmbeddedName is how configurations name the embedded database.
const EmbeddedName = "embedded"

// Info is what the loaded databases say about an address.
type Info struct {
	Country     string // ISO 3166-1 alpha-2, "" when unknown
	Continent   string // AF AN AS EU NA OC SA, "" when unknown
	Subdivision string // ISO 3166-2 such as "IN-MH", "" when unknown
	City        string // the City database's English city name, "" when unknown
	ASN         uint32 // 0 when unknown
	Lat, Lon    float64
	// HasLocation is set when Lat/Lon are known; LocationIsCentroid when
	// they are the country's centroid because no database had coordinates.
	HasLocation        bool
	LocationIsCentroid bool
	// Networks holds, per database, the network the answer came from
	// (invalid when that database had no record).
	Networks []netip.Prefix
}

// Database is one opened mmdb file.
type Database struct {
	// Name is the path as configured, or "embedded".
	Name string
	// Layout is the detected record layout.
	Layout Layout
	// Type is the file's database_type metadata.
	Type string
	// Built is the file's build_epoch.
	Built time.Time
	// IPVersion is 4 or 6.
	IPVersion int
	// ModTime is the file's modification time when it was opened, Size
	// its size then and Sum the SHA-256 of the bytes read: a reload that
	// reads the same bytes reuses this database.
	ModTime time.Time
	Size    int64
	Sum     [sha256.Size]byte

	r    *maxminddb.Reader
	raw  []byte         // the bytes r reads (tree.go walks its search tree)
	keep *embeddedBytes // the embedded database's bytes, which r reads (nil: a file's)

	cacheMu sync.Mutex
	cache   map[uintptr]record // decoded records by data offset
}

// record is a decoded database record, in the union of all layouts.
type record struct {
	country, continent, subdivision string
	city                            string
	asn                             uint32
	lat, lon                        float64
	hasLoc                          bool
}

//go:embed embedded/iptoasn-country.mmdb.gz
var embeddedGz []byte

// The embedded database decompressed (about 5 MB) is kept only while a
// Database opened from it is in use: a node with no steered record never
// decompresses it, and one whose reload removed the last steered record
// gives it back. Databases opened while one is in use share its bytes.
var (
	embeddedMu   sync.Mutex
	embeddedData weak.Pointer[embeddedBytes]
	embeddedSum  [sha256.Size]byte // of the decompressed bytes, once known
	embeddedSeen bool
)

// embeddedBytes holds the decompressed database; each Database opened
// from it points here, which keeps it.
type embeddedBytes struct{ b []byte }

// OpenEmbedded opens the database compiled into the binary.
func OpenEmbedded() (*Database, error) {
	e, sum, err := embeddedDB()
	if err != nil {
		return nil, fmt.Errorf("embedded geo database: %w", err)
	}
	r, err := maxminddb.OpenBytes(e.b)
	if err != nil {
		return nil, fmt.Errorf("embedded geo database: %w", err)
	}
	d, err := newDatabase(EmbeddedName, r, time.Time{})
	if err != nil {
		return nil, err
	}
	d.Size, d.Sum, d.keep, d.raw = int64(len(e.b)), sum, e, e.b
	return d, nil
}

// embeddedDB returns the decompressed embedded database, decompressing
// it when no Database holds it now, and its SHA-256.
func embeddedDB() (*embeddedBytes, [sha256.Size]byte, error) {
	embeddedMu.Lock()
	defer embeddedMu.Unlock()
	if e := embeddedData.Value(); e != nil {
		return e, embeddedSum, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(embeddedGz))
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	// The gzip trailer's ISIZE is the data's length (mod 2^32): one
	// buffer of that size, not ReadAll's doubling copies.
	size := 0
	if n := len(embeddedGz); n >= 4 {
		size = int(binary.LittleEndian.Uint32(embeddedGz[n-4:]))
	}
	var b bytes.Buffer
	b.Grow(size + bytes.MinRead)
	if _, err := b.ReadFrom(zr); err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	e := &embeddedBytes{b: b.Bytes()}
	if !embeddedSeen {
		embeddedSum, embeddedSeen = sha256.Sum256(e.b), true
	}
	embeddedData = weak.Make(e)
	return e, embeddedSum, nil
}

// Open opens the mmdb file at path, reading it whole (so a later change of
// the file cannot affect a database in use) and detecting its layout.
func Open(path string) (*Database, error) {
	if path == EmbeddedName {
		return OpenEmbedded()
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := maxminddb.OpenBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a usable MaxMind DB: %w", path, err)
	}
	d, err := newDatabase(path, r, st.ModTime())
	if err != nil {
		return nil, err
	}
	d.Size, d.Sum, d.raw = int64(len(data)), sha256.Sum256(data), data
	return d, nil
}

func newDatabase(name string, r *maxminddb.Reader, mod time.Time) (*Database, error) {
	d := &Database{
		Name:      name,
		Type:      r.Metadata.DatabaseType,
		Built:     r.Metadata.BuildTime(),
		IPVersion: int(r.Metadata.IPVersion),
		ModTime:   mod,
		r:         r,
		cache:     map[uintptr]record{},
	}
	layout, err := detectLayout(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	d.Layout = layout
	return d, nil
}

// detectLayout decodes the first record with data and looks at its keys.
func detectLayout(r *maxminddb.Reader) (Layout, error) {
	for res := range r.Networks() {
		if err := res.Err(); err != nil {
			return 0, err
		}
		var m map[string]any
		if err := res.Decode(&m); err != nil {
			return 0, fmt.Errorf("cannot decode a record: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		if _, ok := m["autonomous_system_number"]; ok {
			return LayoutASN, nil
		}
		if _, ok := m["country"].(map[string]any); ok {
			return LayoutGeoIP2, nil
		}
		if _, ok := m["continent"].(map[string]any); ok {
			return LayoutGeoIP2, nil
		}
		if _, ok := m["country_code"].(string); ok {
			if _, ok := m["continent_code"]; ok {
				return LayoutIPinfo, nil
			}
			return LayoutFlat, nil
		}
		if _, ok := m["country"].(string); ok {
			return LayoutIPinfoCountry, nil
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		return 0, fmt.Errorf("unknown record layout (keys %s): expected GeoIP2/GeoLite2 City, Country or ASN, ip-location-db or IPinfo", strings.Join(keys, ", "))
	}
	return 0, errors.New("the database holds no records")
}

type geoip2Record struct {
	Continent struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"continent"`
	Country struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"`
	Subdivisions []struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"subdivisions"`
	City struct {
		Names struct {
			En string `maxminddb:"en"`
		} `maxminddb:"names"`
	} `maxminddb:"city"`
	Location struct {
		Latitude  *float64 `maxminddb:"latitude"`
		Longitude *float64 `maxminddb:"longitude"`
	} `maxminddb:"location"`
}

type flatRecord struct {
	CountryCode string   `maxminddb:"country_code"`
	Latitude    *float64 `maxminddb:"latitude"`
	Longitude   *float64 `maxminddb:"longitude"`
}

type ipinfoRecord struct {
	CountryCode   string `maxminddb:"country_code"`
	ContinentCode string `maxminddb:"continent_code"`
	ASN           string `maxminddb:"asn"`
}

type ipinfoCountryRecord struct {
	Country   string `maxminddb:"country"`
	Continent string `maxminddb:"continent"`
}

type asnRecord struct {
	ASN uint32 `maxminddb:"autonomous_system_number"`
}

// decode reads the record behind res in d's layout, caching by offset.
func (d *Database) decode(res maxminddb.Result) (record, error) {
	off := res.Offset()
	d.cacheMu.Lock()
	rec, ok := d.cache[off]
	d.cacheMu.Unlock()
	if ok {
		return rec, nil
	}
	switch d.Layout {
	case LayoutGeoIP2:
		var g geoip2Record
		if err := res.Decode(&g); err != nil {
			return rec, err
		}
		rec.country = strings.ToUpper(g.Country.ISOCode)
		rec.continent = strings.ToUpper(g.Continent.Code)
		if len(g.Subdivisions) > 0 && g.Subdivisions[0].ISOCode != "" && rec.country != "" {
			rec.subdivision = rec.country + "-" + strings.ToUpper(g.Subdivisions[0].ISOCode)
		}
		rec.city = g.City.Names.En
		if g.Location.Latitude != nil && g.Location.Longitude != nil {
			rec.lat, rec.lon, rec.hasLoc = *g.Location.Latitude, *g.Location.Longitude, true
		}
	case LayoutFlat:
		var f flatRecord
		if err := res.Decode(&f); err != nil {
			return rec, err
		}
		rec.country = strings.ToUpper(f.CountryCode)
		if f.Latitude != nil && f.Longitude != nil {
			rec.lat, rec.lon, rec.hasLoc = *f.Latitude, *f.Longitude, true
		}
	case LayoutIPinfo:
		var f ipinfoRecord
		if err := res.Decode(&f); err != nil {
			return rec, err
		}
		rec.country = strings.ToUpper(f.CountryCode)
		rec.continent = strings.ToUpper(f.ContinentCode)
		if n, err := strconv.ParseUint(strings.TrimPrefix(strings.ToUpper(f.ASN), "AS"), 10, 32); err == nil {
			rec.asn = uint32(n)
		}
	case LayoutIPinfoCountry:
		var f ipinfoCountryRecord
		if err := res.Decode(&f); err != nil {
			return rec, err
		}
		rec.country = strings.ToUpper(f.Country)
		rec.continent = strings.ToUpper(f.Continent)
	case LayoutASN:
		var a asnRecord
		if err := res.Decode(&a); err != nil {
			return rec, err
		}
		rec.asn = a.ASN
	}
	d.cacheMu.Lock()
	d.cache[off] = rec
	d.cacheMu.Unlock()
	return rec, nil
}

// lookup returns d's record for addr (already unmapped), whether there was
// one, and the length of the network it came from: the record is the same
// for every address in addr's /bits.
func (d *Database) lookup(addr netip.Addr) (rec record, found bool, bits int, err error) {
	if addr.Is6() && d.IPVersion == 4 {
		return rec, false, 0, nil // an IPv4-only database knows nothing of IPv6
	}
	res := d.r.Lookup(addr)
	if err := res.Err(); err != nil {
		return rec, false, 0, err
	}
	p := res.Prefix()
	bits = p.Bits()
	if addr.Is4() && d.IPVersion != 4 && !p.Addr().Is4() {
		// The search stopped above ::/96: all of IPv4 is one empty network.
		bits = 0
	}
	if bits < 0 {
		bits = 0
	}
	if !res.Found() {
		return rec, false, bits, nil
	}
	rec, err = d.decode(res)
	return rec, err == nil, bits, err
}

// Set is the databases a configuration loads, consulted together: for
// each field the first database (in configuration order) that knows it wins.
type Set struct {
	DBs []*Database
}

// Lookup returns what the databases know about addr and the widest prefix
// length around addr over which every database's answer is the same.
func (s *Set) Lookup(addr netip.Addr) (Info, int, error) {
	return s.lookup(addr, true)
}

// LookupInfo is Lookup without Info.Networks, for compiling.
func (s *Set) LookupInfo(addr netip.Addr) (Info, int, error) {
	return s.lookup(addr, false)
}

func (s *Set) lookup(addr netip.Addr, networks bool) (Info, int, error) {
	addr = addr.Unmap()
	var info Info
	uniform := 0
	if networks {
		info.Networks = make([]netip.Prefix, len(s.DBs))
	}
	for i, d := range s.DBs {
		rec, found, bits, err := d.lookup(addr)
		if err != nil {
			return info, 0, fmt.Errorf("%s: %w", d.Name, err)
		}
		uniform = max(uniform, bits)
		if !found {
			continue
		}
		if networks {
			info.Networks[i], _ = addr.Prefix(bits)
		}
		info.add(&rec)
	}
	info.finish()
	return info, uniform, nil
}

// add fills what info does not know yet from rec (the first database that
// knows a field wins).
func (info *Info) add(rec *record) {
	if info.Country == "" {
		info.Country = rec.country
	}
	if info.Continent == "" {
		info.Continent = rec.continent
	}
	if info.Subdivision == "" {
		info.Subdivision = rec.subdivision
	}
	if info.City == "" {
		info.City = rec.city
	}
	if info.ASN == 0 {
		info.ASN = rec.asn
	}
	if !info.HasLocation && rec.hasLoc {
		info.Lat, info.Lon, info.HasLocation = rec.lat, rec.lon, true
	}
}

// finish derives the continent from the country, and a location from the
// country's centroid, when no database gave them.
func (info *Info) finish() {
	if info.Continent == "" && info.Country != "" {
		info.Continent = ContinentOf(info.Country)
	}
	if !info.HasLocation && info.Country != "" {
		if c, ok := LookupCountry(info.Country); ok {
			info.Lat, info.Lon = c.Lat, c.Lon
			info.HasLocation, info.LocationIsCentroid = true, true
		}
	}
}

// Summary names the databases for logs and status.
func (s *Set) Summary() string {
	var parts []string
	for _, d := range s.DBs {
		built := "unknown build date"
		if !d.Built.IsZero() && d.Built.Unix() > 0 {
			built = "built " + d.Built.UTC().Format("2006-01-02")
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s, %s)", d.Name, d.Type, d.Layout, built))
	}
	return strings.Join(parts, "; ")
}
