package policy

import (
	"reflect"
	"slices"
	"strconv"

	"github.com/steer-dns/steer/internal/config"
)

// A reload usually changes a few records of many. BuildWith takes each
// record whose inputs are unchanged from the table being served instead
// of building it again: a shallow copy of the compiled Record (which is
// immutable and still served by the old table) with its new Index and
// the lines of the new configuration file.
//
// What (*builder).record and the compile of a record read, and what is
// compared before one is reused:
//
//   - its config.Record, every field (recordEqual) but Line, and its
//     pools' order, which follows their lines (PoolNames);
//   - the named policy it refers to (policyEqual);
//   - the health checks its pools name: their existence is what the
//     record reads, their definitions are compared too (the record then
//     is built again, which costs nothing wrong);
//   - for a record with by: latency, whether latency files are
//     configured (a warning depends on it);
//   - the geo databases (the same *geo.Set) and with them whether an ASN
//     database is loaded;
//   - lines: the record's, its pools' and its rules' (in the record or in
//     its policy) are read again from the new file, so a record moved by
//     an edit above it keeps correct lines in explain and messages.
//
// A record that failed to build is not in the previous table and is
// built again, so its errors are reported again. Its warnings are kept
// with it (Record.warns) and given again on reuse, through the same
// once-per-policy filter and with the new lines.

// warning is one warning building or compiling a record gave.
type warning struct {
	at   string // path under the record, as for builder.line
	msg  string // without the "policy NAME: " prefix
	late bool   // from shadowed or disabled, given after compiling
}

// reuser finds the compiled record of the previous table that a record of
// the configuration being built may reuse.
type reuser struct {
	cfg, pcfg *config.Config
	prev      *Table
	// latencyFiles is set when latency files are configured in one of
	// the configurations only: a by: latency action warns on that.
	latencyFiles bool
	// nodeChanged is set when the node's identity or ecs.unknown_client
	// differ: records that depend on the node are built again.
	nodeChanged bool
	byName      map[string]*Record // prev's records by configured name, built when first needed
	policies    map[string]bool    // policy name -> equal in both configurations
	checks      map[string]bool    // health check name -> equal in both
	ruleLines   map[string][]int   // policy name -> its rules' lines in cfg
	buf         []byte
	slab        []Record // the copies are allocated a few hundred at a time
	// rebased holds, by the previous rules of a policy's records, the
	// first record given their rules at the new lines.
	rebased map[rebasedKey]*Record
}

func newReuser(cfg *config.Config, prev *Table) *reuser {
	if prev == nil || prev.cfg == nil {
		return nil
	}
	return &reuser{cfg: cfg, pcfg: prev.cfg, prev: prev,
		latencyFiles: (len(cfg.Latency.Files) == 0) != (len(prev.cfg.Latency.Files) == 0),
		nodeChanged:  !nodeEqual(cfg, prev.cfg),
		policies:     map[string]bool{}, checks: map[string]bool{}, ruleLines: map[string][]int{}}
}

// take returns a copy of the previous table's record for b's record when
// its inputs are unchanged, with b's index and lines, after giving again
// the warnings building it gave; nil when it must be built.
func (u *reuser) take(b *builder) *Record {
	if u == nil {
		return nil
	}
	i := b.idx
	rc := &u.cfg.Records[i]
	old := u.find(i, rc)
	if old == nil {
		return nil
	}
	oc := &u.pcfg.Records[old.src]
	if !recordEqual(rc, oc) {
		return nil
	}
	if rc.Policy != "" && !u.samePolicy(rc.Policy) || u.latencyFiles && len(old.latencyActs) > 0 {
		return nil
	}
	if u.nodeChanged && old.nodeDependent() {
		return nil
	}
	if len(u.slab) == 0 {
		u.slab = make([]Record, min(256, len(u.cfg.Records)-i))
	}
	r := &u.slab[0]
	*r = *old
	r.Line, r.src = rc.Line, i
	if !u.rebase(r, old, rc) {
		*r = Record{}
		return nil
	}
	u.slab = u.slab[1:]
	b.r, b.policy = r, rc.Policy
	b.replay(r, false)
	return r
}

// find returns the previous table's record built from a record named as
// rc is (the same index when nothing moved).
func (u *reuser) find(i int, rc *config.Record) *Record {
	if i < len(u.prev.bySrc) {
		if old := u.prev.bySrc[i]; old != nil && u.pcfg.Records[i].Name == rc.Name {
			return old
		}
	}
	if u.byName == nil {
		u.byName = make(map[string]*Record, len(u.prev.Records))
		for _, r := range u.prev.Records {
			u.byName[u.pcfg.Records[r.src].Name] = r
		}
	}
	return u.byName[rc.Name]
}

// line returns cfg's line of "records[i]"+mid+name (0 when unknown),
// building the path in a buffer.
func (u *reuser) line(i int, mid, name string) int {
	u.buf = append(append(u.buf[:0], mid...), name...)
	return u.cfg.RecordLine(i, string(u.buf))
}

// rebase gives r (a copy of old) the lines of its pools and rules in the
// new configuration, copying the pools and rules whose lines changed. It
// reports false when the pools are no longer in the order of their lines
// (they would be numbered differently) or a health check one uses
// changed.
func (u *reuser) rebase(r, old *Record, rc *config.Record) bool {
	prevRaw := 0
	for k, p := range old.Pools {
		if p.Check != "" && !u.sameCheck(p.Check) { // the pools are rc's, which is equal
			return false
		}
		raw := u.line(r.src, ".pools.", p.Name)
		// PoolNames orders by line, then name.
		if k > 0 && (prevRaw > raw || prevRaw == raw && old.Pools[k-1].Name > p.Name) {
			return false
		}
		prevRaw = raw
		l := raw
		if l == 0 {
			l = rc.Line
		}
		if l != p.Line {
			if &r.Pools[0] == &old.Pools[0] {
				r.Pools = slices.Clone(old.Pools)
			}
			np := *p
			np.Line = l
			r.Pools[k] = &np
		}
	}
	var policyLines []int
	var memo rebasedKey
	if rc.Policy != "" {
		policyLines = u.policyRuleLines(rc.Policy, len(old.Rules))
		if len(old.Rules) > 0 {
			// The records of a policy share their rules (shareRules):
			// moved, they share one copy too.
			memo = rebasedKey{&old.Rules[0], len(old.Rules)}
			if rb, ok := u.rebased[memo]; ok {
				r.ruleSet = rb.ruleSet
				return true
			}
		}
	}
	for k, rule := range old.Rules {
		var l int
		if policyLines != nil {
			l = policyLines[k]
		} else {
			l = u.line(r.src, ".rules[", strconv.Itoa(k)+"]")
		}
		if l == 0 {
			l = rc.Line
		}
		if l != rule.Line {
			if r.ruleSet == old.ruleSet {
				// Shared with old (and maybe others): r's own copy.
				rs := *old.ruleSet
				r.ruleSet = &rs
				r.Rules = slices.Clone(old.Rules)
			}
			nr := *rule
			nr.Line = l
			r.Rules[k] = &nr
		}
	}
	if len(old.Rules) > 0 && &r.Rules[0] != &old.Rules[0] {
		// The ranking actions point into the rules: at the copies now.
		r.proximity = slices.Clone(old.proximity)
		r.latencyActs = slices.Clone(old.latencyActs)
		for _, rule := range r.Rules {
			switch rule.Action.Kind {
			case ActProximity:
				r.proximity[rule.Action.Proximity] = &rule.Action
			case ActLatency:
				r.latencyActs[rule.Action.Latency] = &rule.Action
			}
		}
	}
	if memo.first != nil {
		if u.rebased == nil {
			u.rebased = map[rebasedKey]*Record{}
		}
		u.rebased[memo] = r
	}
	return true
}

// rebasedKey names the rules of a previous record: their slice.
type rebasedKey struct {
	first **Rule
	n     int
}

// policyRuleLines returns the lines of the n rules of policy name in cfg
// (0 where unknown).
func (u *reuser) policyRuleLines(name string, n int) []int {
	if ls, ok := u.ruleLines[name]; ok && len(ls) == n {
		return ls
	}
	ls := make([]int, n)
	for k := range ls {
		ls[k] = u.cfg.Line("policies." + name + ".rules[" + strconv.Itoa(k) + "]")
	}
	u.ruleLines[name] = ls
	return ls
}

func (u *reuser) samePolicy(name string) bool {
	same, ok := u.policies[name]
	if !ok {
		a, inNew := u.cfg.Policies[name]
		b, inOld := u.pcfg.Policies[name]
		same = inNew && inOld && policyEqual(&a, &b)
		u.policies[name] = same
	}
	return same
}

func (u *reuser) sameCheck(name string) bool {
	same, ok := u.checks[name]
	if !ok {
		a, inNew := u.cfg.HealthChecks[name]
		b, inOld := u.pcfg.HealthChecks[name]
		same = inNew && inOld && reflect.DeepEqual(a, b)
		u.checks[name] = same
	}
	return same
}

// replay gives again the warnings r gave when it was built, those of
// building it (late false) or those of compiling it.
func (b *builder) replay(r *Record, late bool) {
	for _, w := range r.warns {
		if w.late == late {
			b.warn(w.at, w.msg)
		}
	}
}

// recordEqual reports whether a and b build the same record, Line aside.
// Slices are equal when their elements are and both or neither are nil:
// the builder tells an empty list from none in places (split: [] is an
// error, no split is not). A test makes sure every field is compared.
func recordEqual(a, b *config.Record) bool {
	return a.Name == b.Name && a.Type == b.Type && ptrEqual(a.TTL, b.TTL) &&
		ptrEqual(a.TTLWhileDegraded, b.TTLWhileDegraded) && a.OnUnhealthy == b.OnUnhealthy &&
		a.WhenAllDown == b.WhenAllDown && a.Policy == b.Policy &&
		poolsEqual(a.Pools, b.Pools) && rulesEqual(a.Rules, b.Rules) && reflect.DeepEqual(a.Groups, b.Groups) &&
		ptrEqual(a.Safety, b.Safety)
}

// nodeEqual reports whether a and b give records the same node to compile
// against: its identity, and whether and where unknown clients are steered
// by it (anycast_resolvers are read when deciding, from the table).
func nodeEqual(a, b *config.Config) bool {
	if a.ECS.UnknownClient != b.ECS.UnknownClient || (a.Node == nil) != (b.Node == nil) {
		return false
	}
	if a.Node == nil {
		return true
	}
	x, y := a.Node, b.Node
	return x.Name == y.Name && x.Region == y.Region && x.Country == y.Country && ptrEqual(x.Location, y.Location)
}

func policyEqual(a, b *config.Policy) bool {
	return a.OnUnhealthy == b.OnUnhealthy && a.WhenAllDown == b.WhenAllDown && rulesEqual(a.Rules, b.Rules) &&
		reflect.DeepEqual(a.Groups, b.Groups) && ptrEqual(a.Safety, b.Safety)
}

func poolsEqual(a, b map[string]*config.Pool) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true // the same map: a reload shares unchanged records' (configurations are read-only)
	}
	for name, pa := range a {
		pb, ok := b[name]
		if !ok || !poolEqual(pa, pb) {
			return false
		}
	}
	return true
}

func poolEqual(a, b *config.Pool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Address == b.Address && listEqual(a.Addresses, b.Addresses) && a.Target == b.Target &&
		ptrEqual(a.Location, b.Location) && a.Site == b.Site && a.Bias == b.Bias &&
		ptrEqual(a.Enabled, b.Enabled) && a.HealthCheck == b.HealthCheck && a.MinUp == b.MinUp &&
		capacityEqual(a.Capacity, b.Capacity)
}

func capacityEqual(a, b *config.Capacity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Target == b.Target && ptrEqual(a.Max, b.Max)
}

func rulesEqual(a, b []config.Rule) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, func(x, y config.Rule) bool {
		return matchEqual(x.Match, y.Match) && (x.Default == nil) == (y.Default == nil) &&
			(x.Default == nil || actionEqual(x.Default, y.Default)) && actionEqual(&x.Action, &y.Action)
	})
}

func actionEqual(a, b *config.Action) bool {
	return a.Pool == b.Pool && listEqual(a.Split, b.Split) && a.Sticky == b.Sticky &&
		a.Multivalue == b.Multivalue && listEqual(a.Pools, b.Pools) && listEqual(a.Failover, b.Failover) &&
		a.By == b.By && listEqual(a.Fallback, b.Fallback)
}

func listEqual[S ~[]E, E comparable](a, b S) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
