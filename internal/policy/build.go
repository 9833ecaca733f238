package policy

import (
	"fmt"
	"hash/fnv"
	"math"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/geo"
)

// Table is the compiled steered records of a configuration, by name.
type Table struct {
	Records []*Record
	byName  map[string]*Record
	// CompileTime is how long compiling every record took.
	CompileTime time.Duration
	// Compiled counts the partitions compiled for this table, Shared the
	// records that took one compiled for another record of it, Reused
	// those that took one from the previous table (see share.go).
	Compiled, Shared, Reused int
	// RecordsReused counts the records taken whole from the previous
	// table because everything they are built from is unchanged
	// (reuse.go), RecordsBuilt those built from their configuration.
	RecordsReused, RecordsBuilt int

	geo   *geo.Set           // the databases the partitions were compiled against
	cfg   *config.Config     // the configuration the records were built from
	bySrc []*Record          // by index in cfg.Records (nil: not in the table)
	parts map[string]*Record // a record of each compile key, for the next build
	// nodeIn is the answering node and ecs.unknown_client (node.go).
	nodeIn *nodeInput
}

// Get returns the record named name (canonical), or nil.
func (t *Table) Get(name string) *Record {
	if t == nil {
		return nil
	}
	return t.byName[name]
}

// MaxSteeredTTL is the TTL above which check warns: a long TTL keeps
// clients on a site long after it fails.
const MaxSteeredTTL = 300

var subdivisionRe = regexp.MustCompile(`^[A-Z]{2}-[A-Z0-9]{1,3}$`)

// Build compiles every record of cfg against g. Every problem is reported
// with the configuration file and line; warnings do not stop the build.
func Build(cfg *config.Config, g *geo.Set) (*Table, diag.Problems, error) {
	return BuildWith(cfg, g, nil)
}

// BuildWith is Build that takes what it can from prev (the table being
// served) instead of building it again, when prev was compiled against
// the same geo set: a record whose inputs are all unchanged is prev's
// compiled record, copied, with its new index and lines (reuse.go); any
// other record whose rules, candidates and their locations are unchanged
// reuses its partition. Within the build, records with equal rules share
// one. prev is only read.
func BuildWith(cfg *config.Config, g *geo.Set, prev *Table) (*Table, diag.Problems, error) {
	t := &Table{byName: make(map[string]*Record, len(cfg.Records)), geo: g, cfg: cfg, bySrc: make([]*Record, len(cfg.Records)), nodeIn: newNodeInput(cfg)}
	compiled := map[string]*Record{}
	var previous map[string]*Record
	var reuse *reuser
	if prev != nil && prev.geo == g {
		previous = prev.parts
		reuse = newReuser(cfg, prev)
	}
	var errs, warns diag.Problems
	start := time.Now()
	hasASN := false
	for _, d := range g.DBs {
		if d.Layout == geo.LayoutASN || d.Layout == geo.LayoutIPinfo {
			hasASN = true
		}
	}
	if len(cfg.ECS.AnycastResolvers) > 0 && cfg.ECS.UnknownClient != config.UnknownClientNode {
		warns.Add(cfg.File, cfg.Line("ecs.anycast_resolvers"), "ecs.anycast_resolvers is only used with ecs.unknown_client: node (it is %s)", cfg.ECS.UnknownClient)
	}
	if cfg.ECS.UnknownClient == config.UnknownClientNode && !t.nodeIn.steer && len(cfg.Records) > 0 {
		warns.Add(cfg.File, cfg.Line("ecs.unknown_client"), "ecs.unknown_client: node, but the node has no location or country (node.location, node.country): queries without ECS are steered by the resolver's address")
	}
	warnedPolicy := map[string]bool{}
	var specs map[specKey]*PoolSpec
	recs := make([]built, 0, len(cfg.Records))
	toCompile := map[string]bool{}
	ckeys, dkeys, lkeys := map[string]string{}, map[string]string{}, map[string]string{}
	ruleSets := map[string][]*Record{}            // by policy: records whose rules others may share
	builders := make([]builder, len(cfg.Records)) // one allocation, not one a record
	for i := range cfg.Records {
		b := &builders[i]
		*b = builder{cfg: cfg, idx: i, errs: &errs, warns: &warns, hasASN: hasASN, warnedPolicy: warnedPolicy, specs: &specs, node: t.nodeIn}
		var r *Record
		reused := false
		if r = reuse.take(b); r != nil {
			reused = true
		} else if r = b.record(); r == nil {
			continue
		}
		if prev := t.byName[r.Name]; prev != nil {
			errs.Add(cfg.File, r.Line, "record %s is already defined at line %d", r.Name, prev.Line)
			continue
		}
		t.byName[r.Name] = r
		if !reused && b.policy != "" {
			shared := false
			for _, o := range ruleSets[b.policy] {
				if shared = r.shareRules(o); shared {
					break
				}
			}
			if !shared && len(ruleSets[b.policy]) < 8 {
				ruleSets[b.policy] = append(ruleSets[b.policy], r)
			}
		}
		if !reused {
			// The keys are the same strings for the records of a
			// policy: one copy each, not one a record.
			r.ckey = r.compileKey()
			if c, ok := ckeys[r.ckey]; ok {
				r.ckey = c
			} else {
				ckeys[r.ckey] = r.ckey
			}
			k := r.decisionKey()
			if d, ok := dkeys[k]; ok {
				k = d // one copy for the records of a policy
			} else {
				dkeys[k] = k
			}
			r.dkey = k
			if r.HasLatency() {
				lk := r.latencyKey()
				if d, ok := lkeys[lk]; ok {
					lk = d
				} else {
					lkeys[lk] = lk
				}
				r.latKey = lk
			}
			if previous[r.ckey] == nil {
				toCompile[r.ckey] = true
			}
		}
		recs = append(recs, built{b, r, reused})
	}
	// Two or more partitions to compile against one geo set, or any
	// against a single database (whose list of networks is read in one
	// pass): compile the databases once into a shared partition and look
	// clients up there. Not when no record to compile looks at the
	// client and no node tries are placed: failover, weighted and
	// multivalue records compile to one leaf (compiler.build), and the
	// partition (15 MB and 0.2 s of CPU for the embedded database) would
	// be made for nothing.
	walks := false
	for _, br := range recs {
		r := br.r
		if toCompile[r.ckey] && !r.clientIndependent() || r.nodeTwins && !br.reused && !r.hasCIDRs() {
			walks = true
			break
		}
	}
	var part *geo.Partition
	if walks && (len(toCompile) >= 2 || len(toCompile) == 1 && len(g.DBs) == 1) {
		var err error
		if part, err = g.Partition(unrouted, Workers(prev != nil)); err != nil {
			errs.Add(cfg.File, 0, "compiling the geo databases: %v", err)
			return nil, warns, errs.Err()
		}
	}
	// The partitions to compile, one record for each, compiled at once:
	// on every core at start-up (nothing is answering yet), on half of
	// them (one of two) on a reload, so that answering keeps its own.
	if err := t.nodeIn.placedTries(recs, g, part, prev); err != nil {
		errs.Add(cfg.File, 0, "compiling the geo databases: %v", err)
		return nil, warns, errs.Err()
	}
	compileErrs := compileAll(recs, compiled, previous, g, part, Workers(prev != nil))
	t.Records = make([]*Record, 0, len(recs))
	for _, br := range recs {
		b, r := br.b, br.r
		switch src := compiled[r.ckey]; {
		case src != nil:
			// A reused record has this partition already: every record
			// of the previous table with its key shares one.
			if !br.reused {
				r.sharePartition(src)
			}
			t.Shared++
		case br.reused:
			compiled[r.ckey] = r
			t.Reused++
		case previous[r.ckey] != nil:
			r.sharePartition(previous[r.ckey])
			compiled[r.ckey] = r
			t.Reused++
		default:
			err, ok := compileErrs[r]
			if !ok { // its key's first record failed: try it alone
				err = r.compile(g, part, 0)
			}
			if err != nil {
				errs.Add(cfg.File, r.Line, "record %s: compiling against the geo databases: %v", r.Name, err)
				delete(t.byName, r.Name)
				continue
			}
			compiled[r.ckey] = r
			t.Compiled++
		}
		if br.reused {
			b.replay(r, true)
			t.RecordsReused++
		} else {
			b.late = true
			b.shadowed(r)
			b.disabled(r)
			t.RecordsBuilt++
		}
		r.node = nil
		if r.nodeTwins {
			r.node = t.nodeIn // this table's anycast_resolvers
		}
		r.Index = len(t.Records)
		t.Records = append(t.Records, r)
		t.bySrc[r.src] = r
	}
	t.checkSafety(cfg, &errs) // safety.go
	t.parts = compiled
	t.CompileTime = time.Since(start)
	return t, warns, errs.Err()
}

// Workers is how many goroutines a build compiles (or parses) on: every
// core at start-up, when nothing is answering yet; half of them on a
// reload, so that answering keeps its own (one of two).
func Workers(reload bool) int {
	n := runtime.NumCPU()
	if reload {
		n /= 2
	}
	return max(1, n)
}

// built is a record of a build with its builder; reused when taken from
// the previous table.
type built struct {
	b      *builder
	r      *Record
	reused bool // taken whole from prev
}

// compileAll compiles, on workers goroutines, the first record of recs
// for each compile key that has no partition yet (the loop of BuildWith
// shares it with the others), and returns the errors by record. Each
// compile writes only its own record and reads the geo set and the
// shared partition.
func compileAll(recs []built, compiled, previous map[string]*Record, g *geo.Set, part *geo.Partition, workers int) map[*Record]error {
	var todo []*Record
	first := map[string]bool{}
	for _, br := range recs {
		k := br.r.ckey
		if br.reused || compiled[k] != nil || previous[k] != nil || first[k] {
			continue
		}
		first[k] = true
		todo = append(todo, br.r)
	}
	errs := make([]error, len(todo))
	next := make(chan int, len(todo))
	for i := range todo {
		next <- i
	}
	close(next)
	// Fewer partitions than workers: each builds its IPv4 and IPv6 tries
	// at once (a one-policy start-up on two cores).
	var mode compileMode
	if workers > len(todo) {
		mode = compileSplit
	}
	var wg sync.WaitGroup
	for range min(workers, len(todo)) {
		wg.Go(func() {
			for i := range next {
				errs[i] = todo[i].compile(g, part, mode)
			}
		})
	}
	wg.Wait()
	out := make(map[*Record]error, len(todo))
	for i, r := range todo {
		out[r] = errs[i]
	}
	return out
}

type builder struct {
	cfg         *config.Config
	idx         int
	errs, warns *diag.Problems
	hasASN      bool
	node        *nodeInput
	r           *Record
	poolIdx     map[string]int
	groupIdx    map[string]int // member index of each group
	// failed is set when the record has an error already reported for
	// another record of its policy (errOnce).
	failed bool
	// policy is the named policy the record's rules come from ("" for
	// inline rules): problems in them point at policies.NAME, and its
	// warnings are given once, for the first record using it.
	policy       string
	warnedPolicy map[string]bool
	// specs are the table's pool specs (spec), shared by its builders.
	specs *map[specKey]*PoolSpec
	// late is set once the record is compiled: its warnings from then on
	// (shadowed, disabled) are kept apart from those of building it, so a
	// reused record gives both where a built one would (reuse.go).
	late bool
}

func policyNames(cfg *config.Config) string {
	if len(cfg.Policies) == 0 {
		return "none defined"
	}
	names := make([]string, 0, len(cfg.Policies))
	for n := range cfg.Policies {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// inPolicy reports whether at (".rules[...]" and so on) lies in the named
// policy the record uses rather than in the record.
func (b *builder) inPolicy(at string) bool {
	if b.policy == "" {
		return false
	}
	if name, ok := strings.CutPrefix(at, ".groups."); ok {
		name, _, _ = strings.Cut(name, ".")
		_, own := b.cfg.Records[b.idx].Groups[name]
		_, inPol := b.cfg.Policies[b.policy].Groups[name]
		return !own && inPol
	}
	for _, k := range []string{".rules", ".on_unhealthy", ".when_all_down"} {
		if strings.HasPrefix(at, k) {
			return k == ".rules" || b.cfg.Records[b.idx].OnUnhealthy == "" && k == ".on_unhealthy" ||
				b.cfg.Records[b.idx].WhenAllDown == "" && k == ".when_all_down"
		}
	}
	return false
}

func (b *builder) path(s string) string {
	if b.inPolicy(s) {
		return "policies." + b.policy + s
	}
	return fmt.Sprintf("records[%d]%s", b.idx, s)
}

func (b *builder) line(s string) int {
	if l := b.cfg.Line(b.path(s)); l != 0 {
		return l
	}
	return b.cfg.Records[b.idx].Line
}

func (b *builder) errf(at string, format string, args ...any) {
	b.errs.Add(b.cfg.File, b.line(at), format, args...)
}

// warnf reports a warning about the record being built at (a path under
// it, as for line) and keeps it with the record, to be given again when a
// later build reuses the record (replay).
func (b *builder) warnf(at string, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if b.r != nil {
		// Kept before the once-per-policy filter: if the record that gave
		// it first is gone on a rebuild, the next one using the policy
		// gives it.
		b.r.warns = append(b.r.warns, warning{at: at, msg: msg, late: b.late})
	}
	b.warn(at, msg)
}

func (b *builder) warn(at, msg string) {
	if b.inPolicy(at) {
		if b.warnedPolicy[b.policy+"\x00"+at] {
			return
		}
		b.warnedPolicy[b.policy+"\x00"+at] = true
		msg = "policy " + b.policy + ": " + msg
	}
	b.warns.Add(b.cfg.File, b.line(at), "%s", msg)
}

func (b *builder) record() *Record {
	rc := b.cfg.Records[b.idx]
	nerr := len(*b.errs)
	if rc.Name == "" {
		b.errf("", "record has no name")
		return nil
	}
	if _, ok := dns.IsDomainName(rc.Name); !ok {
		b.errf(".name", "record name %q is not a domain name", rc.Name)
		return nil
	}
	r := &Record{Name: dns.CanonicalName(rc.Name), Line: rc.Line, TTL: config.DefaultSteeredTTL, NextRule: true, src: b.idx, ruleSet: &ruleSet{}}
	b.r = r
	if rc.Policy != "" {
		pol, ok := b.cfg.Policies[rc.Policy]
		switch {
		case !ok:
			b.errf(".policy", "record %s: no policy %q (policies: %s)", r.Name, rc.Policy, policyNames(b.cfg))
			return nil
		case len(rc.Rules) > 0:
			b.errf(".rules", "record %s has rules and policy %s: give one or the other", r.Name, rc.Policy)
			return nil
		}
		b.policy = rc.Policy
		rc.Rules = pol.Rules
		if rc.OnUnhealthy == "" {
			rc.OnUnhealthy = pol.OnUnhealthy
		}
		if rc.WhenAllDown == "" {
			rc.WhenAllDown = pol.WhenAllDown
		}
	}
	switch strings.ToUpper(rc.Type) {
	case "A", "AAAA", "":
		r.Type = dns.TypeA
	case "CNAME":
		r.Type = dns.TypeCNAME
	default:
		b.errf(".type", "record %s: type %q is not A, AAAA or CNAME", r.Name, rc.Type)
	}
	if rc.TTL != nil {
		if *rc.TTL < 0 || *rc.TTL > 1<<31-1 {
			b.errf(".ttl", "record %s: ttl %d is out of range", r.Name, *rc.TTL)
		} else {
			r.TTL = uint32(*rc.TTL)
		}
		if *rc.TTL > MaxSteeredTTL {
			b.warnf(".ttl", "record %s: ttl %d is over %d: clients stay on a failed site that long", r.Name, *rc.TTL, MaxSteeredTTL)
		}
	}
	if rc.TTLWhileDegraded != nil {
		v := *rc.TTLWhileDegraded
		if v < 0 || v > 1<<31-1 {
			b.errf(".ttl_while_degraded", "record %s: ttl_while_degraded %d is out of range", r.Name, v)
		} else if uint32(v) >= r.TTL {
			b.warnf(".ttl_while_degraded", "record %s: ttl_while_degraded %d is not shorter than ttl %d", r.Name, v, r.TTL)
		}
		r.DegradedTTL = uint32(max(v, 0))
	}
	b.pools(rc)
	if len(r.Pools) == 0 {
		b.errf("", "record %s has no pools", r.Name)
		return nil
	}
	switch rc.OnUnhealthy {
	case "", "next_rule":
	case "when_all_down":
		r.NextRule = false
	default:
		b.errf(".on_unhealthy", "record %s: on_unhealthy %q is not next_rule or when_all_down", r.Name, rc.OnUnhealthy)
	}
	b.groupStubs()
	b.whenAllDown(rc)
	b.rules(rc)
	if len(*b.errs) == nerr {
		b.finishGroups()
	}
	if len(*b.errs) == nerr {
		b.finishActions()
	}
	if len(*b.errs) > nerr || b.failed {
		return nil
	}
	if b.node.steer && r.geoDependent() {
		r.nodeTwins, r.node = true, b.node
	}
	return r
}

func (b *builder) pools(rc config.Record) {
	r := b.r
	b.poolIdx = map[string]int{}
	names := b.cfg.PoolNames(b.idx)
	if len(names) > MaxPools {
		b.errf(".pools", "record %s has %d pools; at most %d are supported", r.Name, len(names), MaxPools)
		return
	}
	for _, name := range names {
		pc := rc.Pools[name]
		at := ".pools." + name
		sp := PoolSpec{Name: name, Index: len(r.Pools), Bias: pc.Bias, Site: name}
		p := &Pool{Line: b.line(at)}
		if pc.Site != "" {
			sp.Site = pc.Site
		}
		addrs := pc.Addresses
		if pc.Address != "" {
			addrs = append([]string{pc.Address}, addrs...)
		}
		if r.Type == dns.TypeCNAME {
			if pc.Target == "" {
				b.errf(at, "record %s: pool %s needs a target (a CNAME record's pools hold names)", r.Name, name)
			} else if _, ok := dns.IsDomainName(pc.Target); !ok {
				b.errf(at, "record %s: pool %s: target %q is not a domain name", r.Name, name, pc.Target)
			} else {
				p.Target = dns.Fqdn(pc.Target)
			}
			if len(addrs) > 0 {
				b.errf(at, "record %s: pool %s: a CNAME record's pools have a target, not addresses", r.Name, name)
			}
		} else {
			if len(addrs) == 0 {
				b.errf(at, "record %s: pool %s has no address", r.Name, name)
			}
			if pc.Target != "" {
				b.errf(at, "record %s: pool %s: target is only for CNAME records", r.Name, name)
			}
			for _, s := range addrs {
				a, err := netip.ParseAddr(s)
				if err != nil || a.Zone() != "" {
					b.errf(at, "record %s: pool %s: %q is not an IP address", r.Name, name, s)
					continue
				}
				a = a.Unmap()
				if a.Is4() {
					p.V4 = append(p.V4, a)
				} else {
					p.V6 = append(p.V6, a)
				}
			}
		}
		if pc.Location != nil {
			if pc.Location.Lat < -90 || pc.Location.Lat > 90 || pc.Location.Lon < -180 || pc.Location.Lon > 180 {
				b.errf(at+".location", "record %s: pool %s: location %v,%v is not a latitude and longitude", r.Name, name, pc.Location.Lat, pc.Location.Lon)
			}
			sp.Lat, sp.Lon, sp.HasLoc = pc.Location.Lat, pc.Location.Lon, true
		}
		if pc.HealthCheck != "" {
			if _, ok := b.cfg.HealthChecks[pc.HealthCheck]; !ok {
				b.errf(at+".health_check", "record %s: pool %s: no health check named %q in health_checks", r.Name, name, pc.HealthCheck)
			}
			if r.Type == dns.TypeCNAME {
				b.errf(at+".health_check", "record %s: pool %s: a CNAME record's pools hold names, which cannot be health-checked", r.Name, name)
			}
			if len(addrs) > 64 {
				b.errf(at+".health_check", "record %s: pool %s: a health-checked pool holds at most 64 addresses", r.Name, name)
			}
			sp.Check = pc.HealthCheck
		}
		sp.MinUp = max(1, pc.MinUp)
		if pc.MinUp < 0 || (pc.MinUp > len(addrs) && r.Type != dns.TypeCNAME) {
			b.errf(at+".min_up", "record %s: pool %s: min_up %d is not between 1 and its %d addresses", r.Name, name, pc.MinUp, len(addrs))
		}
		if c := pc.Capacity; c != nil {
			sp.Capacity = &Capacity{Target: c.Target, Max: math.Inf(1)}
			if math.IsNaN(c.Target) || math.IsInf(c.Target, 0) || c.Target <= 0 {
				b.errf(at+".capacity.target", "record %s: pool %s: capacity target %v must be a positive number (in the unit of its load feed)", r.Name, name, c.Target)
			}
			if c.Max != nil {
				sp.Capacity.Max = *c.Max
				if math.IsNaN(*c.Max) || *c.Max < c.Target {
					b.errf(at+".capacity.max", "record %s: pool %s: capacity max %v is below its target %v", r.Name, name, *c.Max, c.Target)
				}
			}
		}
		if pc.Bias < -99 || pc.Bias > 99 {
			b.errf(at+".bias", "record %s: pool %s: bias %d is not between -99 and 99", r.Name, name, pc.Bias)
		}
		p.PoolSpec = b.spec(sp)
		bit := uint64(1) << p.Index
		r.allPools |= bit
		if pc.Enabled == nil || *pc.Enabled {
			r.Enabled |= bit
		}
		if len(p.V4) > 0 {
			r.hasV4 |= bit
		}
		if len(p.V6) > 0 {
			r.hasV6 |= bit
		}
		b.poolIdx[name] = p.Index
		r.Pools = append(r.Pools, p)
	}
}

// specKey is a PoolSpec by value, with its capacity's figures for the
// pointer.
type specKey struct {
	PoolSpec
	hasCap            bool
	capTarget, capMax float64
}

// spec returns the table's PoolSpec equal to sp, making sp it when there
// is none yet: the pools of the records of a policy share one per name.
func (b *builder) spec(sp PoolSpec) *PoolSpec {
	h := fnv.New64a()
	h.Write([]byte(sp.Name))
	sp.hash = h.Sum64()
	k := specKey{PoolSpec: sp}
	if c := sp.Capacity; c != nil {
		k.hasCap, k.capTarget, k.capMax, k.Capacity = true, c.Target, c.Max, nil
	}
	if s, ok := (*b.specs)[k]; ok {
		return s
	}
	s := &sp
	if *b.specs == nil {
		*b.specs = map[specKey]*PoolSpec{}
	}
	(*b.specs)[k] = s
	return s
}

func (b *builder) whenAllDown(rc config.Record) {
	r := b.r
	f := strings.Fields(rc.WhenAllDown)
	if len(f) == 0 {
		return
	}
	switch f[0] {
	case "answer_all":
		r.WhenAllDown = AnswerAll
	case "nodata":
		r.WhenAllDown = NoData
	case "servfail":
		r.WhenAllDown = ServFail
	case "fallback_pool":
		r.WhenAllDown = FallbackPool
		if len(f) != 2 {
			b.errf(".when_all_down", "record %s: when_all_down: fallback_pool needs a pool name", r.Name)
			return
		}
		p, ok := b.poolIdx[f[1]]
		if !ok {
			b.errf(".when_all_down", "record %s: when_all_down: unknown pool %q", r.Name, f[1])
		}
		r.FallbackPool = p
		return
	default:
		b.errf(".when_all_down", "record %s: when_all_down %q is not answer_all, fallback_pool NAME, nodata or servfail", r.Name, rc.WhenAllDown)
		return
	}
	if len(f) != 1 {
		b.errf(".when_all_down", "record %s: when_all_down %q takes no argument", r.Name, f[0])
	}
}

func (b *builder) rules(rc config.Record) {
	r := b.r
	if len(rc.Rules) > MaxRules {
		b.errf(".rules", "record %s has %d rules; at most %d are supported", r.Name, len(rc.Rules), MaxRules)
		return
	}
	hasDefault := false
	for i, rcr := range rc.Rules {
		at := fmt.Sprintf(".rules[%d]", i)
		rule := &Rule{Index: i, Line: b.line(at)}
		act := rcr.Action
		switch {
		case rcr.Default != nil:
			if rcr.Match != nil {
				b.errf(at, "record %s: rule %d has both match and default", r.Name, i+1)
			}
			if !isZeroAction(rcr.Action) {
				b.errf(at, "record %s: put the default rule's action inside default:", r.Name)
			}
			if hasDefault {
				b.errf(at, "record %s: a second default rule", r.Name)
			}
			if i != len(rc.Rules)-1 {
				b.errf(at, "record %s: the default rule must be the last rule (rules after it never match)", r.Name)
			}
			hasDefault = true
			rule.Default = true
			act = *rcr.Default
			r.defaultBit = 1 << i
		case rcr.Match != nil:
			rule.Match = b.match(rcr.Match, at+".match")
			if rule.Match != nil {
				if rule.Match.Resolver {
					r.resolverRules |= 1 << i
				} else {
					r.clientRules |= 1 << i
				}
			}
		default:
			b.errf(at, "record %s: rule %d has neither match nor default", r.Name, i+1)
		}
		rule.Action = b.action(act, at+map[bool]string{true: ".default", false: ""}[rule.Default], rule.Default)
		r.Rules = append(r.Rules, rule)
	}
	if !hasDefault {
		b.errf(".rules", "record %s has no default rule: clients no rule matches would get no answer at all; end the rules with - default: { pool: NAME } or - default: { by: geoproximity, fallback: [...] }", r.Name)
	}
}

// rankAll sets the candidates a ranking action (geoproximity, latency)
// orders: the fallback list (pools or groups) when given, else every
// pool, which is then also the fallback order (a client the ranking knows
// nothing about takes the pools in configuration order, not "all down").
// The checks of their locations are finishActions'.
func (b *builder) rankAll(a *Action, ac config.Action) {
	if ac.Fallback != nil {
		a.Candidates = a.Pools
	} else {
		for _, p := range b.r.Pools {
			a.Candidates = append(a.Candidates, p.Index)
		}
		a.Pools = a.Candidates
	}
}

func isZeroAction(a config.Action) bool {
	return a.Pool == "" && a.Split == nil && a.Sticky == "" && a.Multivalue == 0 &&
		a.Pools == nil && a.Failover == nil && a.By == "" && a.Fallback == nil
}

// pool resolves a member name of an action: a pool or a group.
func (b *builder) pool(name, at string) (int, bool) {
	if p, ok := b.poolIdx[name]; ok {
		return p, true
	}
	if g, ok := b.groupIdx[name]; ok {
		return g, true
	}
	if len(b.groupIdx) == 0 {
		b.errf(at, "record %s: unknown pool %q (pools: %s)", b.r.Name, name, strings.Join(b.cfg.PoolNames(b.idx), ", "))
		return 0, false
	}
	gs, _ := b.cfg.GroupNames(b.idx)
	b.errf(at, "record %s: unknown pool or group %q (pools: %s; groups: %s)", b.r.Name, name, strings.Join(b.cfg.PoolNames(b.idx), ", "), strings.Join(gs, ", "))
	return 0, false
}

func (b *builder) poolList(names []string, at string) []int {
	var out []int
	for _, n := range names {
		if p, ok := b.pool(n, at); ok {
			if slices.Contains(out, p) {
				b.errf(at, "record %s: %s is listed twice", b.r.Name, n)
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

func (b *builder) action(ac config.Action, at string, isDefault bool) Action {
	r := b.r
	var a Action
	kinds := 0
	if ac.Pool != "" {
		kinds++
		a.Kind = ActPool
		if p, ok := b.pool(ac.Pool, at+".pool"); ok {
			a.Pools = []int{p}
		}
	}
	if ac.Split != nil {
		kinds++
		a.Kind = ActSplit
		var total int
		for _, s := range ac.Split {
			if s.Weight < 0 {
				b.errf(at+".split", "record %s: split weight %d for %s is negative", r.Name, s.Weight, s.Pool)
				continue
			}
			if p, ok := b.pool(s.Pool, at+".split"); ok {
				a.Pools = append(a.Pools, p)
				a.Weights = append(a.Weights, uint32(s.Weight))
				total += s.Weight
			}
		}
		if total == 0 && len(ac.Split) > 0 {
			b.errf(at+".split", "record %s: every split weight is zero", r.Name)
		}
		if len(ac.Split) == 0 {
			b.errf(at+".split", "record %s: split lists no pools", r.Name)
		}
		switch ac.Sticky {
		case "":
		case "client_subnet":
			a.Sticky = true
		default:
			b.errf(at+".sticky", "record %s: sticky %q is not client_subnet", r.Name, ac.Sticky)
		}
	} else if ac.Sticky != "" {
		b.errf(at+".sticky", "record %s: sticky only applies to split", r.Name)
	}
	if ac.Multivalue != 0 {
		kinds++
		a.Kind = ActMultivalue
		a.Limit = ac.Multivalue
		if ac.Multivalue < 1 {
			b.errf(at+".multivalue", "record %s: multivalue %d must be at least 1", r.Name, ac.Multivalue)
		}
		if ac.Pools != nil {
			a.Pools = b.poolList(ac.Pools, at+".pools")
		} else {
			for _, p := range r.Pools {
				a.Pools = append(a.Pools, p.Index)
			}
		}
	} else if ac.Pools != nil {
		b.errf(at+".pools", "record %s: pools: only applies to multivalue", r.Name)
	}
	if ac.Failover != nil {
		kinds++
		a.Kind = ActFailover
		a.Pools = b.poolList(ac.Failover, at+".failover")
		if len(a.Pools) == 0 {
			b.errf(at+".failover", "record %s: failover lists no pools", r.Name)
		}
	}
	if ac.By != "" {
		kinds++
		a.Pools = b.poolList(ac.Fallback, at+".fallback")
		switch ac.By {
		case "geoproximity":
			a.Kind = ActProximity
			b.rankAll(&a, ac)
		case "first":
			a.Kind = ActFirst
			if len(a.Pools) == 0 {
				b.errf(at+".fallback", "record %s: by: first needs a fallback list", r.Name)
			}
		case "latency":
			a.Kind = ActLatency
			b.rankAll(&a, ac)
		default:
			b.errf(at+".by", "record %s: by %q is not latency, geoproximity or first", r.Name, ac.By)
		}
	} else if ac.Fallback != nil {
		b.errf(at+".fallback", "record %s: fallback goes with by: latency, geoproximity or first", r.Name)
	}
	switch {
	case kinds == 0:
		b.errf(at, "record %s: the rule has no action (pool, split, multivalue, failover or by)", r.Name)
	case kinds > 1:
		b.errf(at, "record %s: a rule takes one action of pool, split, multivalue, failover or by", r.Name)
	}
	return a // its mask is finishActions', once the groups are built
}

// shadowed warns about rules that can never be the first match: for every
// client where they match, an earlier rule does too.
func (b *builder) shadowed(r *Record) {
	var first uint64
	var seen uint64
	for _, o := range r.outcomes {
		m := o.mask & r.clientRules
		seen |= m
		if m != 0 {
			first |= m & -m
		}
	}
	for _, m := range r.masks {
		seen |= m & r.resolverRules
	}
	for _, rule := range r.Rules {
		if rule.Default || rule.Match.Resolver {
			continue
		}
		bit := uint64(1) << rule.Index
		at := fmt.Sprintf(".rules[%d]", rule.Index)
		switch {
		case !rule.Match.onNode():
			// A rule for other nodes: expected in a fleet's shared
			// configuration, not worth a warning.
		case seen&bit == 0:
			b.warnf(at, "record %s: rule %d matches no address in the loaded geo databases", r.Name, rule.Index+1)
		case first&bit == 0:
			b.warnf(at, "record %s: rule %d can never match first: an earlier rule matches every client it does (it still serves when the earlier rule's pools are down)", r.Name, rule.Index+1)
		}
	}
}

// disabled warns when enabled: false leaves a rule, or the whole record,
// with no pool to answer from, saying what will be answered instead.
func (b *builder) disabled(r *Record) {
	if r.Enabled == 0 {
		b.warnf("", "record %s: every pool is disabled (enabled: false): when_all_down %s decides every answer", r.Name, r.WhenAllDown)
		return
	}
	for _, rule := range r.Rules {
		if rule.Action.mask&r.Enabled != 0 {
			continue
		}
		at := fmt.Sprintf(".rules[%d]", rule.Index)
		if r.NextRule && !rule.Default {
			b.warnf(at, "record %s: every pool of rule %d is disabled: its clients fall through to the next matching rule", r.Name, rule.Index+1)
		} else {
			b.warnf(at, "record %s: every pool of rule %d is disabled: its clients get when_all_down %s", r.Name, rule.Index+1, r.WhenAllDown)
		}
	}
}
