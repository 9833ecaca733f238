package policy_test

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// TestWidenedScopes: with bom down the whole of 10.16.0.0/12 answers fra,
// widened from the /16s bom's rules cut it into; nothing else widens.
func TestWidenedScopes(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, mumbaiRecord))
	live := policy.NewLive(table, policy.LiveOptions{})
	r := table.Records[0]
	live.SetHealth(allUsable, nil)
	if ws, n := live.WidenedScopes(r, dns.TypeA, 10); ws != nil || n != 0 {
		t.Fatalf("all up: %v %d", ws, n)
	}
	for _, p := range r.Pools {
		if s, w, _ := live.PoolState(r, p); live.PoolStateWord(r, p) != s {
			t.Errorf("%s: PoolStateWord %s, PoolState %s (%s)", p.Name, live.PoolStateWord(r, p), s, w)
		}
	}
	live.SetHealth(allUsable, down("bom"))
	ws, n := live.WidenedScopes(r, dns.TypeA, 10)
	if n != 1 || fmt.Sprint(ws) != "[{10.16.0.0/12 16}]" {
		t.Fatalf("bom down: %v (%d in all)", ws, n)
	}
	if a, aaaa := live.Widened(r); !a || aaaa { // no IPv6 pool: AAAA answers none
		t.Errorf("Widened: %v %v", a, aaaa)
	}
	for _, p := range r.Pools {
		if s, w, _ := live.PoolState(r, p); live.PoolStateWord(r, p) != s {
			t.Errorf("%s: PoolStateWord %s, PoolState %s (%s)", p.Name, live.PoolStateWord(r, p), s, w)
		}
	}
}
