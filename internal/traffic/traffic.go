// Package traffic counts what the steered answers gave out, per record:
// answers per pool, decisions per rule, ECS scope lengths returned, and
// keeps them over sliding windows (the last 5 minutes and hour) for the
// dashboard. In a fleet the windows of every node are summed.
//
// # Counting
//
// The query path (Answered) makes an atomic add per counter an answer
// touches (its answers, each pool, its rule, its scope), at indexes
// computed from the record's offset in a flat []atomic.Uint32: no lock,
// no allocation. Each record has a fixed block of counters: its
// answers, widened answers (IPv4, IPv6), 33 IPv4 scope lengths (/0–/32),
// 33 IPv6 scope buckets, then one counter per pool and per rule. The
// counters are 32 bits: the sampler empties them every 10 s, and no
// record gets 4·10⁹ answers in 10 s.
//
// IPv6 scopes are counted in 4-bit buckets, not by length: bucket k
// holds the lengths 4k-3 … 4k (bucket 0: /0) and is reported as
// Counts.Scopes6[4k], the other entries of Scopes6 staying 0. The lengths
// resolvers and geo databases use (/32, /48, /56, /64) are exact; a /44
// partition shows as /44, a /29 one as /32. It keeps the counters of a
// record at 69 plus one per pool and rule, 300 bytes for a typical one,
// instead of 165.
//
// # Windows
//
// Sample (every 10 s, Run) empties the counters into a sample slot: only
// the records with counts, only their non-zero counters, as varints
// (slot.go; a busy record takes about 20 bytes). Three samples merge into
// a 30-s slot; ten 30-s slots are kept for the last 5 minutes, and they
// are also summed into 5-minute slots, twelve of which are kept for the
// last hour. A record busy in every slot so costs about 300 bytes of
// counters plus about 650 of history (measured by TestMemoryPerRecord:
// under 1 KB); an idle one only its counters. A window is the slots
// ending at the last sample whose span fits in the window: Covered is
// their span, shorter than Span by up to a slot (30 s or 5 min), or by
// what the recorder has not yet seen (a node up 2 minutes covers 2m).
//
// # Reloads
//
// SetRecords renumbers: each stored slot is rewritten with the new
// indexes, keeping the counts of records, pools and rules (by position)
// whose names stay and dropping the rest; O(the history) per reload, and
// nothing when the records are the same. The counters made before the
// reload are emptied into the next sample. Answers counted between
// SetRecords and the new table going live (the old table's indexes
// counted on the new layout, as the metrics are) may be attributed to the
// wrong record; the gap is the swap itself.
package traffic

import (
	"context"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// Record describes one steered record to SetRecords, in the order of the
// compiled table's indexes (policy.Record.Index).
type Record struct {
	Name  string // canonical owner name
	Pools []string
	Rules int
}

// RecordsOf describes t's records to SetRecords.
func RecordsOf(t *policy.Table) []Record {
	if t == nil {
		return nil
	}
	out := make([]Record, len(t.Records))
	var last []string // records of a policy name their pools alike: one slice for a run of them
	for i, r := range t.Records {
		same := len(last) == len(r.Pools)
		for j := 0; same && j < len(last); j++ {
			same = last[j] == r.Pools[j].Name
		}
		if !same {
			last = make([]string, len(r.Pools))
			for j, p := range r.Pools {
				last[j] = p.Name
			}
		}
		out[i] = Record{Name: r.Name, Pools: last, Rules: len(r.Rules)}
	}
	return out
}

// The keys of a record's counters.
const (
	kAnswers      = 0
	kWidened4     = 1
	kWidened6     = 2
	kScope4       = 3
	kScope6       = kScope4 + 33
	scope6Buckets = 33
	kPools        = kScope6 + scope6Buckets // then the rules
)

// The windows' slots.
const (
	// SampleInterval is how often Run samples.
	SampleInterval = 10 * time.Second
	fineSlot       = 30 * time.Second
	fineSpan       = 5 * time.Minute
	coarseSlot     = 5 * time.Minute
	coarseSpan     = time.Hour
)

// table is the live counters of one layout.
type table struct {
	// Record r's counters are c[off[r]:off[r+1]], its rules from
	// rules[r]; len(records)+1 and len(records) entries.
	off, rules []int32
	c          []atomic.Uint32
}

func newTable(recs []Record) *table {
	t := &table{off: make([]int32, len(recs)+1), rules: make([]int32, len(recs))}
	n := int32(0)
	for i, r := range recs {
		t.off[i] = n
		t.rules[i] = n + kPools + int32(len(r.Pools))
		n = t.rules[i] + int32(max(r.Rules, 0))
	}
	t.off[len(recs)] = n
	t.c = make([]atomic.Uint32, n)
	return t
}

// layout is the records a table and the slots are numbered by.
type layout struct {
	recs  []Record
	index map[string]int
}

func newLayout(recs []Record) *layout {
	l := &layout{recs: slices.Clone(recs), index: make(map[string]int, len(recs))}
	for i, r := range recs {
		l.index[r.Name] = i
	}
	return l
}

func (l *layout) same(recs []Record) bool {
	if len(l.recs) != len(recs) {
		return false
	}
	for i, r := range recs {
		o := l.recs[i]
		if o.Name != r.Name || o.Rules != r.Rules || !slices.Equal(o.Pools, r.Pools) {
			return false
		}
	}
	return true
}

// lookup finds name, as given or canonical.
func (l *layout) lookup(name string) (int, bool) {
	if i, ok := l.index[name]; ok {
		return i, true
	}
	i, ok := l.index[strings.ToLower(dns.Fqdn(name))]
	return i, ok
}

// Recorder holds the counters and their windows.
type Recorder struct {
	tab atomic.Pointer[table]

	mu  sync.Mutex
	lay *layout
	// carry is the counts of tables SetRecords replaced, for the next
	// sample.
	carry []*slot
	// first and last are when the first and last samples were taken
	// (Unix ns; 0: none yet).
	first, last int64
	pending     []*slot // samples of the 30-s slot being filled
	fine        []*slot // 30-s slots, oldest first, for the last 5m
	acc         *slot   // the 5-min slot being filled
	coarse      []*slot // 5-min slots, oldest first, for the last hour

	// fleet is the other nodes' windows (SetFleet), fc their cache.
	fleet atomic.Pointer[fleetView]
	fc    fleetCache
}

// New returns an empty recorder.
func New() *Recorder {
	r := &Recorder{lay: newLayout(nil)}
	r.tab.Store(newTable(nil))
	return r
}

// SetRecords renumbers the counters for a new table; the windows of
// records (and pools, rules) that keep their names carry over.
func (r *Recorder) SetRecords(recs []Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lay.same(recs) {
		return
	}
	old := r.lay
	ot := r.tab.Swap(newTable(recs))
	if s := drain(ot, r.last, r.last); len(s.data) > 0 {
		r.carry = append(r.carry, s)
	}
	m := newRemap(old, recs)
	for _, ss := range [][]*slot{r.carry, r.pending, r.fine, r.coarse} {
		for i, s := range ss {
			ss[i] = m.apply(s)
		}
	}
	if r.acc != nil {
		r.acc = m.apply(r.acc)
	}
	r.lay = newLayout(recs)
}

// Answered counts one answer of record (the policy.Hooks.Answered the
// node sets): each of its pools (d.Pools' bits; those past the record's
// pools are ignored), its deciding rule and, when the query carried an
// ECS subnet of family 4 or 6 (0: none, so no scope is returned), the
// scope returned (d.Scope) and whether health widened it (d.WidenedFrom
// != 0). One read of the counter table, no lock, no allocation. Records
// out of range of the last SetRecords are ignored.
func (r *Recorder) Answered(record int, d *policy.Decision, family int) {
	t := r.tab.Load()
	if uint(record) >= uint(len(t.rules)) {
		return
	}
	lo, hi := int(t.off[record])+kPools, int(t.rules[record])
	for m := d.Pools; m != 0; m &= m - 1 {
		i := lo + bits.TrailingZeros64(m)
		if i >= hi {
			break
		}
		t.c[i].Add(1)
	}
	base := int(t.off[record])
	t.c[base+kAnswers].Add(1)
	if d.Rule >= 0 {
		if i := int(t.rules[record]) + d.Rule; i < int(t.off[record+1]) {
			t.c[i].Add(1)
		}
	}
	switch family {
	case 4:
		t.c[base+kScope4+min(max(d.Scope, 0), 32)].Add(1)
		if d.WidenedFrom != 0 {
			t.c[base+kWidened4].Add(1)
		}
	case 6:
		t.c[base+kScope6+(min(max(d.Scope, 0), 128)+3)/4].Add(1)
		if d.WidenedFrom != 0 {
			t.c[base+kWidened6].Add(1)
		}
	}
}

// drain empties t's counters into a slot of (from, to].
func drain(t *table, from, to int64) *slot {
	b := newBuilder(from, to)
	var es []entry
	for rec := range len(t.rules) {
		es = es[:0]
		lo, hi := int(t.off[rec]), int(t.off[rec+1])
		for i := lo; i < hi; i++ {
			if t.c[i].Load() == 0 {
				continue
			}
			if v := t.c[i].Swap(0); v != 0 {
				es = append(es, entry{key: uint32(i - lo), n: uint64(v)})
			}
		}
		b.add(uint32(rec), es)
	}
	return b.done()
}

// Run samples now and every SampleInterval until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	r.Begin(time.Now())
	t := time.NewTicker(SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.Sample(now)
		}
	}
}

// Begin starts the history at now without a sample: the counts made
// until the first Sample are that sample's, and its slot spans from now,
// so a window never shows answers while saying it covers no time. It
// does nothing once the history has begun.
func (r *Recorder) Begin(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == 0 {
		r.first, r.last = now.UnixNano(), now.UnixNano()
	}
}

// Sample empties the counters into the history as of now; the node calls
// it every SampleInterval (Run), a test with its own clock.
func (r *Recorder) Sample(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := now.UnixNano()
	if r.last == 0 {
		r.first, r.last = t, t
	}
	t = max(t, r.last) // the clock stepped back: count from the last sample
	s := drain(r.tab.Load(), r.last, t)
	if len(r.carry) > 0 {
		// Counted before a reload, since the last sample (or before
		// the first: their times are not the window's).
		s = merge(append(r.carry, s)...)
		s.from, s.to = r.last, t
		r.carry = nil
	}
	r.last = t
	r.pending = append(r.pending, s)
	if t-r.pending[0].from < int64(fineSlot) {
		return
	}
	f := merge(r.pending...)
	r.pending = nil
	r.fine = dropOld(append(r.fine, f), t-int64(fineSpan))
	if r.acc == nil {
		r.acc = f
	} else {
		r.acc = merge(r.acc, f)
	}
	if r.acc.to-r.acc.from >= int64(coarseSlot) {
		r.coarse = dropOld(append(r.coarse, r.acc), t-int64(coarseSpan))
		r.acc = nil
	}
}

// dropOld drops the slots starting before since.
func dropOld(ss []*slot, since int64) []*slot {
	i := 0
	for i < len(ss) && ss[i].from < since {
		i++
	}
	if i == 0 {
		return ss
	}
	return append(ss[:0:0], ss[i:]...)
}

// Counts is one record's counts over a window.
type Counts struct {
	Pools map[string]uint64 // answers naming each pool
	Rules []uint64          // decisions by rule (0-based)
	// Scopes4[len] and Scopes6[len] count answers to queries with an ECS
	// subnet by the scope length returned; Scopes6 in 4-bit buckets,
	// each at its longest length (Scopes6[48] holds /45–/48; see the
	// package doc). Widened4/6 count those whose scope health widened.
	Scopes4            [33]uint64
	Scopes6            [129]uint64
	Widened4, Widened6 uint64
	Answers            uint64 // answers of the record
}

// Window is the counts over the last Span as of At; Covered is how much
// of Span the history covers.
type Window struct {
	Span, Covered time.Duration
	At            time.Time
	// Nodes is how many nodes' counts are summed (1 off a fleet).
	Nodes int

	lay   *layout
	slots []*slot
	// remote is the other nodes' counts of this span, by record name.
	remote []map[string]*wireCounts
}

// Window returns the window ending at the last sample over span (5m or
// 1h; up to 5m the 30-s slots are used, beyond the 5-min ones); in a
// fleet it sums every node's (SetFleet).
func (r *Recorder) Window(span time.Duration) *Window {
	w := r.local(span)
	if f := r.fleet.Load(); f != nil {
		w.remote = f.spans[f.spanIndex(span)]
		w.Nodes += len(w.remote)
	}
	return w
}

// local is this node's window.
func (r *Recorder) local(span time.Duration) *Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.localLocked(span)
}

// localLocked is local with r.mu held.
func (r *Recorder) localLocked(span time.Duration) *Window {
	w := &Window{Span: span, Nodes: 1, lay: r.lay}
	if r.last == 0 {
		return w
	}
	at := r.last
	w.At = time.Unix(0, at).UTC()
	oldest := at
	add := func(s *slot) bool {
		if s == nil {
			return true
		}
		if at-s.from > int64(span) {
			return false
		}
		w.slots = append(w.slots, s)
		oldest = min(oldest, s.from)
		return true
	}
	ok := true
	for i := len(r.pending) - 1; i >= 0 && ok; i-- {
		ok = add(r.pending[i])
	}
	if span <= fineSpan {
		for i := len(r.fine) - 1; i >= 0 && ok; i-- {
			ok = add(r.fine[i])
		}
	} else {
		ok = ok && add(r.acc)
		for i := len(r.coarse) - 1; i >= 0 && ok; i-- {
			ok = add(r.coarse[i])
		}
	}
	w.Covered = time.Duration(at - oldest)
	return w
}

// Record returns name's counts in w; ok is false for a record with no
// counts at all. The pools and rules are those of the records last set.
func (w *Window) Record(name string) (c Counts, ok bool) {
	if w.lay == nil {
		return Counts{}, false
	}
	i, found := w.lay.lookup(name)
	if !found {
		return Counts{}, false
	}
	rec := w.lay.recs[i]
	c = newCounts(rec)
	any := false
	for _, s := range w.slots {
		if body := s.find(uint32(i)); body != nil {
			any = true
			c.addBody(rec, body)
		}
	}
	for _, m := range w.remote {
		if o := m[rec.Name]; o != nil {
			any = true
			c.addWire(o)
		}
	}
	return c, any
}

// newCounts is rec's counts at zero: every pool and rule named.
func newCounts(rec Record) Counts {
	c := Counts{Pools: make(map[string]uint64, len(rec.Pools)), Rules: make([]uint64, max(rec.Rules, 0))}
	for _, p := range rec.Pools {
		c.Pools[p] = 0
	}
	return c
}

// addBody sums one of rec's slot blocks into c.
func (c *Counts) addBody(rec Record, body []byte) {
	np := uint32(len(rec.Pools))
	eachEntry(body, func(key uint32, n uint64) {
		switch {
		case key == kAnswers:
			c.Answers += n
		case key == kWidened4:
			c.Widened4 += n
		case key == kWidened6:
			c.Widened6 += n
		case key < kScope6:
			c.Scopes4[key-kScope4] += n
		case key < kPools:
			c.Scopes6[4*(key-kScope6)] += n
		case key < kPools+np:
			c.Pools[rec.Pools[key-kPools]] += n
		case int(key-kPools-np) < len(c.Rules):
			c.Rules[key-kPools-np] += n
		}
	})
}

// remap renumbers slots from one layout to another.
type remap struct {
	rec   []int32   // old record -> new, -1: gone
	pools [][]int32 // old record's pool -> the new record's, -1: gone
	oldP  []uint32  // old record's pool count
	newP  []uint32  // new record's pool and rule counts
	newR  []uint32
}

func newRemap(old *layout, recs []Record) *remap {
	m := &remap{rec: make([]int32, len(old.recs)), pools: make([][]int32, len(old.recs)),
		oldP: make([]uint32, len(old.recs)), newP: make([]uint32, len(recs)), newR: make([]uint32, len(recs))}
	idx := make(map[string]int, len(recs))
	for i, r := range recs {
		idx[r.Name] = i
		m.newP[i], m.newR[i] = uint32(len(r.Pools)), uint32(max(r.Rules, 0))
	}
	for i, o := range old.recs {
		m.oldP[i] = uint32(len(o.Pools))
		j, ok := idx[o.Name]
		if !ok {
			m.rec[i] = -1
			continue
		}
		m.rec[i] = int32(j)
		m.pools[i] = make([]int32, len(o.Pools))
		for k, p := range o.Pools {
			m.pools[i][k] = int32(slices.Index(recs[j].Pools, p))
		}
	}
	return m
}

// apply returns s renumbered.
func (m *remap) apply(s *slot) *slot {
	type block struct {
		rec uint32
		es  []entry
	}
	var blocks []block
	for c := s.cursor(); c.ok; c.next(false) {
		if int(c.rec) >= len(m.rec) || m.rec[c.rec] < 0 {
			continue
		}
		o, n := c.rec, uint32(m.rec[c.rec])
		var es []entry
		eachEntry(c.body, func(key uint32, v uint64) {
			switch {
			case key < kPools:
			case key < kPools+m.oldP[o]:
				p := m.pools[o][key-kPools]
				if p < 0 {
					return
				}
				key = kPools + uint32(p)
			default:
				k := key - kPools - m.oldP[o]
				if k >= m.newR[n] {
					return
				}
				key = kPools + m.newP[n] + k
			}
			es = append(es, entry{key: key, n: v})
		})
		slices.SortFunc(es, func(a, b entry) int { return int(a.key) - int(b.key) })
		blocks = append(blocks, block{rec: n, es: es})
	}
	slices.SortFunc(blocks, func(a, b block) int { return int(a.rec) - int(b.rec) })
	b := newBuilder(s.from, s.to)
	for _, bl := range blocks {
		b.add(bl.rec, bl.es)
	}
	return b.done()
}

// Bytes is about how much memory the counters and the history hold.
func (r *Recorder) Bytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tab.Load()
	n := 4*len(t.c) + 8*len(t.off)
	for _, ss := range [][]*slot{r.carry, r.pending, r.fine, r.coarse, {r.acc}} {
		for _, s := range ss {
			if s != nil {
				n += s.size()
			}
		}
	}
	return n
}
