package node

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Safety rules (config.Safety) on operator overrides. Every override of
// the API comes through ApplyOverrides: its items are checked, the pools
// each affected record would keep usable are computed from the health
// the policy goes by (the fleet's quorum verdict in a fleet, with the
// overrides in force) with the batch's overrides in place of the current
// ones, and a record left with fewer usable pools than its rule, and
// fewer than it has now, refuses the whole batch unless forced. Only a
// change that takes pools away is refused: setting a pool up, or a drain
// of a record already below its rule through failures, is not made
// worse by the rule.

// moveWindow is the span of answers a dry run's figures are taken from.
const moveWindow = 5 * time.Minute

// hypo is a batch's overrides by what they override.
type hypo struct {
	targets map[netip.Addr]health.Override
	pools   map[[2]string]health.Override
}

// ApplyOverrides implements api.OverrideBackend.
//
// In a fleet the rule is the fleet's: the batch is checked against the
// overrides in the store (read at a revision R, with this node's pending
// ones over them) and written only if none of them changed after R
// (fleetnode.SetOverridesIf), then applied here; a concurrent change
// makes it read, check and try again (fleetRetries times), so two nodes
// taking batches at once cannot together break a rule each keeps alone.
// When the store cannot be read, the batch is checked against this
// node's view and, if it passes, applied here and pending for the fleet.
func (b *backend) ApplyOverrides(items []api.Override, o api.OverrideOptions) (api.OverrideResult, error) {
	n := b.n
	// Serialised, so two batches that each keep a rule cannot together
	// break it on this node.
	n.safetyMu.Lock()
	defer n.safetyMu.Unlock()
	snap := n.srv.Handler().Snapshot()
	h := hypo{targets: map[netip.Addr]health.Override{}, pools: map[[2]string]health.Override{}}
	writes := make([]fleetnode.OverrideWrite, len(items))
	var targets map[netip.Addr]bool
	for i, it := range items {
		ov, err := health.ParseOverride(it.State)
		if err != nil {
			return api.OverrideResult{}, &api.ItemError{Item: i + 1, Err: err}
		}
		w := fleetnode.OverrideWrite{Override: ov, Expires: it.Expires}
		if it.Target.IsValid() {
			a := it.Target.Unmap()
			if targets == nil {
				targets = servedTargets(snap)
			}
			if !targets[a] {
				return api.OverrideResult{}, &api.ItemError{Item: i + 1, Err: fmt.Errorf("%s is no address of any pool of the served records: %w", a, api.ErrNotFound)}
			}
			h.targets[a], w.Target = ov, a
		} else {
			name, err := findPool(snap, it.Record, it.Pool)
			if err != nil {
				return api.OverrideResult{}, &api.ItemError{Item: i + 1, Err: fmt.Errorf("%v: %w", err, api.ErrNotFound)}
			}
			h.pools[[2]string{name, it.Pool}] = ov
			w.Record, w.Pool = name, it.Pool
		}
		writes[i] = w
	}
	fl := n.fl
	if fl == nil {
		res, broken, err := n.checkSafety(snap, h, nil, o)
		if err != nil || o.DryRun {
			return res, err
		}
		n.applyLocal(writes)
		n.logForced(broken, o)
		res.Applied = true
		return res, nil
	}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), fleetRead)
		view, rerr := fl.ReadOverrides(ctx)
		cancel()
		if rerr != nil {
			// The store cannot be read: this node's view decides, and the
			// batch is pending for the fleet (written when it answers).
			res, broken, err := n.checkSafety(snap, h, nil, o)
			if err != nil || o.DryRun {
				return res, err
			}
			n.applyLocal(writes)
			n.logForced(broken, o)
			res.Applied = true
			return res, fleetErr(fl.PendOverrides(writes, rerr))
		}
		res, broken, err := n.checkSafety(snap, h, &view, o)
		if err != nil || o.DryRun {
			return res, err
		}
		ok, err := fl.SetOverridesIf(writes, view.Rev)
		if ok {
			// Taken by the store (or pending when it did not answer):
			// applied here now, on the other nodes as they follow it.
			n.applyLocal(writes)
			n.logForced(broken, o)
			res.Applied = true
			return res, fleetErr(err)
		}
		if err != nil {
			return res, fleetErr(err)
		}
		if attempt == fleetRetries {
			n.log.Warn("overrides not applied: the fleet's overrides kept changing while they were checked", "attempts", attempt, "caller", o.Caller)
			return res, &api.SafetyError{Msg: fmt.Sprintf("the fleet's overrides changed concurrently %d times while this batch was checked against them; nothing applied; retry", attempt), Result: res}
		}
		// Another node wrote in between: read its overrides and check
		// again, after a short pause that grows with the attempts so
		// that writers racing each other spread out.
		time.Sleep(time.Duration(attempt) * time.Duration(5+rand.IntN(20)) * time.Millisecond)
	}
}

// fleetRetries bounds the attempts of a batch whose conditional write
// meets a concurrent change of the fleet's overrides; fleetRead bounds
// reading them.
const (
	fleetRetries = 5
	fleetRead    = 3 * time.Second
)

// checkSafety checks h against the safety rules with the overrides of
// view (nil: this node's) in force, and returns the result, the rules
// the batch breaks, and a *api.SafetyError when it breaks one and is
// neither forced nor a dry run.
func (n *Node) checkSafety(snap *snapshot.Snapshot, h hypo, view *fleetnode.OverridesView, o api.OverrideOptions) (api.OverrideResult, []effect, error) {
	res := api.OverrideResult{DryRun: o.DryRun}
	effects, broken := n.safetyEffects(snap, h, view)
	if o.DryRun {
		n.addMoves(snap, effects)
	}
	for _, e := range effects {
		res.Records = append(res.Records, e.RecordEffect)
	}
	if len(broken) > 0 {
		msg := refusal(broken)
		switch {
		case o.DryRun:
			res.Refused = msg
		case !o.Force:
			return res, broken, &api.SafetyError{Msg: msg + "; force: true applies it anyway", Result: res}
		default:
			for _, e := range broken {
				res.Forced = append(res.Forced, e.Rule)
			}
		}
	}
	return res, broken, nil
}

// applyLocal applies writes to this node's health manager.
func (n *Node) applyLocal(writes []fleetnode.OverrideWrite) {
	hm := n.hc.manager
	for _, w := range writes {
		if w.Target.IsValid() {
			hm.SetOverride(w.Target, w.Override, w.Expires)
		} else {
			hm.SetPoolOverride(w.Record, w.Pool, w.Override, w.Expires)
		}
	}
}

// logForced logs each rule a forced batch went past, with the caller.
func (n *Node) logForced(broken []effect, o api.OverrideOptions) {
	for _, e := range broken {
		n.log.Warn("safety rule overridden by force", "record", e.Record, "rule", e.Rule,
			"usable_after", strings.Join(e.UsableAfter, ","), "usable_before", strings.Join(e.UsableBefore, ","),
			"caller", o.Caller)
	}
}

// effect is one record's RecordEffect with what computing it took.
type effect struct {
	api.RecordEffect
	r             *policy.Record
	before, after uint64
}

// refusal is the message of a refused batch: the rule of each record it
// breaks, where the rule is declared, and what would remain usable.
func refusal(broken []effect) string {
	var parts []string
	for _, e := range broken {
		left := "no pool"
		if len(e.UsableAfter) > 0 {
			left = strings.Join(e.UsableAfter, ", ")
		}
		parts = append(parts, fmt.Sprintf("record %s: safety rule %s: only %d usable pool(s) would remain (%s; usable now: %s)",
			e.Record, e.Rule, len(e.UsableAfter), left, strings.Join(e.UsableBefore, ", ")))
	}
	return "refused: " + strings.Join(parts, "; ")
}

// safetyEffects returns the records whose usable pools h changes, with
// their pools before and after, and those of them h leaves below their
// rule (and below what they have now). The overrides in force are
// view's (the fleet's), or this node's when view is nil; health is the
// node's (the fleet's verdict in a fleet) either way.
func (n *Node) safetyEffects(snap *snapshot.Snapshot, h hypo, view *fleetnode.OverridesView) (all, broken []effect) {
	if snap.Policies == nil {
		return nil, nil
	}
	hc := n.hc
	var rules map[string]config.SafetyRule
	if snap.Config != nil {
		rules = snap.Config.SafetyRules()
	}
	nowUsable := func(a netip.Addr, check string) bool { return hc.manager.Usable(health.Key{Addr: a, Check: check}) }
	nowPool := hc.poolOverride
	if view != nil {
		nowUsable = func(a netip.Addr, check string) bool {
			return hc.manager.UsableIf(health.Key{Addr: a, Check: check}, view.Targets[a])
		}
		nowPool = func(record, pool string) policy.PoolOverride {
			return toPoolOverride(view.Pools[[2]string{record, pool}])
		}
	}
	ifUsable := func(a netip.Addr, check string) bool {
		if o, ok := h.targets[a]; ok {
			return hc.manager.UsableIf(health.Key{Addr: a, Check: check}, o)
		}
		return nowUsable(a, check)
	}
	ifPool := func(record, pool string) policy.PoolOverride {
		if o, ok := h.pools[[2]string{record, pool}]; ok {
			return toPoolOverride(o)
		}
		return nowPool(record, pool)
	}
	for _, r := range snap.Policies.Records {
		if !touches(r, h) {
			continue
		}
		w := r.Weighted()
		e := effect{r: r, before: r.UsablePools(nowUsable, nowPool) & w, after: r.UsablePools(ifUsable, ifPool) & w}
		e.Record = r.Name
		e.UsableBefore, e.UsableAfter = poolNames(r, e.before), poolNames(r, e.after)
		rule, ok := rules[r.Name]
		if ok {
			e.Rule = rule.String()
			na, nb := bits.OnesCount64(e.after), bits.OnesCount64(e.before)
			e.BelowRule = na < rule.MinUsable && na < nb
		}
		all = append(all, e)
		if e.BelowRule {
			broken = append(broken, e)
		}
	}
	return all, broken
}

// touches reports whether h overrides a pool of r or an address of one.
func touches(r *policy.Record, h hypo) bool {
	for _, p := range r.Pools {
		if _, ok := h.pools[[2]string{r.Name, p.Name}]; ok {
			return true
		}
		if len(h.targets) == 0 {
			continue
		}
		for _, a := range p.Addrs() {
			if _, ok := h.targets[a]; ok {
				return true
			}
		}
	}
	return false
}

func toPoolOverride(o health.Override) policy.PoolOverride {
	switch o {
	case health.OverrideUp:
		return policy.PoolUp
	case health.OverrideDrain:
		return policy.PoolDrain
	case health.OverrideDown:
		return policy.PoolDown
	}
	return policy.PoolAuto
}

func poolNames(r *policy.Record, mask uint64) []string {
	out := []string{}
	for _, p := range r.Pools {
		if mask&(1<<p.Index) != 0 {
			out = append(out, p.Name)
		}
	}
	return out
}

// addMoves fills in each effect's answers of the last 5 minutes (the
// traffic recorder's window, every node's in a fleet) and where those of
// the pools that stop being usable would go: each such pool's answers
// are spread over the rules that may answer with it by their decisions,
// and each rule's share over the pools its action would choose with the
// usable pools after (policy.Record.Shares).
func (n *Node) addMoves(snap *snapshot.Snapshot, effects []effect) {
	if n.tr == nil {
		return
	}
	win := n.tr.Window(moveWindow)
	for i := range effects {
		e := &effects[i]
		e.Window = win.Covered.Round(time.Second).String()
		c, ok := win.Record(e.Record)
		if !ok {
			continue
		}
		var total uint64
		for _, v := range c.Pools {
			total += v
		}
		e.Answers = total
		gone := e.before &^ e.after
		if total == 0 || gone == 0 {
			continue
		}
		to := map[string]float64{}
		var moving uint64
		for _, p := range e.r.Pools {
			if gone&(1<<p.Index) == 0 || c.Pools[p.Name] == 0 {
				continue
			}
			np := float64(c.Pools[p.Name])
			moving += c.Pools[p.Name]
			// The rules that may answer with p, weighted by their decisions.
			var ws []float64
			var rs []int
			var sum float64
			for ri := range e.r.Rules {
				if e.r.RuleMask(ri)&(1<<p.Index) == 0 {
					continue
				}
				wt := 0.0
				if ri < len(c.Rules) {
					wt = float64(c.Rules[ri])
				}
				rs, ws = append(rs, ri), append(ws, wt)
				sum += wt
			}
			if len(rs) == 0 {
				to["none"] += np
				continue
			}
			for k, ri := range rs {
				share := 1 / float64(len(rs))
				if sum > 0 {
					share = ws[k] / sum
				}
				dest := e.r.Shares(ri, e.after)
				if len(dest) == 0 {
					to["none"] += np * share
					continue
				}
				var dsum float64
				for _, s := range dest {
					dsum += s
				}
				for q, s := range dest {
					to[e.r.Pools[q].Name] += np * share * s / dsum
				}
			}
		}
		e.Moving = round4(float64(moving) / float64(total))
		e.MovingTo = map[string]float64{}
		for k, v := range to {
			e.MovingTo[k] = round4(v / float64(total))
		}
	}
}

func round4(x float64) float64 { return float64(int64(x*1e4+0.5)) / 1e4 }

// checkReloadSafety refuses a new snapshot that leaves a record with a
// safety rule fewer usable pools than its rule and than the record has
// now, given the health and overrides in force: a pool disabled
// (enabled: false) or weighted out (a split weight of 0) by the edit.
// A forced reload applies it, logging each rule it goes past and the
// caller.
func (n *Node) checkReloadSafety(old, snap *snapshot.Snapshot, force bool, caller string) error {
	if snap.Policies == nil || snap.Config == nil {
		return nil
	}
	rules := snap.Config.SafetyRules()
	if len(rules) == 0 {
		return nil
	}
	hc := n.hc
	usable := func(a netip.Addr, check string) bool { return hc.manager.Usable(health.Key{Addr: a, Check: check}) }
	var broken []effect
	for _, r := range snap.Policies.Records {
		rule, ok := rules[r.Name]
		if !ok {
			continue
		}
		var or *policy.Record
		if old != nil && old.Policies != nil {
			or = old.Policies.Get(r.Name)
		}
		if or == nil {
			continue // a new record: its pools' health is not known yet
		}
		after := r.UsablePools(usable, hc.poolOverride) & r.Weighted()
		before := or.UsablePools(usable, hc.poolOverride) & or.Weighted()
		na, nb := bits.OnesCount64(after), bits.OnesCount64(before)
		if na >= rule.MinUsable || na >= nb {
			continue
		}
		e := effect{r: r, before: before, after: after}
		e.Record, e.Rule = r.Name, rule.String()
		e.UsableBefore, e.UsableAfter = poolNames(or, before), poolNames(r, after)
		broken = append(broken, e)
	}
	if len(broken) == 0 {
		return nil
	}
	sort.Slice(broken, func(i, j int) bool { return broken[i].Record < broken[j].Record })
	if !force {
		return errors.New(refusal(broken) + " (a pool disabled or weighted out by the new configuration); POST /v1/reload?force=1 applies it anyway")
	}
	for _, e := range broken {
		n.log.Warn("reload: safety rule overridden by force", "record", e.Record, "rule", e.Rule,
			"usable_after", strings.Join(e.UsableAfter, ","), "usable_before", strings.Join(e.UsableBefore, ","), "caller", caller)
	}
	return nil
}
