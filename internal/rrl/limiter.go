package rrl

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Table layout.
//
// The table is one array of TableSize entries of 24 bytes, allocated by New
// and never resized, split into numShards contiguous shards, each guarded
// by its own mutex. The shard is chosen by the source prefix alone, so one
// Decide takes one lock for both of its buckets (the key's and the source's
// aggregate), and the counters kept beside that lock need no atomics.
// Within a shard the table is set-associative: a 64-bit hash picks a set
// of `ways` consecutive entries, and the bucket lives in one of them,
// identified by the whole hash (its fingerprint; two keys with the same
// 64-bit hash would share a bucket, as benign as BIND's qname-hash
// collisions and far rarer).
//
// A source can only ever displace buckets in its own shard, 1/numShards of
// the table, so a flood of distinct keys from one source (random ECS or
// names) cannot wash the whole table out.
//
// Eviction, when a new key finds its set full, replaces the entry that
// would be back to a full balance soonest (least time to full, from its
// balance, rate and last update):
//   - an empty entry first;
//   - then one already full by now (or older than the window): forgetting
//     it loses nothing, since a new bucket starts full;
//   - otherwise the one closest to full. Among idle buckets that is the
//     least recently used (LRU); unlike plain LRU it keeps the buckets of
//     sources being limited (deep in debt, seconds from full) against a
//     flood of fresh distinct keys (milliseconds from full), so varying ECS
//     or names cannot evict a limited bucket and reset it. Such a
//     replacement loses state and is counted in Stats.Evictions.
const (
	ways      = 4
	shardBits = 6
	numShards = 1 << shardBits
	// unit is the balance of one response: balances are kept in
	// thousandths of a response so that a bucket earning rate responses a
	// second earns exactly rate units a millisecond.
	unit = 1000
	// maxTimeTravel is how far (ms) a timestamp may lie in the future
	// before it is taken for a clock change and the bucket treated as
	// ancient; smaller reorderings between goroutines count as no time.
	maxTimeTravel = 60_000
)

// entry is one bucket.
type entry struct {
	fp      uint64 // hash of the key; 0: empty
	balance int64  // credit in units (1/1000 response), [−window×rate×unit, rate×unit]
	stamp   uint32 // last credit, milliseconds on the caller's clock (mod 2^32)
	slips   uint8  // limited responses since the last slip, 0..Slip−1
	agg     bool   // an aggregate (AllPerSecond) bucket
}

// counters are one shard's statistics, guarded by its mutex.
type counters struct {
	class      [NumClasses][4]uint64 // by outcome: passed, slipped, dropped, would-limit
	allLimited uint64
	evictions  uint64
}

const (
	outPassed = iota
	outSlipped
	outDropped
	outWould
)

type shard struct {
	mu      sync.Mutex
	stats   counters
	exempt  atomic.Uint64 // counted without the lock
	entries []entry
	_       [64]byte // keep the next shard's mutex off this cache line
}

// Limiter decides, for each UDP response, whether to send, slip or drop it.
// It holds a fixed-size table allocated by New; Decide does not allocate
// and may be called from any number of goroutines.
type Limiter struct {
	seed         maphash.Seed // names
	k            [7]uint64    // secret keys of the fixed-size parts of keys
	rate, all    int64        // responses per second; 0: off
	windowMS     int64
	window       int64 // seconds
	slip         uint8
	v4, v6       int
	ecs, logOnly bool
	exempt       []netip.Prefix

	shards  []shard
	setMask uint64 // sets per shard − 1
	size    int
}

// New returns a Limiter for c, or the error of c.Validate. A TableSize of 0
// is DefaultTableSize; others are rounded up to a power of two. Exempt
// prefixes are copied.
func New(c Config) (*Limiter, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	size := c.TableSize
	if size == 0 {
		size = DefaultTableSize
	}
	size = 1 << bits.Len(uint(size-1))
	perShard := size / ways / numShards
	l := &Limiter{
		seed:     maphash.MakeSeed(),
		rate:     int64(c.ResponsesPerSecond),
		all:      int64(c.AllPerSecond),
		window:   int64(c.Window),
		windowMS: int64(c.Window) * 1000,
		slip:     uint8(c.Slip),
		v4:       c.IPv4Prefix,
		v6:       c.IPv6Prefix,
		ecs:      c.ECSAware,
		logOnly:  c.LogOnly,
		shards:   make([]shard, numShards),
		setMask:  uint64(perShard - 1),
		size:     size,
	}
	for i := range l.k {
		l.k[i] = rand.Uint64() | 1
	}
	for _, p := range c.Exempt {
		a := p.Addr()
		b := p.Bits()
		if a.Is4In6() && b >= 96 {
			a, b = a.Unmap(), b-96
		}
		l.exempt = append(l.exempt, netip.PrefixFrom(a, b).Masked())
	}
	table := make([]entry, size)
	for i := range l.shards {
		n := perShard * ways
		l.shards[i].entries = table[i*n : (i+1)*n : (i+1)*n]
	}
	return l, nil
}

var epoch = time.Now()

// Now returns the time for Decide: nanoseconds on the monotonic clock since
// the process started. Decide takes the time as an argument, not a
// time.Time it reads itself, so that the handler reads the clock once per
// packet (or from a coarse clock it keeps), and tests inject their own.
func Now() int64 { return int64(time.Since(epoch)) }

// TableSize returns the number of entries in the table (fixed at New).
func (l *Limiter) TableSize() int { return l.size }

// Decide returns what to do with the UDP response r to source src at now
// (non-negative nanoseconds on a monotonic clock, e.g. [Now]; only
// differences matter, in milliseconds). It debits the response's bucket,
// keyed on (src masked to IPv4Prefix/IPv6Prefix, r's class, name, qtype
// and ECS scope block, as [Response] says), and, with AllPerSecond, the
// aggregate bucket of the source prefix:
//
//   - an exempt source, or a bucket with credit left: Pass;
//   - over AllPerSecond: Drop, never Slip;
//   - over ResponsesPerSecond: every Slip-th limited response of the
//     bucket is Slip (from the first), the others Drop; an Error response
//     is always Drop;
//   - in log-only mode, LogSlip or LogDrop instead of Slip or Drop.
//
// As in BIND, every response debits its buckets, limited ones included:
// a source that keeps asking faster than the rate stays limited until it
// slows down, however long, and a bucket at its floor (−Window×rate)
// answers again only after Window seconds of silence.
//
// The caller does not call Decide for TCP, nor for UDP queries with a valid
// server cookie. A nil Limiter passes everything.
func (l *Limiter) Decide(src netip.Addr, r Response, now int64) Verdict {
	return l.decide(src, r, now, false)
}

// Exempt reports whether src is in Config.Exempt (never limited).
func (l *Limiter) Exempt(src netip.Addr) bool {
	if l == nil {
		return false
	}
	src = src.Unmap()
	for i := range l.exempt {
		if l.exempt[i].Contains(src) {
			return true
		}
	}
	return false
}

// CountExempt counts n responses to sources the caller found exempt
// (Exempt) and did not ask Decide about: a batch of them counted at once.
func (l *Limiter) CountExempt(n uint64) {
	if l != nil {
		l.shards[0].exempt.Add(n)
	}
}

// Peek returns what Decide would return for the same arguments now,
// changing nothing: no bucket is debited, created or evicted and no
// counter moves (for explain).
func (l *Limiter) Peek(src netip.Addr, r Response, now int64) Verdict {
	return l.decide(src, r, now, true)
}

// peekSave is what a Peek puts back: the two sets it touched and the
// shard's counters.
type peekSave struct {
	sets    [2]int
	entries [2][ways]entry
	stats   counters
}

func (l *Limiter) decide(src netip.Addr, r Response, now int64, peek bool) Verdict {
	if l == nil {
		return Pass
	}
	src = src.Unmap()
	// Exempt sources first, before any hashing: they are most of the
	// queries where they matter at all (a node's own monitoring, the
	// loopback a benchmark sends from). Their count goes to a shard
	// chosen by the source's last bytes, which spreads sources as well as
	// the hash did for the count's purpose.
	for i := range l.exempt {
		if l.exempt[i].Contains(src) {
			if !peek {
				b := src.As16()
				l.shards[(b[13]^b[14]^b[15])&(numShards-1)].exempt.Add(1)
			}
			return Pass
		}
	}
	pfx, fam := l.v4, uint64(1)
	if src.Is6() {
		pfx, fam = l.v6, 2
	}
	hs := l.hash2(masked(src, pfx), fam, l.k[0])
	sh := &l.shards[hs>>(64-shardBits)]
	class := r.Class
	if class >= NumClasses {
		class = Error
	}
	t := uint32(uint64(now) / 1e6)

	var hk uint64
	if l.rate > 0 {
		meta := uint64(class)
		if class == Positive {
			meta |= uint64(r.Qtype) << 8
		}
		var eb [16]byte
		if l.ecs && r.Scope > 0 && r.ECS.IsValid() && class != Error {
			n := min(r.Scope, r.ECS.BitLen())
			meta |= uint64(n)<<24 | 1<<32
			if r.ECS.Is6() {
				meta |= 2 << 32
			}
			eb = masked(r.ECS, n)
		}
		var nh uint64
		if class != Error {
			nh = maphash.Bytes(l.seed, r.Name)
		}
		hk = l.hash2(eb, mix(hs^meta^l.k[3], nh^l.k[4]), l.k[5])
	}

	sh.mu.Lock()
	// A peek works on the two sets as they are and puts them back after
	// (saved on the heap: Decide, the hot path, zeroes nothing for it).
	var sv *peekSave
	if peek {
		sv = &peekSave{sets: [2]int{int(hk&l.setMask) * ways, int((hs>>32)&l.setMask) * ways}, stats: sh.stats}
		for i, b := range sv.sets {
			copy(sv.entries[i][:], sh.entries[b:b+ways])
		}
	}
	v := Pass
	if l.rate > 0 {
		v = l.debit(sh, hk, hk, false, class != Error && (l.slip != 0 || r.Cookie), t)
		if v == Drop && r.Cookie && class != Error {
			v = Slip // BADCOOKIE: the client's retry with its cookie is exempt
		}
	}
	all := l.all > 0 && l.debit(sh, hs, hs>>32, true, false, t) != Pass
	c := &sh.stats
	if all {
		v = Drop
		c.allLimited++
	}
	switch {
	case v == Pass:
		c.class[class][outPassed]++
	case l.logOnly:
		c.class[class][outWould]++
		v += LogSlip - Slip
	case v == Slip:
		c.class[class][outSlipped]++
	default:
		c.class[class][outDropped]++
	}
	if sv != nil {
		for i := len(sv.sets) - 1; i >= 0; i-- {
			copy(sh.entries[sv.sets[i]:sv.sets[i]+ways], sv.entries[i][:])
		}
		sh.stats = sv.stats
	}
	sh.mu.Unlock()
	return v
}

// mix is a keyed 64-bit mixer (the folded 128-bit product, as in wyhash).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// hash2 hashes 16 bytes and a 64-bit word with secret keys.
func (l *Limiter) hash2(b [16]byte, w uint64, k uint64) uint64 {
	x := mix(binary.BigEndian.Uint64(b[:8])^l.k[1], binary.BigEndian.Uint64(b[8:])^l.k[2])
	return mix(x^w^k, l.k[6])
}

// debit charges one response at t (ms) to the bucket with hash h in set
// (set & setMask) of shard sh, whose lock the caller holds: an aggregate
// bucket (earning AllPerSecond) or a per-key one (earning
// ResponsesPerSecond). It says whether the response passes, slips or
// drops.
func (l *Limiter) debit(sh *shard, h, set uint64, agg, canSlip bool, t uint32) Verdict {
	fp := h | 1 // never 0 (empty)
	rate := l.rate
	if agg {
		rate = l.all
	}
	full := rate * unit
	base := int(set&l.setMask) * ways
	entries := sh.entries[base : base+ways : base+ways]
	var e *entry
	victim, need := 0, int64(1<<62)
	for i := range entries {
		x := &entries[i]
		if x.fp == fp && x.agg == agg {
			e = x
			break
		}
		if n := l.untilFull(x, t); n < need {
			victim, need = i, n
		}
	}
	if e == nil {
		e = &entries[victim]
		if need > 0 {
			sh.stats.evictions++
		}
		*e = entry{fp: fp, balance: full, stamp: t, agg: agg}
	} else {
		age := int64(int32(t - e.stamp))
		switch {
		case age < -maxTimeTravel || age > l.windowMS:
			e.balance, e.slips, e.stamp = full, 0, t
		case age > 0:
			e.balance += age * rate
			if e.balance >= full {
				e.balance, e.slips = full, 0
			}
			e.stamp = t
		}
	}
	e.balance -= unit
	if e.balance >= 0 {
		return Pass
	}
	if floor := -l.window * full; e.balance < floor {
		e.balance = floor
	}
	if !canSlip {
		return Drop
	}
	v := Drop
	if e.slips == 0 {
		v = Slip
	}
	e.slips++
	if e.slips >= l.slip {
		e.slips = 0
	}
	return v
}

// untilFull returns how many milliseconds from t entry x needs to be back
// to a full balance: what replacing it would lose. An empty entry is −1;
// one full by now, or older than the window, 0.
func (l *Limiter) untilFull(x *entry, t uint32) int64 {
	if x.fp == 0 {
		return -1
	}
	rate := l.rate
	if x.agg {
		rate = l.all
	}
	age := int64(int32(t - x.stamp))
	if age < -maxTimeTravel || age > l.windowMS || rate <= 0 {
		return 0
	}
	return max((rate*unit-x.balance+rate-1)/rate-max(age, 0), 0)
}

// masked returns a's bytes (4 for IPv4, 16 for IPv6) with the bits after
// the first n cleared, in a 16-byte array.
func masked(a netip.Addr, n int) (out [16]byte) {
	size := 16
	switch {
	case a.Is4():
		b := a.As4()
		copy(out[:], b[:])
		size = 4
	case a.Is6():
		out = a.As16()
	default:
		return out
	}
	if n >= size*8 {
		return out
	}
	i := max(n, 0) / 8
	if rem := n % 8; rem > 0 {
		out[i] &^= 0xFF >> rem
		i++
	}
	clear(out[i:size])
	return out
}

// ClassStats counts the responses of one class that Decide saw.
type ClassStats struct {
	// Passed were answered, not limited.
	Passed uint64
	// Slipped and Dropped were limited.
	Slipped, Dropped uint64
	// WouldLimit were answered in log-only mode but would have been
	// slipped or dropped (LogSlip, LogDrop).
	WouldLimit uint64
}

// Stats is a snapshot of the limiter's counters since New. Shards are
// read one after the other without stopping Decide, so a snapshot taken
// under load is not an exact instant; each counter only grows.
type Stats struct {
	// Class is indexed by Class.
	Class [NumClasses]ClassStats
	// AllLimited counts the limited (or would-be-limited) responses that
	// the aggregate AllPerSecond cap decided; they are also in Class.
	AllLimited uint64
	// Exempt counts responses to exempt sources (in no Class).
	Exempt uint64
	// Evictions counts buckets replaced while they still held state (a
	// balance below full): a table too small for the traffic, or a flood
	// of distinct keys pushing others out.
	Evictions uint64
	// TableSize is the number of entries in the table.
	TableSize int
}

// Total returns the sum over the classes.
func (s *Stats) Total() ClassStats {
	var t ClassStats
	for _, c := range s.Class {
		t.Passed += c.Passed
		t.Slipped += c.Slipped
		t.Dropped += c.Dropped
		t.WouldLimit += c.WouldLimit
	}
	return t
}

// Stats returns a snapshot of the counters. It takes each shard's lock in
// turn, briefly, and does not allocate; it is meant for a metrics scrape,
// not for every query. A nil Limiter has none.
func (l *Limiter) Stats() Stats {
	var s Stats
	if l == nil {
		return s
	}
	s.TableSize = l.size
	for i := range l.shards {
		sh := &l.shards[i]
		s.Exempt += sh.exempt.Load()
		sh.mu.Lock()
		c := sh.stats
		sh.mu.Unlock()
		for k := range s.Class {
			s.Class[k].Passed += c.class[k][outPassed]
			s.Class[k].Slipped += c.class[k][outSlipped]
			s.Class[k].Dropped += c.class[k][outDropped]
			s.Class[k].WouldLimit += c.class[k][outWould]
		}
		s.AllLimited += c.allLimited
		s.Evictions += c.evictions
	}
	return s
}
