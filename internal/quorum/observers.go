package quorum

import (
	"cmp"
	"slices"
)

// Node is a fleet member that can probe targets.
type Node struct {
	Name   string // unique in the fleet
	Region string
}

// DefaultK is the number of observers Observers assigns to each target when
// given k ≤ 0 for a fleet of n nodes and the given min_observers:
// min(n, max(5, minObservers+2)), so 5 with the default min_observers 3.
//
// Why: the quorum decides only with at least MinObservers live observers,
// and two spare observers let two of them die (a PoP crash, a lease expiry)
// with the quorum still deciding rather than each node falling back to its
// own view. Why not more: each observer is one more prober hitting every
// target (the point of spreading is not N PoPs × M targets). And how k
// meets healthy_above 0.18: with k = 5 the possible up fractions are 0,
// 20 %, 40 %, …, and 1 up of 5 = 20 % > 18 %, so the target goes down only
// when all five see it down; with 2 of them lost, 1 of 3 = 33 % and 1 of 4
// = 25 % still keep it up. Past 5 the rule changes character: 1 of 6 =
// 16.7 % ≤ 18 %, so with k ≥ 6 two observers up are needed, and 5 of 6
// cut off from a healthy target would take it down. k = 5 is the largest
// k for which "down" means "every live observer sees it down".
func DefaultK(n, minObservers int) int {
	return min(n, max(5, minObservers+2))
}

// DefaultRegionalK is the k to give Observers in regional mode for a fleet
// of n nodes in the given number of regions: min(n, regions ×
// (minObservers+1)). Observers deals observers out to regions in turn, so
// this gives each region (with that many nodes) minObservers+1 observers:
// enough for a regional verdict, with one spare so that a single lost
// observer does not drop the region back to the global verdict.
func DefaultRegionalK(n, regions, minObservers int) int {
	return min(n, max(1, regions)*(minObservers+1))
}

// PickK is the k a fleet gives Observers for nodes: configured when it is
// set (> 0); else, in regional mode, DefaultRegionalK over the regions the
// nodes are in, so that every region with at least minObservers nodes gets
// minObservers observers of every target (and one spare); else DefaultK.
func PickK(nodes []Node, configured, minObservers int, regional bool) int {
	if configured > 0 {
		return configured
	}
	if regional {
		return DefaultRegionalK(len(nodes), len(regionSizes(nodes)), minObservers)
	}
	return DefaultK(len(nodes), minObservers)
}

// ShortRegions names, sorted, the regions of nodes in which Observers
// with k cannot give every target minObservers observers, so that their
// regional verdicts fall back to the global one: a region with fewer than
// minObservers nodes, and, when k is below what the first minObservers
// rounds of Observers' dealing take (each region's min(size,
// minObservers)), every region (some would get fewer, depending on the
// target).
func ShortRegions(nodes []Node, k, minObservers int) []string {
	sizes := regionSizes(nodes)
	need := 0
	for _, n := range sizes {
		need += min(n, minObservers)
	}
	var out []string
	for r, n := range sizes {
		if n < minObservers || k < need {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

func regionSizes(nodes []Node) map[string]int {
	sizes := map[string]int{}
	for _, n := range nodes {
		sizes[n.Region]++
	}
	return sizes
}

// Observers returns the names of the k nodes that should probe target,
// chosen by rendezvous (highest random weight) hashing and spread across
// regions, in the order chosen. k ≤ 0 means DefaultK(len(nodes),
// DefaultMinObservers); k ≥ len(nodes) returns every node.
//
// Every node of the fleet computes the same answer from the same member
// list, whatever its order. Each node has a weight per target, a hash of
// (target, node name); within each region nodes are ranked by weight, and
// observers are dealt out in rounds: the first round takes each region's
// best node, the second each region's second best, and so on, each round in
// weight order, until k are chosen. So with k ≥ the number of regions every
// region has an observer, with k < regions the k regions whose best nodes
// weigh most have one each, and no region gets a second observer while
// another with spare nodes has fewer.
//
// Stability: adding or removing one node changes a target's observers only
// when that node is (or becomes) one of them, and then by one node in the
// usual case, so about k·T/N of the k·T assignments of T targets move: 1/N
// of them. Balance: with regions of equal size, each node probes about
// k·T/N targets; a node in a smaller region probes more (a lone node in its
// region probes every target once k ≥ regions), the price of the spread.
func Observers(target string, nodes []Node, k int) []string {
	if k <= 0 {
		k = DefaultK(len(nodes), DefaultMinObservers)
	}
	k = min(k, len(nodes))
	type cand struct {
		name, region string
		w            uint64
		round        int
	}
	cs := make([]cand, len(nodes))
	th := hashString(fnvOffset, target)
	for i, n := range nodes {
		cs[i] = cand{name: n.Name, region: n.Region, w: mix(hashString(hashByte(th, 0), n.Name))}
	}
	byWeight := func(a, b cand) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if c := cmp.Compare(a.region, b.region); c != 0 {
			return c
		}
		return byWeight(a, b)
	})
	for i := range cs {
		if i > 0 && cs[i].region == cs[i-1].region {
			cs[i].round = cs[i-1].round + 1
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if c := cmp.Compare(a.round, b.round); c != 0 {
			return c
		}
		return byWeight(a, b)
	})
	out := make([]string, k)
	for i := range out {
		out[i] = cs[i].name
	}
	return out
}

// FNV-1a, 64 bits, then a splitmix64 finaliser: FNV alone leaves similar
// names with correlated high bits. Fixed, so every node agrees.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = hashByte(h, s[i])
	}
	return h
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
