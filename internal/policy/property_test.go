package policy_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/policy"
)

// sinkRecord uses every kind of match and action.
const sinkRecord = `
  - name: sink.example.com
    pools:
      mumbai:    { address: 203.0.113.10, location: { lat: 19.08, lon: 72.88 } }
      singapore: { address: 203.0.113.11, location: { lat: 1.35, lon: 103.82 }, bias: 30 }
      frankfurt: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      virginia:  { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 }, bias: -20 }
      oregon:    { addresses: [192.0.2.40, "2001:db8::40"], location: { lat: 45.6, lon: -121.2 } }
      saopaulo:  { address: 192.0.2.50, location: { lat: -23.55, lon: -46.63 }, bias: 10 }
      sydney:    { addresses: [192.0.2.60, "2001:db8::60"], location: { lat: -33.87, lon: 151.21 } }
      noloc:     { address: 192.0.2.70 }
    rules:
      - match: { subdivision: [IN-AS] }
        pool: singapore
      - match: { asn: [64498, 3320], not: { subdivision: DE-HE } }
        failover: [frankfurt, virginia]
      - match: { cidr: [192.0.2.96/27, "2001:db8:8::/47"], continent: NA }
        pool: oregon
      - match: { cidr: [10.20.0.0/16, "2001:db8:ffff:1::/64", 198.51.100.128/25] }
        multivalue: 2
        pools: [mumbai, frankfurt, virginia, sydney]
      - match: { source: resolver, country: [SG, JP] }
        pool: singapore
      - match: { continent: [AS, OC], not: { country: [JP] } }
        by: geoproximity
        fallback: [singapore, sydney, mumbai]
      - match: { country: US, not: { cidr: 8.8.8.0/24 } }
        by: first
        fallback: [virginia, oregon]
      - match: { continent: [EU, AF], not: { asn: 64499 } }
        split: [{ pool: frankfurt, weight: 3 }, { pool: mumbai, weight: 1 }]
        sticky: client_subnet
      - match: { not: { continent: [EU, AS, NA, SA, OC, AF, AN] } }
        split: [{ pool: oregon, weight: 1 }, { pool: sydney, weight: 1 }, { pool: saopaulo, weight: 0 }]
      - default:
          by: geoproximity
          fallback: [noloc, virginia]
`

// TestPartitionMatchesReference: for 20,000 random clients (mostly inside
// the testdata networks) the compiled partition decides what a direct
// rule-by-rule evaluation of the configuration decides.
func TestPartitionMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dbs    []string
		record string
		n      int
	}{
		{"larkbook city+asn", []string{cityDB, asnDB}, larkbookRecord, 20000},
		{"sink city+asn", []string{cityDB, asnDB}, sinkRecord, 20000},
		{"sink asn+flat+city", []string{asnDB, flatDB, cityDB}, sinkRecord, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := configYAML(t, tc.dbs, tc.record)
			cfg, err := config.Parse(nil, "steer.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			table := mustBuild(t, yaml)
			r := table.Records[0]
			rf := newRef(t, cfg, 0, geoSetFor(t, tc.dbs...))
			if r.Enabled != rf.enabled() {
				t.Fatalf("enabled %b, reference %b", r.Enabled, rf.enabled())
			}
			rnd := rand.New(rand.NewPCG(11, uint64(len(tc.name))))
			rules := map[int]int{}
			for i := range tc.n {
				client := randomClient(rnd)
				bits := client.BitLen()
				if rnd.IntN(3) == 0 {
					// An ECS subnet.
					bits = []int{24, 28, 20}[rnd.IntN(3)]
					if client.Is6() {
						bits = []int{56, 48, 64}[rnd.IntN(3)]
					}
					p, _ := client.Prefix(bits)
					client = p.Addr()
				}
				if rnd.IntN(20) == 0 && client.Is4() {
					client = netip.AddrFrom16(client.As16()) // IPv4-mapped
					bits += 96
				}
				var resolver netip.Addr
				if rnd.IntN(4) != 0 {
					resolver = randomClient(rnd)
				}
				qtype := dns.TypeA
				if rnd.IntN(4) == 0 {
					qtype = dns.TypeAAAA
				}
				up := r.Enabled
				if i%2 == 1 {
					up &= rnd.Uint64()
				}
				q := &policy.Query{Client: client, ClientBits: bits, Resolver: resolver, Qtype: qtype, Up: up}
				d := r.Decide(q)
				want := rf.decide(t, client, resolver, qtype, up)
				if msg := rf.check(d, want); msg != "" {
					info := rf.info(t, client.Unmap())
					t.Fatalf("client %s/%d resolver %v qtype %s up %b (client %+v): %s\ndecision %+v\nreference %+v",
						client, bits, resolver, dns.TypeToString[qtype], up, info, msg, d, want)
				}
				if want.sticky && d.Scope < bits {
					t.Fatalf("client %s/%d: sticky decision with scope %d", client, bits, d.Scope)
				}
				rules[d.Rule]++
			}
			// Every rule should have decided something.
			for i := range r.Rules {
				if rules[i] == 0 {
					t.Errorf("rule %d never decided: %v", i+1, rules)
				}
			}
			t.Logf("decisions per rule: %v", rules)
		})
	}
}

// TestProximityMatchesDistance: the pool geoproximity picks is the nearest
// by policy.Distance with bias, for every located testdata client.
func TestProximityMatchesDistance(t *testing.T) {
	yaml := configYAML(t, []string{cityDB, asnDB}, `
  - name: near.example.com
    pools:
      mumbai:    { address: 203.0.113.10, location: { lat: 19.08, lon: 72.88 } }
      singapore: { address: 203.0.113.11, location: { lat: 1.35, lon: 103.82 }, bias: 40 }
      frankfurt: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 }, bias: -30 }
      virginia:  { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 } }
      oregon:    { address: 192.0.2.40, location: { lat: 45.6, lon: -121.2 }, bias: 25 }
      saopaulo:  { address: 192.0.2.50, location: { lat: -23.55, lon: -46.63 } }
      sydney:    { address: 192.0.2.60, location: { lat: -33.87, lon: 151.21 }, bias: 60 }
    rules:
      - default: { by: geoproximity }
`)
	r := mustBuild(t, yaml).Get("near.example.com.")
	set := geoSetFor(t, cityDB, asnDB)
	type pool struct {
		lat, lon float64
		bias     int
	}
	pools := []pool{{19.08, 72.88, 0}, {1.35, 103.82, 40}, {50.11, 8.68, -30}, {38.95, -77.45, 0}, {45.6, -121.2, 25}, {-23.55, -46.63, 0}, {-33.87, 151.21, 60}}
	rnd := rand.New(rand.NewPCG(12, 13))
	located := 0
	for range 5000 {
		a := randomClient(rnd)
		info, _, err := set.Lookup(a)
		if err != nil {
			t.Fatal(err)
		}
		if isUnrouted(a) {
			continue
		}
		d := r.Decide(&policy.Query{Client: a, ClientBits: a.BitLen(), Qtype: dns.TypeA, Up: r.Enabled})
		if !info.HasLocation {
			// No location and no fallback list: the first pool, not
			// "all down" while every pool is up.
			if d.AllDown || d.Pools != 1 || d.Rule != 0 {
				t.Fatalf("%s has no location: %+v", a, d)
			}
			continue
		}
		located++
		best, bestD := -1, 0.0
		for i, p := range pools {
			dist := policy.Distance(info.Lat, info.Lon, p.lat, p.lon) * (1 - float64(p.bias)/100)
			if best < 0 || dist < bestD {
				best, bestD = i, dist
			}
		}
		if d.Pools != 1<<best || d.Rule != 0 {
			t.Fatalf("%s at %.2f,%.2f: %s, nearest (biased) is %s", a, info.Lat, info.Lon, poolNames(r, d.Pools), r.Pools[best].Name)
		}
	}
	if located < 2500 {
		t.Errorf("only %d located clients", located)
	}
}

// TestDistance checks the haversine against known distances.
func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		lat1, lon1, lat2, lon2, km float64
	}{
		{0, 0, 0, 0, 0},
		{0, 0, 0, 180, 20015.1},
		{90, 0, -90, 0, 20015.1},
		{19.076, 72.8777, 50.1109, 8.6821, 6565},    // Mumbai-Frankfurt
		{51.5074, -0.1278, 40.7128, -74.0060, 5570}, // London-New York
		{1.3521, 103.8198, 19.076, 72.8777, 3910},   // Singapore-Mumbai
	} {
		got := policy.Distance(tt.lat1, tt.lon1, tt.lat2, tt.lon2)
		if got < tt.km*0.99-1 || got > tt.km*1.01+1 {
			t.Errorf("Distance(%v,%v,%v,%v) = %.0f km, want about %.0f", tt.lat1, tt.lon1, tt.lat2, tt.lon2, got, tt.km)
		}
		if back := policy.Distance(tt.lat2, tt.lon2, tt.lat1, tt.lon1); back-got > 1e-6 || got-back > 1e-6 {
			t.Errorf("Distance is not symmetric: %v %v", got, back)
		}
	}
}

// TestExplainAgreesWithDecide: the first rule ExplainRules says matches is
// the rule Decide used (every pool up), for client subnets of any length.
func TestExplainAgreesWithDecide(t *testing.T) {
	dbs := []string{cityDB, asnDB}
	set := geoSetFor(t, dbs...)
	r := mustBuild(t, configYAML(t, dbs, sinkRecord)).Get("sink.example.com.")
	rnd := rand.New(rand.NewPCG(41, 42))
	for i := range 5000 {
		client := randomClient(rnd)
		bits := client.BitLen()
		if i%2 == 0 {
			bits = []int{16, 20, 24}[rnd.IntN(3)]
			if client.Is6() {
				bits = []int{32, 48, 56}[rnd.IntN(3)]
			}
		}
		if i%3 == 0 {
			// Subnets of the cidr rules' networks and around them.
			client = randomWithin(rnd, netip.MustParsePrefix([]string{"10.20.0.0/15", "192.0.2.64/26", "198.51.100.0/24", "2001:db8:ffff::/63", "2001:db8:8::/46"}[rnd.IntN(5)]))
			bits = client.BitLen()/4 + rnd.IntN(client.BitLen()*3/4+1)
		}
		switch i % 20 {
		case 1: // 6to4 of the testdata networks: no geo data in the partition
			client = randomWithin(rnd, netip.MustParsePrefix("2002:c000:200::/40"))
			bits = 48
		case 2: // IPv4-mapped
			client = netip.AddrFrom16(randomClient(rnd).Unmap().As16())
			if client.Is4In6() {
				bits = 96 + 24
			}
		}
		p, _ := client.Prefix(bits)
		resolver := randomClient(rnd)
		if i%20 == 3 {
			resolver = netip.AddrFrom16(randomWithin(rnd, netip.MustParsePrefix("192.0.2.128/25")).As16())
		}
		q := &policy.Query{Client: p.Addr(), ClientBits: bits, Resolver: resolver, Qtype: dns.TypeA, Up: r.Enabled}
		d := r.Decide(q)
		info, _, _ := set.Lookup(q.Client)
		rinfo, _, _ := set.Lookup(resolver)
		traces := r.ExplainRules(&info, p, &rinfo, netip.PrefixFrom(resolver, resolver.BitLen()))
		first := -1
		for _, tr := range traces {
			if tr.Matched {
				first = tr.Rule - 1
				break
			}
		}
		if first != d.Rule {
			t.Fatalf("client %s resolver %s: Decide used rule %d, ExplainRules says rule %d matches first:\n%+v", p, resolver, d.Rule+1, first+1, traces)
		}
	}
}
