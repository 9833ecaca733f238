package policy_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/traffic"
)

// recorderHooks are the hooks the node sets: every answer counted by a
// traffic recorder (internal/node build).
func recorderHooks(tr *traffic.Recorder) policy.Hooks {
	return policy.Hooks{Answered: func(record int, d policy.Decision, ecs int) { tr.Answered(record, &d, ecs) }}
}

// TestLiveDecideHooksDoNotAllocate checks that the hooks the node sets,
// called with each decision, keep Live.Decide free of allocations, and
// that what they count reaches the recorder: the ECS family and scope.
func TestLiveDecideHooksDoNotAllocate(t *testing.T) {
	r, _, addrs := embedded(t)
	tr := traffic.New()
	tr.SetRecords(traffic.RecordsOf(embTable))
	live := policy.NewLive(embTable, policy.LiveOptions{Hooks: recorderHooks(tr)})
	live.SetHealth(func(netip.Addr, string) bool { return true }, nil)
	now := time.Now().Unix()
	for _, v6 := range []bool{false, true} {
		i := 0
		q := policy.Query{Qtype: dns.TypeA}
		if n := testing.AllocsPerRun(1000, func() {
			q.Client = addrs[v6][i&(len(addrs[v6])-1)]
			q.ClientBits = q.Client.BitLen()
			q.NoECS = i%2 == 0
			i++
			live.Decide(r, &q, now)
		}); n != 0 {
			t.Errorf("v6=%v: Live.Decide with the node's hooks makes %v allocations, want 0", v6, n)
		}
	}
	start := time.Unix(now, 0)
	tr.Sample(start)
	c, ok := tr.Window(5 * time.Minute).Record(r.Name)
	if !ok || c.Answers != 2002 {
		t.Fatalf("the recorder counted %d answers (ok %v), want 2002", c.Answers, ok)
	}
	var s4, s6 uint64
	for _, n := range c.Scopes4 {
		s4 += n
	}
	for _, n := range c.Scopes6 {
		s6 += n
	}
	if s4 != 500 || s6 != 500 {
		t.Errorf("scopes counted: %d IPv4, %d IPv6, want 500 each (the odd queries carry ECS)", s4, s6)
	}
}

// BenchmarkLiveDecideHooks is BenchmarkLiveDecide with the node's hooks
// counting into a traffic recorder.
func BenchmarkLiveDecideHooks(b *testing.B) {
	r, _, _ := embedded(b)
	tr := traffic.New()
	tr.SetRecords(traffic.RecordsOf(embTable))
	live := policy.NewLive(embTable, policy.LiveOptions{Hooks: recorderHooks(tr)})
	live.SetHealth(func(netip.Addr, string) bool { return true }, nil)
	now := time.Now().Unix()
	benchFamilies(b, func(b *testing.B, addrs []netip.Addr) {
		q := policy.Query{Qtype: dns.TypeA}
		var sink int
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			q.Client = addrs[i&(len(addrs)-1)]
			q.ClientBits = q.Client.BitLen()
			d := live.Decide(r, &q, now)
			sink += d.Scope
		}
		_ = sink
	})
}
