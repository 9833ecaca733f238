package zone

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// ParseQType returns the RR type a configuration, a command-line flag or
// an API query names: a mnemonic in any case ("aaaa", "SOA") or the
// RFC 3597 form TYPEnnn ("TYPE65"). Type 0 (NONE) is not a type one can
// ask for and is refused. It is the project's one qtype parser.
func ParseQType(s string) (uint16, error) {
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
