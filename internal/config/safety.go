package config

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
)

// Safety is a safety rule on operator overrides (Route 53 ARC's
// assertion rules): a drain, a down, a pool disabled by a reload or a
// weight of 0 that would leave a record fewer usable pools than
// MinUsable is refused unless forced. It may be set at the top level
// (every record), on a policy (the records using it) or on a record; the
// nearest applies.
type Safety struct {
	// MinUsable is how many of a record's pools must stay usable
	// (healthy and not drained or down); at least 1.
	MinUsable int `yaml:"min_usable"`
}

// SafetyRule is the rule that applies to one record and where it is
// declared.
type SafetyRule struct {
	MinUsable int
	// At is where the rule is declared, file:line; Line is the line.
	At   string
	Line int
	// Scope says whose rule it is: "record", "policy NAME" or "top level".
	Scope string
}

// String describes the rule for messages: "min_usable 2 (record rule at
// steer.yaml:14)".
func (r SafetyRule) String() string {
	return fmt.Sprintf("min_usable %d (%s rule at %s)", r.MinUsable, r.Scope, r.At)
}

// SafetyFor returns the rule that applies to record i, if any: its own,
// else its policy's, else the top level's.
func (c *Config) SafetyFor(i int) (SafetyRule, bool) {
	if i < 0 || i >= len(c.Records) {
		return SafetyRule{}, false
	}
	r := c.Records[i]
	rule := func(min int, path, scope string) (SafetyRule, bool) {
		l := c.Line(path)
		return SafetyRule{MinUsable: min, At: fmt.Sprintf("%s:%d", c.File, l), Line: l, Scope: scope}, true
	}
	if r.Safety != nil {
		return rule(r.Safety.MinUsable, fmt.Sprintf("records[%d].safety", i), "record")
	}
	if p, ok := c.Policies[r.Policy]; ok && r.Policy != "" && p.Safety != nil {
		return rule(p.Safety.MinUsable, "policies."+r.Policy+".safety", "policy "+r.Policy)
	}
	if c.Safety != nil {
		return rule(c.Safety.MinUsable, "safety", "top level")
	}
	return SafetyRule{}, false
}

// SafetyRules returns the rule of every record that has one, by
// canonical name.
func (c *Config) SafetyRules() map[string]SafetyRule {
	out := map[string]SafetyRule{}
	for i, r := range c.Records {
		if rule, ok := c.SafetyFor(i); ok {
			out[dns.CanonicalName(r.Name)] = rule
		}
	}
	return out
}

// checkSafety refuses a rule below 1, and a rule a record cannot meet
// even with every pool up: more than its enabled pools. Such a rule
// would refuse every drain of the record and every reload that keeps
// it, so it is refused where it is written, naming the record.
func (c *Config) checkSafety(probs *diag.Problems) {
	bad := func(s *Safety, path string) bool {
		if s != nil && s.MinUsable < 1 {
			probs.Add(c.File, c.Line(path+".min_usable"), "%s.min_usable: %d is below 1 (a rule keeps at least one pool usable)", path, s.MinUsable)
			return true
		}
		return false
	}
	top := bad(c.Safety, "safety")
	pol := map[string]bool{}
	for name, p := range c.Policies {
		pol[name] = bad(p.Safety, "policies."+name+".safety")
	}
	for i, r := range c.Records {
		if bad(r.Safety, fmt.Sprintf("records[%d].safety", i)) {
			continue
		}
		rule, ok := c.SafetyFor(i)
		if !ok || (r.Safety == nil && (pol[r.Policy] || (c.Policies[r.Policy].Safety == nil && top))) {
			continue
		}
		var enabled []string
		for _, name := range c.PoolNames(i) {
			if e := r.Pools[name].Enabled; e == nil || *e {
				enabled = append(enabled, name)
			}
		}
		if rule.MinUsable <= len(enabled) {
			continue
		}
		line := c.RecordLine(i, "")
		if r.Safety != nil {
			line = c.RecordLine(i, ".safety.min_usable")
		}
		probs.Add(c.File, line, "record %s: safety min_usable %d (%s rule at %s) cannot be met even with every pool up: it has %d enabled pools (%s); lower the rule or give the record its own safety: { min_usable: N }",
			r.Name, rule.MinUsable, rule.Scope, rule.At, len(enabled), strings.Join(enabled, ", "))
	}
}
