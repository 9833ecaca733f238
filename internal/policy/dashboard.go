package policy

import (
	"net/netip"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/latency"
)

// Read-only accessors for the dashboard (internal/node/dashboard.go).

// PoolStateWord is PoolState's state alone ("up", "down", "drain",
// "disabled"), without the reason: no allocation, for counting the states
// of every pool of a large table.
func (l *Live) PoolStateWord(r *Record, p *Pool) string {
	bit := uint64(1) << p.Index
	if r.Enabled&bit == 0 {
		return "disabled"
	}
	h := l.health.Load()
	if h != nil && r.Index < len(h.ovr) && p.Index < len(h.ovr[r.Index]) {
		switch h.ovr[r.Index][p.Index] {
		case PoolUp:
			return "up"
		case PoolDown:
			return "down"
		case PoolDrain:
			return "drain"
		}
	}
	if (l.Up(r, dns.TypeA)|l.Up(r, dns.TypeAAAA))&bit == 0 {
		return "down"
	}
	return "up"
}

// Widened reports, for r's A (IPv4 addresses) and AAAA answers, whether
// the current health widened the ECS scopes it answers with.
func (l *Live) Widened(r *Record) (a, aaaa bool) {
	_, sa := l.Usable(r, dns.TypeA)
	_, s6 := l.Usable(r, dns.TypeAAAA)
	return sa != nil, s6 != nil
}

// Map returns the latency map the state was evaluated from (nil for a nil
// state).
func (s *LatencyState) Map() *latency.Map {
	if s == nil {
		return nil
	}
	return s.m
}

// WidenedScope is a client network whose answers the current health
// widened: Prefix is the scope answered now, From the longest scope the
// partition gives under it.
type WidenedScope struct {
	Prefix netip.Prefix
	From   int
}

// WidenedScopes lists, in address order, at most max of the networks
// where the current health widened r's scopes for qtype's answers (the
// client partitions of both families), and how many there are in all. It
// walks r's partitions: one record page's worth of work, not a query's.
func (l *Live) WidenedScopes(r *Record, qtype uint16, max int) (out []WidenedScope, total int) {
	_, sc := l.Usable(r, qtype)
	if sc == nil {
		return nil, 0
	}
	for _, f := range [2]struct {
		t     *trie
		depth []uint8
	}{{&r.v4, sc.v4}, {&r.v6, sc.v6}} {
		if len(f.depth) == 0 || len(f.t.nodes) == 0 {
			continue
		}
		var addr [16]byte
		var last netip.Prefix
		var walk func(ref uint32, d int)
		walk = func(ref uint32, d int) {
			for bit := range uint32(2) {
				pos := 2*ref + bit
				if bit == 1 {
					addr[d>>3] |= 0x80 >> (d & 7)
				} else {
					addr[d>>3] &^= 0x80 >> (d & 7)
				}
				c := f.t.nodes[pos]
				if !isLeaf(c) {
					walk(c, d+1)
					continue
				}
				if int(pos) >= len(f.depth) || int(f.depth[pos]) >= d+1 {
					continue
				}
				p := prefixOf(addr, f.t.bits, int(f.depth[pos]))
				if p == last {
					if n := len(out); n > 0 && out[n-1].Prefix == p {
						out[n-1].From = maxInt(out[n-1].From, d+1)
					}
					continue
				}
				last = p
				total++
				if len(out) < max {
					out = append(out, WidenedScope{Prefix: p, From: d + 1})
				}
			}
			addr[d>>3] &^= 0x80 >> (d & 7)
		}
		walk(f.t.root, 0)
	}
	return out, total
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// prefixOf is the prefix of the first bits of addr (a 4- or 16-byte
// address by family bits).
func prefixOf(addr [16]byte, family, bits int) netip.Prefix {
	var a netip.Addr
	if family == 32 {
		a = netip.AddrFrom4([4]byte(addr[:4]))
	} else {
		a = netip.AddrFrom16(addr)
	}
	p, _ := a.Prefix(bits)
	return p
}
