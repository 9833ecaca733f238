//go:build !race

package traffic

import (
	"fmt"
	"testing"
	"time"
)

// Built without the race detector only: single-threaded computation over
// 3,000 records (13 s raced, 1 s plain); the test script runs such files
// plain, beside the plain stage.

// TestPublishBound: with more records than fit, the quietest are left
// out and said so, and what is published stays under the bound.
func TestPublishBound(t *testing.T) {
	r := New()
	recs := make([]Record, 3000)
	for i := range recs {
		recs[i] = Record{Name: fmt.Sprintf("r%d.example.", i), Pools: []string{"mumbai", "frankfurt", "virginia"}, Rules: 3}
	}
	r.SetRecords(recs)
	r.Sample(t0)
	for i := range recs {
		hit(r, i, i%3, i%3, 24-i%8, 0, 4, 1+i/100)
		hit(r, i, (i+1)%3, 0, 48, 0, 6, 1)
	}
	r.Sample(t0.Add(10 * time.Second))
	full, dropped, err := r.Publish("n")
	if err != nil || dropped != 0 {
		t.Fatalf("3,000 records: %v, %d dropped", err, dropped)
	}
	limit := len(full) / 3
	data, dropped, err := r.publish("n", limit)
	if err != nil || len(data) > limit || dropped == 0 {
		t.Fatalf("bound %d: %d bytes, %d dropped, %v", limit, len(data), dropped, err)
	}
	p, err := DecodePublished(data)
	if err != nil || p.Dropped != dropped || len(p.Windows) != 2 {
		t.Fatalf("%v %+v", err, p)
	}
	t.Logf("3,000 busy records: %d bytes published; under %d bytes %d records (%d left out)", len(full), limit, len(p.Windows[1].Records), dropped)
	if p.Windows[1].Records["r2999.example."] == nil || p.Windows[1].Records["r0.example."] != nil {
		t.Errorf("the busiest record left out, or the quietest kept")
	}
	if len(p.Windows[1].Records)+dropped != len(recs) {
		t.Errorf("%d published + %d dropped, of %d", len(p.Windows[1].Records), dropped, len(recs))
	}
}
