//go:build !race

package traffic

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/policy"
)

// Built without the race detector only: it is single-threaded
// computation over 10,000 records (82 s raced, 6 s plain), and the test
// script runs such files plain.

// TestMemoryPerRecord keeps 10,000 records busy (every record answered
// in every sample, three pools, three rules, two scopes) for an hour and
// a quarter of samples, and measures what the recorder holds per record.
func TestMemoryPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const records = 10000
	recs := make([]Record, records)
	for i := range recs {
		recs[i] = Record{Name: fmt.Sprintf("r%d.example.", i), Pools: []string{"mumbai", "frankfurt", "virginia"}, Rules: 3}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := New()
	r.SetRecords(recs)
	now := t0
	r.Sample(now)
	d4 := policy.Decision{Pools: 1 << 0, Rule: 0, Scope: 24}
	d6 := policy.Decision{Pools: 1 << 2, Rule: 2, Scope: 48, WidenedFrom: 56}
	for s := range 450 {
		tab := r.tab.Load()
		for i := range records {
			// 10 to 5,000 answers in 10 s, most from mumbai.
			r.Answered(i, &d4, 4)
			n := uint32(10 + (i*7+s)%5000)
			base := tab.off[i]
			for _, k := range []int32{kAnswers, kPools, kScope4 + 24, tab.rules[i] - base} {
				tab.c[base+k].Add(n)
			}
			r.Answered(i, &d6, 6)
		}
		now = now.Add(SampleInterval)
		r.Sample(now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int(after.HeapAlloc) - int(before.HeapAlloc)
	est := r.Bytes()
	t.Logf("%d records busy for %v: %d B/record on the heap (%d counted by Bytes), %d 30-s and %d 5-min slots",
		records, now.Sub(t0), heap/records, est/records, len(r.fine), len(r.coarse))
	if heap/records > 1100 || est/records > 1024 {
		t.Errorf("%d B/record on the heap, %d counted: want about 1 KB at most", heap/records, est/records)
	}
	c := mustRecord(t, r.Window(time.Hour), "r17.example.")
	if c.Pools["virginia"] == 0 || c.Scopes6[48] != c.Pools["virginia"] {
		t.Errorf("r17: %v", c.Pools)
	}
	runtime.KeepAlive(r)
}
