package policy

import (
	"fmt"
	"slices"
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
	r.partition = src.partition
	r.nodeTwins = src.nodeTwins
}

// shareRules makes r use o's compiled rules (and what points into them:
// the ranking actions, the members' masks) when they are equal to its own,
// as they are for records of one policy whose pools are named alike: the
// rules are then held once per policy instead of once per record. Records
// with groups keep their own (group actions point into the groups).
// Everything shared is immutable once built; a reload that moves the
// rules' lines copies them (reuse.go).
func (r *Record) shareRules(o *Record) bool {
	if len(r.Groups) != 0 || len(o.Groups) != 0 || len(r.Pools) != len(o.Pools) || len(r.Rules) != len(o.Rules) ||
		!slices.Equal(r.mmask, o.mmask) || len(r.gact) != len(o.gact) || len(r.proximity) != len(o.proximity) ||
		len(r.latencyActs) != len(o.latencyActs) || r.clientRules != o.clientRules || r.resolverRules != o.resolverRules ||
		r.defaultBit != o.defaultBit || r.latencyRules != o.latencyRules {
		return false
	}
	for _, a := range r.gact {
		if a != nil {
			return false
		}
	}
	for i, a := range r.Rules {
		b := o.Rules[i]
		if a.Index != b.Index || a.Line != b.Line || a.Default != b.Default || !builtMatchEqual(a.Match, b.Match) || !builtActionEqual(&a.Action, &b.Action) {
			return false
		}
	}
	r.ruleSet = o.ruleSet
	return true
}

func builtActionEqual(a, b *Action) bool {
	return a.Kind == b.Kind && slices.Equal(a.Pools, b.Pools) && slices.Equal(a.Weights, b.Weights) && a.Sticky == b.Sticky &&
		a.Limit == b.Limit && a.Proximity == b.Proximity && slices.Equal(a.Candidates, b.Candidates) && a.Latency == b.Latency &&
		a.mask == b.mask && a.nested == b.nested
}

func builtMatchEqual(a, b *Match) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Resolver != b.Resolver || len(a.keys) != len(b.keys) || !builtMatchEqual(a.Not, b.Not) {
		return false
	}
	for i := range a.keys {
		x, y := &a.keys[i], &b.keys[i]
		if x.k != y.k || x.have != y.have || !slices.Equal(x.strs, y.strs) || !slices.Equal(x.asns, y.asns) || !slices.Equal(x.cidrs, y.cidrs) {
			return false
		}
	}
	return true
}
