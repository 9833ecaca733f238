// Package rum aggregates real-user measurements (beacons): round-trip
// times that browsers measured from a client network to a site, posted to
// the node's beacon listener (see Intake). Each beacon's client is
// truncated on arrival to the ECS source prefix (/24 IPv4, /56 IPv6, or
// the coarser subnet the beacon gave), so nothing finer is ever stored.
//
// A Store keeps one cell per (network block, site): a decayed histogram of
// the RTTs, from which it reports p50/p75 and a decayed count. Memory is a
// fixed budget of blocks; the least recently seen block is evicted when a
// new one arrives at the budget. The server turns the cells changed since
// its last round into per-prefix measurements of the latency map (see
// Store.TakeChanged and package latency).
package rum

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Truncation lengths: the ECS source prefixes RFC 7871 §11.1 recommends
// resolvers send, so a RUM block is the network an ECS query names.
const (
	V4Bits = 24
	V6Bits = 56
)

// Defaults applied by NewStore to zero Options fields.
const (
	DefaultMaxBlocks = 50000
	DefaultHalfLife  = 10 * time.Minute
)

// Histogram layout. The estimator: each cell keeps a fixed log-spaced
// histogram, 8 buckets per octave from 2^-2 ms (0.25 ms) to 2^16 ms
// (65.5 s), whose counts decay exponentially with the beacons' age. A
// quantile of the decayed distribution is then exact up to the bucket
// resolution (2^(1/8) = 9 % wide buckets; interpolating in log space
// within the bucket makes the error far smaller for smooth
// distributions), adding a beacon is one increment with no allocation,
// and merging or re-reading needs no sorted samples. Sketches such as
// P² or t-digest do not decay cleanly (P² keeps five markers of the whole
// history; a t-digest must be recompressed and allocates), and keeping a
// sample reservoir per cell costs far more memory per cell for the same
// accuracy. RTTs outside the range land in the edge buckets (beacons
// above the intake's max RTT are rejected before they get here).
const (
	perOctave = 8
	minLog2   = -2 // the lowest bucket starts at 2^minLog2 ms
	nBuckets  = (16 - minLog2) * perOctave
)

// rescaleAt bounds forward-decay weights: once a cell's newest weight
// exceeds 2^rescaleAt, its counts are scaled down and its landmark moved
// (see cell.add).
const rescaleAt = 32

// Options configure a Store.
type Options struct {
	// MaxBlocks is the memory budget: how many network blocks are kept
	// (default DefaultMaxBlocks). Each block holds one cell per site seen
	// from it, about 0.6 KB each.
	MaxBlocks int
	// HalfLife is how fast old beacons lose weight: a beacon HalfLife
	// older than another counts half as much (default DefaultHalfLife).
	HalfLife time.Duration
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// Beacon is one real-user measurement.
type Beacon struct {
	// Client is the client network: an address as a full-length prefix
	// (/32, /128) or a subnet. Add truncates it (see Truncate).
	Client netip.Prefix
	Site   string    // site or pool name as configured
	RTTms  float64   // round-trip time in milliseconds, > 0
	Time   time.Time // when it was measured
}

// Aggregate is one (network block, site) cell of the RUM store.
type Aggregate struct {
	Block    netip.Prefix // the truncated client network (/24 or /56)
	Site     string       // site or pool name as configured
	P50, P75 float64      // decayed quantiles, milliseconds
	Count    float64      // decayed number of beacons
	Total    uint64       // beacons ever accepted for the cell
	Last     time.Time    // newest beacon's time
	// Recent is the decayed number of beacons as of Last: how many
	// back the quantiles, not counting the time since (Count does).
	Recent float64
}

// Truncate returns the block p belongs to: p masked to /24 (IPv4) or /56
// (IPv6), or p itself when it is coarser. IPv4-mapped IPv6 is taken as
// IPv4. An invalid p stays invalid.
func Truncate(p netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return p
	}
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() {
		a, bits = a.Unmap(), max(bits-96, 0)
	}
	a = a.WithZone("")
	limit := V6Bits
	if a.Is4() {
		limit = V4Bits
	}
	q, _ := a.Prefix(min(bits, limit))
	return q
}

// cell is one (block, site) histogram. Counts use forward decay: a beacon
// at time t is added with weight 2^((t-landmark)/HalfLife), so newer
// beacons weigh more and nothing needs decaying on add; quantiles are
// ratios of counts and so need no decay either. The decayed count at now
// is sum*2^((landmark-now)/HalfLife).
type cell struct {
	site     int32
	landmark int64 // unix nanoseconds
	last     int64 // unix nanoseconds of the newest beacon
	sum      float64
	total    uint64
	dirty    bool // changed since the last TakeChanged
	h        [nBuckets]float32
}

// block is one network block: its cells and its place in the LRU list.
type block struct {
	p          netip.Prefix
	prev, next int32 // LRU neighbours (-1: none); head is most recent
	gen        uint32
	cells      []cell
}

// ref names a dirty cell; gen tells a reused block slot from the old one.
type ref struct {
	blk  int32
	gen  uint32
	site int32
}

// Store aggregates beacons per (network block, site). It is safe for
// concurrent use; Add takes one mutex and does not allocate once its
// block and cell exist.
type Store struct {
	o    Options
	hlNs float64

	mu         sync.Mutex
	index      map[netip.Prefix]int32
	blocks     []block
	head, tail int32
	siteIdx    map[string]int32
	sites      []string
	dirty      []ref
	evicted    []netip.Prefix // blocks evicted since the last TakeEvicted
	cells      int
	evictions  uint64
	accepted   uint64
}

// NewStore returns an empty Store.
func NewStore(o Options) *Store {
	if o.MaxBlocks <= 0 {
		o.MaxBlocks = DefaultMaxBlocks
	}
	if o.HalfLife <= 0 {
		o.HalfLife = DefaultHalfLife
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{o: o, hlNs: float64(o.HalfLife), index: make(map[netip.Prefix]int32), head: -1, tail: -1,
		siteIdx: make(map[string]int32)}
}

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.o }

// Errors Add returns for a beacon it cannot take.
var (
	ErrClient = errors.New("bad client (want an IP address or subnet)")
	ErrSite   = errors.New("empty site")
	ErrRTT    = errors.New("bad rtt_ms (want a finite number > 0)")
	ErrTime   = errors.New("missing time")
)

// Add folds b into its (block, site) cell, truncating b.Client first.
// It checks only what the store itself needs (a valid client, a site, a
// finite RTT > 0, a time); the intake checks the rest (known sites, RTT
// and time bounds) before calling it.
func (s *Store) Add(b Beacon) error {
	p, err := check(&b)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.add(p, &b)
	s.mu.Unlock()
	return nil
}

// check returns b's block, or the reason Add refuses b.
func check(b *Beacon) (netip.Prefix, error) {
	p := Truncate(b.Client)
	switch {
	case !p.IsValid():
		return p, ErrClient
	case b.Site == "":
		return p, ErrSite
	case !(b.RTTms > 0) || math.IsInf(b.RTTms, 0):
		return p, ErrRTT
	case b.Time.IsZero():
		return p, ErrTime
	}
	return p, nil
}

// add folds b into block p's cell for b.Site; the caller holds s.mu.
func (s *Store) add(p netip.Prefix, b *Beacon) {
	t := b.Time.UnixNano()
	bi := s.blockFor(p)
	bl := &s.blocks[bi]
	si, ok := s.siteIdx[b.Site]
	if !ok {
		si = int32(len(s.sites))
		s.sites = append(s.sites, b.Site)
		s.siteIdx[b.Site] = si
	}
	var c *cell
	for i := range bl.cells {
		if bl.cells[i].site == si {
			c = &bl.cells[i]
			break
		}
	}
	if c == nil {
		if len(bl.cells) < cap(bl.cells) {
			// A slot reused from an evicted block keeps its cells'
			// memory: clear the one taken.
			bl.cells = bl.cells[:len(bl.cells)+1]
			bl.cells[len(bl.cells)-1] = cell{site: si, landmark: t}
		} else {
			bl.cells = append(bl.cells, cell{site: si, landmark: t})
		}
		c = &bl.cells[len(bl.cells)-1]
		s.cells++
	}
	c.add(b.RTTms, t, s.hlNs)
	if !c.dirty {
		c.dirty = true
		s.dirty = append(s.dirty, ref{blk: bi, gen: bl.gen, site: si})
	}
	s.accepted++
}

// add folds one RTT measured at t (unix ns) into c.
func (c *cell) add(ms float64, t int64, hlNs float64) {
	e := float64(t-c.landmark) / hlNs
	if e > rescaleAt {
		f := float32(math.Exp2(-e))
		for i := range c.h {
			c.h[i] *= f
		}
		c.sum *= float64(f)
		c.landmark, e = t, 0
	}
	w := math.Exp2(e)
	c.h[bucket(ms)] += float32(w)
	c.sum += w
	c.total++
	if t > c.last {
		c.last = t
	}
}

// bucket returns the histogram bucket of an RTT in ms.
func bucket(ms float64) int {
	i := int(math.Floor((math.Log2(ms) - minLog2) * perOctave))
	return min(max(i, 0), nBuckets-1)
}

// quantile returns the q-quantile (0 < q < 1) of c's decayed distribution,
// interpolated in log space within its bucket.
func (c *cell) quantile(q float64) float64 {
	var total float64
	for _, v := range c.h {
		total += float64(v)
	}
	if total <= 0 {
		return 0
	}
	target := q * total
	var cum float64
	for i, v := range c.h {
		f := float64(v)
		if f > 0 && cum+f >= target {
			frac := (target - cum) / f
			return math.Exp2(minLog2 + (float64(i)+frac)/perOctave)
		}
		cum += f
	}
	return math.Exp2(minLog2 + float64(nBuckets)/perOctave)
}

// count returns c's decayed number of beacons at now (unix ns).
func (c *cell) count(now int64, hlNs float64) float64 {
	e := float64(c.landmark-now) / hlNs
	return c.sum * math.Exp2(min(e, 0))
}

// blockFor returns the index of p's block, creating it (evicting the
// least recently seen block at the budget) and marking it most recently
// seen; the caller holds s.mu.
func (s *Store) blockFor(p netip.Prefix) int32 {
	if bi, ok := s.index[p]; ok {
		s.touch(bi)
		return bi
	}
	var bi int32
	if len(s.blocks) < s.o.MaxBlocks {
		bi = int32(len(s.blocks))
		s.blocks = append(s.blocks, block{prev: -1, next: -1})
	} else {
		bi = s.tail
		old := &s.blocks[bi]
		s.unlink(bi)
		delete(s.index, old.p)
		if len(s.evicted) < s.o.MaxBlocks {
			s.evicted = append(s.evicted, old.p)
		}
		s.cells -= len(old.cells)
		old.cells = old.cells[:0]
		old.gen++
		s.evictions++
	}
	bl := &s.blocks[bi]
	bl.p = p
	s.index[p] = bi
	s.pushFront(bi)
	return bi
}

func (s *Store) touch(bi int32) {
	if s.head != bi {
		s.unlink(bi)
		s.pushFront(bi)
	}
}

func (s *Store) unlink(bi int32) {
	b := &s.blocks[bi]
	if b.prev >= 0 {
		s.blocks[b.prev].next = b.next
	} else {
		s.head = b.next
	}
	if b.next >= 0 {
		s.blocks[b.next].prev = b.prev
	} else {
		s.tail = b.prev
	}
	b.prev, b.next = -1, -1
}

func (s *Store) pushFront(bi int32) {
	b := &s.blocks[bi]
	b.prev, b.next = -1, s.head
	if s.head >= 0 {
		s.blocks[s.head].prev = bi
	}
	s.head = bi
	if s.tail < 0 {
		s.tail = bi
	}
}

// aggregate describes c of block p at now; the caller holds s.mu.
func (s *Store) aggregate(p netip.Prefix, c *cell, now int64) Aggregate {
	return Aggregate{Block: p, Site: s.sites[c.site], P50: c.quantile(0.5), P75: c.quantile(0.75),
		Count: c.count(now, s.hlNs), Total: c.total, Last: time.Unix(0, c.last).UTC(), Recent: c.count(c.last, s.hlNs)}
}

// Snapshot returns every cell, sorted by Block (IPv4 first, then by
// address and length) then Site. Its cost is proportional to the cells
// held.
func (s *Store) Snapshot() []Aggregate {
	now := s.o.Now().UnixNano()
	s.mu.Lock()
	out := make([]Aggregate, 0, s.cells)
	for i := range s.blocks {
		b := &s.blocks[i]
		if !b.p.IsValid() {
			continue
		}
		for j := range b.cells {
			out = append(out, s.aggregate(b.p, &b.cells[j], now))
		}
	}
	s.mu.Unlock()
	sortAggregates(out)
	return out
}

// TakeChanged returns the cells changed since the previous call (sorted
// as Snapshot sorts them) and starts a new round: its cost is
// proportional to the cells changed, not to the cells held. A cell whose
// block was evicted since it changed is left out.
func (s *Store) TakeChanged() []Aggregate {
	now := s.o.Now().UnixNano()
	s.mu.Lock()
	out := make([]Aggregate, 0, len(s.dirty))
	for _, r := range s.dirty {
		b := &s.blocks[r.blk]
		if b.gen != r.gen {
			continue
		}
		for j := range b.cells {
			if c := &b.cells[j]; c.site == r.site && c.dirty {
				c.dirty = false
				out = append(out, s.aggregate(b.p, c, now))
			}
		}
	}
	s.dirty = s.dirty[:0]
	s.mu.Unlock()
	sortAggregates(out)
	return out
}

// TakeEvicted returns the blocks evicted since the previous call (at
// most MaxBlocks of them; beyond that the latency map's staleness removes
// what is left), so the server removes their values from the latency map.
func (s *Store) TakeEvicted() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.evicted
	s.evicted = nil
	return out
}

func sortAggregates(out []Aggregate) {
	slices.SortFunc(out, func(a, b Aggregate) int {
		if c := a.Block.Addr().Compare(b.Block.Addr()); c != 0 {
			return c
		}
		if c := a.Block.Bits() - b.Block.Bits(); c != 0 {
			return c
		}
		switch {
		case a.Site < b.Site:
			return -1
		case a.Site > b.Site:
			return 1
		}
		return 0
	})
}

// Stats are a Store's counters.
type Stats struct {
	Blocks, Cells int
	Evictions     uint64 // blocks evicted at the budget, ever
	Accepted      uint64 // beacons added, ever
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Blocks: len(s.index), Cells: s.cells, Evictions: s.evictions, Accepted: s.accepted}
}

// String describes a for logs and errors; the block is already truncated.
func (a Aggregate) String() string {
	return fmt.Sprintf("%s %s p50=%.1fms p75=%.1fms n=%.1f", a.Block, a.Site, a.P50, a.P75, a.Count)
}
