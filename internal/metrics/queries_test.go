package metrics

import (
	"testing"

	"github.com/miekg/dns"
)

func TestQueriesTotal(t *testing.T) {
	m := newM()
	if n := m.QueriesTotal(); n != 0 {
		t.Fatalf("fresh: %d", n)
	}
	m.Query(UDP, dns.RcodeSuccess, dns.TypeA, true, 100)
	m.Query(TCP, dns.RcodeNameError, dns.TypeAAAA, false, 10)
	m.Query(UDP, 4000, 65000, false, 10)
	m.Dropped(UDP) // dropped packets are not answered queries
	if n := m.QueriesTotal(); n != 3 {
		t.Fatalf("QueriesTotal = %d, want 3", n)
	}
}
