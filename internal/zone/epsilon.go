package zone

import "github.com/miekg/dns"

// subtreeSuccessor returns the first name after name (canonical) and all
// the names below it in canonical order (RFC 4034 §6.1): name's first
// label with a zero octet appended, or, when that label or the name is as
// long as can be, with its last octet below 0xff increased (upper-case
// letters sort as lower-case ones, so they are skipped) and the octets
// after it dropped. "" when there is none.
//
// A wildcard's proof covers the next closer name from its predecessor
// (dnssec.Predecessor) to this name, not to its immediate successor
// \000.name: validators take the closest encloser to be the longest name
// the NSEC's owner or next name shares with the query name (Unbound's
// nsec_closest_encloser), and it must be the wildcard's parent, not the
// next closer name itself.
func subtreeSuccessor(name string) string {
	var buf [256]byte
	n, err := dns.PackDomainName(name, buf[:], 0, nil, false)
	if err != nil || n < 2 || buf[0] == 0 {
		return ""
	}
	l := int(buf[0])
	label, rest := buf[1:1+l], buf[1+l:n]
	var out []byte
	if l < 63 && n+1 <= 255 {
		out = append(append(append([]byte{byte(l + 1)}, label...), 0), rest...)
	} else {
		for i := l - 1; i >= 0 && out == nil; i-- {
			c := label[i]
			if c == 0xff {
				continue
			}
			c++
			if c >= 'A' && c <= 'Z' {
				c = 'Z' + 1
			}
			out = append(append(append([]byte{byte(i + 1)}, label[:i]...), c), rest...)
		}
		if out == nil {
			return ""
		}
	}
	s, _, err := dns.UnpackDomainName(out, 0)
	if err != nil {
		return ""
	}
	return s
}
