// Command querygen writes the benchmark's dnsperf input files and the
// answer-check sample, from a geo database:
//
//	static.txt    dnsperf text input: "static.example.com A"
//	steered.bin   dnsperf -B input: N wire-format queries for
//	              shop.example.com A, each with an EDNS Client Subnet option
//	              for a different IPv4 /24 (RFC 1035 §4.2.2 framing: a
//	              2-byte big-endian length, then the message)
//	sample.tsv    a stratified sample of those subnets with the answer the
//	              Larkbook benchmark policy gives them (for bench/check)
//	mix.txt       how many subnets of each class were drawn
//
// The policy (the same on every server in the benchmark):
//
//	country IN, LK, BD or NP -> Mumbai    203.0.113.10
//	continent EU             -> Frankfurt 198.51.100.20
//	continent NA or SA       -> Virginia  192.0.2.30
//	anything else, not found -> Virginia  192.0.2.30
//
// Subnets are drawn per class (Mumbai countries, EU, NA/SA, other
// continents, not in the database) from the database's IPv4 networks, only
// inside networks of /24 or wider, so every address of a drawn /24 has the
// same record and no server can disagree because of where it looks inside
// the /24. Countries come from the source database; continents from steer's
// country table (the table bench/geoconv writes into the GeoIP2-shaped
// copy). The database may be either layout.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"

	"github.com/steer-dns/steer/bench/internal/larkbook"
	"github.com/steer-dns/steer/internal/geo"
)

// Classes of client subnet, in the order they are reported.
var classes = []string{"south-asia", "eu", "americas", "other", "none"}

// share of each class in the steered query file, in percent.
var share = map[string]int{"south-asia": 20, "eu": 25, "americas": 25, "other": 25, "none": 5}

func classOf(found bool, country, continent string) string {
	switch {
	case !found || country == "":
		return "none"
	case larkbook.Expected(country, continent) == larkbook.Mumbai:
		return "south-asia"
	case continent == "EU":
		return "eu"
	case continent == "NA" || continent == "SA":
		return "americas"
	}
	return "other"
}

type record struct {
	CountryCode string `maxminddb:"country_code"` // flat layout
	Country     struct {
		ISOCode string `maxminddb:"iso_code"`
	} `maxminddb:"country"` // GeoIP2 layout
	Continent struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"continent"`
}

func (r record) codes() (country, continent string) {
	country = strings.ToUpper(r.CountryCode)
	if country == "" {
		country = strings.ToUpper(r.Country.ISOCode)
	}
	continent = strings.ToUpper(r.Continent.Code)
	if continent == "" {
		continent = geo.ContinentOf(country)
	}
	return country, continent
}

// span is a run of /24s: the first one and how many.
type span struct {
	first uint32 // network address >> 8
	n     uint32
	cc    string
	cont  string
}

// special IPv4 ranges never used as client subnets.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/3"),
}

func isSpecial(p netip.Prefix) bool {
	for _, s := range special {
		if s.Overlaps(p) {
			return true
		}
	}
	return false
}

func main() {
	dbPath := flag.String("db", "", "geo database (.mmdb, flat or GeoIP2 layout) (required)")
	outDir := flag.String("out", ".", "output directory")
	n := flag.Int("n", 200000, "distinct client /24s in steered.bin")
	sampleN := flag.Int("sample", 200, "subnets in sample.tsv (spread over the classes)")
	seed := flag.Uint64("seed", 1, "random seed (the same seed gives the same files)")
	flag.Parse()
	if *dbPath == "" {
		flag.Usage()
		os.Exit(2)
	}
	r, err := maxminddb.Open(*dbPath)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// Index every IPv4 network of /24 or wider by class, including the
	// networks with no data ("none").
	spans := map[string][]span{}
	total := map[string]uint64{}
	v4 := netip.MustParsePrefix("0.0.0.0/0")
	for res := range r.NetworksWithin(v4, maxminddb.IncludeNetworksWithoutData()) {
		if err := res.Err(); err != nil {
			log.Fatal(err)
		}
		p := res.Prefix()
		if !p.Addr().Is4() || p.Bits() > 24 || isSpecial(p) {
			continue
		}
		var rec record
		found := res.Found()
		if found {
			if err := res.Decode(&rec); err != nil {
				log.Fatalf("%s: %v", p, err)
			}
		}
		cc, cont := rec.codes()
		cl := classOf(found, cc, cont)
		s := span{first: binary.BigEndian.Uint32(p.Addr().AsSlice()) >> 8, n: 1 << (24 - p.Bits()), cc: cc, cont: cont}
		spans[cl] = append(spans[cl], s)
		total[cl] += uint64(s.n)
	}

	rng := rand.New(rand.NewPCG(*seed, 0x5eed))
	type subnet struct {
		p        netip.Prefix
		cc, cont string
		class    string
	}
	seen := map[uint32]bool{}
	var all []subnet
	byClass := map[string][]subnet{}
	for _, cl := range classes {
		want := *n * share[cl] / 100
		if cl == classes[len(classes)-1] {
			want = *n - len(all) // the rounding remainder goes to the last class
		}
		ss := spans[cl]
		if len(ss) == 0 || want <= 0 {
			continue
		}
		if uint64(want) > total[cl]/2 {
			log.Fatalf("class %s has only %d /24s, too few to draw %d distinct ones", cl, total[cl], want)
		}
		// cumulative /24 counts for size-weighted drawing
		cum := make([]uint64, len(ss))
		var acc uint64
		for i, s := range ss {
			acc += uint64(s.n)
			cum[i] = acc
		}
		for got := 0; got < want; {
			k := rng.Uint64N(acc)
			i := sort.Search(len(cum), func(i int) bool { return cum[i] > k })
			s := ss[i]
			prev := uint64(0)
			if i > 0 {
				prev = cum[i-1]
			}
			idx := s.first + uint32(k-prev)
			if seen[idx] {
				continue
			}
			seen[idx] = true
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], idx<<8)
			sn := subnet{p: netip.PrefixFrom(netip.AddrFrom4(a), 24), cc: s.cc, cont: s.cont, class: cl}
			all = append(all, sn)
			byClass[cl] = append(byClass[cl], sn)
			got++
		}
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		log.Fatal(err)
	}
	must(os.WriteFile(filepath.Join(*outDir, "static.txt"), []byte("static.example.com A\n"), 0o644))

	// steered.bin
	f, err := os.Create(filepath.Join(*outDir, "steered.bin"))
	if err != nil {
		log.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	for i, s := range all {
		wire, err := larkbook.Query("shop.example.com.", s.p, uint16(i))
		if err != nil {
			log.Fatal(err)
		}
		var l [2]byte
		binary.BigEndian.PutUint16(l[:], uint16(len(wire)))
		bw.Write(l[:])
		bw.Write(wire)
	}
	must(bw.Flush())
	must(f.Close())

	// sample.tsv: round-robin over the classes, so every class is checked.
	sf, err := os.Create(filepath.Join(*outDir, "sample.tsv"))
	if err != nil {
		log.Fatal(err)
	}
	sw := bufio.NewWriter(sf)
	fmt.Fprintln(sw, "# subnet\tcountry\tcontinent\tclass\texpected")
	written := 0
	for i := 0; written < *sampleN; i++ {
		progress := false
		for _, cl := range classes {
			if i < len(byClass[cl]) && written < *sampleN {
				s := byClass[cl][i]
				fmt.Fprintf(sw, "%s\t%s\t%s\t%s\t%s\n", s.p, dash(s.cc), dash(s.cont), s.class, larkbook.Expected(s.cc, s.cont))
				written++
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	must(sw.Flush())
	must(sf.Close())

	// mix.txt
	var mix strings.Builder
	for _, cl := range classes {
		fmt.Fprintf(&mix, "%s\t%d\t(%d /24s in the database's class)\n", cl, len(byClass[cl]), total[cl])
	}
	must(os.WriteFile(filepath.Join(*outDir, "mix.txt"), []byte(mix.String()), 0o644))
	fmt.Fprintf(os.Stderr, "querygen: %d steered queries, %d sample subnets in %s\n%s", len(all), written, *outDir, mix.String())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
