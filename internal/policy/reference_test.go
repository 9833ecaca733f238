package policy_test

// A reference evaluator for steering decisions, written from the
// configuration (not the compiled record): it looks the client up in the
// geo set and walks the rules one by one, the way the configuration reads.
// The compiled partition must agree with it everywhere.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/oschwald/maxminddb-golang/v2"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
)

type refEval struct {
	rec   config.Record
	set   *geo.Set
	names []string // pools in configuration order (bit i is names[i])
	idx   map[string]int
	loc   []*config.Location
	bias  []int
	v4    uint64 // pools with IPv4 addresses
	v6    uint64
}

func newRef(t testing.TB, cfg *config.Config, i int, set *geo.Set) *refEval {
	t.Helper()
	rf := &refEval{rec: cfg.Records[i], set: set, names: cfg.PoolNames(i), idx: map[string]int{}}
	for j, n := range rf.names {
		rf.idx[n] = j
		pc := rf.rec.Pools[n]
		rf.loc = append(rf.loc, pc.Location)
		rf.bias = append(rf.bias, pc.Bias)
		addrs := pc.Addresses
		if pc.Address != "" {
			addrs = append(addrs, pc.Address)
		}
		for _, s := range addrs {
			if netip.MustParseAddr(s).Unmap().Is4() {
				rf.v4 |= 1 << j
			} else {
				rf.v6 |= 1 << j
			}
		}
	}
	return rf
}

// enabled returns the pools the configuration does not disable.
func (rf *refEval) enabled() uint64 {
	var m uint64
	for j, n := range rf.names {
		if e := rf.rec.Pools[n].Enabled; e == nil || *e {
			m |= 1 << j
		}
	}
	return m
}

// unroutedV6 is the IPv6 space steer compiles as one leaf with no geo data
// (IPv4-mapped and -compatible, Teredo, 6to4, NAT64): see policy.unrouted.
var unroutedV6 = []netip.Prefix{
	netip.MustParsePrefix("::/80"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

func isUnrouted(a netip.Addr) bool {
	if !a.Is6() {
		return false
	}
	for _, p := range unroutedV6 {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// info looks a up, or knows nothing in unrouted IPv6 space. An
// IPv4-mapped a is in that space: Decide unmaps clients before it steers,
// so the IPv6 partition never sees one.
func (rf *refEval) info(t testing.TB, a netip.Addr) geo.Info {
	if isUnrouted(a) {
		return geo.Info{}
	}
	info, _, err := rf.set.Lookup(a)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", a, err)
	}
	return info
}

func has(list []string, v string) bool {
	if v == "" {
		return false
	}
	for _, s := range list {
		if strings.EqualFold(s, v) {
			return true
		}
	}
	return false
}

// match evaluates m: keys ANDed, values within a key ORed, not negated.
func match(m *config.Match, info geo.Info, a netip.Addr) bool {
	if c := m.Keys["country"]; len(c) > 0 && !has(c, info.Country) {
		return false
	}
	if c := m.Keys["continent"]; len(c) > 0 && !has(c, info.Continent) {
		return false
	}
	if c := m.Keys["subdivision"]; len(c) > 0 && !has(c, info.Subdivision) {
		return false
	}
	if asns := m.Keys["asn"]; len(asns) > 0 && (info.ASN == 0 || !slices.ContainsFunc(asns, func(v string) bool {
		return strings.TrimPrefix(strings.ToUpper(v), "AS") == strconv.FormatUint(uint64(info.ASN), 10)
	})) {
		return false
	}
	if cidrs := m.Keys["cidr"]; len(cidrs) > 0 {
		in := false
		for _, c := range cidrs {
			if netip.MustParsePrefix(c).Contains(a.Unmap()) {
				in = true
			}
		}
		if !in {
			return false
		}
	}
	if m.Not != nil && match(m.Not, info, a) {
		return false
	}
	return true
}

// clientMask returns the client rules (not source: resolver, not default)
// that match a.
func (rf *refEval) clientMask(info geo.Info, a netip.Addr) uint64 {
	var m uint64
	for i, r := range rf.rec.Rules {
		if r.Match != nil && r.Match.Source != "resolver" && match(r.Match, info, a) {
			m |= 1 << i
		}
	}
	return m
}

func (rf *refEval) action(i int) config.Action {
	r := rf.rec.Rules[i]
	if r.Default != nil {
		return *r.Default
	}
	return r.Action
}

// candidates returns the pools geoproximity ranks for a.
func (rf *refEval) candidates(a config.Action) []int {
	if a.Fallback != nil {
		return rf.list(a.Fallback)
	}
	out := make([]int, len(rf.names))
	for i := range out {
		out[i] = i
	}
	return out
}

func (rf *refEval) list(names []string) []int {
	var out []int
	for _, n := range names {
		out = append(out, rf.idx[n])
	}
	return out
}

// biased is Route 53's biased distance: distance * (1 - bias/100).
func (rf *refEval) biased(p int, lat, lon float64) float64 {
	l := rf.loc[p]
	if l == nil {
		return 1e300
	}
	return policy.Distance(lat, lon, l.Lat, l.Lon) * (1 - float64(rf.bias[p])/100)
}

// ranking orders a's candidates by biased distance, ties in list order.
func (rf *refEval) ranking(a config.Action, info geo.Info) []int {
	c := rf.candidates(a)
	sort.SliceStable(c, func(i, j int) bool {
		return rf.biased(c[i], info.Lat, info.Lon) < rf.biased(c[j], info.Lat, info.Lon)
	})
	return c
}

// outcomeKey is what steering knows about a: the client rules that match
// and, where a has a location, each geoproximity ranking.
func (rf *refEval) outcomeKey(t testing.TB, a netip.Addr) string {
	info := rf.info(t, a)
	key := fmt.Sprintf("%x", rf.clientMask(info, a))
	if info.HasLocation {
		for i := range rf.rec.Rules {
			if act := rf.action(i); act.By == "geoproximity" {
				key += fmt.Sprint(rf.ranking(act, info))
			}
		}
	}
	return key
}

// actionPools is every pool an action names.
func (rf *refEval) actionPools(a config.Action) uint64 {
	var m uint64
	add := func(names []string) {
		for _, n := range names {
			m |= 1 << rf.idx[n]
		}
	}
	if a.Pool != "" {
		add([]string{a.Pool})
	}
	for _, s := range a.Split {
		add([]string{s.Pool})
	}
	if a.Multivalue > 0 {
		if a.Pools == nil {
			m |= 1<<len(rf.names) - 1
		}
		add(a.Pools)
	}
	add(a.Failover)
	add(a.Fallback)
	if a.By == "geoproximity" {
		for _, p := range rf.candidates(a) {
			m |= 1 << p
		}
	}
	return m
}

// refDecision is what the reference expects.
type refDecision struct {
	rule    int
	allowed uint64 // the answer's pools are exactly this, or (oneOf) one of these
	oneOf   bool
	limit   int
	allDown bool
	noData  bool
	sticky  bool
}

// decide walks the rules for a client and resolver with pools up usable.
func (rf *refEval) decide(t testing.TB, client, resolver netip.Addr, qtype uint16, up uint64) refDecision {
	fam := rf.v4
	if qtype == dns.TypeAAAA {
		fam = rf.v6
	}
	if fam == 0 {
		return refDecision{rule: -1, noData: true}
	}
	avail := up & fam
	client, resolver = client.Unmap(), resolver.Unmap()
	cinfo := rf.info(t, client)
	var rinfo geo.Info
	if resolver.IsValid() {
		rinfo = rf.info(t, resolver)
	}
	first := -1
	for i, r := range rf.rec.Rules {
		switch {
		case r.Default != nil:
		case r.Match.Source == "resolver":
			if !resolver.IsValid() || !match(r.Match, rinfo, resolver) {
				continue
			}
		default:
			if !match(r.Match, cinfo, client) {
				continue
			}
		}
		if first < 0 {
			first = i
		}
		a := rf.action(i)
		d := refDecision{rule: i}
		switch {
		case a.Pool != "":
			d.allowed = 1 << rf.idx[a.Pool] & avail
		case a.Split != nil:
			d.oneOf, d.sticky = true, a.Sticky != ""
			for _, s := range a.Split {
				if s.Weight > 0 {
					d.allowed |= 1 << rf.idx[s.Pool] & avail
				}
			}
			if d.allowed == 0 {
				// Only zero-weight pools are usable: the first of them.
				for _, s := range a.Split {
					if avail&(1<<rf.idx[s.Pool]) != 0 {
						d.allowed = 1 << rf.idx[s.Pool]
						break
					}
				}
			}
		case a.Multivalue > 0:
			d.allowed = rf.actionPools(a) & avail
			d.limit = a.Multivalue
		case a.Failover != nil || a.By == "first":
			list := a.Failover
			if a.By == "first" {
				list = a.Fallback
			}
			for _, p := range rf.list(list) {
				if avail&(1<<p) != 0 {
					d.allowed = 1 << p
					break
				}
			}
		case a.By == "geoproximity":
			var order []int
			if cinfo.HasLocation {
				order = rf.ranking(a, cinfo)
			}
			// Then the fallback list; without one, every pool in
			// configuration order.
			order = append(order, rf.candidates(a)...)
			for _, p := range order {
				if avail&(1<<p) != 0 {
					d.allowed = 1 << p
					break
				}
			}
		default:
			t.Fatalf("reference: rule %d has an action it does not know", i)
		}
		if d.allowed != 0 {
			return d
		}
		if rf.rec.OnUnhealthy == "when_all_down" {
			break
		}
	}
	d := refDecision{rule: first, allDown: true}
	f := strings.Fields(rf.rec.WhenAllDown)
	switch {
	case len(f) == 0 || f[0] == "answer_all":
		d.allowed = rf.actionPools(rf.action(first)) & fam
		if d.allowed == 0 {
			d.allowed = fam
		}
	case f[0] == "fallback_pool":
		d.allowed = 1 << rf.idx[f[1]] & fam
	}
	if d.allowed == 0 && (len(f) == 0 || f[0] != "servfail") {
		d.noData = true
	}
	return d
}

// check compares a decision with the reference's.
func (rf *refEval) check(d policy.Decision, want refDecision) string {
	switch {
	case d.Rule != want.rule:
		return fmt.Sprintf("rule %d, want %d", d.Rule, want.rule)
	case d.AllDown != want.allDown:
		return fmt.Sprintf("AllDown %v, want %v", d.AllDown, want.allDown)
	case d.NoData != want.noData:
		return fmt.Sprintf("NoData %v, want %v", d.NoData, want.noData)
	case want.oneOf && (d.Pools&(d.Pools-1) != 0 || d.Pools&want.allowed != d.Pools || d.Pools == 0):
		return fmt.Sprintf("pools %b, want one of %b", d.Pools, want.allowed)
	case !want.oneOf && d.Pools != want.allowed:
		return fmt.Sprintf("pools %b, want %b", d.Pools, want.allowed)
	case d.Limit != want.limit:
		return fmt.Sprintf("limit %d, want %d", d.Limit, want.limit)
	}
	return ""
}

// boundaries returns, for the databases at paths and extra prefixes, the
// first address of every network (with or without data) and the address
// after every extra prefix: the places where what steering knows can
// change.
func boundaries(t testing.TB, paths []string, extra []netip.Prefix) []netip.Addr {
	t.Helper()
	seen := map[netip.Addr]bool{}
	add := func(p netip.Prefix) {
		seen[p.Masked().Addr()] = true
		last := lastAddr(p)
		if n := last.Next(); n.IsValid() {
			seen[n] = true
		}
	}
	for _, path := range paths {
		r, err := maxminddb.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for res := range r.Networks(maxminddb.IncludeNetworksWithoutData(), maxminddb.IncludeAliasedNetworks()) {
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
			add(res.Prefix())
		}
		r.Close()
	}
	for _, p := range extra {
		add(p)
	}
	add(netip.MustParsePrefix("0.0.0.0/0"))
	add(netip.MustParsePrefix("::/0"))
	out := make([]netip.Addr, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// bruteScope returns the widest prefix around a over which the reference's
// outcome is the same: the scope a correct partition gives a.
func bruteScope(t testing.TB, rf *refEval, points []netip.Addr, keys map[netip.Addr]string, a netip.Addr) int {
	t.Helper()
	key := func(p netip.Addr) string {
		k, ok := keys[p]
		if !ok {
			k = rf.outcomeKey(t, p)
			keys[p] = k
		}
		return k
	}
	want := key(a)
	for l := 0; l <= a.BitLen(); l++ {
		pfx, _ := a.Prefix(l)
		if key(pfx.Addr()) != want {
			continue
		}
		same := true
		lo, _ := slices.BinarySearchFunc(points, pfx.Addr(), func(x, y netip.Addr) int { return x.Compare(y) })
		for _, p := range points[lo:] {
			if !pfx.Contains(p) {
				break
			}
			if key(p) != want {
				same = false
				break
			}
		}
		if same {
			return l
		}
	}
	return a.BitLen()
}
