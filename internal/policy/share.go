package policy

import (
	"fmt"
	"strings"
)

// Records whose compiled partitions would be equal share one: the
// partition (tries, outcomes, resolver masks, latency classes) depends
// only on the rules' matches and action kinds, the candidates that
// geoproximity and latency rank with their pools' locations and biases,
// and the geo databases. compileKey says all of that in one string, so a
// config of 10,000 records over a handful of distinct policies compiles a
// handful of partitions, and a reload reuses those of the previous table
// when its databases are the same. A record still binds its own pools,
// addresses, TTLs and names to the shared outcomes, which refer to pools
// by position only.

// compileKey describes everything compile reads from r.
func (r *Record) compileKey() string {
	var b strings.Builder
	for _, rule := range r.Rules {
		fmt.Fprintf(&b, "rule %d default=%t kind=%d prox=%d lat=%d cand=%v|", rule.Index, rule.Default,
			rule.Action.Kind, rule.Action.Proximity, rule.Action.Latency, rule.Action.Candidates)
		writeMatch(&b, rule.Match)
		b.WriteByte('\n')
	}
	// rank reads the candidates' locations and biases, at every level of
	// the tree (a group's candidates are members of its own action).
	seen := map[int]bool{}
	for i, a := range r.proximity {
		fmt.Fprintf(&b, "proximity %d cand=%v\n", i, a.Candidates)
		for _, p := range a.Candidates {
			if !seen[p] {
				seen[p] = true
				lat, lon, ok, bias := r.memberLoc(p)
				fmt.Fprintf(&b, "member %d loc=%t %v %v bias=%d\n", p, ok, lat, lon, bias)
			}
		}
	}
	fmt.Fprintf(&b, "pools=%d latency-actions=%d\n", len(r.Pools), len(r.latencyActs))
	fmt.Fprintf(&b, "client=%x resolver=%x default=%x latency=%x proximity=%d\n",
		r.clientRules, r.resolverRules, r.defaultBit, r.latencyRules, len(r.proximity))
	if r.nodeTwins {
		// The outcomes have twins at the node's location (node.go).
		fmt.Fprintf(&b, "node twins at %s\n", r.node.key)
	}
	return b.String()
}

// sharePartition makes r answer from src's compiled partition (equal
// compile keys). Everything shared is immutable once compiled.
func (r *Record) sharePartition(src *Record) {
	r.v4, r.v6, r.r4, r.r6 = src.v4, src.v6, src.r4, src.r6
	r.outcomes, r.masks = src.outcomes, src.masks
	r.nodeTwins, r.u4, r.u6, r.twinBase = src.nodeTwins, src.u4, src.u6, src.twinBase
	r.latClasses, r.latClassKeys, r.latClassIndex = src.latClasses, src.latClassKeys, src.latClassIndex
	r.Stats = src.Stats
}
