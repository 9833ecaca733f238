//go:build !race

package node

import (
	"bytes"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/steer-dns/steer/internal/geo"
)

// A synthetic population for real-user measurement tests: networks in
// countries, three sites, RTTs from a known model, and a geo database
// that places some networks in the wrong country.

// rumSite is one site of the model (a pool of the steered record).
type rumSite struct {
	name     string
	addr     string
	lat, lon float64
}

var rumSites = []rumSite{
	{"fra", "198.51.100.1", 50.11, 8.68},
	{"iad", "198.51.100.2", 38.95, -77.45},
	{"sin", "198.51.100.3", 1.35, 103.82},
}

// rumCity is where a country's networks are.
type rumCity struct{ lat, lon float64 }

type rumCountry struct {
	code, continent string
	networks        int
	cities          [3]rumCity
}

// rumCountries are ten countries on four continents, 1,000 networks.
// Users in AF are about as far from fra as from sin (Kabul 5,115 and
// 5,144 km): their networks are the near ties.
var rumCountries = []rumCountry{
	{"DE", "EU", 110, [3]rumCity{{52.52, 13.40}, {48.14, 11.58}, {53.55, 9.99}}},
	{"FR", "EU", 110, [3]rumCity{{48.86, 2.35}, {45.76, 4.84}, {43.30, 5.37}}},
	{"PL", "EU", 105, [3]rumCity{{52.23, 21.01}, {50.06, 19.94}, {54.35, 18.65}}},
	{"NL", "EU", 105, [3]rumCity{{52.37, 4.90}, {51.92, 4.48}, {53.22, 6.57}}},
	{"US", "NA", 115, [3]rumCity{{40.71, -74.01}, {41.88, -87.63}, {32.78, -96.80}}},
	{"CA", "NA", 105, [3]rumCity{{43.65, -79.38}, {45.50, -73.57}, {49.28, -123.12}}},
	{"BR", "SA", 105, [3]rumCity{{-23.55, -46.63}, {-22.91, -43.17}, {-15.79, -47.88}}},
	{"IN", "AS", 110, [3]rumCity{{19.08, 72.88}, {28.61, 77.21}, {12.97, 77.59}}},
	{"JP", "AS", 95, [3]rumCity{{35.68, 139.69}, {34.69, 135.50}, {43.06, 141.35}}},
	{"AF", "AS", 40, [3]rumCity{{34.53, 69.17}, {31.61, 65.71}, {34.43, 70.45}}},
}

// The VPN egresses: a mislocated network is placed by the database at
// one of these (country index, city), always on another continent than
// its users.
var rumEgress = []struct{ country, city int }{{3, 0}, {4, 0}} // NL Amsterdam, US New York

// rumNet is one client network of the population.
type rumNet struct {
	block      netip.Prefix // a /24
	country    int          // where its users are
	city       int
	geoCountry int // where the database places it
	geoCity    int
	mislocated bool
	rtt        [3]float64 // the model's median RTT to each site, ms
}

// best returns the model's best site and its margin over the second:
// second/best - 1.
func (n *rumNet) best() (int, float64) {
	order := []int{0, 1, 2}
	slices.SortFunc(order, func(a, b int) int { return cmpFloat(n.rtt[a], n.rtt[b]) })
	return order[0], n.rtt[order[1]]/n.rtt[order[0]] - 1
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rumPopulation is the networks, in address order.
type rumPopulation struct {
	nets  []rumNet
	index map[netip.Prefix]int
}

// The RTT model: the great-circle distance at 100 km per ms of RTT
// (light in fibre, 200 km/ms, there and back), 3 ms of equipment, times
// a path inflation per (network, site) of 1 + |N(0, rumInflation)|, plus
// a last mile per network of 2 to 20 ms. Beacons scatter around that
// median log-normally (sigma rumNoise).
const (
	rumKmPerMs   = 100
	rumInflation = 0.06
	rumNoise     = 0.10
)

// newRUMPopulation makes each country's networks, 10.C.N.0/24 (C =
// country index + 1), a third in each of its cities, and places
// mislocated of them (chosen at random) at a VPN egress.
func newRUMPopulation(seed uint64, mislocated int) *rumPopulation {
	rnd := rand.New(rand.NewPCG(seed, seed^0x5eed))
	pop := &rumPopulation{index: map[netip.Prefix]int{}}
	for c := range rumCountries {
		perCountry := rumCountries[c].networks
		for i := range perCountry {
			city := i * 3 / perCountry
			n := rumNet{block: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(c + 1), byte(i), 0}), 24),
				country: c, city: city, geoCountry: c, geoCity: city}
			ct := rumCountries[c].cities[city]
			lastMile := 2 + 18*rnd.Float64()
			for s, site := range rumSites {
				d := geo.Distance(ct.lat, ct.lon, site.lat, site.lon)
				n.rtt[s] = (d/rumKmPerMs+3)*(1+math.Abs(rumInflation*rnd.NormFloat64())) + lastMile
			}
			pop.index[n.block] = len(pop.nets)
			pop.nets = append(pop.nets, n)
		}
	}
	for _, i := range rnd.Perm(len(pop.nets))[:mislocated] {
		n := &pop.nets[i]
		var cands []int
		for e, eg := range rumEgress {
			if rumCountries[eg.country].continent != rumCountries[n.country].continent {
				cands = append(cands, e)
			}
		}
		eg := rumEgress[cands[rnd.IntN(len(cands))]]
		n.geoCountry, n.geoCity, n.mislocated = eg.country, eg.city, true
	}
	return pop
}

// beacon draws one RTT of n to site s.
func (n *rumNet) beacon(rnd *rand.Rand, s int) float64 {
	return n.rtt[s] * math.Exp(rumNoise*rnd.NormFloat64())
}

// writeMMDB writes a GeoIP2-City-shaped database placing each network
// where the population says the database places it, with mmdbwriter as
// the repository's other test databases are built.
func (pop *rumPopulation) writeMMDB(t testing.TB, path string) {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Steer-Test-RUM-City", IPVersion: 6, RecordSize: 24,
		IncludeReservedNetworks: true, Description: map[string]string{"en": "synthetic RUM population"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range pop.nets {
		c := rumCountries[n.geoCountry]
		ct := c.cities[n.geoCity]
		rec := mmdbtype.Map{
			"continent": mmdbtype.Map{"code": mmdbtype.String(c.continent)},
			"country":   mmdbtype.Map{"iso_code": mmdbtype.String(c.code)},
			"location":  mmdbtype.Map{"latitude": mmdbtype.Float64(ct.lat), "longitude": mmdbtype.Float64(ct.lon)},
		}
		_, ipn, _ := net.ParseCIDR(n.block.String())
		if err := w.Insert(ipn, rec); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// geoChoice is the site geography alone picks for n: the nearest to
// where the database places it (the latency map's estimate).
func (n *rumNet) geoChoice() int {
	ct := rumCountries[n.geoCountry].cities[n.geoCity]
	best, bestD := 0, math.Inf(1)
	for s, site := range rumSites {
		if d := geo.Distance(ct.lat, ct.lon, site.lat, site.lon); d < bestD {
			best, bestD = s, d
		}
	}
	return best
}
