package policy_test

import (
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

const drainRecord = `
  - name: d.example.com
    ttl: 60
    ttl_while_degraded: 10
    pools:
      bom: { addresses: [203.0.113.10, 203.0.113.11] }
      fra: { address: 198.51.100.20 }
    rules:
      - match: { cidr: [10.16.0.0/12] }
        pool: bom
      - default: { pool: fra }
    on_unhealthy: next_rule
`

// TestLiveDecideWithoutNode drives the decision step as steer simulate
// will: a compiled table, its live state, health set by hand and a clock
// given with each decision; no node, no server. It checks that the one
// step reads the health (pools and addresses), marks the answer at the
// time it was given, gives the degraded TTL, and calls the hooks.
func TestLiveDecideWithoutNode(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, drainRecord))
	r := table.Get("d.example.com.")
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var observed, decided []int
	live := policy.NewLive(table, policy.LiveOptions{Start: start, Hooks: policy.Hooks{
		Answered: func(_ int, d policy.Decision, _ int) {
			for m := d.Pools; m != 0; m &= m - 1 {
				observed = append(observed, bits.TrailingZeros64(m))
			}
			decided = append(decided, d.Rule)
		},
	}})
	bom, fra := r.Pools[0].Index, r.Pools[1].Index
	client := addr("10.17.3.4")
	decide := func(now time.Time) policy.Steered {
		q := policy.Query{Qtype: dns.TypeA, Client: client, ClientBits: 32, Resolver: client}
		return live.Decide(r, &q, now.Unix())
	}

	// No health yet: every enabled pool is usable.
	if got := live.LastAnswered(r, bom); !got.Equal(start) {
		t.Fatalf("before any answer: last answered %v, want the start %v", got, start)
	}
	at := start.Add(time.Hour)
	s := decide(at)
	if poolNames(r, s.Pools) != "bom" || s.TTL != 60 || s.Addrs != nil {
		t.Fatalf("no health: %s ttl %d addrs %v, want bom, 60, all addresses", poolNames(r, s.Pools), s.TTL, s.Addrs)
	}
	if got := live.LastAnswered(r, bom); !got.Equal(at) {
		t.Errorf("bom answered at %v, last answered says %v", at, got)
	}
	if got := live.LastAnswered(r, fra); !got.Equal(start) {
		t.Errorf("fra not answered, last answered says %v", got)
	}
	if len(observed) != 1 || observed[0] != bom || len(decided) != 1 || decided[0] != 0 {
		t.Errorf("hooks saw pools %v rules %v, want [%d] [0]", observed, decided, bom)
	}

	// One of bom's addresses fails: bom still answers, with the other.
	live.SetHealth(func(a netip.Addr, _ string) bool { return a != addr("203.0.113.10") }, nil)
	s = decide(at)
	if poolNames(r, s.Pools) != "bom" || len(s.Addrs) != 2 || s.Addrs[bom] != 0b10 {
		t.Fatalf("one bom address down: %s addrs %v, want bom with its second address", poolNames(r, s.Pools), s.Addrs)
	}

	// bom drained: the next rule answers, with the degraded TTL, and the
	// drain is safe once the TTL has passed since bom's last answer.
	live.SetHealth(allUsable, func(_, pool string) policy.PoolOverride {
		if pool == "bom" {
			return policy.PoolDrain
		}
		return policy.PoolAuto
	})
	later := at.Add(30 * time.Second)
	s = decide(later)
	if poolNames(r, s.Pools) != "fra" || s.TTL != 10 {
		t.Fatalf("bom drained: %s ttl %d, want fra with ttl_while_degraded 10", poolNames(r, s.Pools), s.TTL)
	}
	if state, _, ovr := live.PoolState(r, r.Pools[0]); state != "drain" || !ovr {
		t.Errorf("bom state %q (override %v), want drain by the operator", state, ovr)
	}
	if live.DrainSafe(r, bom, at.Add(60*time.Second)) {
		t.Errorf("drain safe 60 s after bom's last answer, with a 60 s TTL")
	}
	if !live.DrainSafe(r, bom, at.Add(62*time.Second)) {
		t.Errorf("drain not safe 62 s after bom's last answer, with a 60 s TTL")
	}
	if got := live.LastAnswered(r, fra); !got.Equal(later) {
		t.Errorf("fra answered at %v, last answered says %v", later, got)
	}

	// A decision that does not answer marks nothing.
	q := policy.Query{Qtype: dns.TypeAAAA, Client: client, ClientBits: 32}
	if s := live.Decide(r, &q, later.Add(time.Hour).Unix()); !s.NoData {
		t.Fatalf("AAAA of an IPv4-only record: %+v, want NODATA", s.Decision)
	}
	if got := live.LastAnswered(r, fra); !got.Equal(later) {
		t.Errorf("a NODATA moved fra's last answer to %v", got)
	}
}

// TestLiveDecideAllocatesNothing: the step the query path takes does not
// allocate, with health and widened scopes in place.
func TestLiveDecideAllocatesNothing(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, mumbaiRecord))
	live := policy.NewLive(table, policy.LiveOptions{})
	live.SetHealth(allUsable, down("bom"))
	r := table.Get("m.example.com.")
	q := policy.Query{Qtype: dns.TypeA, Client: addr("10.17.3.0"), ClientBits: 24}
	now := time.Now().Unix()
	if n := testing.AllocsPerRun(1000, func() { live.Decide(r, &q, now) }); n != 0 {
		t.Errorf("Live.Decide allocates %v times", n)
	}
	if d := live.Decide(r, &q, now); poolNames(r, d.Pools) != "iad" && poolNames(r, d.Pools) != "fra" || d.WidenedFrom == 0 {
		t.Errorf("bom down: %s scope /%d widened from %d, want another pool on a widened scope", poolNames(r, d.Pools), d.Scope, d.WidenedFrom)
	}
}

// TestQueryRandSeeded: a non-sticky split drawn with the query's own
// source repeats for the same seed and follows the weights (what steer
// simulate relies on to repeat a run); without one it still draws.
func TestQueryRandSeeded(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, `
  - name: c.example.com
    ttl: 60
    pools:
      stable: { address: 192.0.2.30 }
      canary: { address: 192.0.2.31 }
    rules:
      - default:
          split: [{ pool: stable, weight: 95 }, { pool: canary, weight: 5 }]
`))
	r := table.Get("c.example.com.")
	live := policy.NewLive(table, policy.LiveOptions{})
	client := addr("10.17.3.4")
	var canaryBit uint64
	for _, p := range r.Pools {
		if p.Name == "canary" {
			canaryBit = 1 << p.Index
		}
	}
	draws := func(src *rand.Rand) (seq []uint64, canary int) {
		for range 4000 {
			q := policy.Query{Qtype: dns.TypeA, Client: client, ClientBits: 32, Resolver: client, Rand: src}
			s := live.Decide(r, &q, 0)
			seq = append(seq, s.Pools)
			if s.Pools == canaryBit {
				canary++
			}
		}
		return seq, canary
	}
	a, na := draws(rand.New(rand.NewPCG(7, 1)))
	b, _ := draws(rand.New(rand.NewPCG(7, 1)))
	c, _ := draws(rand.New(rand.NewPCG(8, 1)))
	if !slices.Equal(a, b) {
		t.Errorf("the same seed drew different members")
	}
	if slices.Equal(a, c) {
		t.Errorf("two seeds drew the same 4,000 members")
	}
	if na < 140 || na > 260 { // 5 % of 4,000 = 200, ±4.3 σ
		t.Errorf("canary drawn %d times in 4,000, want about 200", na)
	}
	if _, n := draws(nil); n < 100 || n > 320 {
		t.Errorf("the process's source drew the canary %d times in 4,000", n)
	}
}
