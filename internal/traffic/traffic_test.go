package traffic

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/policy"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func shopRecords() []Record {
	return []Record{
		{Name: "a.example.", Pools: []string{"x"}, Rules: 1},
		{Name: "shop.example.", Pools: []string{"mumbai", "frankfurt", "virginia"}, Rules: 3},
		{Name: "z.example.", Pools: []string{"y", "z"}, Rules: 2},
	}
}

// hit counts n answers of rec from pool by rule with scope over ECS of
// family fam (0: none).
func hit(r *Recorder, rec, pool, rule, scope, widened, fam, n int) {
	d := policy.Decision{Pools: 1 << pool, Rule: rule, Scope: scope, WidenedFrom: widened}
	for range n {
		r.Answered(rec, &d, fam)
	}
}

func mustRecord(t *testing.T, w *Window, name string) Counts {
	t.Helper()
	c, ok := w.Record(name)
	if !ok {
		t.Fatalf("%s: no counts in the %v window", name, w.Span)
	}
	return c
}

func TestCounts(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	r.Sample(t0)
	hit(r, 1, 0, 0, 24, 0, 4, 5)
	hit(r, 1, 2, 2, 20, 24, 4, 2)
	hit(r, 1, 1, 1, 48, 0, 6, 3)
	hit(r, 1, 1, 1, 45, 56, 6, 1)
	hit(r, 1, 1, 1, 0, 0, 0, 4)   // no ECS: no scope
	hit(r, 1, 7, 9, 129, 0, 6, 1) // out of range: the answer, a /128 bucket
	r.Sample(t0.Add(10 * time.Second))
	w := r.Window(5 * time.Minute)
	c := mustRecord(t, w, "shop.example.")
	if c.Answers != 16 {
		t.Errorf("answers %d, want 16", c.Answers)
	}
	if want := map[string]uint64{"mumbai": 5, "frankfurt": 8, "virginia": 2}; fmt.Sprint(c.Pools) != fmt.Sprint(want) {
		t.Errorf("pools %v, want %v", c.Pools, want)
	}
	if fmt.Sprint(c.Rules) != "[5 8 2]" {
		t.Errorf("rules %v, want [5 8 2]", c.Rules)
	}
	if c.Scopes4[24] != 5 || c.Scopes4[20] != 2 || c.Widened4 != 2 {
		t.Errorf("IPv4 scopes /24 %d /20 %d widened %d, want 5 2 2", c.Scopes4[24], c.Scopes4[20], c.Widened4)
	}
	if c.Scopes6[48] != 4 || c.Scopes6[128] != 1 || c.Widened6 != 1 {
		t.Errorf("IPv6 scopes /48 %d (/45 and /48) /128 %d widened %d, want 4 1 1", c.Scopes6[48], c.Scopes6[128], c.Widened6)
	}
	if w.Covered != 10*time.Second || !w.At.Equal(t0.Add(10*time.Second)) || w.Nodes != 1 {
		t.Errorf("window covers %v at %v of %d nodes, want 10s at %v of 1", w.Covered, w.At, w.Nodes, t0.Add(10*time.Second))
	}
	if c, ok := w.Record("a.example."); ok || c.Pools["x"] != 0 || len(c.Rules) != 1 {
		t.Errorf("a.example.: %+v, %v: want its pools and rules at zero, not ok", c, ok)
	}
	if _, ok := w.Record("SHOP.example"); !ok {
		t.Errorf("the name not canonical is not found")
	}
	if _, ok := w.Record("nowhere.example."); ok {
		t.Errorf("an unknown record has counts")
	}
}

// TestWindows drives the sampler with a fake clock for two hours: the 5m
// and 1h windows hold the answers of their span, and cover the history.
func TestWindows(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	now := t0
	r.Sample(now)
	// One answer per second from mumbai, sampled every 10 s.
	for i := 1; i <= 2*360; i++ {
		hit(r, 1, 0, 0, 24, 0, 4, 10)
		now = now.Add(10 * time.Second)
		r.Sample(now)
		up := time.Duration(i) * 10 * time.Second
		for _, span := range []time.Duration{5 * time.Minute, time.Hour} {
			w := r.Window(span)
			slot := fineSlot
			if span > fineSpan {
				slot = coarseSlot
			}
			c, _ := w.Record("shop.example.")
			switch {
			case w.Covered > span || w.Covered > up:
				t.Fatalf("up %v: the %v window covers %v", up, span, w.Covered)
			case w.Covered < min(span, up)-slot:
				t.Fatalf("up %v: the %v window covers only %v", up, span, w.Covered)
			case c.Answers != uint64(w.Covered/time.Second):
				t.Fatalf("up %v: the %v window covers %v but holds %d answers", up, span, w.Covered, c.Answers)
			}
		}
	}
	if n := len(r.fine); n > 10 {
		t.Errorf("%d 30-s slots kept, want 10", n)
	}
	if n := len(r.coarse); n > 12 {
		t.Errorf("%d 5-min slots kept, want 12", n)
	}
	// Quiet for 5 minutes: the 5m window empties, the hour does not.
	for range 31 {
		now = now.Add(10 * time.Second)
		r.Sample(now)
	}
	if c, ok := r.Window(5 * time.Minute).Record("shop.example."); ok && c.Answers != 0 {
		t.Errorf("5 quiet minutes: the 5m window still holds %d answers", c.Answers)
	}
	if c := mustRecord(t, r.Window(time.Hour), "shop.example."); c.Answers < 3000 {
		t.Errorf("the hour holds %d answers, want its busy 55 minutes", c.Answers)
	}
}

// TestBegin: answers counted between Begin and the first sample are in a
// slot that spans that time (the window never shows answers while
// covering nothing).
func TestBegin(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	r.Begin(t0)
	hit(r, 1, 0, 0, 24, 0, 4, 1)
	r.Sample(t0.Add(10 * time.Second))
	w := r.Window(5 * time.Minute)
	if w.Covered != 10*time.Second {
		t.Errorf("the first sample after Begin covers %v, want 10s", w.Covered)
	}
	if c := mustRecord(t, w, "shop.example."); c.Answers != 1 {
		t.Errorf("the first sample holds %d answers, want 1", c.Answers)
	}
}

func TestNoSample(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	hit(r, 1, 0, 0, 24, 0, 4, 1)
	w := r.Window(time.Hour)
	if _, ok := w.Record("shop.example."); ok || w.Covered != 0 || !w.At.IsZero() {
		t.Errorf("before the first sample: covered %v at %v", w.Covered, w.At)
	}
	// A reload before the first sample: the counts carry over.
	recs := shopRecords()
	recs[0].Name = "b.example."
	r.SetRecords(recs)
	hit(r, 1, 0, 0, 24, 0, 4, 1)
	r.Sample(t0)
	if c := mustRecord(t, r.Window(time.Hour), "shop.example."); c.Answers != 2 {
		t.Errorf("the first sample holds %d answers, want 2", c.Answers)
	}
	r.Sample(t0.Add(10 * time.Second))
	if w := r.Window(time.Hour); w.Covered != 10*time.Second {
		t.Errorf("10 s after the first sample the window covers %v", w.Covered)
	} else if c := mustRecord(t, w, "shop.example."); c.Answers != 2 {
		t.Errorf("10 s later the hour holds %d answers, want 2", c.Answers)
	}
}

// TestSetRecordsKeepsHistory reloads with records reordered, one gone,
// one new, a pool renamed and a rule fewer: what keeps its name keeps its
// counts, in the windows and in the counters not yet sampled.
func TestSetRecordsKeepsHistory(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	now := t0
	r.Sample(now)
	for range 40 { // past a 5-min slot
		hit(r, 1, 0, 0, 24, 0, 4, 1)
		hit(r, 1, 1, 1, 24, 0, 4, 2)
		hit(r, 1, 2, 2, 16, 0, 4, 3)
		hit(r, 0, 0, 0, 8, 0, 4, 1)
		hit(r, 2, 1, 1, 32, 0, 6, 1)
		now = now.Add(10 * time.Second)
		r.Sample(now)
	}
	hit(r, 1, 0, 0, 24, 0, 4, 7) // not sampled yet
	r.SetRecords([]Record{
		{Name: "new.example.", Pools: []string{"p"}, Rules: 1},
		{Name: "z.example.", Pools: []string{"z", "y"}, Rules: 2},
		{Name: "shop.example.", Pools: []string{"virginia", "london", "mumbai"}, Rules: 2},
	})
	hit(r, 2, 1, 0, 24, 0, 4, 1) // london, on the new numbering
	now = now.Add(10 * time.Second)
	r.Sample(now)
	for _, span := range []time.Duration{5 * time.Minute, time.Hour} {
		w := r.Window(span)
		n := uint64(w.Covered / (10 * time.Second))
		c := mustRecord(t, w, "shop.example.")
		want := map[string]uint64{"virginia": 3 * (n - 1), "london": 1, "mumbai": n - 1 + 7}
		if fmt.Sprint(c.Pools) != fmt.Sprint(want) {
			t.Errorf("%v window (%v): shop pools %v, want %v", span, w.Covered, c.Pools, want)
		}
		if want := fmt.Sprint([]uint64{n - 1 + 7 + 1, 2 * (n - 1)}); fmt.Sprint(c.Rules) != want {
			t.Errorf("%v window: shop rules %v, want %v", span, c.Rules, want)
		}
		if c.Answers != 6*(n-1)+8 || c.Scopes4[16] != 3*(n-1) {
			t.Errorf("%v window: shop answers %d /16 %d, want %d %d", span, c.Answers, c.Scopes4[16], 6*(n-1)+8, 3*(n-1))
		}
		z := mustRecord(t, w, "z.example.")
		if z.Pools["z"] != n-1 || z.Pools["y"] != 0 || z.Scopes6[32] != n-1 {
			t.Errorf("%v window: z pools %v /32 %d, want z %d", span, z.Pools, z.Scopes6[32], n-1)
		}
		if _, ok := w.Record("a.example."); ok {
			t.Errorf("%v window: the record gone still has counts", span)
		}
		if _, ok := w.Record("new.example."); ok {
			t.Errorf("%v window: the new record has counts", span)
		}
	}
	// The same records again: nothing changes, the table stays.
	tab := r.tab.Load()
	r.SetRecords([]Record{
		{Name: "new.example.", Pools: []string{"p"}, Rules: 1},
		{Name: "z.example.", Pools: []string{"z", "y"}, Rules: 2},
		{Name: "shop.example.", Pools: []string{"virginia", "london", "mumbai"}, Rules: 2},
	})
	if r.tab.Load() != tab {
		t.Errorf("SetRecords with the same records replaced the counters")
	}
}

func TestQueryPathDoesNotAllocate(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	d := policy.Decision{Pools: 1 << 2, Rule: 1, Scope: 56, WidenedFrom: 60}
	if n := testing.AllocsPerRun(1000, func() {
		r.Answered(1, &d, 6)
		r.Answered(1, &d, 4)
		r.Answered(9, &d, 4)
		r.Answered(-1, &d, 4)
	}); n != 0 {
		t.Errorf("Answered makes %v allocations, want 0", n)
	}
}

// TestConcurrent counts from several goroutines while the sampler runs
// and the records are set again (go test -race): of what was counted,
// nothing is lost but the adds in flight at the reload.
func TestConcurrent(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	r.Sample(t0)
	var wg sync.WaitGroup
	var stop atomic.Bool
	const workers = 4
	done := make([]uint64, workers)
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := policy.Decision{Rule: 0, Scope: 24}
			for !stop.Load() {
				r.Answered(1, &d, 4)
				done[k]++
			}
		}()
	}
	now := t0
	sample := func() {
		now = now.Add(10 * time.Millisecond) // well within the hour however long the workers take
		r.Sample(now)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c, _ := r.Window(time.Hour).Record("shop.example."); c.Answers < 1000; c, _ = r.Window(time.Hour).Record("shop.example.") {
		if time.Now().After(deadline) {
			t.Fatalf("the workers counted %d answers in 10 s", c.Answers)
		}
		sample()
	}
	// shop stays, as record 0: the workers count z.example. from here.
	r.SetRecords(shopRecords()[1:])
	for c, _ := r.Window(time.Hour).Record("z.example."); c.Answers < 1000; c, _ = r.Window(time.Hour).Record("z.example.") {
		if time.Now().After(deadline) {
			t.Fatalf("the workers counted %d answers of z in 10 s", c.Answers)
		}
		sample()
	}
	stop.Store(true)
	wg.Wait()
	sample()
	w := r.Window(time.Hour)
	a, _ := w.Record("shop.example.")
	z, _ := w.Record("z.example.")
	total := uint64(0)
	for _, n := range done {
		total += n
	}
	if got := a.Answers + z.Answers; got > total || got < total-workers {
		t.Errorf("%d answers counted of %d", got, total)
	}
	if a.Answers == 0 || z.Answers == 0 {
		t.Errorf("shop counted %d, z %d: want both", a.Answers, z.Answers)
	}
}

func BenchmarkAnswered(b *testing.B) {
	r := New()
	r.SetRecords(shopRecords())
	d := policy.Decision{Rule: 1, Scope: 24, WidenedFrom: 20}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d.Pools = 1 << (i % 3)
		r.Answered(1, &d, 4)
	}
}

// BenchmarkSample is one sample of 10,000 records, a tenth of them busy.
func BenchmarkSample(b *testing.B) {
	r := New()
	recs := make([]Record, 10000)
	for i := range recs {
		recs[i] = Record{Name: fmt.Sprintf("r%d.example.", i), Pools: []string{"a", "b", "c"}, Rules: 3}
	}
	r.SetRecords(recs)
	d := policy.Decision{Pools: 1 << 1, Rule: 1, Scope: 24}
	now := t0
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for k := 0; k < len(recs); k += 10 {
			r.Answered(k, &d, 4)
		}
		now = now.Add(SampleInterval)
		r.Sample(now)
	}
}

// BenchmarkWindowRecord reads one record's counts of the hour, of 10,000
// records busy in every slot: what the overview pays per record shown.
func BenchmarkWindowRecord(b *testing.B) {
	r := New()
	recs := make([]Record, 10000)
	for i := range recs {
		recs[i] = Record{Name: fmt.Sprintf("r%d.example.", i), Pools: []string{"a", "b", "c"}, Rules: 3}
	}
	r.SetRecords(recs)
	d := policy.Decision{Rule: 1, Scope: 24}
	now := t0
	r.Sample(now)
	for range 400 {
		for k := range recs {
			d.Pools = 1 << (k % 3)
			r.Answered(k, &d, 4)
		}
		now = now.Add(SampleInterval)
		r.Sample(now)
	}
	w := r.Window(time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := w.Record(recs[i%len(recs)].Name); !ok {
			b.Fatal("no counts")
		}
	}
}

// TestAnsweredManyPools: an answer from several pools (multivalue)
// counts each of its pools once, and once as an answer and a decision;
// bits past the record's pools are ignored.
func TestAnsweredManyPools(t *testing.T) {
	r := New()
	r.SetRecords(shopRecords())
	r.Sample(t0)
	d := policy.Decision{Pools: 0b101 | 1<<5, Rule: 2, Scope: 24}
	r.Answered(1, &d, 4)
	r.Answered(1, &d, 4)
	r.Sample(t0.Add(10 * time.Second))
	c := mustRecord(t, r.Window(5*time.Minute), "shop.example.")
	if want := map[string]uint64{"mumbai": 2, "frankfurt": 0, "virginia": 2}; c.Answers != 2 || fmt.Sprint(c.Pools) != fmt.Sprint(want) {
		t.Errorf("answers %d pools %v, want 2 %v", c.Answers, c.Pools, want)
	}
	if fmt.Sprint(c.Rules) != "[0 0 2]" || c.Scopes4[24] != 2 {
		t.Errorf("rules %v, /24 scopes %d, want [0 0 2] and 2", c.Rules, c.Scopes4[24])
	}
}
