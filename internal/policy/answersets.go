package policy

import (
	"slices"

	"github.com/miekg/dns"
)

// Answer sets: every RRset a steered record can answer a type with, so
// that a signed zone can sign each once, off the query path (DNSSEC signs
// the RRset, not the client: however many subnets a record steers, it
// answers with few distinct sets).
//
// A decision answers with the addresses of its pools (those health lets
// it use), or a window of them under a multivalue limit (appendAnswer).
// The sets a record can answer are therefore, per family:
//
//   - for each rule, what its action picks among the usable pools: each
//     usable candidate alone for the actions that pick one pool (failover,
//     first, geoproximity, latency, split), all of them for pool and
//     multivalue actions, and, under a multivalue limit, each of the n
//     rotation windows of limit consecutive addresses (n sets, not
//     n-choose-limit: that is why the limit takes a window);
//   - the when_all_down results (answer_all: each rule's pools; the
//     fallback pool), with all their addresses, as the decision fails
//     open;
//   - for CNAME records, each pool's target (one CNAME per answer).
//
// Which pools are usable is a matter of health. AnswerSets gives the sets
// of the record with every enabled pool usable, plus each pool alone (the
// set a pool action answers when it is the only one left); Live.OnHealth
// gives, at each health change, the sets the new state makes reachable,
// before the state is published. Groups (nested actions) are enumerated
// by their members' pools alone and all together; a set no enumeration
// foresaw is the query path's to sign once, within the signing budget.

// AnswerSets calls fn with every RRset r answers with while all its
// enabled pools are usable, each pool alone, and the when_all_down
// results; qtype is the set's type (A, AAAA or CNAME). A set may be given
// more than once; its records may be shared between sets and must not be modified, and
// fn must not keep rrs's slice (it is reused).
func (r *Record) AnswerSets(fn func(qtype uint16, rrs []dns.RR)) {
	var buf []dns.RR
	if r.Type == dns.TypeCNAME {
		for _, p := range r.Pools {
			if p.Target != "" {
				fn(dns.TypeCNAME, []dns.RR{r.cnameRR(p.Target)})
			}
		}
		return
	}
	for _, qt := range [2]uint16{dns.TypeA, dns.TypeAAAA} {
		fam := r.family(qt)
		buf = r.sets(qt, r.Enabled&fam, nil, buf, fn)
		for m := fam; m != 0; m &= m - 1 {
			buf = r.emit(qt, m&-m, 0, nil, buf, fn)
		}
	}
}

// sets calls fn with every set r answers qtype with when the usable pools
// are avail and the usable addresses, per pool, addrs (nil: all).
func (r *Record) sets(qtype uint16, avail uint64, addrs []uint64, buf []dns.RR, fn func(uint16, []dns.RR)) []dns.RR {
	fam := r.family(qtype)
	if fam == 0 {
		return buf
	}
	for _, rule := range r.Rules {
		a := &rule.Action
		m := a.mask & avail
		if m == 0 {
			continue
		}
		switch {
		case a.Kind == ActPool && !a.nested:
			buf = r.emit(qtype, m, 0, addrs, buf, fn)
		case a.Kind == ActMultivalue:
			buf = r.emit(qtype, m, a.Limit, addrs, buf, fn)
			if a.nested {
				for p := m; p != 0; p &= p - 1 {
					buf = r.emit(qtype, p&-p, a.Limit, addrs, buf, fn)
				}
			}
		default:
			// One pool of the candidates (or, for a group, a member's
			// pick: a pool, or a nested pool or multivalue's union).
			for p := m; p != 0; p &= p - 1 {
				buf = r.emit(qtype, p&-p, 0, addrs, buf, fn)
			}
			if a.nested {
				buf = r.emit(qtype, m, 0, addrs, buf, fn)
			}
		}
	}
	// when_all_down, as decideOutcome fails open: all addresses.
	switch r.WhenAllDown {
	case AnswerAll:
		for _, rule := range r.Rules {
			p := rule.Action.mask & fam
			if p == 0 {
				p = fam
			}
			buf = r.emit(qtype, p, 0, nil, buf, fn)
		}
	case FallbackPool:
		if p := uint64(1) << r.FallbackPool & fam; p != 0 {
			buf = r.emit(qtype, p, 0, nil, buf, fn)
		}
	}
	return buf
}

// emit gives fn the set of pools' addresses of qtype (those in addrs when
// it is not nil), or each rotation window of limit of them.
func (r *Record) emit(qtype uint16, pools uint64, limit int, addrs []uint64, buf []dns.RR, fn func(uint16, []dns.RR)) []dns.RR {
	d := Decision{Pools: pools}
	buf = r.appendAnswer(buf[:0], &d, qtype, addrs, false)
	n := len(buf)
	if n == 0 {
		return buf
	}
	if limit <= 0 || n <= limit {
		fn(qtype, buf)
		return buf
	}
	for s := 0; s < n; s++ {
		w := make([]dns.RR, 0, limit)
		for i := range limit {
			w = append(w, buf[(s+i)%n])
		}
		fn(qtype, w)
	}
	return buf
}

// OnHealth makes every later SetHealth call fn, before the new state is
// published, with each set (as AnswerSets) that the new state lets a
// record answer with, for the records whose usable pools or addresses
// changed: what a signed zone signs before the first answer uses it. fn
// must not keep rrs's slice (its records may be shared between sets). nil stops.
func (l *Live) OnHealth(fn func(r *Record, qtype uint16, rrs []dns.RR)) {
	if fn == nil {
		l.onHealth.Store(nil)
		return
	}
	l.onHealth.Store(&fn)
}

// Reachable calls fn with each set the current health state lets a
// record answer with (as OnHealth, for every record): what a table built
// while the state is served signs beside AnswerSets. Without a health
// state it calls nothing (AnswerSets has them).
func (l *Live) Reachable(fn func(r *Record, qtype uint16, rrs []dns.RR)) {
	if h := l.health.Load(); h != nil {
		l.reachable(h, nil, fn)
	}
}

// reachable calls fn for the sets h makes reachable for the records whose
// state differs from prev's (all of them without prev).
func (l *Live) reachable(h, prev *Health, fn func(r *Record, qtype uint16, rrs []dns.RR)) {
	var buf []dns.RR
	for i, r := range l.t.Records {
		if r.Type == dns.TypeCNAME {
			continue // every target is in AnswerSets
		}
		if prev != nil && i < len(prev.pools) && prev.pools[i] == h.pools[i] && slices.Equal(prev.addrs[i], h.addrs[i]) {
			continue
		}
		each := func(qt uint16, rrs []dns.RR) { fn(r, qt, rrs) }
		buf = r.sets(dns.TypeA, r.Enabled&h.pools[i][0], h.addrs[i], buf, each)
		buf = r.sets(dns.TypeAAAA, r.Enabled&h.pools[i][1], h.addrs[i], buf, each)
	}
}
