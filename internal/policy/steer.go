package policy

import (
	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/zone"
)

// Steerer answers steered names for one query: it implements zone.Steering
// for the client in Query. The server and explain both answer through it.
type Steerer struct {
	Table *Table
	Query Query
	// Trace, when non-nil, receives every decision made (explain).
	Trace func(r *Record, q *Query, d *Decision)
}

// Steer implements zone.Steering.
func (s *Steerer) Steer(a *zone.Answer, name string, qtype uint16) (string, bool) {
	r := s.Table.Get(name)
	if r == nil {
		return "", false
	}
	q := s.Query
	q.Qtype = qtype
	q.Up = s.Table.Up(r)
	d := r.Decide(&q)
	if s.Trace != nil {
		s.Trace(r, &q, &d)
	}
	switch {
	case d.ServFail:
		a.Rcode = dns.RcodeServerFailure
		a.Scope = max(a.Scope, d.Scope)
		return "", true
	case d.NoData:
		if d.Rule >= 0 {
			a.Scope = max(a.Scope, d.Scope)
		}
		return "", false
	}
	a.Scope = max(a.Scope, d.Scope)
	start := len(a.Answer)
	a.Answer = r.AppendAnswer(a.Answer, &d, qtype)
	if r.Type == dns.TypeCNAME && len(a.Answer) > start {
		if c, ok := a.Answer[start].(*dns.CNAME); ok && qtype != dns.TypeCNAME {
			return dns.CanonicalName(c.Target), true
		}
	}
	return "", true
}

// Up returns the pools of r usable now.
func (t *Table) Up(r *Record) uint64 {
	return r.Enabled
}
