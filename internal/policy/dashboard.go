package policy

import (
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
