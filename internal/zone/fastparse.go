package zone

import (
	"bytes"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"unsafe"

	"github.com/miekg/dns"
)

// A host's 100,000 small zones are parsed at every start, and most of
// their lines are the plainest of master-file lines: an owner, a TTL and
// class perhaps, a common type and its data. miekg/dns's ZoneParser reads
// them a byte at a time through a state machine, a string per token and a
// record per line, and those tokens and the nodes built from them were
// most of a start's CPU and garbage. fastParse reads such a file itself,
// into the very records the ZoneParser makes of it (the same names, in
// the same case, the same TTLs and data), and the line of each. It only
// accepts what it can vouch for, and leaves the whole file to the
// ZoneParser at the first thing it cannot: $INCLUDE and $GENERATE, an
// escape, a type or class it does not read, TTLs with units, a missing
// TTL with no default, a token where the ZoneParser would join or split
// tokens differently (a parenthesis or quote against a token), any
// error. So every error, warning and file:line stays the ZoneParser's
// (and steer's): the file is then read exactly as before, from the
// start. fastparse_test.go checks the two agree on every file at hand
// and on generated and fuzzed ones.

// noFastParse leaves every file to the ZoneParser (tests compare).
var noFastParse bool

// fastTok is a token of an entry: data[start:end], the text between the
// quotes for a quoted one.
type fastTok struct {
	start, end int
	quoted     bool
	// after is the byte after the token (after its closing quote), 0 at
	// the end of the data.
	after byte
	// paren: a parenthesis came before it in its entry.
	paren bool
}

// fastParser is one file's fast parse.
type fastParser struct {
	data   []byte
	origin string // as $ORIGIN sets it
	i      int    // the next byte to read
	lineNo int    // of data[i]
	lineAt int    // where that line starts
	// The entry read last: its tokens, the line of its first, whether
	// that starts its line (an owner or directive), whether a comment
	// came inside its parentheses.
	toks     []fastTok
	line     int
	owner    bool
	cmtParen bool
	// The default TTL, as the ZoneParser keeps it: set by $TTL (byDir)
	// or by the last explicit TTL until a $TTL.
	defTTL        uint32
	hasDef, byDir bool
	prevOwner     string

	rrs []dns.RR
	pos []int32
	// Blocks the names and addresses are cut from. The builder copies
	// every one it keeps into its own blocks (compact), so these are
	// garbage once the zone is built, and so may be names and strings
	// written in full in the file, which are handed out as they are
	// there (the zone does not keep the file's text). The records it
	// keeps with their names as they are (SOA, DNAME) get allocations
	// of their own. The records of the types compact knows are cut
	// from blocks that hold records only, which the zone keeps as
	// they are (see builder.fast).
	names []byte
	ips   []byte
	strs  []string
	a     fastSlab[dns.A]
	aaaa  fastSlab[dns.AAAA]
	ns    fastSlab[dns.NS]
	cname fastSlab[dns.CNAME]
	mx    fastSlab[dns.MX]
	txt   fastSlab[dns.TXT]
	ptr   fastSlab[dns.PTR]
	srv   fastSlab[dns.SRV]
}

// fastParsers keeps parsers for the next file (a start parses 100,000,
// on every core): only the parser and its list of tokens are used again,
// as what it hands out is the file's records'.
var fastParsers = sync.Pool{New: func() any { return new(fastParser) }}

// fastSlab hands out zero values from blocks, as slab does: the first
// of one, each next one twice the last (most small zones hold one or two
// records of most types).
type fastSlab[T any] struct{ buf []T }

func (s *fastSlab[T]) new() *T {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]T, 0, nextBlock(cap(s.buf), 1, slabBlock, 1))
	}
	s.buf = s.buf[:len(s.buf)+1]
	return &s.buf[len(s.buf)-1]
}

// fastParse returns the records of data, a master file read with origin
// (canonical), and the line each starts on, as the ZoneParser and
// recordLines give them; ok is false when it cannot vouch for the file,
// which the ZoneParser must then read.
func fastParse(origin string, data []byte) (rrs []dns.RR, lines []int32, ok bool) {
	if noFastParse {
		return nil, nil, false
	}
	if _, ok := dns.IsDomainName(origin); !ok || !dns.IsFqdn(origin) {
		return nil, nil, false
	}
	n := bytes.Count(data, []byte{'\n'}) + 1
	p := fastParsers.Get().(*fastParser)
	*p = fastParser{data: data, origin: origin, lineNo: 1, toks: p.toks[:0],
		rrs: make([]dns.RR, 0, n), pos: make([]int32, 0, n),
		names: make([]byte, 0, len(data)/2+64)}
	defer func() {
		*p = fastParser{toks: p.toks[:0]} // nothing of this file's
		fastParsers.Put(p)
	}()
	for {
		more, ok := p.entry()
		if !ok {
			return nil, nil, false
		}
		if !more {
			return p.rrs, p.pos, true
		}
		if !p.record() {
			return nil, nil, false
		}
	}
}

// fastSep reports whether c ends an unquoted token as the ZoneParser
// reads it, or is one it leaves to the ZoneParser (quote, escape, CR).
func fastSep(c byte) bool {
	switch c {
	case ' ', '\t', '\n', ';', '(', ')', '"', '\\', '\r':
		return true
	}
	return false
}

// entry reads the next entry's tokens; more is false at the end of the
// data, ok false on what only the ZoneParser reads.
func (p *fastParser) entry() (more, ok bool) {
	d := p.data
	p.toks, p.cmtParen = p.toks[:0], false
	depth, paren := 0, false
	for p.i < len(d) {
		switch c := d[p.i]; c {
		case ' ', '\t':
			p.i++
		case '\n':
			p.i++
			p.lineNo++
			p.lineAt = p.i
			if depth == 0 && len(p.toks) > 0 {
				return true, true
			}
		case ';':
			if depth > 0 {
				p.cmtParen = true
			}
			if j := bytes.IndexByte(d[p.i:], '\n'); j >= 0 {
				p.i += j // the newline ends it
			} else {
				p.i = len(d)
			}
		case '(':
			depth++
			paren = true
			p.i++
		case ')':
			if depth == 0 {
				return false, false // the ZoneParser's "extra closing brace"
			}
			depth--
			paren = true
			p.i++
		case '"':
			start := p.i + 1
			j := start
			for j < len(d) && d[j] != '"' {
				if d[j] == '\n' || d[j] == '\\' || d[j] == '\r' {
					return false, false // a newline kept in the string, an escape
				}
				j++
			}
			if j == len(d) {
				return false, false
			}
			var after byte
			if j+1 < len(d) {
				after = d[j+1]
			}
			switch after {
			case 0, ' ', '\t', '\n', '(', ')', ';':
			default:
				return false, false // a token against the quote
			}
			p.token(fastTok{start: start, end: j, quoted: true, after: after, paren: paren})
			p.i = j + 1
		case '\\', '\r':
			return false, false
		default:
			start := p.i
			j := start
			for j < len(d) && !fastSep(d[j]) {
				j++
			}
			var after byte
			if j < len(d) {
				after = d[j]
			}
			switch after {
			case '"', '\\', '\r', ';':
				// A quote or comment against the token: the
				// ZoneParser splits there without the blank
				// between tokens that the records' data expects.
				return false, false
			case '(', ')', '\n':
				// The ZoneParser goes on with the same token after
				// a parenthesis or a newline inside them: only a
				// blank, a comment or the end of the entry ends it.
				if (after != '\n' || depth > 0) && !p.endsAfterParens(j, depth) {
					return false, false
				}
			}
			p.token(fastTok{start: start, end: j, after: after, paren: paren})
			p.i = j
		}
	}
	if depth > 0 {
		return false, false
	}
	return len(p.toks) > 0, true
}

// endsAfterParens reports whether the token ending at j, before
// parentheses or newlines inside them, ends there for the ZoneParser too:
// a blank, the end of the entry or of the data comes before any other
// byte.
func (p *fastParser) endsAfterParens(j, depth int) bool {
	d := p.data
	for ; j < len(d); j++ {
		switch d[j] {
		case '(':
			depth++
		case ')':
			depth--
		case '\n':
			if depth <= 0 {
				return true
			}
		case ' ', '\t':
			return true
		default:
			// A comment there: the ZoneParser gives the token
			// without the blank after it that the data expects.
			return false
		}
	}
	return true
}

func (p *fastParser) token(t fastTok) {
	if len(p.toks) == 0 {
		p.line = p.lineNo
		p.owner = t.start == p.lineAt
	}
	p.toks = append(p.toks, t)
}

func (p *fastParser) text(t fastTok) []byte { return p.data[t.start:t.end] }

// view is b as a string, for a look or for what the builder copies: the
// zone does not keep the file's text (dropSource).
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// blankAfter reports whether a blank follows t, as the ZoneParser needs
// after an owner, TTL, class and type to tell them apart.
func blankAfter(t fastTok) bool { return t.after == ' ' || t.after == '\t' }

// record reads the entry's directive or record.
func (p *fastParser) record() bool {
	toks := p.toks
	k := 0
	owner := p.prevOwner
	if p.owner {
		t := toks[0]
		w := p.text(t)
		if t.quoted || !blankAfter(t) || t.paren {
			return false
		}
		if w[0] == '$' {
			return p.directive(w)
		}
		name, ok := p.name(w, false)
		if !ok {
			return false
		}
		owner, k = name, 1
	} else if owner == "" {
		return false // no owner yet: the ZoneParser's error
	}
	var rtype uint16
	var ttl uint32
	hasTTL, hasClass := false, false
	for ; k < len(toks); k++ {
		t := toks[k]
		if t.quoted || t.paren || !blankAfter(t) {
			return false
		}
		w := p.text(t)
		if rtype = fastType(w); rtype != 0 {
			k++
			break
		}
		if len(w) == 2 && w[0]|0x20 == 'i' && w[1]|0x20 == 'n' && !hasClass {
			hasClass = true
			continue
		}
		v, ok := fastUint(w, math.MaxUint32)
		if !ok || hasTTL {
			return false
		}
		ttl, hasTTL = v, true
	}
	if rtype == 0 || k == len(toks) {
		return false // no type, or no data (an update's record)
	}
	h := dns.RR_Header{Name: owner, Rrtype: rtype, Class: dns.ClassINET}
	if hasTTL {
		h.Ttl = ttl
		if !p.hasDef || !p.byDir {
			p.defTTL, p.hasDef, p.byDir = ttl, true, false
		}
	} else {
		if !p.hasDef {
			return false
		}
		h.Ttl = p.defTTL
	}
	rdata := toks[k:]
	if p.cmtParen {
		// After a comment inside parentheses the ZoneParser takes a
		// type's or class's name for one again.
		for _, t := range rdata {
			if !t.quoted && typeOrClass(p.text(t)) {
				return false
			}
		}
	}
	if rtype != dns.TypeTXT {
		for _, t := range rdata {
			if t.quoted {
				return false
			}
		}
	}
	rr := p.rdata(h, rdata)
	if rr == nil {
		return false
	}
	p.prevOwner = owner
	p.rrs = append(p.rrs, rr)
	p.pos = append(p.pos, int32(p.line))
	return true
}

// directive reads $TTL and $ORIGIN (w); any other is the ZoneParser's.
func (p *fastParser) directive(w []byte) bool {
	if len(p.toks) != 2 {
		return false
	}
	t := p.toks[1]
	v := p.text(t)
	if t.quoted || t.paren || t.after == '(' || t.after == ')' {
		return false
	}
	switch {
	case bytes.EqualFold(w, []byte("$TTL")):
		ttl, ok := fastUint(v, math.MaxUint32)
		if !ok {
			return false
		}
		p.defTTL, p.hasDef, p.byDir = ttl, true, true
		return true
	case bytes.EqualFold(w, []byte("$ORIGIN")):
		if typeOrClass(v) {
			return false // the ZoneParser reads it as one
		}
		o, ok := p.name(v, true)
		if !ok {
			return false
		}
		p.origin = o
		return true
	}
	return false
}

// rdata makes the record of type h.Rrtype from its data's tokens, or
// returns nil.
func (p *fastParser) rdata(h dns.RR_Header, toks []fastTok) dns.RR {
	one := func() ([]byte, bool) {
		if len(toks) != 1 {
			return nil, false
		}
		return p.text(toks[0]), true
	}
	switch h.Rrtype {
	case dns.TypeA, dns.TypeAAAA:
		w, ok := one()
		if !ok || bytes.IndexByte(w, ':') >= 0 != (h.Rrtype == dns.TypeAAAA) {
			return nil
		}
		ip, err := netip.ParseAddr(view(w))
		if err != nil || ip.Zone() != "" {
			return nil
		}
		if h.Rrtype == dns.TypeA {
			r := p.a.new()
			r.Hdr, r.A = h, p.ip(ip)
			return r
		}
		r := p.aaaa.new()
		r.Hdr, r.AAAA = h, p.ip(ip)
		return r
	case dns.TypeNS, dns.TypeCNAME, dns.TypePTR, dns.TypeDNAME:
		w, ok := one()
		if !ok {
			return nil
		}
		name, ok := p.name(w, h.Rrtype == dns.TypeDNAME)
		if !ok {
			return nil
		}
		switch h.Rrtype {
		case dns.TypeNS:
			r := p.ns.new()
			r.Hdr, r.Ns = h, name
			return r
		case dns.TypeCNAME:
			r := p.cname.new()
			r.Hdr, r.Target = h, name
			return r
		case dns.TypePTR:
			r := p.ptr.new()
			r.Hdr, r.Ptr = h, name
			return r
		}
		return &dns.DNAME{Hdr: h, Target: name}
	case dns.TypeMX:
		if len(toks) != 2 {
			return nil
		}
		pref, ok := fastUint(p.text(toks[0]), math.MaxUint16)
		name, ok2 := p.name(p.text(toks[1]), false)
		if !ok || !ok2 {
			return nil
		}
		r := p.mx.new()
		r.Hdr, r.Preference, r.Mx = h, uint16(pref), name
		return r
	case dns.TypeSRV:
		if len(toks) != 4 {
			return nil
		}
		var v [3]uint32
		for i := range v {
			var ok bool
			if v[i], ok = fastUint(p.text(toks[i]), math.MaxUint16); !ok {
				return nil
			}
		}
		name, ok := p.name(p.text(toks[3]), false)
		if !ok {
			return nil
		}
		r := p.srv.new()
		r.Hdr, r.Priority, r.Weight, r.Port, r.Target = h, uint16(v[0]), uint16(v[1]), uint16(v[2]), name
		return r
	case dns.TypeSOA:
		if len(toks) != 7 {
			return nil
		}
		var v [5]uint32
		for i := range v {
			var ok bool
			if v[i], ok = fastUint(p.text(toks[2+i]), math.MaxUint32); !ok {
				return nil
			}
		}
		ns, ok := p.name(p.text(toks[0]), true)
		mbox, ok2 := p.name(p.text(toks[1]), true)
		if !ok || !ok2 {
			return nil
		}
		return &dns.SOA{Hdr: h, Ns: ns, Mbox: mbox, Serial: v[0], Refresh: v[1], Retry: v[2], Expire: v[3], Minttl: v[4]}
	case dns.TypeTXT:
		txt := p.strings(len(toks))
		for i, t := range toks {
			w := p.text(t)
			if len(w) > 255 {
				return nil // cut in parts by the ZoneParser
			}
			txt[i] = view(w) // copied by compact
		}
		r := p.txt.new()
		r.Hdr, r.Txt = h, txt
		return r
	}
	return nil
}

// fastType returns the type w names, among those fastParse reads, or 0.
func fastType(w []byte) uint16 {
	if len(w) > 5 {
		return 0
	}
	var u [5]byte
	for i, c := range w {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		u[i] = c
	}
	switch string(u[:len(w)]) {
	case "A":
		return dns.TypeA
	case "AAAA":
		return dns.TypeAAAA
	case "NS":
		return dns.TypeNS
	case "CNAME":
		return dns.TypeCNAME
	case "DNAME":
		return dns.TypeDNAME
	case "PTR":
		return dns.TypePTR
	case "MX":
		return dns.TypeMX
	case "SRV":
		return dns.TypeSRV
	case "SOA":
		return dns.TypeSOA
	case "TXT":
		return dns.TypeTXT
	}
	return 0
}

// typeOrClass reports whether the ZoneParser's lexer takes w for a type
// or a class (TYPEnnn and CLASSnnn included, or reported as bad).
func typeOrClass(w []byte) bool {
	u := strings.ToUpper(string(w))
	_, t := dns.StringToType[u]
	_, c := dns.StringToClass[u]
	return t || c || strings.HasPrefix(u, "TYPE") || strings.HasPrefix(u, "CLASS")
}

// fastUint reads w, decimal digits only (no units, no sign, at most ten
// digits), up to most.
func fastUint(w []byte, most uint64) (uint32, bool) {
	if len(w) == 0 || len(w) > 10 {
		return 0, false
	}
	var v uint64
	for _, c := range w {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > most {
		return 0, false
	}
	return uint32(v), true
}

// name returns the domain name w made absolute, as the ZoneParser's
// toAbsoluteName does; kept: in an allocation of its own (the record
// keeps it as it is), else cut from the parse's block.
func (p *fastParser) name(w []byte, kept bool) (string, bool) {
	if len(w) == 1 && w[0] == '@' {
		return p.origin, true
	}
	s := view(w)
	if _, ok := dns.IsDomainName(s); !ok || s == "" {
		return "", false
	}
	if s[len(s)-1] == '.' { // no escapes: the dot is not escaped
		if kept {
			return string(w), true
		}
		return s, true // copied by compact, or the owner's by the node
	}
	if kept {
		if p.origin == "." {
			return s + ".", true
		}
		return s + "." + p.origin, true
	}
	p.grow(len(w) + 1 + len(p.origin))
	start := len(p.names)
	p.names = append(p.names, w...)
	if p.origin != "." {
		p.names = append(p.names, '.')
	}
	p.names = append(p.names, p.origin...)
	return unsafe.String(&p.names[start], len(p.names)-start), true
}

// grow makes room for n more bytes in the block of names: a new block
// when it is full (what was cut from the old one stays where it is).
func (p *fastParser) grow(n int) {
	if len(p.names)+n > cap(p.names) {
		p.names = make([]byte, 0, max(n, 2*cap(p.names)))
	}
}

// ip returns ip in net.ParseIP's 16-byte form, cut from a block.
func (p *fastParser) ip(ip netip.Addr) net.IP {
	if len(p.ips)+16 > cap(p.ips) {
		p.ips = make([]byte, 0, 16*max(8, len(p.rrs)))
	}
	a := ip.As16()
	p.ips = append(p.ips, a[:]...)
	return net.IP(p.ips[len(p.ips)-16 : len(p.ips) : len(p.ips)])
}

// strings returns a slice of n strings cut from a block.
func (p *fastParser) strings(n int) []string {
	if len(p.strs)+n > cap(p.strs) {
		p.strs = make([]string, 0, max(n, 8))
	}
	i := len(p.strs)
	p.strs = p.strs[:i+n]
	return p.strs[i : i+n : i+n]
}
