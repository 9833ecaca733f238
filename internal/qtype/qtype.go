// Package qtype holds the project's one query-type parser: the
// configuration, the command line, the admin API and the tests (the kdig
// output parser of dnstest among them) all read a type's text through
// Parse. It is a leaf that imports nothing of steer, so dnstest, which the
// internal tests of every other package use, can use it without a cycle.
package qtype

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// Parse returns the RR type a configuration, a command-line flag, an API
// query or kdig's output names: a mnemonic in any case ("aaaa", "SOA") or
// the RFC 3597 form TYPEnnn ("TYPE65"). Type 0 (NONE) is not a type one
// can ask for and is refused.
func Parse(s string) (uint16, error) {
	u := strings.ToUpper(s)
	if t, ok := dns.StringToType[u]; ok && t != dns.TypeNone {
		return t, nil
	}
	if n, ok := strings.CutPrefix(u, "TYPE"); ok {
		if v, err := strconv.ParseUint(n, 10, 16); err == nil && v != 0 {
			return uint16(v), nil
		}
	}
	return 0, fmt.Errorf("unknown type %q", s)
}
