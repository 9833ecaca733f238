package steeringtest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/policy"
)

// larkbookNested says what the Larkbook record says, through groups: each
// rule names a group, the default ranks groups (which take their first
// member's location). It must answer every client as the flat record
// does, with the same scopes.
const larkbookNested = `  - name: nested.example.com
    type: A
    ttl: 60
    pools:
      ap-south:       { address: 203.0.113.10,  location: { lat: 19.08, lon: 72.88 } }
      eu-central:     { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      us-east:        { address: 192.0.2.30,    location: { lat: 38.95, lon: -77.45 } }
      us-east-canary: { address: 192.0.2.31,    location: { lat: 38.95, lon: -77.45 } }
    groups:
      south:  { failover: [ap-south] }
      europe: { pool: eu-central }
      canary: { split: [{ pool: us-east, weight: 95 }, { pool: us-east-canary, weight: 5 }] }
    rules:
      - match: { country: [IN, LK, BD, NP] }
        pool: south
      - match: { continent: EU }
        pool: europe
      - match: { continent: [NA, SA] }
        pool: canary
      - default:
          by: geoproximity
          fallback: [south, europe, us-east]
    on_unhealthy: next_rule
`

// TestNestedSeedCases runs the seed's cases against the nested record:
// the same answers and the same ECS scopes as the flat one, over the
// wire and through kdig.
func TestNestedSeedCases(t *testing.T) {
	srv := start(t, cfgOpts{extra: larkbookNested})
	resolver := startUnbound(t, srv)
	const nested = "nested.example.com."
	for _, c := range seedCases {
		sent := netip.MustParsePrefix(c.subnet)
		qtype := uint16(dns.TypeA)
		if sent.Addr().Is6() {
			qtype = dns.TypeA // the pools are IPv4: an IPv6 client asks A too
		}
		flat, _ := exchangeRaw(t, srv.V4, ecsQuery(shop, qtype, c.subnet))
		tree, pkt := exchangeRaw(t, srv.V4, ecsQuery(nested, qtype, c.subnet))
		fa, na := addrs(flat, shop), addrs(tree, nested)
		if len(na) != 1 || !contains(c.want, na[0]) || len(fa) != 1 {
			t.Errorf("%s: nested answers %v, flat %v, want one of %v", c.city, na, fa, c.want)
		}
		fs, ns := scopeOf(flat), scopeOf(tree)
		if fs != ns {
			t.Errorf("%s: nested scope %d, flat %d", c.city, ns, fs)
		}
		if c.scope >= 0 {
			wantECSWire(t, pkt, sent, c.scope)
		}
		k := kdigA(t, srv.V4, nested, c.subnet)
		if want := c.subnet + "/" + itoa(fs); k.ecs != want {
			t.Errorf("%s: kdig CLIENT-SUBNET %q, want %q", c.city, k.ecs, want)
		}
	}
	// Through Unbound's subnet cache, twice each (the second from the
	// cache): the scopes keep each city's answer apart.
	for range 2 {
		for _, c := range seedCases {
			k := parseKdig(t, dnstest.Kdig(t, resolver, "+rec", nested, "A", "+subnet="+c.subnet))
			if len(k.answers) != 1 || !contains(c.want, k.answers[0].rdata) {
				t.Errorf("%s via Unbound: %+v, want one of %v", c.city, k.answers, c.want)
			}
		}
	}
}

func scopeOf(m *dns.Msg) int {
	if o := m.IsEdns0(); o != nil {
		for _, e := range o.Option {
			if s, ok := e.(*dns.EDNS0_SUBNET); ok {
				return int(s.SourceScope)
			}
		}
	}
	return -1
}

// treeRecord is issue 17's example tree, with a TTL of 1 s so that
// Unbound's cache lets each phase of the test through.
const treeRecord = `  - name: tree.example.com
    ttl: 1
    pools:
      bom-1:      { address: 203.0.113.10 }
      bom-2:      { address: 203.0.113.11 }
      fra:        { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      iad:        { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 } }
      iad-canary: { address: 192.0.2.31 }
    groups:
      mumbai:   { failover: [bom-1, bom-2], location: { lat: 19.08, lon: 72.88 } }
      virginia: { split: [{ pool: iad, weight: 95 }, { pool: iad-canary, weight: 5 }], sticky: client_subnet, site: iad }
    rules:
      - match: { continent: EU }
        pool: fra
      - default: { by: geoproximity, fallback: [mumbai, fra, virginia] }
`

// TestTreeLevels takes down leaves and whole branches of the tree, by
// health (targets down) and by operator overrides (pools drained), and
// checks the answer at every level, straight from steer with kdig and
// ECS, and through Unbound with its subnet cache in front.
func TestTreeLevels(t *testing.T) {
	t.Parallel() // 13 s of waiting out Unbound's copies: overlaps the other such test
	srv := start(t, cfgOpts{extra: treeRecord})
	resolver := startUnbound(t, srv)
	const tree = "tree.example.com."
	down := map[string]bool{}                   // target addresses failing their checks
	drained := map[string]policy.PoolOverride{} // pool overrides
	apply := func() {
		srv.Handler().Snapshot().Live.SetHealth(
			func(a netip.Addr, _ string) bool { return !down[a.String()] },
			func(record, pool string) policy.PoolOverride { return drained[pool] })
	}
	viaSteer := func(subnet string) string {
		t.Helper()
		k := kdigA(t, srv.V4, tree, subnet)
		if len(k.answers) != 1 {
			t.Fatalf("steer +subnet=%s: %+v\n%s", subnet, k.answers, k.raw)
		}
		return k.answers[0].rdata
	}
	viaUnbound := func(subnet string) string {
		t.Helper()
		k := parseKdig(t, dnstest.Kdig(t, resolver, "+rec", tree, "A", "+subnet="+subnet))
		if k.status != "NOERROR" || len(k.answers) != 1 {
			t.Fatalf("unbound +subnet=%s: %s %+v\n%s", subnet, k.status, k.answers, k.raw)
		}
		return k.answers[0].rdata
	}
	type probe struct {
		city, subnet string
		want         []string
	}
	phase := func(name string, probes ...probe) {
		t.Helper()
		apply()
		// The 1 s TTL of Unbound's copies: Unbound counts whole seconds, so
		// a copy may live until the second after next.
		time.Sleep(2100 * time.Millisecond)
		for _, p := range probes {
			if got := viaSteer(p.subnet); !contains(p.want, got) {
				t.Errorf("%s: %s via steer got %s, want %v", name, p.city, got, p.want)
			}
			if got := viaUnbound(p.subnet); !contains(p.want, got) {
				t.Errorf("%s: %s via Unbound got %s, want %v", name, p.city, got, p.want)
			}
		}
	}
	virginia := []string{"192.0.2.30", "192.0.2.31"}
	phase("all up",
		probe{"Pune", punePfx, []string{"203.0.113.10"}},
		probe{"Berlin", berlinPfx, []string{"198.51.100.20"}},
		probe{"Ashburn", ashburnPfx, virginia})
	down["203.0.113.10"] = true
	phase("bom-1 failing its checks: the Mumbai group's secondary",
		probe{"Pune", punePfx, []string{"203.0.113.11"}},
		probe{"Singapore", singaporePfx, []string{"203.0.113.11"}})
	drained["bom-2"] = policy.PoolDrain
	phase("bom-2 drained too: the Mumbai branch is down, the next region by distance",
		probe{"Pune", punePfx, []string{"198.51.100.20"}},
		probe{"Berlin", berlinPfx, []string{"198.51.100.20"}})
	down["198.51.100.20"] = true
	phase("fra down as well: Europe and India go to Virginia's split",
		probe{"Berlin", berlinPfx, virginia},
		probe{"Pune", punePfx, virginia})
	drained["iad"] = policy.PoolDown
	phase("iad down by the operator: the canary takes all of Virginia",
		probe{"Ashburn", ashburnPfx, []string{"192.0.2.31"}},
		probe{"Berlin", berlinPfx, []string{"192.0.2.31"}})
	clear(down)
	clear(drained)
	phase("all back",
		probe{"Pune", punePfx, []string{"203.0.113.10"}},
		probe{"Berlin", berlinPfx, []string{"198.51.100.20"}})
}
