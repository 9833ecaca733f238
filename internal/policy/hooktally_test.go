package policy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// TestHookTally: decisions made with a tally call no hook until Flush,
// which makes one call for each set of alike answers with their number;
// more distinct answers than the tally keeps are passed on at once, a
// decision of another live state flushes the first one's calls to its
// own hooks first, and the totals are those of the answers.
func TestHookTally(t *testing.T) {
	// 20 rules: 20 distinct decisions, more than the tally keeps apart.
	record := `
  - name: d.example.com
    ttl: 60
    pools:
      bom: { address: 203.0.113.10 }
      fra: { address: 198.51.100.20 }
    rules:
`
	for i := range 20 {
		record += fmt.Sprintf("      - { match: { cidr: [10.%d.0.0/16] }, pool: %s }\n", i, [2]string{"bom", "fra"}[i%2])
	}
	record += "      - default: { pool: fra }\n"
	table := mustBuild(t, configYAML(t, []string{cityDB}, record))
	r := table.Get("d.example.com.")
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	type counts struct{ calls, observed, decided int }
	newLive := func(c *counts) *policy.Live {
		return policy.NewLive(table, policy.LiveOptions{Start: start, Hooks: policy.Hooks{
			Observe: func(_, _ int, _ bool, n int) { c.calls++; c.observed += n },
			Decided: func(_ int, _ policy.Decision, _, n int) { c.calls++; c.decided += n },
		}})
	}
	var first, second counts
	a, b := newLive(&first), newLive(&second)
	var tally policy.HookTally
	decide := func(l *policy.Live, client string, bits int) {
		q := policy.Query{Qtype: dns.TypeA, Client: addr(client), ClientBits: bits, Resolver: addr(client), Tally: &tally}
		if s := l.Decide(r, &q, start.Unix()); s.Pools == 0 {
			t.Fatalf("%s: no pool", client)
		}
	}
	for range 100 {
		decide(a, "10.1.3.4", 32)
	}
	if first.calls != 0 {
		t.Fatalf("%d hook calls before the flush", first.calls)
	}
	tally.Flush()
	if first != (counts{calls: 2, observed: 100, decided: 100}) {
		t.Fatalf("100 alike answers flushed: %+v, want 2 calls counting 100 each", first)
	}
	// 40 answers decided by the 20 rules in turn, then one of the other
	// live state.
	first = counts{}
	for i := range 40 {
		decide(a, fmt.Sprintf("10.%d.1.1", i%20), 32)
	}
	decide(b, "10.17.3.4", 32)
	// Two pools tallied; 16 decisions kept, the other 4 made at once
	// both times round.
	if first != (counts{calls: 2 + 16 + 2*4, observed: 40, decided: 40}) || second.calls != 0 {
		t.Fatalf("after a decision of another live state: first %+v (want 26 calls counting 40 and 40), second %+v (want none yet)", first, second)
	}
	tally.Flush()
	tally.Flush()
	if second != (counts{calls: 2, observed: 1, decided: 1}) {
		t.Fatalf("second live state: %+v, want one answer", second)
	}
}
