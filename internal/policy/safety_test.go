package policy_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/policy"
)

// TestSafetyPools: UsablePools follows the checks, min_up and the
// overrides as SetHealth does; a pool listed only with weight 0 is not
// Weighted; Shares spreads a rule over its usable pools by weight, or
// its failover's next.
func TestSafetyPools(t *testing.T) {
	tab := mustBuild(t, configYAML(t, []string{cityDB}, `
  - name: shop.example.com
    pools:
      a: { addresses: [192.0.2.1, 192.0.2.2], min_up: 2 }
      b: { address: 192.0.2.3 }
      c: { address: 192.0.2.4 }
      d: { address: 192.0.2.5 }
    rules:
      - match: { country: [DE] }
        split: [ { pool: a, weight: 1 }, { pool: b, weight: 3 }, { pool: d, weight: 0 } ]
      - default: { failover: [c, a] }
`))
	r := tab.Get("shop.example.com.")
	down := netip.MustParseAddr("192.0.2.2")
	usable := func(a netip.Addr, _ string) bool { return a != down }
	if got := r.UsablePools(usable, nil); got != 0b1110 {
		t.Errorf("UsablePools with one of a's two addresses down: %04b, want b, c, d", got)
	}
	drainC := func(_, p string) policy.PoolOverride {
		if p == "c" {
			return policy.PoolDrain
		}
		return policy.PoolAuto
	}
	if got := r.UsablePools(func(netip.Addr, string) bool { return true }, drainC); got != 0b1011 {
		t.Errorf("UsablePools with c drained: %04b", got)
	}
	if got := r.Weighted(); got != 0b0111 {
		t.Errorf("Weighted: %04b, want a, b, c (d has weight 0)", got)
	}
	if s := r.Shares(0, 0b1111); s[0] != 0.25 || s[1] != 0.75 || len(s) != 2 {
		t.Errorf("split shares: %v", s)
	}
	if s := r.Shares(0, 0b1010); s[1] != 1 || len(s) != 1 {
		t.Errorf("split shares without a: %v", s)
	}
	if s := r.Shares(1, 0b0011); s[0] != 1 || len(s) != 1 {
		t.Errorf("failover shares without c: %v", s)
	}
	if s := r.Shares(1, 0b1000); s != nil {
		t.Errorf("failover shares with neither c nor a: %v", s)
	}
}

// TestSafetyWeightedOut: a rule counting a pool only ever weighted 0 is
// refused at build, naming the record and the rule's line.
func TestSafetyWeightedOut(t *testing.T) {
	_, _, err := build(t, configYAML(t, []string{cityDB}, `
  - name: shop.example.com
    safety: { min_usable: 2 }
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
    rules:
      - default: { split: [ { pool: a, weight: 1 }, { pool: b, weight: 0 } ] }
`))
	if err == nil || !strings.Contains(err.Error(), "steer.yaml:4: record shop.example.com.: safety min_usable 2 (record rule at steer.yaml:5) cannot be met even with every pool up: only 1 of its pools can be answered (a;") {
		t.Fatalf("build: %v", err)
	}
}
