package simulate

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
)

// Base is what a scenario runs against: a configuration, its geo
// databases and, when already compiled, its policies.
type Base struct {
	// Config is the configuration the scenario runs against.
	Config *config.Config
	// Geo is its opened geo databases.
	Geo *geo.Set
	// Table is its compiled policies (nil: Compile builds them).
	Table *policy.Table
	// LoadConfig reads a config event's file (the path already resolved
	// against the scenario's directory); nil refuses config events (the
	// admin API), naming the event's line.
	LoadConfig func(path string) (*config.Config, error)
	// Limits bound what the scenario may ask for (zero fields: the
	// defaults).
	Limits Limits
}

// Limits bound a scenario's size. A zero field is its default: MaxSubnets,
// MaxRuns and MaxBins have one (DefaultMaxSubnets...), MaxResolvers and
// MaxDuration none.
type Limits struct {
	MaxSubnets, MaxRuns, MaxBins, MaxResolvers int
	MaxDuration                                time.Duration
}

// The default limits.
const (
	DefaultMaxSubnets = 100_000
	DefaultMaxRuns    = 1_000
	DefaultMaxBins    = 100_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxSubnets <= 0 {
		l.MaxSubnets = DefaultMaxSubnets
	}
	if l.MaxRuns <= 0 {
		l.MaxRuns = DefaultMaxRuns
	}
	if l.MaxBins <= 0 {
		l.MaxBins = DefaultMaxBins
	}
	return l
}

// Compile resolves sc against the configuration of b into the model the
// engine runs: the client subnets, resolver sites and instances, and one
// phase (a compiled table with its live state) per event time. Problems
// are reported together, each at the scenario's file:line, naming what is
// wrong (an unknown record or pool, a config event's own errors). Compile
// fills in sc's defaults; a scenario not read by ParseScenario (built in
// code) is checked as ParseScenario would, without lines. The model's
// tables are b.Table (or compiled from b.Config) and those the events
// compile; the base configuration is never modified (set_weights and
// ttl_override change copies of what they touch).
//
// The subnets of a prefixes group are its prefixes cut into /24s (IPv4)
// and /56s (IPv6), subnets: N of them evenly spread when set; a
// from_geodb group's are drawn from the geo databases. A site's
// resolvers take its subnets in turn (subnet i → resolver i mod count,
// counted over the site's groups), each at the site's share of the
// subnet's group; a resolver left with no subnet is dropped.
func Compile(sc *Scenario, b Base) (*Model, error) {
	c := &compiler{sc: sc, b: b, lim: b.Limits.withDefaults()}
	m, err := c.compile()
	if err != nil {
		return nil, err
	}
	if err := c.probs.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

type compiler struct {
	sc    *Scenario
	b     Base
	lim   Limits
	probs diag.Problems
	// networks are the geo databases' IPv4 networks of /24 or wider with
	// a country, read once for every from_geodb group.
	networks []geoNet
}

func (c *compiler) add(line int, format string, args ...any) {
	if line == 0 {
		line = c.sc.Line
	}
	c.probs.Add(c.sc.File, line, format, args...)
}

// errStop ends compile early: the problems so far say why.
var errStop = errors.New("stop")

func (c *compiler) compile() (*Model, error) {
	sc, b := c.sc, c.b
	if b.Config == nil || b.Geo == nil {
		return nil, errors.New("simulate: Compile needs a configuration and its geo databases (Base.Config, Base.Geo)")
	}
	sc.applyDefaults() // again: a caller may have cleared a field (--runs 0)
	if sc.keys == nil {
		// Built in code (FromLog, a test), not parsed: check it as
		// ParseScenario would, without lines.
		keys := map[string]int{}
		for k, set := range map[string]bool{"duration": sc.Duration != 0, "record": sc.Record != "", "clients": len(sc.Clients) > 0, "resolvers": len(sc.Resolvers) > 0} {
			if set {
				keys[k] = -1
			}
		}
		var probs diag.Problems
		sc.check(&probs, keys)
		if err := probs.Err(); err != nil {
			return nil, err
		}
	}
	start, err := time.Parse(time.RFC3339, sc.Start)
	if err != nil {
		c.add(sc.keyLine("start"), "start %q is not an RFC 3339 time", sc.Start)
	}
	m := &Model{Start: start, Duration: time.Duration(sc.Duration), Bin: time.Duration(sc.Bin),
		Runs: sc.Runs, Seed: *sc.Seed, Qtype: dns.TypeA, Record: dns.CanonicalName(strings.TrimSpace(sc.Record))}
	if sc.Type == "AAAA" {
		m.Qtype = dns.TypeAAAA
	}
	if m.Bin <= 0 || m.Duration <= 0 || m.Duration%m.Bin != 0 {
		c.add(sc.Line, "duration %s and bin %s: the duration must be a positive whole number of bins", sc.Duration, sc.Bin)
		return nil, c.probs.Err()
	}
	// Limits.
	if m.Runs > c.lim.MaxRuns {
		c.add(sc.keyLine("runs"), "runs %d is more than the limit of %d", m.Runs, c.lim.MaxRuns)
	}
	if n := int64(m.Duration / m.Bin); n > int64(c.lim.MaxBins) {
		c.add(sc.keyLine("duration"), "duration %s in bins of %s is %d bins, more than the limit of %d", sc.Duration, sc.Bin, n, c.lim.MaxBins)
	}
	if c.lim.MaxDuration > 0 && m.Duration > c.lim.MaxDuration {
		c.add(sc.keyLine("duration"), "duration %s is longer than the limit of %s", sc.Duration, fmtDuration(c.lim.MaxDuration))
	}
	ri := c.recordIndex(b.Config, m.Record)
	if ri < 0 {
		c.add(sc.keyLine("record"), "record %s is not a steered record of %s%s", strings.TrimSuffix(m.Record, "."), b.Config.File, steeredList(b.Config))
	}
	for _, g := range sc.Clients {
		m.Groups = append(m.Groups, c.group(g))
	}
	c.subnets(m)
	if len(m.Subnets) > c.lim.MaxSubnets {
		c.add(sc.keyLine("clients"), "the client groups have %d subnets, more than the limit of %d", len(m.Subnets), c.lim.MaxSubnets)
	}
	c.sites(m)
	if c.lim.MaxResolvers > 0 && len(m.Resolvers) > c.lim.MaxResolvers {
		c.add(sc.keyLine("resolvers"), "the resolver sites have %d resolvers, more than the limit of %d", len(m.Resolvers), c.lim.MaxResolvers)
	}
	if ri < 0 || len(c.probs) > 0 {
		return nil, c.probs.Err()
	}
	if err := c.phases(m, ri); err != nil && err != errStop {
		return nil, err
	}
	if len(c.probs) == 0 {
		c.capacity(m)
	}
	return m, nil
}

// recordIndex is the index of the steered record name (canonical) in cfg,
// or -1.
func (c *compiler) recordIndex(cfg *config.Config, name string) int {
	for i := range cfg.Records {
		if dns.CanonicalName(cfg.Records[i].Name) == name {
			return i
		}
	}
	return -1
}

// steeredList names a configuration's steered records for a message,
// when there are few.
func steeredList(cfg *config.Config) string {
	switch n := len(cfg.Records); {
	case n == 0:
		return " (it steers no record)"
	case n > 10:
		return fmt.Sprintf(" (it steers %d records)", n)
	}
	var names []string
	for _, r := range cfg.Records {
		names = append(names, strings.TrimSuffix(dns.CanonicalName(r.Name), "."))
	}
	return " (steered: " + strings.Join(names, ", ") + ")"
}

func (c *compiler) group(g ClientGroup) Group {
	out := Group{Name: g.Name, Rate: g.Rate}
	if d := g.Diurnal; d != nil {
		peak, _ := parseTimeOfDay(d.Peak)
		out.Diurnal = &Diurnal{Trough: d.Trough, Peak: peak}
	}
	return out
}

// subnets fills m.Subnets, group by group.
func (c *compiler) subnets(m *Model) {
	for gi := range c.sc.Clients {
		g := &c.sc.Clients[gi]
		var subs []Subnet
		var zipf float64
		if g.FromGeoDB != nil {
			subs = c.geoSubnets(g)
			zipf = *g.FromGeoDB.Zipf
		} else {
			subs = c.prefixSubnets(g)
			zipf = g.Zipf
		}
		if len(subs) == 0 {
			continue // reported
		}
		weigh(subs, zipf, c.rng("zipf", g.Name))
		for i := range subs {
			subs[i].Group = gi
		}
		m.Subnets = append(m.Subnets, subs...)
	}
}

// rng is a source seeded by the scenario's seed and a purpose, so that
// each group's draw does not depend on the others.
func (c *compiler) rng(purpose, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(purpose + "\x00" + name))
	return rand.New(rand.NewPCG(*c.sc.Seed, h.Sum64()))
}

// weigh sets the subnets' weights: equal, or by rank^-s for a random
// (seeded) order of ranks. They sum to 1.
func weigh(subs []Subnet, s float64, rng *rand.Rand) {
	if s == 0 {
		for i := range subs {
			subs[i].Weight = 1 / float64(len(subs))
		}
		return
	}
	rank := rng.Perm(len(subs))
	sum := 0.0
	for i := range subs {
		subs[i].Weight = math.Pow(float64(rank[i]+1), -s)
		sum += subs[i].Weight
	}
	for i := range subs {
		subs[i].Weight /= sum
	}
}

// span is a run of subnets: n consecutive /cut prefixes from base.
type span struct {
	base    netip.Addr
	cut     int
	n       uint64
	country string
}

// subnetLen is the length client subnets are cut to: what resolvers send
// as ECS source (/24, /56).
func subnetLen(a netip.Addr) int {
	if a.Is4() {
		return DefaultECSV4
	}
	return DefaultECSV6
}

// nth is the k-th subnet of the span.
func (s span) nth(k uint64) netip.Prefix {
	shift := s.base.BitLen() - s.cut
	if s.base.Is4() {
		b := s.base.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		v += uint32(k) << shift
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), s.cut)
	}
	b := s.base.As16()
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	var addHi, addLo uint64
	if shift >= 64 {
		addHi = k << (shift - 64)
	} else {
		addLo = k << shift
		if shift > 0 {
			addHi = k >> (64 - shift)
		}
	}
	var carry uint64
	lo, carry = bits.Add64(lo, addLo, 0)
	hi, _ = bits.Add64(hi, addHi, carry)
	for i := 0; i < 8; i++ {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), s.cut)
}

// pick returns count indices spread evenly over total subnets (all of
// them when count is 0 or not less than total).
func pick(total uint64, count int) []uint64 {
	if count <= 0 || uint64(count) >= total {
		out := make([]uint64, total)
		for i := range out {
			out[i] = uint64(i)
		}
		return out
	}
	out := make([]uint64, count)
	for i := range out {
		hi, lo := bits.Mul64(uint64(i), total)
		out[i], _ = bits.Div64(hi, lo, uint64(count))
	}
	return out
}

// subnetsOf returns the subnets at indices idx (ascending) of the spans
// laid end to end.
func subnetsOf(spans []span, idx []uint64) []Subnet {
	out := make([]Subnet, 0, len(idx))
	seen := make(map[netip.Prefix]bool, len(idx))
	si, base := 0, uint64(0)
	for _, k := range idx {
		for si < len(spans) && k >= base+spans[si].n {
			base += spans[si].n
			si++
		}
		if si == len(spans) {
			break
		}
		p := spans[si].nth(k - base)
		if seen[p] {
			continue // overlapping prefixes
		}
		seen[p] = true
		out = append(out, Subnet{Prefix: p, Country: spans[si].country})
	}
	return out
}

const maxCount = uint64(1) << 62

func (c *compiler) prefixSubnets(g *ClientGroup) []Subnet {
	var spans []span
	total := uint64(0)
	for _, s := range g.Prefixes {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			c.add(g.Line, "client group %s: %q is not a prefix", g.Name, s)
			continue
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		cut := subnetLen(p.Addr())
		sp := span{base: p.Addr(), cut: cut, n: 1}
		if p.Bits() < cut {
			sp.n = maxCount
			if d := cut - p.Bits(); d < 62 {
				sp.n = 1 << d
			}
		} else {
			sp.base = netip.PrefixFrom(p.Addr(), cut).Masked().Addr()
		}
		spans = append(spans, sp)
		total = min(total+sp.n, maxCount)
	}
	if len(spans) == 0 {
		return nil
	}
	if g.Subnets == 0 && total > uint64(c.lim.MaxSubnets) {
		c.add(g.Line, "client group %s has %s subnets, more than the limit of %d (set subnets: to take fewer, spread over its prefixes)", g.Name, countString(total), c.lim.MaxSubnets)
		return nil
	}
	if g.Subnets > c.lim.MaxSubnets {
		c.add(g.Line, "client group %s: subnets %d is more than the limit of %d", g.Name, g.Subnets, c.lim.MaxSubnets)
		return nil
	}
	subs := subnetsOf(spans, pick(total, g.Subnets))
	if c.b.Geo != nil {
		for i := range subs {
			if info, _, err := c.b.Geo.LookupInfo(subs[i].Prefix.Addr()); err == nil {
				subs[i].Country = info.Country
			}
		}
	}
	return subs
}

func countString(n uint64) string {
	if n >= maxCount {
		return "more than 2^62"
	}
	return fmt.Sprint(n)
}

// geoNet is a network of the geo databases with its country.
type geoNet struct {
	p       netip.Prefix
	country string
}

// geoSubnets draws a from_geodb group's subnets: the /24s of the geo
// databases' IPv4 networks of its countries (networks of /24 or wider;
// narrower ones may share their /24 with another country), FromGeoDB.Subnets
// of them drawn at random, seeded, without repeats.
func (c *compiler) geoSubnets(g *ClientGroup) []Subnet {
	fg := g.FromGeoDB
	if c.b.Geo == nil {
		c.add(fg.Line, "client group %s: from_geodb needs the configuration's geo databases", g.Name)
		return nil
	}
	if fg.Subnets > c.lim.MaxSubnets {
		c.add(fg.Line, "client group %s: from_geodb subnets %d is more than the limit of %d", g.Name, fg.Subnets, c.lim.MaxSubnets)
		return nil
	}
	if c.networks == nil {
		c.networks = []geoNet{}
		ipv4Only := func(netip.Prefix) bool { return true } // skip IPv6 when walking
		err := c.b.Geo.Networks(ipv4Only, func(p netip.Prefix, info geo.Info) bool {
			if p.Addr().Is4() && p.Bits() <= DefaultECSV4 && info.Country != "" {
				c.networks = append(c.networks, geoNet{p, info.Country})
			}
			return true
		})
		if err != nil {
			c.add(fg.Line, "client group %s: reading the geo databases: %v", g.Name, err)
			return nil
		}
	}
	want := map[string]bool{}
	for _, cc := range fg.Countries {
		want[cc] = true
	}
	var spans []span
	total := uint64(0)
	found := map[string]bool{}
	for _, n := range c.networks {
		if want[n.country] {
			sp := span{base: n.p.Addr(), cut: DefaultECSV4, n: 1 << (DefaultECSV4 - n.p.Bits()), country: n.country}
			spans = append(spans, sp)
			total += sp.n
			found[n.country] = true
		}
	}
	var missing []string
	for _, cc := range fg.Countries {
		if !found[cc] {
			missing = append(missing, cc)
		}
	}
	if len(missing) > 0 {
		c.add(fg.Line, "client group %s: the geo databases (%s) have no IPv4 /24 of %s", g.Name, geoNames(c.b.Geo), strings.Join(missing, ", "))
		return nil
	}
	idx := draw(total, fg.Subnets, c.rng("from_geodb", g.Name))
	return subnetsOf(spans, idx)
}

func geoNames(s *geo.Set) string {
	var names []string
	for _, d := range s.DBs {
		names = append(names, filepath.Base(d.Name))
	}
	return strings.Join(names, ", ")
}

// draw returns count distinct indices below total, drawn at random,
// ascending (all of them when count ≥ total).
func draw(total uint64, count int, rng *rand.Rand) []uint64 {
	if uint64(count) >= total {
		return pick(total, 0)
	}
	var out []uint64
	if uint64(count) > total/2 {
		perm := rng.Perm(int(total))
		for _, k := range perm[:count] {
			out = append(out, uint64(k))
		}
	} else {
		seen := make(map[uint64]bool, count)
		for len(out) < count {
			k := rng.Uint64N(total)
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// sites fills m.Sites and m.Resolvers.
func (c *compiler) sites(m *Model) {
	cfg := c.b.Config
	ecsOn := cfg.ECS.Enabled == nil || *cfg.ECS.Enabled
	maxV4, maxV6 := cfg.ECS.MaxSourceV4, cfg.ECS.MaxSourceV6
	if maxV4 == 0 {
		maxV4 = config.DefaultMaxSourceV4
	}
	if maxV6 == 0 {
		maxV6 = config.DefaultMaxSourceV6
	}
	byGroup := make([][]int32, len(c.sc.Clients))
	for i, s := range m.Subnets {
		byGroup[s.Group] = append(byGroup[s.Group], int32(i))
	}
	shares := siteShares(c.sc)
	for si := range c.sc.Resolvers {
		rs := &c.sc.Resolvers[si]
		site := Site{Name: rs.Name, HonorsScope: true, Line: rs.Line}
		if e := rs.ECS; e != nil && e.Enabled && ecsOn {
			site.ECS = true
			site.SourceV4, site.SourceV6 = min(e.V4, maxV4), min(e.V6, maxV6)
			if e.HonorsScope != nil {
				site.HonorsScope = *e.HonorsScope
			}
		}
		if t := rs.TTL; t != nil {
			site.MinTTL, site.MaxTTL = time.Duration(t.Min), time.Duration(t.Max)
		}
		v := rs.TTLViolators
		if v == nil {
			v = c.sc.TTLViolators
		}
		if v != nil {
			site.Violators, site.ExtendTo = v.Fraction, time.Duration(v.ExtendTo)
		}
		m.Sites = append(m.Sites, site)

		count, caches := max(rs.Count, 1), max(rs.Caches, 1)
		res := make([]Resolver, count)
		for i := range res {
			res[i] = Resolver{Site: si, Caches: caches}
		}
		k := 0 // the site's subnets go to its resolvers in turn
		for gi := range c.sc.Clients {
			share, ok := shares[si][gi]
			if !ok || !(share > 0) {
				continue
			}
			for _, sub := range byGroup[gi] {
				r := &res[k%count]
				r.Subnets = append(r.Subnets, sub)
				r.Share = append(r.Share, share)
				k++
			}
		}
		var addrs []netip.Addr
		if rs.Address != "" {
			var err error
			if addrs, err = siteAddresses(rs.Address, count); err != nil {
				c.add(rs.Line, "resolver site %s: %v", rs.Name, err)
				continue
			}
		}
		for i := range res {
			if len(res[i].Subnets) == 0 {
				continue // more resolvers than subnets: this one serves nobody
			}
			if addrs != nil {
				res[i].Addr = addrs[i]
			} else {
				res[i].Addr = m.Subnets[res[i].Subnets[0]].Prefix.Addr().Next()
			}
			m.Resolvers = append(m.Resolvers, res[i])
		}
	}
}

// poolKey is a pool of a record (canonical name).
type poolKey struct{ record, pool string }

// state is the policy state the timeline has reached.
type state struct {
	cfg   *config.Config
	ri    int // the asked record's index in cfg.Records
	table *policy.Table
	live  *policy.Live
	ovr   map[poolKey]policy.PoolOverride
	fail  map[poolKey]bool
}

func (c *compiler) phases(m *Model, ri int) error {
	b, sc := c.b, c.sc
	st := &state{cfg: b.Config, ri: ri, table: b.Table, ovr: map[poolKey]policy.PoolOverride{}, fail: map[poolKey]bool{}}
	if sc.TTLOverride != nil {
		st.cfg, st.table = withTTL(st.cfg, ri, time.Duration(*sc.TTLOverride)), nil
	}
	if st.table == nil {
		t, _, err := policy.Build(st.cfg, b.Geo)
		if err != nil {
			c.add(sc.Line, "compiling the configuration's policies: %v", err)
			return errStop
		}
		st.table = t
	}
	if !c.addPhase(m, st, 0, "start", 0) {
		return errStop
	}
	// Load events feed the capacity prediction (capacity.go), not the
	// policy: they start no phase.
	events := slices.DeleteFunc(slices.Clone(sc.Events), func(e Event) bool { return e.Load != nil })
	sort.SliceStable(events, func(i, j int) bool { return events[i].At < events[j].At })
	for i := 0; i < len(events); {
		at := time.Duration(events[i].At)
		j := i
		var labels []string
		ok := true
		for ; j < len(events) && time.Duration(events[j].At) == at; j++ {
			e := &events[j]
			label, rebuild, good := c.apply(m, st, e)
			if good && rebuild {
				// At once, so that the events after it at the same time
				// name the new table's pools.
				t, _, err := policy.BuildWith(st.cfg, b.Geo, st.table)
				if err != nil {
					c.add(e.Line, "%s: compiling the policies: %v", label, err)
					good = false
				} else {
					st.table = t
				}
			}
			labels = append(labels, label)
			ok = ok && good
		}
		line := events[i].Line
		if ok {
			c.addPhase(m, st, at, strings.Join(labels, "; "), line)
		}
		i = j
	}
	return nil
}

// addPhase appends a phase of the state's table with a new live state
// holding its overrides and failures.
func (c *compiler) addPhase(m *Model, st *state, at time.Duration, label string, line int) bool {
	rec := st.table.Get(m.Record)
	if rec == nil {
		c.add(line, "record %s is not in the compiled policies", strings.TrimSuffix(m.Record, "."))
		return false
	}
	live := policy.NewLive(st.table, policy.LiveOptions{Start: m.Start, Previous: st.live})
	failed := map[netip.Addr]bool{}
	for k := range st.fail {
		if r := st.table.Get(k.record); r != nil {
			for _, p := range r.Pools {
				if p.Name == k.pool {
					for _, a := range p.V4 {
						failed[a] = true
					}
					for _, a := range p.V6 {
						failed[a] = true
					}
				}
			}
		}
	}
	ovr := maps.Clone(st.ovr)
	health := func(l *policy.Live) {
		l.SetHealth(func(a netip.Addr, _ string) bool { return !failed[a] },
			func(record, pool string) policy.PoolOverride { return ovr[poolKey{record, pool}] })
	}
	health(live)
	st.live = live
	m.Phases = append(m.Phases, Phase{At: at, Label: label, Table: st.table, Live: live, Record: rec, Line: line, health: health})
	return true
}

// apply applies one event to st: its label, whether the table must be
// rebuilt, and whether it applied (problems are reported).
func (c *compiler) apply(m *Model, st *state, e *Event) (label string, rebuild, ok bool) {
	switch {
	case e.SetWeights != nil:
		return c.setWeights(m, st, e)
	case e.Config != "":
		return c.configEvent(m, st, e)
	}
	var verb, ref string
	var ov policy.PoolOverride
	switch {
	case e.Drain != "":
		verb, ref, ov = "drain", e.Drain, policy.PoolDrain
	case e.Undrain != "":
		verb, ref, ov = "undrain", e.Undrain, policy.PoolAuto
	case e.Fail != "":
		verb, ref = "fail", e.Fail
	case e.Recover != "":
		verb, ref = "recover", e.Recover
	default:
		c.add(e.Line, "event at %s has no action", e.At)
		return "", false, false
	}
	k, good := c.poolRef(m, st, ref, e.Line)
	if !good {
		return "", false, false
	}
	label = verb + " " + ref
	switch verb {
	case "drain", "undrain":
		if ov == policy.PoolAuto {
			delete(st.ovr, k)
		} else {
			st.ovr[k] = ov
		}
	case "fail":
		st.fail[k] = true
	case "recover":
		delete(st.fail, k)
	}
	if (verb == "drain" || verb == "fail") && k.record == m.Record {
		m.Drains = append(m.Drains, Drain{Pool: k.pool, At: time.Duration(e.At), Label: label})
	}
	return label, false, true
}

// poolRef resolves "pool" (of the asked record) or "record/pool" against
// the state's table.
func (c *compiler) poolRef(m *Model, st *state, ref string, line int) (poolKey, bool) {
	rname, pool := m.Record, ref
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		rname, pool = dns.CanonicalName(ref[:i]), ref[i+1:]
	}
	r := st.table.Get(rname)
	if r == nil {
		c.add(line, "%s: record %s is not a steered record of %s%s", ref, strings.TrimSuffix(rname, "."), st.cfg.File, steeredList(st.cfg))
		return poolKey{}, false
	}
	var names []string
	for _, p := range r.Pools {
		if p.Name == pool {
			return poolKey{rname, pool}, true
		}
		names = append(names, p.Name)
	}
	c.add(line, "pool %s is not a pool of %s (pools: %s)", pool, strings.TrimSuffix(rname, "."), strings.Join(names, ", "))
	return poolKey{}, false
}

// setWeights changes the split weights of the asked record (or of the
// shared policy it uses) in a copy of the configuration.
func (c *compiler) setWeights(m *Model, st *state, e *Event) (string, bool, bool) {
	rc := &st.cfg.Records[st.ri]
	rname := strings.TrimSuffix(m.Record, ".")
	// "record/pool" names a pool of the asked record too; the splits of
	// another record do not change what its users are answered.
	weights := make(map[string]int, len(e.SetWeights))
	for k, w := range e.SetWeights {
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			if dns.CanonicalName(k[:i]) != m.Record {
				c.add(e.Line, "set_weights: %s: only the pools of %s, the record asked, can be reweighed", k, rname)
				return "weights", false, false
			}
			k = k[i+1:]
		}
		weights[k] = w
	}
	var pol *config.Policy
	if rc.Policy != "" {
		if p, ok := st.cfg.Policies[rc.Policy]; ok {
			pol = &p
		}
	}
	members := map[string]bool{}
	for n := range rc.Pools {
		members[n] = true
	}
	for n := range rc.Groups {
		members[n] = true
	}
	inSplit := map[string]bool{}
	splits := func(rules []config.Rule, groups map[string]config.Group) {
		for _, r := range rules {
			for _, s := range r.Split {
				inSplit[s.Pool] = true
			}
			if r.Default != nil {
				for _, s := range r.Default.Split {
					inSplit[s.Pool] = true
				}
			}
		}
		for _, g := range groups {
			for _, s := range g.Split {
				inSplit[s.Pool] = true
			}
		}
	}
	splits(rc.Rules, rc.Groups)
	if pol != nil {
		for n := range pol.Groups {
			members[n] = true
		}
		splits(pol.Rules, pol.Groups)
	}
	ok := true
	var parts []string
	for _, p := range sortedKeys(weights) {
		parts = append(parts, fmt.Sprintf("%s=%d", p, weights[p]))
		switch {
		case !members[p]:
			c.add(e.Line, "pool %s is not a pool of %s (pools: %s)", p, rname, strings.Join(sortedKeys(rc.Pools), ", "))
			ok = false
		case !inSplit[p]:
			c.add(e.Line, "set_weights: pool %s is in no split of %s", p, rname)
			ok = false
		}
	}
	label := "weights " + strings.Join(parts, " ")
	if !ok {
		return label, false, false
	}
	cfg := *st.cfg
	recs := slices.Clone(cfg.Records)
	nr := recs[st.ri]
	nr.Rules, nr.Groups = reweighRules(nr.Rules, weights), reweighGroups(nr.Groups, weights)
	recs[st.ri] = nr
	cfg.Records = recs
	if pol != nil {
		np := *pol
		np.Rules, np.Groups = reweighRules(np.Rules, weights), reweighGroups(np.Groups, weights)
		cfg.Policies = maps.Clone(cfg.Policies)
		cfg.Policies[rc.Policy] = np
		label += fmt.Sprintf(" (in policy %s: every record using it)", rc.Policy)
	}
	st.cfg = &cfg
	return label, true, true
}

func reweigh(split []config.SplitEntry, w map[string]int) []config.SplitEntry {
	if split == nil {
		return nil
	}
	out := slices.Clone(split)
	for i := range out {
		if v, ok := w[out[i].Pool]; ok {
			out[i].Weight = v
		}
	}
	return out
}

func reweighRules(rules []config.Rule, w map[string]int) []config.Rule {
	if rules == nil {
		return nil
	}
	out := slices.Clone(rules)
	for i := range out {
		out[i].Split = reweigh(out[i].Split, w)
		if d := out[i].Default; d != nil {
			nd := *d
			nd.Split = reweigh(nd.Split, w)
			out[i].Default = &nd
		}
	}
	return out
}

func reweighGroups(groups map[string]config.Group, w map[string]int) map[string]config.Group {
	if groups == nil {
		return nil
	}
	out := make(map[string]config.Group, len(groups))
	for n, g := range groups {
		g.Split = reweigh(g.Split, w)
		out[n] = g
	}
	return out
}

// withTTL returns a copy of cfg whose record ri has the TTL d (whole
// seconds, at least 1).
func withTTL(cfg *config.Config, ri int, d time.Duration) *config.Config {
	n := *cfg
	n.Records = slices.Clone(cfg.Records)
	secs := max(int((d+time.Second-1)/time.Second), 1)
	n.Records[ri].TTL = &secs
	return &n
}

// configEvent switches to another configuration file.
func (c *compiler) configEvent(m *Model, st *state, e *Event) (string, bool, bool) {
	label := "config " + e.Config
	if c.b.LoadConfig == nil {
		c.add(e.Line, "config %s: config events need files: not available through the API", e.Config)
		return label, false, false
	}
	p := e.Config
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(c.sc.File), p)
	}
	cfg, err := c.b.LoadConfig(p)
	if err != nil {
		c.add(e.Line, "config %s: %v", e.Config, err)
		return label, false, false
	}
	if a, b := geoPaths(c.b.Config), geoPaths(cfg); !slices.Equal(a, b) {
		c.add(e.Line, "config %s: its geo databases (%s) are not those of %s (%s): a simulation runs against one set", e.Config, strings.Join(b, ", "), c.b.Config.File, strings.Join(a, ", "))
		return label, false, false
	}
	ri := c.recordIndex(cfg, m.Record)
	if ri < 0 {
		c.add(e.Line, "config %s: record %s is not a steered record of %s%s", e.Config, strings.TrimSuffix(m.Record, "."), cfg.File, steeredList(cfg))
		return label, false, false
	}
	if c.sc.TTLOverride != nil {
		cfg = withTTL(cfg, ri, time.Duration(*c.sc.TTLOverride))
	}
	st.cfg, st.ri = cfg, ri
	return label, true, true
}

// geoPaths are the paths of a configuration's geo databases.
func geoPaths(cfg *config.Config) []string {
	var out []string
	for _, d := range cfg.Geo.Databases {
		if d != geo.EmbeddedName {
			d = cfg.LocalPath(d)
		}
		out = append(out, d)
	}
	return out
}
