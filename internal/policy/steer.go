package policy

import (
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/zone"
)

// Steerer answers steered names for one query: it implements zone.Steering
// for the client in Query, deciding through Live.Decide as the fast path
// does. The server and explain both answer through it.
type Steerer struct {
	Live  *Live
	Query Query
	// Now is the time answers are marked with (Unix seconds; the server's
	// coarse clock); 0 reads the clock.
	Now int64
	// Trace, when non-nil, receives every decision made (explain).
	Trace func(r *Record, q *Query, d *Decision)
}

// Steer implements zone.Steering.
func (s *Steerer) Steer(a *zone.Answer, name string, qtype uint16) (string, bool) {
	r := s.Live.Table().Get(name)
	if r == nil {
		return "", false
	}
	q := s.Query
	q.Qtype = qtype
	now := s.Now
	if now == 0 {
		now = time.Now().Unix()
	}
	st := s.Live.Decide(r, &q, now)
	d := &st.Decision
	if s.Trace != nil {
		s.Trace(r, &q, d)
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
	a.Answer = r.AppendAnswer(a.Answer, d, qtype, st.Addrs)
	if ttl := st.TTL; ttl != r.TTL {
		for _, rr := range a.Answer[start:] {
			rr.Header().Ttl = ttl // made for this answer (AppendAnswer)
		}
	}
	if r.Type == dns.TypeCNAME && len(a.Answer) > start {
		if c, ok := a.Answer[start].(*dns.CNAME); ok && qtype != dns.TypeCNAME {
			return dns.CanonicalName(c.Target), true
		}
	}
	return "", true
}
