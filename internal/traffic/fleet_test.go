package traffic

import (
	"fmt"
	"testing"
	"time"
)

// TestFleetSum: a node's window sums what the other nodes published, by
// record and pool name, whatever their numbering.
func TestFleetSum(t *testing.T) {
	a, b := New(), New()
	a.SetRecords(shopRecords())
	recs := shopRecords()
	recs[0], recs[1] = recs[1], recs[0] // b numbers them otherwise
	recs[0].Pools = []string{"virginia", "mumbai", "sydney"}
	b.SetRecords(recs)
	a.Sample(t0)
	b.Sample(t0)
	hit(a, 1, 0, 0, 24, 0, 4, 3)  // shop from mumbai
	hit(b, 0, 1, 1, 24, 20, 4, 5) // shop from mumbai
	hit(b, 0, 2, 2, 48, 0, 6, 7)  // shop from sydney: a has none
	hit(b, 1, 0, 0, 8, 0, 4, 2)   // a.example.
	a.Sample(t0.Add(10 * time.Second))
	b.Sample(t0.Add(10 * time.Second))
	data, dropped, err := b.Publish("b")
	if err != nil || dropped != 0 {
		t.Fatal(err, dropped)
	}
	own, _, _ := a.Publish("a")
	if err := a.SetFleet("a", map[string][]byte{"a": own, "b": data, "broken": []byte("nonsense")}); err == nil {
		t.Errorf("a node's entry that does not decode is no error")
	}
	for _, span := range []time.Duration{5 * time.Minute, time.Hour} {
		w := a.Window(span)
		if w.Nodes != 2 {
			t.Errorf("%v: %d nodes summed, want 2 (a and b)", span, w.Nodes)
		}
		c := mustRecord(t, w, "shop.example.")
		if c.Answers != 15 || c.Pools["mumbai"] != 8 || c.Pools["frankfurt"] != 0 || fmt.Sprint(c.Rules) != "[3 5 7]" {
			t.Errorf("%v: shop %d answers, pools %v, rules %v; want 15, mumbai 8, [3 5 7]", span, c.Answers, c.Pools, c.Rules)
		}
		if c.Scopes4[24] != 8 || c.Widened4 != 5 || c.Scopes6[48] != 7 {
			t.Errorf("%v: /24 %d widened %d /48 %d, want 8 5 7", span, c.Scopes4[24], c.Widened4, c.Scopes6[48])
		}
		if c := mustRecord(t, w, "a.example."); c.Answers != 2 || c.Pools["x"] != 2 {
			t.Errorf("%v: a.example. %+v, want b's 2 answers", span, c)
		}
	}
	// b leaves the fleet.
	a.SetFleet("a", map[string][]byte{"a": own})
	if w := a.Window(time.Hour); w.Nodes != 1 {
		t.Errorf("b gone: %d nodes", w.Nodes)
	} else if c := mustRecord(t, w, "shop.example."); c.Answers != 3 {
		t.Errorf("b gone: shop %d answers, want a's 3", c.Answers)
	}
}

// BenchmarkPublish encodes the windows of 10,000 records busy for an
// hour, as a fleet node does every 30 s.
func BenchmarkPublish(b *testing.B) {
	r := New()
	recs := make([]Record, 10000)
	for i := range recs {
		recs[i] = Record{Name: fmt.Sprintf("r%d.example.", i), Pools: []string{"a", "b", "c"}, Rules: 3}
	}
	r.SetRecords(recs)
	now := t0
	r.Sample(now)
	for range 400 {
		for k := range recs {
			hit(r, k, k%3, k%3, 24, 0, 4, 1)
		}
		now = now.Add(SampleInterval)
		r.Sample(now)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, dropped, err := r.Publish("n")
		if err != nil || dropped != 0 {
			b.Fatal(err, dropped)
		}
		b.ReportMetric(float64(len(data)), "bytes")
	}
}
