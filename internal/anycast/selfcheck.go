package anycast

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// SelfCheck queries the node's own DNS listener, as a resolver would, and
// counts results with rise/fall: it passes after Rise consecutive good
// answers and fails after Fall consecutive bad ones. It starts failing
// ("not checked yet"), so a node announces only after Rise good answers.
type SelfCheck struct {
	Name     string // the query name
	Qtype    uint16
	Interval time.Duration
	Timeout  time.Duration
	Rise     int
	Fall     int
	// Target returns the address to query (the node's own listener), or
	// false when there is none.
	Target func() (netip.AddrPort, bool)
	// OnChange, when set, is called after the result changes.
	OnChange func()

	mu     sync.Mutex
	ok     bool
	detail string
	good   int
	bad    int
}

// State reports whether the check passes and why.
func (c *SelfCheck) State() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.detail == "" {
		return false, "not checked yet"
	}
	return c.ok, c.detail
}

// Run checks every Interval until ctx ends.
func (c *SelfCheck) Run(ctx context.Context) {
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		c.record(c.probe(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// record counts one result and reports whether the state changed.
func (c *SelfCheck) record(err error) {
	c.mu.Lock()
	was := c.ok
	if err == nil {
		c.good, c.bad = c.good+1, 0
		if c.good >= c.Rise {
			c.ok = true
		}
		if c.ok {
			c.detail = "answered"
		} else {
			c.detail = fmt.Sprintf("answered %d of %d times in a row needed", c.good, c.Rise)
		}
	} else {
		c.good, c.bad = 0, c.bad+1
		if c.bad >= c.Fall {
			c.ok = false
		}
		c.detail = err.Error()
		if c.ok {
			c.detail += fmt.Sprintf(" (%d of %d failures in a row)", c.bad, c.Fall)
		}
	}
	changed := was != c.ok
	c.mu.Unlock()
	if changed && c.OnChange != nil {
		c.OnChange()
	}
}

// probe sends one query over UDP. It passes on an authoritative NOERROR
// answer holding at least one record of the asked type.
func (c *SelfCheck) probe(ctx context.Context) error {
	addr, ok := c.Target()
	if !ok {
		return fmt.Errorf("no DNS listener is up")
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(c.Name), c.Qtype)
	m.RecursionDesired = false
	cl := &dns.Client{Net: "udp", Timeout: c.Timeout}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	r, _, err := cl.ExchangeContext(ctx, m, addr.String())
	q := fmt.Sprintf("%s %s @%s", dns.Fqdn(c.Name), dns.TypeToString[c.Qtype], addr)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %v", q, err)
	case r.Rcode != dns.RcodeSuccess:
		return fmt.Errorf("%s: %s", q, dns.RcodeToString[r.Rcode])
	case !r.Authoritative:
		return fmt.Errorf("%s: answer not authoritative", q)
	}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype == c.Qtype {
			return nil
		}
	}
	return fmt.Errorf("%s: no %s record in the answer", q, dns.TypeToString[c.Qtype])
}
