//go:build !(386 || arm || mips || mipsle)

// mmdbwriter v1.2.0 compares offsets with math.MaxUint32, which does not
// compile where int is 32 bits: this bench tool builds on 64-bit systems.

// Command citygen writes a synthetic GeoIP2-City-shaped MaxMind DB with
// millions of networks, for measuring start-up and reloads at the size of
// a commercial City database (bench/scale.sh --db). Every assignment is
// made up: cities are points scattered around real country centroids
// (steer's country table), grouped in runs of neighbouring networks.
//
//	citygen -out city.mmdb [-v4 2500000] [-v6 500000] [-cities 20000] [-seed 1]
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/steer-dns/steer/internal/geo"
)

// reserved reports IPv4 space mmdbwriter keeps out of a database (private,
// loopback, link-local, benchmarking, documentation, multicast and above).
func reserved(ip uint32) bool {
	for _, r := range [][2]uint32{
		{10 << 24, 8}, {100<<24 | 64<<16, 10}, {127 << 24, 8}, {169<<24 | 254<<16, 16}, {172<<24 | 16<<16, 12},
		{192 << 24, 24}, {192<<24 | 2<<8, 24}, {192<<24 | 88<<16 | 99<<8, 24}, {192<<24 | 168<<16, 16},
		{198<<24 | 18<<16, 15}, {198<<24 | 51<<16 | 100<<8, 24}, {203<<24 | 113<<8, 24}, {224 << 24, 3}, {0, 8},
	} {
		if ip>>(32-r[1]) == r[0]>>(32-r[1]) {
			return true
		}
	}
	return false
}

func main() {
	out := flag.String("out", "", "output .mmdb (required)")
	n4 := flag.Int("v4", 2_500_000, "IPv4 networks (/24s)")
	n6 := flag.Int("v6", 500_000, "IPv6 networks (/48s)")
	ncity := flag.Int("cities", 20_000, "distinct cities")
	seed := flag.Uint64("seed", 1, "random seed (the same seed gives the same file)")
	flag.Parse()
	if *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(*seed, 7))
	codes := []string{"US", "DE", "FR", "GB", "IN", "JP", "CN", "BR", "CA", "AU", "IT", "ES", "NL", "SE", "PL",
		"RU", "MX", "AR", "ZA", "NG", "EG", "KE", "SG", "ID", "KR", "TR", "SA", "AE", "LK", "BD", "NP", "VN", "TH", "PH", "CL", "CO"}
	type city struct{ rec mmdbtype.Map }
	cities := make([]city, *ncity)
	for i := range cities {
		cc := codes[rng.IntN(len(codes))]
		c, ok := geo.LookupCountry(cc)
		if !ok {
			fmt.Fprintln(os.Stderr, "citygen: no country", cc)
			os.Exit(1)
		}
		cont := geo.ContinentOf(cc)
		cities[i].rec = mmdbtype.Map{
			"continent":    mmdbtype.Map{"code": mmdbtype.String(cont)},
			"country":      mmdbtype.Map{"iso_code": mmdbtype.String(cc)},
			"subdivisions": mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String(fmt.Sprintf("%s-%d", cc, 1+rng.IntN(30)))}},
			"city":         mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(fmt.Sprintf("City %d", i))}},
			"location": mmdbtype.Map{
				"latitude":  mmdbtype.Float64(c.Lat + rng.Float64()*6 - 3),
				"longitude": mmdbtype.Float64(c.Lon + rng.Float64()*6 - 3),
			},
		}
	}
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Steer-Bench-City", IPVersion: 6, RecordSize: 28,
		Description: map[string]string{"en": "synthetic City-shaped data for steer's benchmarks; every assignment is made up"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "citygen:", err)
		os.Exit(1)
	}
	cur, run := 0, 0
	next := func() mmdbtype.Map {
		if run == 0 {
			cur, run = rng.IntN(len(cities)), 1+rng.IntN(8)
		}
		run--
		return cities[cur].rec
	}
	// IPv4 /24s from 1.0.0.0 up, skipping a /24 now and then so the tree
	// has gaps as real data does.
	ip := uint32(1 << 24)
	for i := 0; i < *n4; ip += 256 {
		if rng.IntN(10) == 0 {
			continue
		}
		if reserved(ip) {
			continue
		}
		n := &net.IPNet{IP: net.IPv4(byte(ip>>24), byte(ip>>16), byte(ip>>8), 0).To4(), Mask: net.CIDRMask(24, 32)}
		if err := w.Insert(n, next()); err != nil {
			fmt.Fprintln(os.Stderr, "citygen:", err)
			os.Exit(1)
		}
		i++
	}
	// The harness's check subnet is Indian, as in the embedded database.
	in := mmdbtype.Map{"continent": mmdbtype.Map{"code": mmdbtype.String("AS")}, "country": mmdbtype.Map{"iso_code": mmdbtype.String("IN")},
		"location": mmdbtype.Map{"latitude": mmdbtype.Float64(19.08), "longitude": mmdbtype.Float64(72.88)}}
	if err := w.Insert(&net.IPNet{IP: net.IPv4(49, 36, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}, in); err != nil {
		fmt.Fprintln(os.Stderr, "citygen:", err)
		os.Exit(1)
	}
	for i := 0; i < *n6; i++ {
		b := make(net.IP, 16)
		b[0], b[1] = 0x24, byte(i>>24)
		b[2], b[3], b[4], b[5] = byte(i>>16), byte(i>>8), byte(i), 0
		if err := w.Insert(&net.IPNet{IP: b, Mask: net.CIDRMask(48, 128)}, next()); err != nil {
			fmt.Fprintln(os.Stderr, "citygen:", err)
			os.Exit(1)
		}
	}
	f, err := os.Create(*out)
	if err == nil {
		_, err = w.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "citygen:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "citygen: %s: %d IPv4 and %d IPv6 networks, %d cities\n", *out, *n4, *n6, *ncity)
}
