// Package explain answers "why did this address get this answer?": it runs
// a query through the server's own handler (the very code that answers on
// the wire) with a trace attached, and reports the input used, what the geo
// databases say, each rule in order with why it matched or not, the pools
// and their state, the answer, its TTL and the ECS scope. The query has the
// DO bit (unless asked without): the signatures an answer from a signed
// zone carries are listed with their expiry, each verified with the key
// the zone serves.
package explain

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Request is what to explain.
type Request struct {
	Name  string
	Qtype uint16
	// ECS is the client subnet to send (invalid: none).
	ECS netip.Prefix
	// From is the resolver address the query comes from.
	From netip.Addr
	// NoDNSSEC asks without the DO bit; by default the query has it, as
	// a validating resolver's does, so the report shows the signatures
	// an answer from a signed zone carries.
	NoDNSSEC bool
	// Node, in a fleet, is the node to answer as ("": the one asked):
	// its identity (name, region, country, location) stands in for the
	// answering node's, which matters to rules on node or node_region and
	// to clients steered by the node's location (ecs.unknown_client:
	// node). Run ignores it: the caller builds the policies for it.
	Node string
}

// Report is the explanation.
type Report struct {
	// Source says what answered: a running node (live health, overrides
	// and latency) or the configuration alone (offline). Set by the
	// caller; empty for the API's own answer.
	Source    string   `json:"source,omitempty"`
	Query     string   `json:"query"`
	Input     Input    `json:"input"`
	Steer     []Step   `json:"steering,omitempty"`
	Rcode     string   `json:"rcode"`
	Answer    []string `json:"answer"`
	Authority []string `json:"authority,omitempty"`
	TTL       *uint32  `json:"ttl,omitempty"`
	// Scope is the ECS SCOPE PREFIX-LENGTH of the response (nil without ECS).
	Scope *int     `json:"ecs_scope,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// Signatures are the RRSIGs the answer carries (DO set, a signed
	// zone), each checked against the served zone's keys.
	Signatures []Signature `json:"signatures,omitempty"`
	// Guard says how cookies and rate limiting treat the query from this
	// resolver over UDP, now (the limiter is asked, not debited).
	Guard *dnsserver.GuardReport `json:"guard,omitempty"`
}

// Input says which address steering looked at.
type Input struct {
	ECS       string `json:"ecs,omitempty"`
	Resolver  string `json:"resolver"`
	Used      string `json:"used"`
	Truncated bool   `json:"truncated,omitempty"`
	// SteeredBy says which input steering used and why: "ECS
	// 203.0.113.0/24", "resolver address (no ECS)", or, with
	// ecs.unknown_client: node, "node fra-1's location (resolver 1.1.1.1
	// is in ecs.anycast_resolvers)" or "(... not placed by the geo
	// database)".
	SteeredBy string `json:"steered_by,omitempty"`
}

// Step is one steered record's decision.
type Step struct {
	Record string  `json:"record"`
	Client string  `json:"client"`
	Geo    GeoInfo `json:"geo"`
	// Node is set when the node's location stood in for the client: the
	// geo facts and rules are then the node's (Geo stays the client's).
	Node    *GeoInfo           `json:"node_geo,omitempty"`
	Rules   []policy.RuleTrace `json:"rules"`
	Pools   []PoolState        `json:"pools"`
	Ranking []string           `json:"geoproximity,omitempty"`
	// Tree is the path through the rule's groups, level by level.
	Tree     []policy.TreeStep    `json:"tree,omitempty"`
	Latency  *policy.LatencyTrace `json:"latency,omitempty"`
	Decision string               `json:"decision"`
	Chosen   []string             `json:"chosen"`
	Scope    int                  `json:"partition_scope"`
	// Widened says how health widened the scope, when it did: from the
	// partition's prefix length to the wider one with the same answer.
	Widened *Widened `json:"scope_widened_by_health,omitempty"`
	// Shed says that capacity feedback shed the client's network from a
	// pool above its target: the network, the pools and why.
	Shed string `json:"shed,omitempty"`
}

// Widened is a scope health widened: every network in Network gets the
// same answer while the pools in Unusable stay unusable.
type Widened struct {
	From     int      `json:"from"`
	To       int      `json:"to"`
	Network  string   `json:"network"`
	Unusable []string `json:"unusable_pools"`
}

// GeoInfo is what the databases said about the client.
type GeoInfo struct {
	Country     string   `json:"country,omitempty"`
	Continent   string   `json:"continent,omitempty"`
	Subdivision string   `json:"subdivision,omitempty"`
	ASN         uint32   `json:"asn,omitempty"`
	Location    string   `json:"location,omitempty"`
	Networks    []string `json:"networks"`
	// Facts is the client's value of every match key the databases
	// answer, in the key table's order (policy.Facts): what the text
	// prints, a new key included.
	Facts []policy.Fact `json:"facts"`
}

// PoolState is one pool as the decision saw it.
type PoolState struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	State     string   `json:"state"`
	// Capacity is the pool's capacity feedback state ("shed: load 130 %
	// of target ..."), for a pool that declares a capacity.
	Capacity string `json:"capacity,omitempty"`
}

// Run explains req against the handler's current snapshot.
func Run(h *dnsserver.Handler, req Request) (*Report, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(req.Name), req.Qtype)
	m.RecursionDesired = false
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(dnsserver.AdvertisedUDPSize)
	if !req.NoDNSSEC {
		o.SetDo()
	}
	in := Input{Resolver: req.From.String()}
	if req.ECS.IsValid() {
		p := req.ECS.Masked()
		fam := uint16(1)
		if p.Addr().Is6() {
			fam = 2
		}
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()})
		in.ECS = p.String()
	}
	m.Extra = append(m.Extra, o)
	wire, err := m.Pack()
	if err != nil {
		return nil, err
	}
	rep := &Report{Query: fmt.Sprintf("%s %s", dns.Fqdn(req.Name), dns.TypeToString[req.Qtype])}
	out, guard := h.Explain(wire, req.From, func(snap *snapshot.Snapshot, r *policy.Record, q *policy.Query, d *policy.Decision) {
		rep.Steer = append(rep.Steer, step(snap, r, q, d))
		used := netip.PrefixFrom(q.Client, q.ClientBits)
		in.Used = used.String()
		switch {
		case d.Input != policy.InputClient:
			in.SteeredBy = snap.Policies.DescribeInput(d.Input, q.Resolver)
		case q.NoECS && req.ECS.IsValid():
			in.SteeredBy = "resolver address (ECS with a /0 source)"
		case q.NoECS:
			in.SteeredBy = "resolver address (no ECS)"
		default:
			in.SteeredBy = "ECS " + used.String()
		}
		if req.ECS.IsValid() && q.ClientBits < req.ECS.Bits() {
			in.Truncated = true
		}
	})
	if in.Used == "" {
		if req.ECS.IsValid() && req.ECS.Bits() > 0 {
			in.Used = req.ECS.Masked().String() + " (no steered record took part)"
		} else {
			in.Used = req.From.String() + " (no steered record took part)"
		}
	}
	rep.Input = in
	rep.Guard = &guard
	if out == nil {
		return nil, fmt.Errorf("the server dropped the query")
	}
	resp := new(dns.Msg)
	if err := resp.Unpack(out); err != nil {
		return nil, fmt.Errorf("unpacking the answer: %w", err)
	}
	rep.Rcode = dns.RcodeToString[resp.Rcode]
	for _, rr := range resp.Answer {
		if rr.Header().Rrtype == dns.TypeRRSIG {
			continue // listed under signatures
		}
		rep.Answer = append(rep.Answer, rr.String())
		if rep.TTL == nil {
			ttl := rr.Header().Ttl
			rep.TTL = &ttl
		}
	}
	for _, rr := range resp.Ns {
		if rr.Header().Rrtype == dns.TypeRRSIG {
			continue
		}
		rep.Authority = append(rep.Authority, rr.String())
	}
	snap := h.Snapshot()
	rep.Signatures = signatures(resp, zoneKeys(snap), time.Now())
	if !req.NoDNSSEC {
		rep.Notes = append(rep.Notes, unsigned(resp, snap, req)...)
	}
	if opt := resp.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				scope := int(s.SourceScope)
				rep.Scope = &scope
			}
		}
	}
	if resp.Truncated {
		rep.Notes = append(rep.Notes, "the answer does not fit in a UDP response: it would be sent with TC=1 and served over TCP")
	}
	return rep, nil
}

func step(snap *snapshot.Snapshot, r *policy.Record, q *policy.Query, d *policy.Decision) Step {
	s := Step{Record: r.Name + " " + dns.TypeToString[r.Type], Scope: d.Scope}
	client := netip.PrefixFrom(q.Client, q.ClientBits)
	s.Client = client.String()
	info, _, err := snap.Geo.Lookup(q.Client)
	if err == nil {
		s.Geo = geoInfo(snap.Geo, &info)
	}
	if d.Input != policy.InputClient {
		// The node's location and country stood in for the client's.
		_, info, _ = snap.Policies.Node()
		gi := geoInfo(snap.Geo, &info)
		s.Node = &gi
	}
	var rinfo geo.Info
	var rp netip.Prefix
	if q.Resolver.IsValid() {
		rinfo, _, _ = snap.Geo.Lookup(q.Resolver)
		rp = netip.PrefixFrom(q.Resolver, q.Resolver.BitLen())
	}
	s.Rules = r.ExplainRules(&info, client, &rinfo, rp)
	for _, p := range r.Pools {
		ps := PoolState{Name: p.Name, State: "up"}
		for _, a := range p.V4 {
			ps.Addresses = append(ps.Addresses, a.String())
		}
		for _, a := range p.V6 {
			ps.Addresses = append(ps.Addresses, a.String())
		}
		if p.Target != "" {
			ps.Addresses = append(ps.Addresses, p.Target)
		}
		// One classification for status, metrics and explain. q.Up is
		// what this query could use; a pool usable for the other family
		// only is "up" there but not here, which the state says.
		state, why, _ := snap.Live.PoolState(r, p)
		if state == "up" && q.Up&(uint64(1)<<p.Index) == 0 {
			state, why = "down", "no usable address of the asked family"
		}
		ps.State = state
		if why != "" && state != "up" || strings.Contains(why, "operator") {
			ps.State += " (" + why + ")"
		}
		if pl, ok := snap.Live.PoolLoad(r, p); ok {
			ps.Capacity = pl.Reason()
		}
		s.Pools = append(s.Pools, ps)
	}
	s.Chosen = r.PoolNames(d.Pools)
	if d.Input == policy.InputClient {
		if net, from, ok := snap.Live.ShedAt(r, q.Client); ok {
			var why []string
			for _, name := range from {
				for _, p := range r.Pools {
					if pl, ok := snap.Live.PoolLoad(r, p); ok && p.Name == name {
						why = append(why, name+": "+pl.Reason())
					}
				}
			}
			s.Shed = fmt.Sprintf("network %s is shed from %s to the next candidate of its rule (%s)", net, strings.Join(from, ", "), strings.Join(why, "; "))
		}
	}
	if d.WidenedFrom != 0 {
		w := &Widened{From: d.WidenedFrom, To: d.Scope, Unusable: r.PoolNames(r.Enabled &^ q.Up)}
		if p, err := q.Client.Prefix(d.Scope); err == nil {
			w.Network = p.String()
		}
		s.Widened = w
	}
	switch {
	case d.ServFail:
		s.Decision = "no usable pool: when_all_down servfail answers SERVFAIL"
	case d.NoData && d.Rule < 0:
		s.Decision = "no pool has records of this type: NODATA"
	case d.NoData:
		s.Decision = fmt.Sprintf("no usable pool after rule %d: when_all_down %s answers NODATA", d.Rule+1, r.WhenAllDown)
	case d.AllDown:
		s.Decision = fmt.Sprintf("no usable pool in any matching rule: when_all_down %s answers with %s (fail open)", r.WhenAllDown, strings.Join(s.Chosen, ", "))
	default:
		rule := r.Rules[d.Rule]
		s.Decision = fmt.Sprintf("rule %d (line %d) decides: %s -> %s", d.Rule+1, rule.Line, r.DescribeAction(&rule.Action), strings.Join(s.Chosen, ", "))
		s.Tree = snap.Live.ExplainTree(r, q, d, &info, time.Now())
		if rule.Action.Kind == policy.ActProximity {
			if info.HasLocation {
				s.Ranking = r.Ranking(d.Rule, info.Lat, info.Lon)
			} else {
				s.Ranking = []string{"client location unknown: fallback order"}
			}
		}
		if rule.Action.Kind == policy.ActLatency {
			winner := ""
			if len(s.Chosen) > 0 {
				winner = s.Chosen[0]
			}
			at := q.Client
			if d.Input != policy.InputClient {
				at = netip.Addr{} // the node's virtual client has no address
			}
			s.Latency = snap.Live.ExplainLatency(r, d.Rule, at, &info, q.Up, winner, time.Now())
		}
	}
	return s
}

func geoInfo(g *geo.Set, info *geo.Info) GeoInfo {
	gi := GeoInfo{Country: info.Country, Continent: info.Continent, Subdivision: info.Subdivision, ASN: info.ASN, Facts: policy.Facts(info)}
	if info.HasLocation {
		gi.Location = fmt.Sprintf("%.4f,%.4f", info.Lat, info.Lon)
		if info.LocationIsCentroid {
			gi.Location += " (country centroid)"
		}
	}
	for i, n := range info.Networks {
		name := g.DBs[i].Name
		if n.IsValid() {
			gi.Networks = append(gi.Networks, fmt.Sprintf("%s in %s", n, name))
		} else {
			gi.Networks = append(gi.Networks, "not found in "+name)
		}
	}
	return gi
}

// Text renders the report for a terminal.
func (r *Report) Text() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if r.Source != "" {
		p("%s", r.Source)
	}
	p("query:    %s", r.Query)
	if r.Input.ECS != "" {
		p("ecs:      %s%s", r.Input.ECS, map[bool]string{true: " (truncated by ecs.max_source)", false: ""}[r.Input.Truncated])
	} else {
		p("ecs:      none")
	}
	p("resolver: %s", r.Input.Resolver)
	p("input:    %s", r.Input.Used)
	if r.Input.SteeredBy != "" {
		p("steered by: %s", r.Input.SteeredBy)
	}
	for _, s := range r.Steer {
		p("")
		p("steered record %s, client %s", s.Record, s.Client)
		g := s.Geo
		facts := ""
		for _, f := range g.Facts {
			facts += f.Key + "=" + dash(f.Value) + " "
		}
		p("  geo: %slocation=%s", facts, dash(g.Location))
		for _, n := range g.Networks {
			p("       %s", n)
		}
		if n := s.Node; n != nil {
			p("  steered as a client at the node: country=%s continent=%s location=%s", dash(n.Country), dash(n.Continent), dash(n.Location))
		}
		for _, rt := range s.Rules {
			mark := "no "
			if rt.Matched {
				mark = "yes"
			}
			what := "match"
			if rt.Default {
				what = "default"
			}
			p("  rule %d (line %d, %s on %s): %s -> %s", rt.Rule, rt.Line, what, rt.Source, mark, rt.Action)
			for _, w := range rt.Why {
				p("      %s", w)
			}
		}
		p("  pools:")
		for _, ps := range s.Pools {
			if ps.Capacity != "" {
				p("    %-16s %-28s %s; %s", ps.Name, strings.Join(ps.Addresses, " "), ps.State, ps.Capacity)
				continue
			}
			p("    %-16s %-28s %s", ps.Name, strings.Join(ps.Addresses, " "), ps.State)
		}
		if len(s.Ranking) > 0 {
			p("  geoproximity: %s", strings.Join(s.Ranking, "; "))
		}
		for _, ts := range s.Tree {
			p("  tree level %d, %s: %s -> %s (%s)", ts.Level, ts.Node, ts.Action, dash(ts.Chosen), ts.Why)
			for _, c := range ts.Candidates {
				p("      %-6s %-16s %s", c.Kind, c.Name, c.State)
			}
		}
		if l := s.Latency; l != nil {
			p("  latency (rule %d, map update %d), network %s:", l.Rule, l.Update, l.Network)
			for _, c := range l.Candidates {
				rtt := "-"
				if c.Source != "none" {
					rtt = fmt.Sprintf("%.1f ms", c.RTT)
				}
				from := c.Source
				if c.Key != "" {
					from += " (key " + c.Key + ")"
				}
				if c.RUMKey != "" && c.RUMKey != c.Key {
					from += fmt.Sprintf(" blended with real users' %.1f ms (key %s)", c.RUMms, c.RUMKey)
				}
				if c.Estimate != "" {
					from += " (" + c.Estimate + ")"
				}
				usable := "usable"
				if !c.Usable {
					usable = "unusable"
				}
				p("    %-16s %-10s %-44s %s", c.Pool, rtt, from, usable)
			}
			if st := l.State; st != nil {
				pend := "none"
				if st.Pending != "" {
					pend = fmt.Sprintf("%s for %d/%d updates", st.Pending, st.Rounds, st.Needed)
				}
				p("    anti-flap: current %s, challenger %s", st.Current, pend)
			}
			p("    winner: %s: %s", dash(l.Winner), l.Why)
		}
		p("  decision: %s", s.Decision)
		if s.Shed != "" {
			p("  capacity: %s", s.Shed)
		}
		if w := s.Widened; w != nil {
			p("  scope: /%d widened to /%d by health: %s not usable, and every network in %s gets this answer", w.From, w.To, strings.Join(w.Unusable, ", "), w.Network)
		}
	}
	p("")
	p("rcode:    %s", r.Rcode)
	for _, a := range r.Answer {
		p("answer:   %s", a)
	}
	for _, a := range r.Authority {
		p("authority: %s", a)
	}
	for _, s := range r.Signatures {
		left := "expires in " + s.ExpiresIn
		if s.ExpiresIn == "expired" {
			left = "EXPIRED"
		}
		p("signature: %s %s %s, %s key %d of %s, valid %s to %s (%s): %s", s.Section, s.Name, s.Covers,
			s.Algorithm, s.KeyTag, s.Signer, s.Inception.Format(time.DateTime), s.Expiration.Format(time.DateTime+" MST"), left, s.Check)
	}
	if r.TTL != nil {
		p("ttl:      %d", *r.TTL)
	}
	if r.Scope != nil {
		p("ecs scope: /%d", *r.Scope)
	}
	if g := r.Guard; g != nil {
		limit := g.RateLimit
		if g.Class != "" {
			limit += fmt.Sprintf(" (as %s, keyed on %s)", g.Class, g.Key)
		}
		p("rate limit: %s", limit)
		p("cookie:   %s", g.Cookie)
	}
	for _, n := range r.Notes {
		p("note:     %s", n)
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
