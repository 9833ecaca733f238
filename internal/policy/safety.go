package policy

import (
	"math/bits"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
)

// What a safety rule (config.Safety) asks of a record before an override
// is applied: which pools would stay usable, and where the answers of the
// pools that would not go.

// UsablePools returns the pools of r usable (for A or AAAA) given usable
// (whether one address passes its pool's check, as SetHealth takes it)
// and pool (the operator's override of each pool, nil: none): enabled,
// not down or drained, and with at least MinUp usable addresses, as
// SetHealth decides them. It reads no live state, so a caller can ask it
// about overrides not yet applied.
func (r *Record) UsablePools(usable func(addr netip.Addr, check string) bool, pool func(record, pool string) PoolOverride) uint64 {
	var out uint64
	for _, p := range r.Pools {
		bit := uint64(1) << p.Index
		if r.Enabled&bit == 0 {
			continue
		}
		ov := PoolAuto
		if pool != nil {
			ov = pool(r.Name, p.Name)
		}
		switch {
		case ov == PoolDown || ov == PoolDrain:
			continue
		case ov == PoolUp || r.Type == dns.TypeCNAME || len(p.V4)+len(p.V6) > 64:
			out |= bit
			continue
		}
		n := 0
		for _, a := range p.V4 {
			if usable(a, p.Check) {
				n++
			}
		}
		for _, a := range p.V6 {
			if usable(a, p.Check) {
				n++
			}
		}
		if n >= p.MinUp && n > 0 {
			out |= bit
		}
	}
	return out
}

// Weighted returns the pools of r some rule or group can answer with
// while others are usable: every pool but those only ever listed in a
// split with weight 0 (a weight of 0 keeps a pool as a last resort,
// answered only when nothing else of the split is usable). A safety rule
// does not count a pool a reload weighted out as usable.
func (r *Record) Weighted() uint64 {
	var in, zero uint64
	add := func(a *Action) {
		for i, m := range a.Pools {
			mask := r.memberMask(m)
			if a.Kind == ActSplit && i < len(a.Weights) && a.Weights[i] == 0 {
				zero |= mask
			} else {
				in |= mask
			}
		}
		for _, m := range a.Candidates {
			in |= r.memberMask(m)
		}
	}
	for _, rule := range r.Rules {
		add(&rule.Action)
	}
	for _, g := range r.Groups {
		add(&g.Action)
	}
	if r.WhenAllDown == FallbackPool {
		zero |= 1 << r.FallbackPool
	}
	return r.allMask() &^ (zero &^ in)
}

// allMask is every pool of r.
func (r *Record) allMask() uint64 {
	if len(r.Pools) >= 64 {
		return ^uint64(0)
	}
	return 1<<len(r.Pools) - 1
}

// RuleMask returns the pools rule i of r may answer with.
func (r *Record) RuleMask(i int) uint64 {
	if i < 0 || i >= len(r.Rules) {
		return 0
	}
	a := &r.Rules[i].Action
	m := a.mask
	for _, c := range a.Candidates {
		m |= r.memberMask(c)
	}
	return m
}

// Shares estimates how rule i of r spreads its answers over the pools
// when up are the usable ones: a pool, failover or first action answers
// its first usable pool; a split by the weights of its usable pools; a
// multivalue answer names every usable pool of it; geoproximity and
// latency, which depend on where each client is, take their fallback
// order. When the rule has no usable pool, the rules after it are asked
// in order (on_unhealthy: next_rule) or none (when_all_down decides):
// nil. The shares add up to 1 (multivalue: to the pools it names).
func (r *Record) Shares(i int, up uint64) map[int]float64 {
	for ; i >= 0 && i < len(r.Rules); i++ {
		a := &r.Rules[i].Action
		if s := r.actionShares(a, up&r.allMask()); len(s) > 0 {
			return s
		}
		if !r.NextRule {
			break
		}
	}
	return nil
}

func (r *Record) actionShares(a *Action, up uint64) map[int]float64 {
	if a.Kind == ActSplit && !a.nested {
		var total uint64
		for j, p := range a.Pools {
			if up&(1<<p) != 0 && j < len(a.Weights) {
				total += uint64(a.Weights[j])
			}
		}
		if total > 0 {
			out := map[int]float64{}
			for j, p := range a.Pools {
				if up&(1<<p) != 0 && a.Weights[j] > 0 {
					out[p] += float64(a.Weights[j]) / float64(total)
				}
			}
			return out
		}
	}
	o := &outcome{lclass: -1}
	pools, _, _ := r.choose(a, o, up, &Query{Stable: true})
	if pools == 0 {
		return nil
	}
	out := map[int]float64{}
	for _, p := range r.Pools {
		if pools&(1<<p.Index) != 0 {
			out[p.Index] = 1
		}
	}
	if a.Kind != ActMultivalue {
		for k := range out {
			out[k] = 1 / float64(len(out))
		}
	}
	return out
}

// checkSafety refuses a safety rule a record cannot meet even with every
// pool up, counting only the pools its rules can answer with (enabled,
// and not only ever weighted 0): the configuration's own check
// (config.checkSafety) counts the enabled pools, which is all it knows.
func (t *Table) checkSafety(cfg *config.Config, errs *diag.Problems) {
	var rules map[string]config.SafetyRule
	for _, r := range t.Records {
		if rules == nil {
			rules = cfg.SafetyRules()
			if len(rules) == 0 {
				return
			}
		}
		rule, ok := rules[r.Name]
		if !ok {
			continue
		}
		m := r.Enabled & r.Weighted()
		if bits.OnesCount64(m) >= rule.MinUsable || bits.OnesCount64(r.Enabled) < rule.MinUsable {
			continue // met, or already refused by the configuration's check
		}
		var names []string
		for _, p := range r.Pools {
			if m&(1<<p.Index) != 0 {
				names = append(names, p.Name)
			}
		}
		errs.Add(cfg.File, r.Line, "record %s: safety min_usable %d (%s rule at %s) cannot be met even with every pool up: only %d of its pools can be answered (%s; a pool listed only with weight 0, or only as when_all_down's fallback, is a last resort)",
			r.Name, rule.MinUsable, rule.Scope, rule.At, len(names), strings.Join(names, ", "))
	}
}
