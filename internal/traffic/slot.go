package traffic

import (
	"encoding/binary"
	"slices"
)

// A slot is the counts of one stretch of time, encoded compactly: only
// records with counts appear, and of each only its non-zero counters.
//
// data is a run of blocks in ascending record order, each
//
//	uvarint(record - previous record) uvarint(len(body)) body
//
// where body is a run of uvarint(key - previous key) uvarint(count) in
// ascending key order (keys: see the k* constants). skip holds every
// skipEvery-th block's record and offset, so one record is found by a
// binary search and a short scan. A slot never changes once built.
type slot struct {
	from, to int64 // Unix nanoseconds: the counts are of (from, to]
	data     []byte
	skip     []skipEntry
}

type skipEntry struct{ rec, off uint32 }

const skipEvery = 32

// entry is one counter of one record.
type entry struct {
	key uint32
	n   uint64
}

// slotBuilder appends blocks, in ascending record order, to a slot.
type slotBuilder struct {
	s      slot
	prev   uint32
	blocks int
	body   []byte
}

func newBuilder(from, to int64) *slotBuilder {
	return &slotBuilder{s: slot{from: from, to: to}}
}

// add appends rec's entries (ascending keys, none zero); nothing when
// there are none.
func (b *slotBuilder) add(rec uint32, es []entry) {
	if len(es) == 0 {
		return
	}
	b.body = b.body[:0]
	prev := uint32(0)
	for _, e := range es {
		b.body = binary.AppendUvarint(b.body, uint64(e.key-prev))
		b.body = binary.AppendUvarint(b.body, e.n)
		prev = e.key
	}
	if b.blocks%skipEvery == 0 {
		b.s.skip = append(b.s.skip, skipEntry{rec: rec, off: uint32(len(b.s.data))})
	}
	b.s.data = binary.AppendUvarint(b.s.data, uint64(rec-b.prev))
	b.s.data = binary.AppendUvarint(b.s.data, uint64(len(b.body)))
	b.s.data = append(b.s.data, b.body...)
	b.prev = rec
	b.blocks++
}

// done returns the slot, its buffers trimmed to size.
func (b *slotBuilder) done() *slot {
	s := b.s
	s.data = slices.Clone(s.data)
	s.skip = slices.Clone(s.skip)
	return &s
}

// cursor walks a slot's blocks in order.
type cursor struct {
	data []byte
	off  int
	rec  uint32
	body []byte
	ok   bool
}

func (s *slot) cursor() *cursor {
	c := &cursor{data: s.data}
	c.next(true)
	return c
}

// next moves to the following block; first makes a delta absolute.
func (c *cursor) next(first bool) {
	if c.off >= len(c.data) {
		c.ok = false
		return
	}
	d, n := binary.Uvarint(c.data[c.off:])
	c.off += n
	l, n := binary.Uvarint(c.data[c.off:])
	c.off += n
	if first {
		c.rec = uint32(d)
	} else {
		c.rec += uint32(d)
	}
	c.body = c.data[c.off : c.off+int(l)]
	c.off += int(l)
	c.ok = true
}

// find returns rec's block body, nil when rec has no counts in s.
func (s *slot) find(rec uint32) []byte {
	i, found := slices.BinarySearchFunc(s.skip, rec, func(e skipEntry, r uint32) int {
		switch {
		case e.rec < r:
			return -1
		case e.rec > r:
			return 1
		}
		return 0
	})
	if !found {
		if i == 0 {
			return nil
		}
		i--
	}
	c := cursor{data: s.data, off: int(s.skip[i].off)}
	c.next(false)
	c.rec = s.skip[i].rec
	for c.ok && c.rec < rec {
		c.next(false)
	}
	if c.ok && c.rec == rec {
		return c.body
	}
	return nil
}

// eachEntry calls f with each counter of a block body.
func eachEntry(body []byte, f func(key uint32, n uint64)) {
	key := uint32(0)
	for len(body) > 0 {
		d, n := binary.Uvarint(body)
		body = body[n:]
		v, m := binary.Uvarint(body)
		body = body[m:]
		key += uint32(d)
		f(key, v)
	}
}

// accumulator sums block bodies into a dense scratch, then hands the
// non-zero counters out in key order.
type accumulator struct {
	sum     []uint64
	touched []uint32
	out     []entry
}

func (a *accumulator) addBody(body []byte) {
	eachEntry(body, func(key uint32, n uint64) { a.add(key, n) })
}

func (a *accumulator) add(key uint32, n uint64) {
	if n == 0 {
		return
	}
	if int(key) >= len(a.sum) {
		a.sum = append(a.sum, make([]uint64, int(key)+1-len(a.sum))...)
	}
	if a.sum[key] == 0 {
		a.touched = append(a.touched, key)
	}
	a.sum[key] += n
}

// take returns the sums in key order and clears the scratch; the result
// is valid until the next take.
func (a *accumulator) take() []entry {
	slices.Sort(a.touched)
	a.out = a.out[:0]
	for _, k := range a.touched {
		a.out = append(a.out, entry{key: k, n: a.sum[k]})
		a.sum[k] = 0
	}
	a.touched = a.touched[:0]
	return a.out
}

// merge sums slots into one spanning from the earliest from to the
// latest to.
func merge(slots ...*slot) *slot {
	if len(slots) == 0 {
		return nil
	}
	from, to := slots[0].from, slots[0].to
	cs := make([]*cursor, 0, len(slots))
	for _, s := range slots {
		from, to = min(from, s.from), max(to, s.to)
		if c := s.cursor(); c.ok {
			cs = append(cs, c)
		}
	}
	b := newBuilder(from, to)
	var acc accumulator
	for {
		rec, any := uint32(0), false
		for _, c := range cs {
			if c.ok && (!any || c.rec < rec) {
				rec, any = c.rec, true
			}
		}
		if !any {
			break
		}
		for _, c := range cs {
			if c.ok && c.rec == rec {
				acc.addBody(c.body)
				c.next(false)
			}
		}
		b.add(rec, acc.take())
	}
	return b.done()
}

// size is the bytes s holds.
func (s *slot) size() int {
	return cap(s.data) + 8*cap(s.skip) + 64
}
