package policy_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// TestGroupSplitRandSeeded: a non-sticky split inside a group draws from
// the query's random source as a split of pools does, so a simulation's
// seeded run repeats (internal/simulate).
func TestGroupSplitRandSeeded(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, `
  - name: g.example.com
    ttl: 60
    pools:
      stable: { address: 192.0.2.30 }
      canary: { address: 192.0.2.31 }
      dr:     { address: 192.0.2.32 }
    groups:
      main: { split: [{ pool: stable, weight: 90 }, { pool: canary, weight: 10 }] }
    rules:
      - default: { failover: [main, dr] }
`))
	r := table.Get("g.example.com.")
	live := policy.NewLive(table, policy.LiveOptions{})
	client := addr("10.17.3.4")
	draws := func(src *rand.Rand) (seq []uint64, canary int) {
		for range 3000 {
			q := policy.Query{Qtype: dns.TypeA, Client: client, ClientBits: 32, Resolver: client, Rand: src}
			s := live.Decide(r, &q, 0)
			seq = append(seq, s.Pools)
			if poolNames(r, s.Pools) == "canary" {
				canary++
			}
		}
		return seq, canary
	}
	a, na := draws(rand.New(rand.NewPCG(3, 1)))
	b, _ := draws(rand.New(rand.NewPCG(3, 1)))
	c, _ := draws(rand.New(rand.NewPCG(4, 1)))
	if !slices.Equal(a, b) {
		t.Errorf("the same seed drew different members of the group's split")
	}
	if slices.Equal(a, c) {
		t.Errorf("two seeds drew the same 3,000 members")
	}
	if na < 220 || na > 380 { // 10 % of 3,000 = 300, ±4.6 σ
		t.Errorf("canary drawn %d times in 3,000, want about 300", na)
	}
}
