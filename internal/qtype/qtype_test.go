package qtype

import (
	"testing"

	"github.com/miekg/dns"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]uint16{"A": dns.TypeA, "aaaa": dns.TypeAAAA, "Soa": dns.TypeSOA, "TYPE65": 65, "type99": 99} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "BOGUS", "NONE", "TYPE0", "TYPE65536", "TYPEx"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", in, got)
		}
	}
}
