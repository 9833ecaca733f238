package latency

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// KeyKind is the kind of a measurement key, in order of precedence
// (KindCIDR is the most specific).
type KeyKind int

// The key kinds.
const (
	KindCIDR KeyKind = iota + 1
	KindASN
	KindSubdivision
	KindCountry
	KindContinent
)

// String names the kind ("cidr", "asn", ...).
func (k KeyKind) String() string {
	switch k {
	case KindCIDR:
		return "cidr"
	case KindASN:
		return "asn"
	case KindSubdivision:
		return "subdivision"
	case KindCountry:
		return "country"
	case KindContinent:
		return "continent"
	}
	return "unknown"
}

// ContinentPrefix starts a continent key ("continent:EU").
const ContinentPrefix = "continent:"

// continents are the valid continent codes.
var continents = map[string]bool{"AF": true, "AN": true, "AS": true, "EU": true, "NA": true, "OC": true, "SA": true}

// Key is a parsed measurement key.
type Key struct {
	Kind   KeyKind
	Prefix netip.Prefix // KindCIDR, masked
	ASN    uint32       // KindASN
	Code   string       // subdivision, country or continent code, upper case
}

// String returns the canonical form of the key.
func (k Key) String() string {
	switch k.Kind {
	case KindCIDR:
		return k.Prefix.String()
	case KindASN:
		return "AS" + strconv.FormatUint(uint64(k.ASN), 10)
	case KindContinent:
		return ContinentPrefix + k.Code
	}
	return k.Code
}

// ParseKey parses a measurement key of any kind (see the package
// documentation).
func ParseKey(s string) (Key, error) {
	switch {
	case s == "":
		return Key{}, errors.New("empty key")
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Key{}, fmt.Errorf("bad CIDR key %q", s)
		}
		p = p.Masked()
		if p.Addr().Is4In6() {
			// Keep one form per network: ::ffff:a.b.c.d/n+96 is a.b.c.d/n.
			if p.Bits() < 96 {
				return Key{}, fmt.Errorf("bad CIDR key %q: IPv4-mapped prefix shorter than /96", s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return Key{Kind: KindCIDR, Prefix: p}, nil
	case len(s) > len(ContinentPrefix) && strings.EqualFold(s[:len(ContinentPrefix)], ContinentPrefix):
		c := strings.ToUpper(s[len(ContinentPrefix):])
		if !continents[c] {
			return Key{}, fmt.Errorf("bad continent key %q (want continent:AF|AN|AS|EU|NA|OC|SA)", s)
		}
		return Key{Kind: KindContinent, Code: c}, nil
	case len(s) > 2 && (s[0] == 'A' || s[0] == 'a') && (s[1] == 'S' || s[1] == 's') && isDigits(s[2:]):
		n, err := strconv.ParseUint(s[2:], 10, 32)
		if err != nil || n == 0 {
			return Key{}, fmt.Errorf("bad ASN key %q", s)
		}
		return Key{Kind: KindASN, ASN: uint32(n)}, nil
	case len(s) == 2 && isLetters(s):
		return Key{Kind: KindCountry, Code: strings.ToUpper(s)}, nil
	case len(s) >= 4 && len(s) <= 6 && s[2] == '-' && isLetters(s[:2]) && isAlnum(s[3:]):
		return Key{Kind: KindSubdivision, Code: strings.ToUpper(s)}, nil
	}
	return Key{}, fmt.Errorf("bad key %q (want CIDR, AS<number>, subdivision like IN-MH, country like IN, or continent:XX)", s)
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isLetters reports whether s is a non-empty run of ASCII letters.
func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}

// isAlnum reports whether s is a non-empty run of ASCII letters and digits.
func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9') && !isLetters(s[i:i+1]) {
			return false
		}
	}
	return s != ""
}

// Validate reports what is wrong with m, or nil: the key must parse, the
// site be non-empty, RTTms finite and >= 0, Samples >= 1 and MeasuredAt set.
func (m *Measurement) Validate() error {
	if _, err := ParseKey(m.Key); err != nil {
		return err
	}
	return m.validateRest()
}

// validateRest is Validate without the key.
func (m *Measurement) validateRest() error {
	if m.Site == "" {
		return errors.New("empty site")
	}
	if math.IsNaN(m.RTTms) || math.IsInf(m.RTTms, 0) || m.RTTms < 0 {
		return fmt.Errorf("bad rtt_ms %v (want a finite number >= 0)", m.RTTms)
	}
	if m.Samples < 1 {
		return fmt.Errorf("bad samples %d (want >= 1)", m.Samples)
	}
	if m.MeasuredAt.IsZero() {
		return errors.New("missing measured_at")
	}
	return nil
}
