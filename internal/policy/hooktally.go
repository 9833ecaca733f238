package policy

import "math/bits"

// HookTally holds the hook calls (Hooks) of the steered answers one
// server reader makes in a batch of datagrams, and makes them at Flush,
// once for each set of alike answers with their number: the hooks add to
// shared counters (metrics, the dashboard's traffic), and five to seven
// locked adds an answer were the largest part of a steered answer's own
// cost after the partition lookup. The counters end with the same values;
// they are only added to later, when the batch ends (microseconds).
//
// A tally is one reader's: it is not safe for concurrent use. Its zero
// value is empty. It does not allocate.
type HookTally struct {
	live *Live // whose hooks the entries are for
	obs  [8]obsTally
	nobs int
	dec  [16]decTally // an ECS batch's decisions differ by scope: a dozen in 32 answers
	ndec int
}

type obsTally struct {
	record, pool int
	allDown      bool
	n            int
}

type decTally struct {
	record int
	d      Decision
	ecs    int
	n      int
}

// add tallies the hook calls of an answer of record decided d by l;
// a tally full of other answers makes them at once.
func (t *HookTally) add(l *Live, record int, d *Decision, ecs int) {
	if t.live != l {
		t.Flush()
		t.live = l
	}
	if l.hooks.Observe != nil {
	pools:
		for m := d.Pools; m != 0; m &= m - 1 {
			pool := bits.TrailingZeros64(m)
			for i := range t.obs[:t.nobs] {
				if e := &t.obs[i]; e.record == record && e.pool == pool && e.allDown == d.AllDown {
					e.n++
					continue pools
				}
			}
			if t.nobs == len(t.obs) {
				l.hooks.Observe(record, pool, d.AllDown, 1)
				continue
			}
			t.obs[t.nobs] = obsTally{record: record, pool: pool, allDown: d.AllDown, n: 1}
			t.nobs++
		}
	}
	if l.hooks.Decided != nil {
		for i := range t.dec[:t.ndec] {
			if e := &t.dec[i]; e.d.Scope == d.Scope && e.record == record && e.d.Pools == d.Pools && e.ecs == ecs && e.d == *d {
				e.n++
				return
			}
		}
		if t.ndec == len(t.dec) {
			l.hooks.Decided(record, *d, ecs, 1)
			return
		}
		t.dec[t.ndec] = decTally{record: record, d: *d, ecs: ecs, n: 1}
		t.ndec++
	}
}

// Flush makes the tallied hook calls and empties t; it lets go of the
// live state they were for.
func (t *HookTally) Flush() {
	l := t.live
	if l == nil {
		return
	}
	for _, e := range t.obs[:t.nobs] {
		l.hooks.Observe(e.record, e.pool, e.allDown, e.n)
	}
	for _, e := range t.dec[:t.ndec] {
		l.hooks.Decided(e.record, e.d, e.ecs, e.n)
	}
	*t = HookTally{}
}
