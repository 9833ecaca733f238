package zone

import (
	"testing"

	"github.com/miekg/dns"
)

func TestParseQType(t *testing.T) {
	for in, want := range map[string]uint16{"A": dns.TypeA, "aaaa": dns.TypeAAAA, "Soa": dns.TypeSOA, "TYPE65": 65, "type99": 99} {
		if got, err := ParseQType(in); err != nil || got != want {
			t.Errorf("ParseQType(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "BOGUS", "NONE", "TYPE0", "TYPE65536", "TYPEx"} {
		if got, err := ParseQType(in); err == nil {
			t.Errorf("ParseQType(%q) = %d, want an error", in, got)
		}
	}
}
