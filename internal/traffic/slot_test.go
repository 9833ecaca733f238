//go:build !race

package traffic

import (
	"math/rand/v2"
	"testing"
)

// TestSlotRandom builds slots of random sparse counts and checks find
// and merge against plain maps. Built without the race detector only:
// single-threaded computation (4 s raced, 0.2 s plain), which the test
// script runs plain.
func TestSlotRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	type counts map[uint32]map[uint32]uint64
	sum := counts{}
	var slots []*slot
	for s := range 8 {
		want := counts{}
		b := newBuilder(int64(s), int64(s+1))
		for rec := uint32(0); rec < 2000; rec++ {
			if rnd.IntN(3) != 0 {
				continue
			}
			var es []entry
			for key := uint32(0); key < 80; key++ {
				if rnd.IntN(10) == 0 {
					n := rnd.Uint64N(1 << (rnd.IntN(40) + 1))
					if n == 0 {
						continue
					}
					es = append(es, entry{key: key, n: n})
					if want[rec] == nil {
						want[rec] = map[uint32]uint64{}
					}
					want[rec][key] = n
					if sum[rec] == nil {
						sum[rec] = map[uint32]uint64{}
					}
					sum[rec][key] += n
				}
			}
			b.add(rec, es)
		}
		sl := b.done()
		slots = append(slots, sl)
		check(t, sl, want)
	}
	m := merge(slots...)
	if m.from != 0 || m.to != 8 {
		t.Errorf("merged slot spans %d..%d", m.from, m.to)
	}
	check(t, m, sum)
}

func check[C ~map[uint32]map[uint32]uint64](t *testing.T, s *slot, want C) {
	t.Helper()
	for rec := uint32(0); rec < 2001; rec++ {
		got := map[uint32]uint64{}
		if body := s.find(rec); body != nil {
			eachEntry(body, func(k uint32, n uint64) { got[k] = n })
		}
		if len(got) != len(want[rec]) {
			t.Fatalf("record %d: %d counters, want %d", rec, len(got), len(want[rec]))
		}
		for k, n := range want[rec] {
			if got[k] != n {
				t.Fatalf("record %d key %d: %d, want %d", rec, k, got[k], n)
			}
		}
	}
}
