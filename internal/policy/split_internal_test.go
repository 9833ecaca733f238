package policy

import (
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"

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
// CIDR and resolver matches; node twins) and the embedded database (a
// country policy of bench/scale.sh's shape, large enough for the tries'
// first-level tables).
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
		{"embedded", `records:
  - name: s0.example.com
    pools: { mumbai: { address: 203.0.113.1 }, frankfurt: { address: 198.51.100.1 }, virginia: { address: 192.0.2.1 } }
    rules:
      - match: { country: [IN, US] }
        pool: mumbai
      - match: { continent: EU }
        pool: frankfurt
      - default: { pool: virginia }
`, []string{geo.EmbeddedName}},
	} {
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
			t.Fatalf("%s: %v", tc.name, err)
		}
		part, err := set.Partition(unrouted, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range tab.Records {
			if r.nodeTwins {
				r.node = tab.nodeIn
			}
			if err := r.compile(set, part, compileNetip); err != nil {
				t.Fatalf("%s, %s: %v", tc.name, r.Name, err)
			}
			seq := r.partition
			for _, mode := range []compileMode{0, compileSplit} {
				if err := r.compile(set, part, mode); err != nil {
					t.Fatalf("%s, %s, mode %d: %v", tc.name, r.Name, mode, err)
				}
				if !reflect.DeepEqual(r.partition, seq) {
					t.Errorf("%s, %s: the compile in mode %d differs: stats %+v, outcomes %d, sequential over netip %+v, %d", tc.name, r.Name,
						mode, r.partition.Stats, len(r.partition.outcomes), seq.Stats, len(seq.outcomes))
				}
			}
			if tc.name == "city" && !r.nodeTwins {
				t.Errorf("%s: no node twins", r.Name)
			}
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
