package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/geo"
)

// A match key is one thing a rule's match tests ("country: [IN, LK]").
// Every key is one row of matchKeys, and everything the package does with
// a key reads the row: the builder parses and checks its values
// (builder.match), the compiler tests them (Match.matches), a record's
// compile key names them (writeMatch), the unknown-client steering asks
// whether a match reads the client's location (usesLocation), the "has no
// keys" message lists them, and explain prints the client's facts
// (Facts). A key the databases give is a row here and a field of
// geo.Info; nothing else changes.
type matchKey struct {
	// name is the key as written under match:.
	name string
	kind keyKind
	// parse normalises one value as written (keyFact and keyNode), or
	// returns a problem (in words, after "record NAME: ").
	parse func(v string) (string, string)
	// fact reads a keyFact key's value from the client's geo facts, ""
	// when the databases do not know it.
	fact func(info *geo.Info) string
	// node reads a keyNode key's value from the answering node.
	node func(n *nodeInput) string
	// needs, when set, returns a problem when the databases cannot give
	// the key's fact at all ("" when they can).
	needs func(b *builder) string
}

// keyKind is how a key's values are compared.
type keyKind uint8

const (
	keyFact keyKind = iota // a string fact of the client's geo record
	keyASN                 // the client's AS number
	keyCIDR                // the client's address
	keyNode                // the answering node, fixed when compiling
)

// matchKeys are the match keys, in the order they are tested, named in
// compile keys and printed.
var matchKeys = []matchKey{
	{name: "country", kind: keyFact, fact: func(i *geo.Info) string { return i.Country }, parse: parseCountry},
	{name: "continent", kind: keyFact, fact: func(i *geo.Info) string { return i.Continent }, parse: parseContinent},
	{name: "subdivision", kind: keyFact, fact: func(i *geo.Info) string { return i.Subdivision }, parse: parseSubdivision},
	{name: "city", kind: keyFact, fact: func(i *geo.Info) string { return i.City }, parse: parseCity},
	{name: "asn", kind: keyASN, needs: needASN},
	{name: "cidr", kind: keyCIDR},
	{name: "node", kind: keyNode, node: func(n *nodeInput) string { return n.name }, parse: parseNodeName},
	{name: "node_region", kind: keyNode, node: func(n *nodeInput) string { return n.region }, parse: parseRegion},
}

// keyNames lists the keys for the "has no keys" message.
func keyNames() string {
	names := make([]string, 0, len(matchKeys)+1)
	for i := range matchKeys {
		names = append(names, matchKeys[i].name)
	}
	return strings.Join(append(names, "not"), ", ")
}

// keyByName returns the row of the key named name, or nil.
func keyByName(name string) *matchKey {
	for i := range matchKeys {
		if matchKeys[i].name == name {
			return &matchKeys[i]
		}
	}
	return nil
}

func parseCountry(c string) (string, string) {
	c = strings.ToUpper(c)
	if _, ok := geo.LookupCountry(c); !ok {
		return c, fmt.Sprintf("unknown country code %q (ISO 3166-1 alpha-2, such as IN or DE)", c)
	}
	return c, ""
}

func parseContinent(c string) (string, string) {
	c = strings.ToUpper(c)
	if !geo.IsContinent(c) {
		return c, fmt.Sprintf("unknown continent code %q (AF AN AS EU NA OC SA)", c)
	}
	return c, ""
}

func parseSubdivision(s string) (string, string) {
	s = strings.ToUpper(s)
	if !subdivisionRe.MatchString(s) {
		return s, fmt.Sprintf("subdivision %q is not an ISO 3166-2 code such as IN-MH or US-VA", s)
	} else if _, ok := geo.LookupCountry(s[:2]); !ok {
		return s, fmt.Sprintf("subdivision %q: unknown country %q", s, s[:2])
	}
	return s, ""
}

// parseCity takes a city's name as a City database gives it in English
// (city.names.en), such as Pune or Frankfurt am Main.
func parseCity(c string) (string, string) {
	if strings.TrimSpace(c) != c || c == "" {
		return c, fmt.Sprintf("city %q is not a city name as the City database writes it (such as Pune or Frankfurt am Main)", c)
	}
	return c, ""
}

func parseNodeName(n string) (string, string) {
	if !config.ValidNodeName(n) {
		return n, fmt.Sprintf("%q is not a node name (1 to 63 letters, digits, '-', '_' or '.')", n)
	}
	return n, ""
}

func parseRegion(n string) (string, string) {
	if n == "" || !config.ValidRegion(n) {
		return n, fmt.Sprintf("%q is not a region name (no '/' or spaces)", n)
	}
	return n, ""
}

func needASN(b *builder) string {
	if b.hasASN {
		return ""
	}
	return "asn matches need an ASN database in geo.databases (GeoLite2-ASN or IPinfo Lite)"
}

// parseASN reads an AS number written 64496 or AS64496.
func parseASN(v string) (uint32, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(strings.ToUpper(v), "AS"), 10, 32)
	return uint32(n), err == nil
}

// parseCIDR reads a cidr value, or returns a problem.
func parseCIDR(s string) (netip.Prefix, string) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return p, fmt.Sprintf("%q is not a CIDR prefix", s)
	case p.Masked() != p:
		return p, fmt.Sprintf("%s has host bits set (did you mean %s?)", s, p.Masked())
	case p.Addr().Is4In6():
		return p, fmt.Sprintf("write IPv4 prefix %s as plain IPv4", s)
	}
	return p, ""
}

// keyMatch is one key of a compiled match with its values.
type keyMatch struct {
	k     *matchKey
	strs  []string // keyFact, keyNode
	asns  []uint32
	cidrs []netip.Prefix
	// have is a keyNode key's value on this node.
	have string
}

// match compiles the match mc (at is its path in the record).
func (b *builder) match(mc *config.Match, at string) *Match {
	r := b.r
	m := &Match{}
	for name := range mc.Keys {
		if keyByName(name) == nil {
			b.errf(at+"."+name, "record %s: unknown match key %q (keys: %s, source)", r.Name, name, keyNames())
		}
	}
	node := false
	for i := range matchKeys {
		k := &matchKeys[i]
		vals := mc.Keys[k.name]
		if len(vals) == 0 {
			continue
		}
		km := keyMatch{k: k}
		kat := at + "." + k.name
		for _, v := range vals {
			switch k.kind {
			case keyFact, keyNode:
				v, bad := k.parse(v)
				if bad != "" {
					b.errf(kat, "record %s: %s", r.Name, bad)
				}
				km.strs = append(km.strs, v)
			case keyASN:
				n, ok := parseASN(v)
				if !ok {
					b.errf(kat, "record %s: %q is not an AS number", r.Name, v)
					continue
				}
				km.asns = append(km.asns, n)
			case keyCIDR:
				p, bad := parseCIDR(v)
				if bad != "" {
					b.errf(kat, "record %s: %s", r.Name, bad)
					continue
				}
				km.cidrs = append(km.cidrs, p)
			}
		}
		if k.needs != nil {
			if bad := k.needs(b); bad != "" {
				b.errf(kat, "record %s: %s", r.Name, bad)
			}
		}
		if k.kind == keyNode {
			km.have = k.node(b.node)
			node = true
		}
		m.keys = append(m.keys, km)
	}
	if node && b.cfg.Node == nil {
		b.warnf(at, "record %s: the match is on the node, but the configuration has no node (or fleet) section: it never matches here (a fleet node matches it with the identity of its own file)", r.Name)
	}
	switch mc.Source {
	case "", "client":
	case "resolver":
		m.Resolver = true
	default:
		b.errf(at+".source", "record %s: source %q is not client or resolver", r.Name, mc.Source)
	}
	if mc.Not != nil {
		m.Not = b.match(mc.Not, at+".not")
		if mc.Not.Source != "" {
			b.errf(at+".not.source", "record %s: put source: on the outer match", r.Name)
		}
	}
	if len(m.keys) == 0 && m.Not == nil {
		b.errf(at, "record %s: the match has no keys (%s)", r.Name, keyNames())
	}
	return m
}

// writeMatch writes m into a compile key: every key with its values, so
// that two matches share a compiled partition only when they test the
// same. Of the node keys only whether they hold here shapes the
// partition.
func writeMatch(b *strings.Builder, m *Match) {
	if m == nil {
		b.WriteString("-")
		return
	}
	b.WriteString("{")
	for _, km := range m.keys {
		switch km.k.kind {
		case keyFact:
			fmt.Fprintf(b, "%s=%q ", km.k.name, km.strs)
		case keyASN:
			fmt.Fprintf(b, "%s=%v ", km.k.name, km.asns)
		case keyCIDR:
			fmt.Fprintf(b, "%s=%v ", km.k.name, km.cidrs)
		}
	}
	fmt.Fprintf(b, "r=%t", m.Resolver)
	if m.onNodeKeys() {
		fmt.Fprintf(b, " node=%t", m.onNode())
	}
	b.WriteString(" not=")
	writeMatch(b, m.Not)
	b.WriteString("}")
}

// matchEqual reports whether two configured matches are the same, for a
// reload that reuses a record (reuse.go).
func matchEqual(a, b *config.Match) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Keys) != len(b.Keys) || a.Source != b.Source {
		return false
	}
	for name, v := range a.Keys {
		w, ok := b.Keys[name]
		if !ok || !listEqual(v, w) {
			return false
		}
	}
	return matchEqual(a.Not, b.Not)
}

// Fact is one match key's value for a client, as explain prints it.
type Fact struct {
	Key   string `json:"key"`
	Value string `json:"value"` // "" when the databases do not know it
}

// Facts returns, for every key the geo databases answer (in the table's
// order), the client's value according to info.
func Facts(info *geo.Info) []Fact {
	var out []Fact
	for i := range matchKeys {
		k := &matchKeys[i]
		switch k.kind {
		case keyFact:
			out = append(out, Fact{k.name, k.fact(info)})
		case keyASN:
			v := ""
			if info.ASN != 0 {
				v = "AS" + strconv.FormatUint(uint64(info.ASN), 10)
			}
			out = append(out, Fact{k.name, v})
		}
	}
	return out
}

// String describes m: each key with its values, source and negation.
func (m *Match) String() string {
	if m == nil {
		return "-"
	}
	var b strings.Builder
	b.WriteString("{")
	for _, km := range m.keys {
		switch km.k.kind {
		case keyFact, keyNode:
			fmt.Fprintf(&b, "%s: %v ", km.k.name, km.strs)
		case keyASN:
			fmt.Fprintf(&b, "%s: %v ", km.k.name, km.asns)
		case keyCIDR:
			fmt.Fprintf(&b, "%s: %v ", km.k.name, km.cidrs)
		}
	}
	fmt.Fprintf(&b, "resolver: %t not: %s}", m.Resolver, m.Not)
	return b.String()
}
