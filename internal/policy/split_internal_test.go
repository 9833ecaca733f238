package policy

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/geo"
)

// A record compiled with its IPv4 and IPv6 tries built at once (split, as
// a one-policy start-up does), or one after the other, walking the
// partition over integers, has exactly the partition the walk over netip
// prefixes builds one family after the other: the same tries, the same
// outcomes at the same indexes, and what the resolver and unknown-client
// tries built after them add.
// Against the test City and ASN databases read from their trees (the
// demo record's country, continent, split and geoproximity rules; ASN,
// CIDR and resolver matches; node twins), and a written one whose IPv6
// trie has a first-level table.
func TestSplitCompileIsSequential(t *testing.T) {
	t.Parallel()
	asn := `
  - name: asn.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { asn: [64498, 3320] }
        pool: x
      - match: { country: [IN, DE] }
        pool: y
      - default: { pool: x }`
	records := "\n" + dnstest.LarkbookRecord() + `
  - name: cidr.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { cidr: [10.0.0.0/8, 2001:db8:1::/48] }
        pool: x
      - match: { continent: AS }
        pool: y
      - default: { pool: x }
  - name: resolver.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { source: resolver, country: SG }
        pool: x
      - match: { country: IN }
        pool: y
      - default: { pool: x }
`
	abs := func(name string) string {
		p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, yaml string
		dbs        []string
	}{
		{"city", "node: { name: fra-1, country: DE }\necs: { unknown_client: node }\nrecords:" + records, []string{abs("larkbook-city.mmdb")}},
		{"city+asn", "records:" + records + asn, []string{abs("larkbook-city.mmdb"), abs("larkbook-asn.mmdb")}},
		// IPv6 meets ZA first, IPv4 last, and a leaf of the IPv6 trie's
		// first-level table holds it: renumbered there too.
		{"written", `records:
  - name: w.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { country: IN }
        pool: x
      - match: { country: ZA }
        pool: y
      - match: { country: DE }
        pool: x
      - default: { pool: y }
`, []string{writeCountries(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := &geo.Set{}
			for _, p := range tc.dbs {
				d, err := geo.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				set.DBs = append(set.DBs, d)
			}
			cfg, err := config.Parse(nil, "steer.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			tab, _, err := Build(cfg, set)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tab.Records {
				if r.nodeTwins {
					r.node = tab.nodeIn
				} else if tc.name == "city" {
					t.Errorf("%s: no node twins", r.Name)
				}
				sameInEveryMode(t, r, set)
			}
		})
	}
}

// sameInEveryMode compiles r against set's partition in every mode and
// fails t unless each gives the partition the netip walk gives.
func sameInEveryMode(t *testing.T, r *Record, set *geo.Set) {
	t.Helper()
	part, err := set.Partition(unrouted, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.compile(set, part, compileNetip); err != nil {
		t.Fatalf("%s: %v", r.Name, err)
	}
	seq := r.partition
	for _, mode := range []compileMode{0, compileSplit} {
		if err := r.compile(set, part, mode); err != nil {
			t.Fatalf("%s, mode %d: %v", r.Name, mode, err)
		}
		if !reflect.DeepEqual(r.partition, seq) {
			t.Errorf("%s: the compile in mode %d differs: stats %+v, outcomes %d, sequential over netip %+v, %d", r.Name,
				mode, r.partition.Stats, len(r.partition.outcomes), seq.Stats, len(seq.outcomes))
		}
	}
}

// unrouted6 (the integer walk's) says what unrouted says, at and around
// the unrouted prefixes' boundaries and at random prefixes.
func TestUnrouted6(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(6, 6))
	check := func(p netip.Prefix) {
		b := p.Addr().As16()
		var hi, lo uint64
		for i := range 8 {
			hi, lo = hi<<8|uint64(b[i]), lo<<8|uint64(b[8+i])
		}
		if got, want := unrouted6(hi, lo, p.Bits()), unrouted(p); got != want {
			t.Fatalf("%s: unrouted6 %v, unrouted %v", p, got, want)
		}
	}
	for _, u := range unroutedV6 {
		for bits := 0; bits <= 128; bits++ {
			check(netip.PrefixFrom(u.Addr(), bits).Masked())
			last := netip.PrefixFrom(u.Addr(), u.Bits()).Masked()
			hiAddr := last.Addr().As16()
			for i := u.Bits(); i < 128; i++ {
				hiAddr[i/8] |= 0x80 >> (i % 8)
			}
			check(netip.PrefixFrom(netip.AddrFrom16(hiAddr), bits).Masked())
			check(netip.PrefixFrom(netip.AddrFrom16(hiAddr).Next(), bits).Masked())
		}
	}
	for range 20000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		if rng.IntN(2) == 0 {
			copy(b[:], unroutedV6[rng.IntN(len(unroutedV6))].Addr().AsSlice()[:2+rng.IntN(12)])
		}
		check(netip.PrefixFrom(netip.AddrFrom16(b), rng.IntN(129)).Masked())
	}
}

// writeCountries writes a country database with mmdbwriter: IN, DE and ZA
// in that order in IPv4, ZA over 2400::/12, then 400 IPv6 /48s
// of IN and DE (more than the nodes above which a trie gets a first-level
// table).
func writeCountries(t *testing.T) string {
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Steer-Test-Country", IPVersion: 6, RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(cidr, cc string) {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(n, mmdbtype.Map{"country_code": mmdbtype.String(cc)}); err != nil {
			t.Fatal(err)
		}
	}
	insert("1.0.0.0/8", "IN")
	insert("2.0.0.0/8", "DE")
	insert("3.0.0.0/8", "ZA")
	insert("2400::/12", "ZA")
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 400 {
		insert(fmt.Sprintf("2600:%x:%x::/48", rng.IntN(1<<16), rng.IntN(1<<16)), []string{"IN", "DE"}[i%2])
	}
	path := filepath.Join(t.TempDir(), "countries.mmdb")
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
