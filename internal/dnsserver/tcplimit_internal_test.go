package dnsserver

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/steer-dns/steer/internal/tcplimit"
)

// benchTracker returns a tracker holding n connections from n/20 /24s, as
// accepted under typical limits with MaxConns n.
func benchTracker(b *testing.B, n int) (*tcpTracker, tcpPolicy, []*tcpConn) {
	l := tcplimit.Limits{PerPrefix: 32, IPv4Prefix: tcplimit.DefaultIPv4Prefix, IPv6Prefix: tcplimit.DefaultIPv6Prefix}
	l.MaxConns = n
	pol := tcpPolicy{maxConns: l.MaxConns, perPrefix: l.PerPrefix, v4bits: l.IPv4Prefix, v6bits: l.IPv6Prefix}
	t := &tcpTracker{}
	var closing atomic.Bool
	conns := make([]*tcpConn, 0, n)
	for i := range n {
		tc, v := t.admit(nil, srcAddr(i), &pol, &closing, nil)
		if tc == nil || len(v) != 0 {
			b.Fatalf("admit %d: %v, %d victims", i, tc, len(v))
		}
		conns = append(conns, tc)
	}
	return t, pol, conns
}

// TestTCPPrefixOf checks the source prefixes PerPrefix counts by.
func TestTCPPrefixOf(t *testing.T) {
	pol := tcpPolicy{v4bits: 24, v6bits: 56}
	for _, c := range []struct{ addr, want string }{
		{"192.0.2.77", "192.0.2.0/24"},
		{"::ffff:192.0.2.77", "192.0.2.0/24"}, // from a dual-stack socket
		{"2001:db8:1:2ff:1::1", "2001:db8:1:200::/56"},
		{"fe80::1%eth0", "fe80::/56"},
	} {
		if got := pol.prefixOf(netip.MustParseAddr(c.addr)); got.String() != c.want {
			t.Errorf("prefixOf(%s) = %v, want %s", c.addr, got, c.want)
		}
	}
}

// TestTCPTrackerLists admits, answers and releases connections in a fixed
// pseudo-random order and checks both lists against a model after each step.
func TestTCPTrackerLists(t *testing.T) {
	pol := tcpPolicy{maxConns: 12, perPrefix: 3, v4bits: 24, v6bits: 56}
	tr := &tcpTracker{}
	var closing atomic.Bool
	var order []*tcpConn // model of the global list, least recent first
	src := map[*tcpConn]netip.Prefix{}
	remove := func(c *tcpConn) {
		for i, x := range order {
			if x == c {
				order = append(order[:i], order[i+1:]...)
				return
			}
		}
		t.Fatalf("%p not in the model", c)
	}
	x := uint32(1)
	rnd := func(n int) int { x = x*1664525 + 1013904223; return int(x>>8) % n }
	for step := range 5000 {
		switch op := rnd(3); {
		case op == 0 || len(order) == 0:
			from := netip.AddrFrom4([4]byte{10, 0, byte(rnd(6)), byte(rnd(200))})
			key := pol.prefixOf(from)
			// The model: the oldest of the prefix goes first, then the oldest overall.
			var want []*tcpConn
			n := 0
			for _, c := range order {
				if src[c] == key {
					n++
				}
			}
			if n >= pol.perPrefix {
				for _, c := range order {
					if src[c] == key {
						want = append(want, c)
						break
					}
				}
			}
			if len(order)-len(want) >= pol.maxConns {
				for _, c := range order {
					if len(want) == 0 || c != want[0] {
						want = append(want, c)
						break
					}
				}
			}
			tc, victims := tr.admit(nil, from, &pol, &closing, nil)
			if len(victims) != len(want) {
				t.Fatalf("step %d: %d victims, want %d", step, len(victims), len(want))
			}
			for i, v := range victims {
				if v != want[i] {
					t.Fatalf("step %d: victim %d is not the longest idle", step, i)
				}
				remove(v)
				tr.release(v) // its goroutine ends
			}
			order = append(order, tc)
			src[tc] = key
		case op == 1:
			c := order[rnd(len(order))]
			tr.answered(c)
			remove(c)
			order = append(order, c)
		default:
			c := order[rnd(len(order))]
			tr.release(c)
			remove(c)
		}
		// Compare.
		i := 0
		for c := tr.all.head; c != nil; c = c.links[listAll].next {
			if i >= len(order) || order[i] != c {
				t.Fatalf("step %d: global list differs from the model at %d", step, i)
			}
			i++
		}
		if i != len(order) || tr.all.n != len(order) || int(tr.current.Load()) != len(order) {
			t.Fatalf("step %d: %d listed, n %d, current %d; model %d", step, i, tr.all.n, tr.current.Load(), len(order))
		}
		counts := map[netip.Prefix]int{}
		for _, c := range order {
			counts[src[c]]++
		}
		if len(tr.prefixes) != len(counts) {
			t.Fatalf("step %d: %d prefixes tracked, model %d", step, len(tr.prefixes), len(counts))
		}
		for k, p := range tr.prefixes {
			var prev *tcpConn
			m := 0
			for c := p.list.head; c != nil; c = c.links[listPrefix].next {
				if src[c] != k || c.links[listPrefix].prev != prev {
					t.Fatalf("step %d: prefix list %v broken", step, k)
				}
				prev = c
				m++
			}
			if m != counts[k] || p.list.n != m || m > pol.perPrefix {
				t.Fatalf("step %d: prefix %v lists %d (n %d), model %d", step, k, m, p.list.n, counts[k])
			}
		}
	}
}

// TestTCPVictimSkipsBusy: eviction passes over busy connections, up to
// victimScan of them.
func TestTCPVictimSkipsBusy(t *testing.T) {
	pol := tcpPolicy{maxConns: 100, perPrefix: 100, v4bits: 24, v6bits: 56}
	tr := &tcpTracker{}
	var closing atomic.Bool
	var cs []*tcpConn
	for i := range 20 {
		tc, _ := tr.admit(nil, srcAddr(i), &pol, &closing, nil)
		cs = append(cs, tc)
	}
	cs[0].busy.Store(true)
	cs[1].busy.Store(true)
	if v := tr.all.victim(listAll); v != cs[2] {
		t.Errorf("victim is not the first idle connection")
	}
	for _, c := range cs[:victimScan] {
		c.busy.Store(true)
	}
	if v := tr.all.victim(listAll); v != cs[victimScan] {
		t.Errorf("victim is not the first idle connection within victimScan")
	}
	cs[victimScan].busy.Store(true)
	if v := tr.all.victim(listAll); v != cs[0] {
		t.Errorf("with the first victimScan busy, the victim is not the longest idle")
	}
}

func srcAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 7, byte(i % 256), byte(i/256 + 1)})
}

// BenchmarkTCPTrackerAnswered is the per-query cost: one answered query
// moves its connection to the recent end of both lists.
func BenchmarkTCPTrackerAnswered(b *testing.B) {
	t, _, conns := benchTracker(b, 1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		t.answered(conns[i%len(conns)])
		i++
	}
}

// BenchmarkTCPTrackerEvict is the per-accept cost with the server full:
// admitting a connection evicts the longest-idle one, whose goroutine then
// releases it.
func BenchmarkTCPTrackerEvict(b *testing.B) {
	t, pol, _ := benchTracker(b, 1024)
	var closing atomic.Bool
	var vbuf [4]*tcpConn
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tc, v := t.admit(nil, srcAddr(i), &pol, &closing, vbuf[:0])
		if tc == nil || len(v) != 1 {
			b.Fatalf("%v, %d victims", tc, len(v))
		}
		t.release(v[0])
		i++
	}
	if t.all.n != 1024 || int(t.current.Load()) != 1024 {
		b.Fatalf("%d tracked, current %d", t.all.n, t.current.Load())
	}
}
