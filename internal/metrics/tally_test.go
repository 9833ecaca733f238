package metrics

import (
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestTallyMatchesMetrics: queries counted through a Tally, flushed at
// random points and touching more query and scope counters than it keeps
// pairs for, end up in exactly the counters direct counting gives.
func TestTallyMatchesMetrics(t *testing.T) {
	direct, tallied := New(prometheus.NewRegistry()), New(prometheus.NewRegistry())
	var tl Tally
	tl.Bind(tallied)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		tr := Transport(r.IntN(2))
		rcode, qtype, fast, size := r.IntN(20), uint16(r.IntN(300)), r.IntN(2) == 0, r.IntN(1500)
		v6, scope := r.IntN(2) == 0, r.IntN(140)-3
		kind, ck := ECSKind(r.IntN(4)), uint8(r.IntN(6))
		in, out := r.IntN(600), r.IntN(1500)
		for _, c := range []interface {
			Query(Transport, int, uint16, bool, int)
			Dropped(Transport)
			Truncated()
			ECS(ECSKind)
			Scope(bool, int)
			Cookie(uint8)
			NoCookieUDP(int, int)
		}{direct, &tl} {
			c.Query(tr, rcode, qtype, fast, size)
			c.Scope(v6, scope)
			c.ECS(kind)
			c.Cookie(ck)
			c.NoCookieUDP(in, out)
			if i%7 == 0 {
				c.Dropped(tr)
			}
			if i%11 == 0 {
				c.Truncated()
			}
		}
		if r.IntN(20) == 0 {
			tl.Flush()
		}
	}
	tl.Flush()
	for i := range direct.queries {
		if a, b := direct.queries[i].Load(), tallied.queries[i].Load(); a != b {
			t.Fatalf("query counter %d: %d direct, %d tallied", i, a, b)
		}
	}
	for f := range direct.scope {
		for l := range direct.scope[f] {
			if a, b := direct.scope[f][l].Load(), tallied.scope[f][l].Load(); a != b {
				t.Fatalf("scope %d/%d: %d direct, %d tallied", f, l, a, b)
			}
		}
	}
	for i := range direct.transport {
		if direct.transport[i].bytes.Load() != tallied.transport[i].bytes.Load() || direct.transport[i].dropped.Load() != tallied.transport[i].dropped.Load() {
			t.Fatalf("transport %d: bytes or drops differ", i)
		}
	}
	for i := range direct.ecs {
		if direct.ecs[i].Load() != tallied.ecs[i].Load() {
			t.Fatalf("ecs %d differs", i)
		}
	}
	for i := range direct.ab.cookies {
		if direct.ab.cookies[i].Load() != tallied.ab.cookies[i].Load() {
			t.Fatalf("cookie %d differs", i)
		}
	}
	if direct.truncated.Load() != tallied.truncated.Load() ||
		direct.ab.nocookie[0].Load() != tallied.ab.nocookie[0].Load() || direct.ab.nocookie[1].Load() != tallied.ab.nocookie[1].Load() {
		t.Fatal("truncated or nocookie bytes differ")
	}
	if direct.QueriesTotal() != 20000 {
		t.Fatalf("%d queries counted", direct.QueriesTotal())
	}
}
