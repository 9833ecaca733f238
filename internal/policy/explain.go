package policy

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/geo"
)

// RuleTrace says whether one rule matched a client, and why.
type RuleTrace struct {
	Rule    int      `json:"rule"` // 1-based, as operators count
	Line    int      `json:"line"`
	Default bool     `json:"default,omitempty"`
	Source  string   `json:"source"` // client or resolver
	Matched bool     `json:"matched"`
	Why     []string `json:"why"`
	Action  string   `json:"action"`
}

// ExplainRules evaluates every rule of r for a client (info at network
// client) and a resolver (rinfo at resolver), saying why each matched or
// not. It uses the same match code the compiler used to build the
// partition the server walks.
func (r *Record) ExplainRules(info *geo.Info, client netip.Prefix, rinfo *geo.Info, resolver netip.Prefix) []RuleTrace {
	// Decide looks at one address (a subnet's first, unmapped), and the
	// partition holds no geo data in unrouted IPv6 space: explain the same.
	client, info = asDecided(client, info)
	if resolver.IsValid() {
		resolver, rinfo = asDecided(resolver, rinfo)
	}
	out := make([]RuleTrace, 0, len(r.Rules))
	for _, rule := range r.Rules {
		t := RuleTrace{Rule: rule.Index + 1, Line: rule.Line, Default: rule.Default, Source: "client", Action: r.DescribeAction(&rule.Action)}
		switch {
		case rule.Default:
			t.Matched = true
			t.Why = []string{"the default rule matches every client"}
		case rule.Match.Resolver:
			t.Source = "resolver"
			if resolver.IsValid() {
				t.Matched = rule.Match.matches(rinfo, resolver, &t.Why)
			} else {
				t.Why = []string{"no resolver address"}
			}
		default:
			t.Matched = rule.Match.matches(info, client, &t.Why)
		}
		out = append(out, t)
	}
	return out
}

// asDecided returns the address of p as a full-length prefix, unmapped,
// and info, or no info where the partition compiles none.
func asDecided(p netip.Prefix, info *geo.Info) (netip.Prefix, *geo.Info) {
	a := p.Addr().Unmap()
	p = netip.PrefixFrom(a, a.BitLen())
	if a.Is6() && unrouted(p) {
		info = &geo.Info{}
	}
	return p, info
}

// DescribeAction renders an action as the configuration wrote it.
func (r *Record) DescribeAction(a *Action) string {
	names := func(ps []int) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = r.MemberName(p)
		}
		return strings.Join(s, ", ")
	}
	switch a.Kind {
	case ActPool:
		return "pool " + names(a.Pools)
	case ActSplit:
		parts := make([]string, len(a.Pools))
		for i, p := range a.Pools {
			parts[i] = fmt.Sprintf("%s %d", r.MemberName(p), a.Weights[i])
		}
		s := "split " + strings.Join(parts, ", ")
		if a.Sticky {
			s += " (sticky by client subnet)"
		}
		return s
	case ActMultivalue:
		return fmt.Sprintf("multivalue %d of %s", a.Limit, names(a.Pools))
	case ActFailover:
		return "failover " + names(a.Pools)
	case ActProximity:
		return "geoproximity over " + names(a.Candidates) + " (fallback " + names(a.Pools) + ")"
	case ActFirst:
		return "first of " + names(a.Pools)
	case ActLatency:
		return "latency over " + names(a.Candidates) + " (fallback " + names(a.Pools) + ")"
	}
	return a.Kind.String()
}

// PoolNames names the pools in mask, in configuration order.
func (r *Record) PoolNames(mask uint64) []string {
	var out []string
	for _, p := range r.Pools {
		if mask&(1<<p.Index) != 0 {
			out = append(out, p.Name)
		}
	}
	return out
}

// Ranking returns geoproximity's order for the rule with index rule at a
// client located at (lat, lon), with each pool's biased distance in km.
func (r *Record) Ranking(rule int, lat, lon float64) []string {
	a := &r.Rules[rule].Action
	if a.Kind != ActProximity {
		return nil
	}
	return r.ranking(a, lat, lon)
}

// ranking is Ranking for any geoproximity action of r.
func (r *Record) ranking(a *Action, lat, lon float64) []string {
	var out []string
	for _, p := range r.rank(a, lat, lon) {
		name := r.MemberName(int(p))
		if plat, plon, ok, bias := r.memberLoc(int(p)); ok {
			d := Distance(lat, lon, plat, plon)
			out = append(out, fmt.Sprintf("%s %.0f km (biased %.0f)", name, d, d*(1-float64(bias)/100)))
		} else {
			out = append(out, name+" (no location)")
		}
	}
	return out
}

// Addrs returns the pool's addresses, IPv4 first, as health masks number
// them.
func (p *Pool) Addrs() []netip.Addr {
	return append(append(make([]netip.Addr, 0, len(p.V4)+len(p.V6)), p.V4...), p.V6...)
}

// TreeStep is one level of the path a decision took through a rule's
// tree of groups.
type TreeStep struct {
	Level      int             `json:"level"` // 1: the rule's own action
	Node       string          `json:"node"`  // "rule 2" or "group mumbai"
	Action     string          `json:"action"`
	Candidates []TreeCandidate `json:"candidates"`
	Chosen     string          `json:"chosen,omitempty"`
	Why        string          `json:"why"`
}

// TreeCandidate is one member an action could choose.
type TreeCandidate struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // pool or group
	Usable bool   `json:"usable"`
	// State says why it is unusable, or what ranks it: its distance, its
	// RTT, its split weight.
	State string `json:"state"`
}

// ExplainTree walks the rule's tree the way the decision d did and says,
// at each level, what the action was, which members it had with their
// state, which one it took and why; nil for a rule without groups. A
// random split names the member the answer came from. info is the
// client's geo facts, for the distances of a geoproximity level.
func (l *Live) ExplainTree(r *Record, q *Query, d *Decision, info *geo.Info, now time.Time) []TreeStep {
	if d.Rule < 0 || d.Rule >= len(r.Rules) || len(r.Groups) == 0 || d.AllDown {
		return nil
	}
	avail := q.Up & r.family(q.Qtype)
	var out []TreeStep
	a := &r.Rules[d.Rule].Action
	node := fmt.Sprintf("rule %d", d.Rule+1)
	for level := 1; a != nil && level <= MaxDepth+1; level++ {
		st := TreeStep{Level: level, Node: node, Action: r.DescribeAction(a)}
		members := actionMembers(a)
		var ranked []string
		switch a.Kind {
		case ActProximity:
			if info != nil && info.HasLocation {
				ranked = r.ranking(a, info.Lat, info.Lon)
			}
		case ActLatency:
			at := q.Client
			if d.Input != InputClient {
				at = netip.Addr{} // the node's virtual client has no address
			}
			if lt := l.explainLatency(r, a, d.Rule, at, info, avail, "", now); lt != nil {
				for _, c := range lt.Candidates {
					rtt := "no RTT"
					if c.Source != "none" {
						rtt = fmt.Sprintf("%.1f ms (%s)", c.RTT, c.Source)
					}
					ranked = append(ranked, c.Pool+" "+rtt)
				}
			}
		}
		for i, m := range members {
			c := TreeCandidate{Name: r.MemberName(m), Kind: r.memberKind(m), Usable: r.usableMember(m, avail)}
			switch {
			case !c.Usable && r.isGroup(m):
				c.State = "unusable: no usable pool under it"
			case !c.Usable:
				c.State = "unusable: down, drained, disabled or without this address family"
			case a.Kind == ActSplit:
				c.State = fmt.Sprintf("weight %d", a.Weights[i])
			default:
				c.State = "usable"
			}
			for _, rk := range ranked {
				if strings.HasPrefix(rk, c.Name+" ") {
					c.State += "; " + strings.TrimPrefix(rk, c.Name+" ")
				}
			}
			st.Candidates = append(st.Candidates, c)
		}
		// The member taken: the usable one the answer's pools are under
		// (for multivalue, every one).
		var taken []int
		for _, m := range members {
			if r.usableMember(m, avail) && r.mmask[m]&d.Pools != 0 {
				taken = append(taken, m)
			}
		}
		names := make([]string, len(taken))
		for i, m := range taken {
			names[i] = r.MemberName(m)
		}
		st.Chosen = strings.Join(names, ", ")
		switch a.Kind {
		case ActPool:
			st.Why = "the only member"
		case ActFailover, ActFirst:
			st.Why = "the first usable member of the list"
		case ActMultivalue:
			st.Why = "every usable member"
		case ActProximity:
			st.Why = "the nearest usable member (by biased distance; the fallback order when the client's location is unknown)"
		case ActLatency:
			st.Why = "the usable member with the lowest RTT for the client's network (the fallback order without one)"
		case ActSplit:
			if a.Sticky {
				st.Why = "weighted rendezvous hash of the client subnet over the usable members"
			} else {
				st.Why = "a weighted random draw over the usable members"
			}
		}
		out = append(out, st)
		if len(taken) != 1 || !r.isGroup(taken[0]) {
			break
		}
		g := r.group(taken[0])
		a, node = &g.Action, "group "+g.Name
	}
	return out
}
