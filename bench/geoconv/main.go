//go:build !(386 || arm || mips || mipsle)

// mmdbwriter v1.2.0 compares offsets with math.MaxUint32, which does not
// compile where int is 32 bits: this bench tool builds on 64-bit systems.

// Command geoconv rewrites steer's embedded geo database (ip-location-db's
// flat {country_code} layout) as a GeoIP2-Country-shaped database
// ({country: {iso_code}, continent: {code}}) with exactly the same networks,
// so that gdnsd's and Knot's geoip modules, which only read GeoIP2 paths,
// see the same data as steer.
//
// Continents come from steer's country table (geo.ContinentOf), the same
// table steer itself uses for a flat database. A country code the table does
// not know gets no continent key.
//
// Usage:
//
//	go run ./bench/geoconv -out /tmp/geo-country.mmdb [-in FILE.mmdb[.gz]]
//
// Without -in it reads internal/geo/embedded/iptoasn-country.mmdb.gz
// (found relative to the module root, i.e. the working directory or its
// parents).
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/oschwald/maxminddb-golang/v2"

	"github.com/steer-dns/steer/internal/geo"
)

// DatabaseType is written into the metadata. gdnsd treats any type without
// "City" as a Country-level database and warns unless the type contains
// "Country"; Knot does not look at it. It deliberately does not claim to be
// a MaxMind product.
const DatabaseType = "Steer-Bench-Country"

const embeddedRel = "internal/geo/embedded/iptoasn-country.mmdb.gz"

func main() {
	in := flag.String("in", "", "source database (.mmdb or .mmdb.gz, flat {country_code} layout); default: steer's embedded one")
	out := flag.String("out", "", "output GeoIP2-Country-shaped .mmdb (required)")
	flat := flag.String("flat-out", "", "also write the gunzipped source database here (optional)")
	flag.Parse()
	if *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if *in == "" {
		p, err := findEmbedded()
		if err != nil {
			log.Fatal(err)
		}
		*in = p
	}
	src, err := readMaybeGz(*in)
	if err != nil {
		log.Fatal(err)
	}
	if *flat != "" {
		if err := os.WriteFile(*flat, src, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	stats, err := convert(src, *out)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "geoconv: %s -> %s: %d networks (%d IPv4, %d IPv6), %d countries, %d without a known continent\n",
		*in, *out, stats.networks, stats.v4, stats.v6, len(stats.countries), stats.noContinent)
}

func findEmbedded() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, embeddedRel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find " + embeddedRel + " from the working directory; pass -in")
		}
		dir = parent
	}
}

func readMaybeGz(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	}
	return b, nil
}

type stats struct {
	networks, v4, v6 int
	noContinent      int
	countries        map[string]int
}

func convert(src []byte, out string) (stats, error) {
	st := stats{countries: map[string]int{}}
	r, err := maxminddb.OpenBytes(src)
	if err != nil {
		return st, err
	}
	w, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: DatabaseType,
		Description: map[string]string{
			"en": "steer benchmark: " + r.Metadata.DatabaseType + " rewritten with GeoIP2 Country paths (continents from steer's country table)",
		},
		Languages:  []string{"en"},
		IPVersion:  int(r.Metadata.IPVersion),
		RecordSize: 28,
		BuildEpoch: int64(r.Metadata.BuildEpoch),
		// Copy the source tree as it is: no ::ffff:0:0/96 or 2002::/16
		// aliases (the source has none; every server unmaps IPv4 itself),
		// and reserved ranges are allowed if the source has any.
		DisableIPv4Aliasing:     true,
		IncludeReservedNetworks: true,
	})
	if err != nil {
		return st, err
	}
	values := map[string]mmdbtype.Map{}
	for res := range r.Networks() {
		if err := res.Err(); err != nil {
			return st, err
		}
		var rec struct {
			CountryCode string `maxminddb:"country_code"`
		}
		if err := res.Decode(&rec); err != nil {
			return st, fmt.Errorf("%s: %w", res.Prefix(), err)
		}
		cc := strings.ToUpper(rec.CountryCode)
		if cc == "" {
			continue // an empty record is the same as no record
		}
		v, ok := values[cc]
		if !ok {
			v = mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(cc)}}
			if cont := geo.ContinentOf(cc); cont != "" {
				v["continent"] = mmdbtype.Map{"code": mmdbtype.String(cont)}
			}
			values[cc] = v
		}
		if _, ok := v["continent"]; !ok {
			st.noContinent++
		}
		p := res.Prefix()
		ipn := &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		if err := w.Insert(ipn, v); err != nil {
			return st, fmt.Errorf("insert %s: %w", p, err)
		}
		st.networks++
		if p.Addr().Is4() {
			st.v4++
		} else {
			st.v6++
		}
		st.countries[cc]++
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return st, err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return st, err
	}
	if err := f.Close(); err != nil {
		return st, err
	}
	if err := verify(src, tmp); err != nil {
		return st, fmt.Errorf("verify: %w", err)
	}
	return st, os.Rename(tmp, out)
}

// verify checks, for the first and last address of every source network,
// that the output has the same country and the same network.
func verify(src []byte, out string) error {
	a, err := maxminddb.OpenBytes(src)
	if err != nil {
		return err
	}
	b, err := maxminddb.Open(out)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Verify(); err != nil {
		return err
	}
	var bad []string
	for res := range a.Networks() {
		var ra struct {
			CountryCode string `maxminddb:"country_code"`
		}
		if err := res.Decode(&ra); err != nil {
			return err
		}
		p := res.Prefix()
		for _, ip := range []netip.Addr{p.Addr(), lastAddr(p)} {
			rb := b.Lookup(ip)
			var g struct {
				Country struct {
					ISOCode string `maxminddb:"iso_code"`
				} `maxminddb:"country"`
				Continent struct {
					Code string `maxminddb:"code"`
				} `maxminddb:"continent"`
			}
			if err := rb.Decode(&g); err != nil {
				return err
			}
			want := strings.ToUpper(ra.CountryCode)
			if g.Country.ISOCode != want || g.Continent.Code != geo.ContinentOf(want) || (want != "" && rb.Prefix() != p) {
				bad = append(bad, fmt.Sprintf("%s: want %s/%s in %s, got %s/%s in %s", ip, want, geo.ContinentOf(want), p, g.Country.ISOCode, g.Continent.Code, rb.Prefix()))
			}
		}
		if len(bad) > 10 {
			break
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	s := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(s)*8; bit++ {
		s[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(s)
	return a
}
