package node

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/traffic"
)

// maxLatencyExcerpts bounds the client networks a record page samples
// from the latency map.
const maxLatencyExcerpts = 20

// Record implements api.DashboardBackend.
func (b *backend) Record(name string) (api.RecordDetail, error) { return b.n.Record(name) }

// Record describes one steered record for its dashboard page: the
// overview's row, its configuration text, its rules and trees with their
// share of decisions, the ECS scopes returned and the latency map's view
// of sampled networks.
func (n *Node) Record(name string) (api.RecordDetail, error) {
	now := time.Now()
	snap, x := n.dashSnapshot()
	var r *policy.Record
	if x != nil {
		r = x.t.Get(dns.CanonicalName(name))
	}
	if r == nil {
		return api.RecordDetail{}, fmt.Errorf("record %s is not a steered record: %w", name, api.ErrNotFound)
	}
	w5, w1 := n.windows()
	d := api.RecordDetail{OverviewRecord: n.overviewRecord(snap, x, r, w5, w1, n.hc.manager, now), Rules: []api.RuleDetail{},
		Scopes: []api.ScopeHistogram{}}
	cfg := snap.Config
	ci := x.src[r.Index]
	d.Config, d.ConfigLine = recordConfig(cfg, ci)
	if cfg != nil {
		d.ConfigFile = cfg.File
	}
	var crules []config.Rule
	if cfg != nil && ci >= 0 {
		crules = cfg.Records[ci].Rules
		if p := cfg.Records[ci].Policy; p != "" {
			crules = cfg.Policies[p].Rules
		}
	}
	c5, c1 := counts(w5, r.Name), counts(w1, r.Name)
	var sum5, sum1 uint64
	for _, v := range c5.Rules {
		sum5 += v
	}
	for _, v := range c1.Rules {
		sum1 += v
	}
	for i, rule := range r.Rules {
		rd := api.RuleDetail{Index: i + 1, Match: "default", Action: describeAction(r, &rule.Action)}
		if !rule.Default {
			rd.Match = "?"
			if i < len(crules) && crules[i].Match != nil {
				rd.Match = describeMatch(crules[i].Match)
			}
		}
		if i < len(c5.Rules) {
			rd.Decisions5m = c5.Rules[i]
		}
		if i < len(c1.Rules) {
			rd.Decisions1h = c1.Rules[i]
		}
		if sum5 > 0 {
			rd.Share5m = float64(rd.Decisions5m) / float64(sum5)
		}
		if sum1 > 0 {
			rd.Share1h = float64(rd.Decisions1h) / float64(sum1)
		}
		d.Rules = append(d.Rules, rd)
		d.Rules = appendTree(d.Rules, r, &rule.Action, i+1, 1, map[int]bool{})
	}
	d.Scopes = scopeHistograms(&c1)
	d.Widened = widened(r, snap.Live, d.Pools)
	d.Latency = latencyExcerpts(r, snap.Live, now)
	return d, nil
}

// maxWidened bounds the widened networks a record page lists per
// answer type.
const maxWidened = 20

// widened lists the client networks whose ECS scope the current health
// widened, per answer type: "A: 49.36.0.0/16 from /24: pool mumbai down".
func widened(r *policy.Record, live *policy.Live, pools []api.OverviewPool) []string {
	var why []string
	for _, p := range pools {
		if p.State != "up" {
			why = append(why, "pool "+p.Name+" "+p.State)
		}
	}
	reason := strings.Join(why, ", ")
	if reason == "" {
		reason = "a pool has no usable address of the family"
	}
	var out []string
	qts := []uint16{dns.TypeA, dns.TypeAAAA}
	if r.Type == dns.TypeCNAME {
		qts = qts[:1] // one answer for both
	}
	for _, qt := range qts {
		ws, total := live.WidenedScopes(r, qt, maxWidened)
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%s: %s from /%d: %s", dns.TypeToString[qt], w.Prefix, w.From, reason))
		}
		if total > len(ws) {
			out = append(out, fmt.Sprintf("%s: and %d more networks", dns.TypeToString[qt], total-len(ws)))
		}
	}
	return out
}

// describeMatch renders a configuration match as "country IN, LK; asn
// 64500", keys in name order, with its source and negation.
func describeMatch(m *config.Match) string {
	keys := make([]string, 0, len(m.Keys))
	for k := range m.Keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys)+2)
	for _, k := range keys {
		parts = append(parts, k+" "+strings.Join(m.Keys[k], ", "))
	}
	if m.Not != nil {
		parts = append(parts, "not ("+describeMatch(m.Not)+")")
	}
	s := strings.Join(parts, "; ")
	if m.Source == "resolver" {
		s += " (resolver)"
	}
	return s
}

// describeAction renders an action in a line: "weighted mumbai:3
// frankfurt:1", "failover primary → secondary", "latency over a, b".
func describeAction(r *policy.Record, a *policy.Action) string {
	names := func(ms []int, sep string) string {
		s := make([]string, len(ms))
		for i, m := range ms {
			s[i] = r.MemberName(m)
		}
		return strings.Join(s, sep)
	}
	switch a.Kind {
	case policy.ActPool:
		return "pool " + names(a.Pools, ", ")
	case policy.ActSplit:
		parts := make([]string, len(a.Pools))
		for i, m := range a.Pools {
			parts[i] = fmt.Sprintf("%s:%d", r.MemberName(m), a.Weights[i])
		}
		s := "weighted " + strings.Join(parts, " ")
		if a.Sticky {
			s += " (sticky)"
		}
		return s
	case policy.ActMultivalue:
		return fmt.Sprintf("multivalue %d of %s", a.Limit, names(a.Pools, ", "))
	case policy.ActFailover:
		return "failover " + names(a.Pools, " → ")
	case policy.ActFirst:
		return "first of " + names(a.Pools, ", ")
	case policy.ActProximity, policy.ActLatency:
		s := a.Kind.String() + " over " + names(a.Candidates, ", ")
		if len(a.Pools) > 0 && !slices.Equal(a.Pools, a.Candidates) {
			s += " (fallback " + names(a.Pools, ", ") + ")"
		}
		return s
	}
	return a.Kind.String()
}

// appendTree appends a row per group a's members reach, depth first, each
// indented by its level under rule.
func appendTree(out []api.RuleDetail, r *policy.Record, a *policy.Action, rule, depth int, seen map[int]bool) []api.RuleDetail {
	if depth > policy.MaxDepth {
		return out
	}
	for _, m := range actionMembers(a) {
		g := m - len(r.Pools)
		if g < 0 || g >= len(r.Groups) || seen[m] {
			continue
		}
		seen[m] = true
		ga := &r.Groups[g].Action
		out = append(out, api.RuleDetail{Index: rule, Depth: depth, Match: "group " + r.Groups[g].Name, Action: describeAction(r, ga)})
		out = appendTree(out, r, ga, rule, depth+1, seen)
	}
	return out
}

// scopeHistograms lists the scope lengths answered, per family, non-zero
// lengths only.
func scopeHistograms(c *traffic.Counts) []api.ScopeHistogram {
	out := []api.ScopeHistogram{}
	add := func(fam string, counts []uint64, widened uint64) {
		h := api.ScopeHistogram{Family: fam, Lengths: []int{}, Counts: []uint64{}, Widened: widened}
		for l, v := range counts {
			if v > 0 {
				h.Lengths = append(h.Lengths, l)
				h.Counts = append(h.Counts, v)
			}
		}
		if len(h.Lengths) > 0 || widened > 0 {
			out = append(out, h)
		}
	}
	add("ipv4", c.Scopes4[:], c.Widened4)
	add("ipv6", c.Scopes6[:], c.Widened6)
	return out
}

// latencyExcerpts samples at most maxLatencyExcerpts CIDR networks of the
// latency map and ranks r's latency candidates' sites for each.
func latencyExcerpts(r *policy.Record, live *policy.Live, now time.Time) []api.LatencyExcerpt {
	if !r.HasLatency() {
		return nil
	}
	m := live.Latency().Map()
	var sites []latency.Site
	seen := map[string]bool{}
	addSite := func(member int) {
		var s latency.Site
		if member < len(r.Pools) {
			p := r.Pools[member]
			s = latency.Site{Name: p.Site, Lat: p.Lat, Lon: p.Lon, HasLocation: p.HasLoc}
		} else if g := member - len(r.Pools); g < len(r.Groups) {
			gr := r.Groups[g]
			s = latency.Site{Name: gr.Site, Lat: gr.Lat, Lon: gr.Lon, HasLocation: gr.HasLoc}
		}
		if s.Name != "" && !seen[s.Name] {
			seen[s.Name] = true
			sites = append(sites, s)
		}
	}
	var walk func(a *policy.Action, depth int)
	walk = func(a *policy.Action, depth int) {
		if depth > policy.MaxDepth+1 {
			return
		}
		if a.Kind == policy.ActLatency {
			for _, c := range a.Candidates {
				addSite(c)
			}
		}
		for _, mb := range actionMembers(a) {
			if g := mb - len(r.Pools); g >= 0 && g < len(r.Groups) {
				walk(&r.Groups[g].Action, depth+1)
			}
		}
	}
	for _, rule := range r.Rules {
		walk(&rule.Action, 1)
	}
	if m == nil || len(sites) == 0 {
		return nil
	}
	prefixes := m.Prefixes()
	step := 1
	if len(prefixes) > maxLatencyExcerpts {
		step = (len(prefixes) + maxLatencyExcerpts - 1) / maxLatencyExcerpts
	}
	out := []api.LatencyExcerpt{}
	var rtts []latency.RTT
	for i := 0; i < len(prefixes) && len(out) < maxLatencyExcerpts; i += step {
		p := prefixes[i]
		rtts = m.Lookup(rtts[:0], &latency.Client{Addr: p.Addr(), Bits: p.Bits()}, sites, now)
		out = append(out, api.LatencyExcerpt{Network: p.String(), Sites: rankRTTs(rtts)})
	}
	return out
}

// rankRTTs orders sites by RTT, those without one last: "frankfurt 38ms",
// "mumbai 120ms (estimated)", "sydney no data".
func rankRTTs(rtts []latency.RTT) []string {
	rs := append([]latency.RTT(nil), rtts...)
	sort.SliceStable(rs, func(i, j int) bool {
		ni, nj := rs[i].Source == latency.SourceNone, rs[j].Source == latency.SourceNone
		if ni != nj {
			return nj
		}
		return rs[i].Ms < rs[j].Ms
	})
	out := make([]string, len(rs))
	for i, t := range rs {
		switch t.Source {
		case latency.SourceNone:
			out[i] = t.Site + " no data"
		case latency.SourceEstimated:
			out[i] = fmt.Sprintf("%s %.0fms (estimated)", t.Site, t.Ms)
		default:
			out[i] = fmt.Sprintf("%s %.0fms", t.Site, t.Ms)
		}
	}
	return out
}
