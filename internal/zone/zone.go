// Package zone owns authoritative zone data: reading RFC 1035 master files,
// checking them (every problem as file:line), and answering a query from an
// immutable, indexed zone by the rules of RFC 1034 §4.3.2, RFC 2308
// (negative answers), RFC 4592 (wildcards) and RFC 6672 (DNAME).
//
// A Zone never changes after Load returns; a reload builds a new one.
package zone

import (
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
)

// Zone is one loaded, checked and indexed zone.
type Zone struct {
	// Origin is the zone apex in canonical (lower case, absolute) form.
	Origin string
	// File is the master file it was read from.
	File string
	// SOA is the apex SOA record.
	SOA *dns.SOA
	// NegSOA is the SOA put in the authority section of negative answers:
	// its TTL is min(SOA TTL, SOA MINIMUM) (RFC 2308 §3).
	NegSOA *dns.SOA
	// Records is the number of resource records loaded.
	Records int
	// Failed, when not empty, says why the zone could not be loaded (see
	// NewFailed): the zone has no data, and every query for a name in it
	// is answered SERVFAIL, as Knot and NSD answer for a zone that failed
	// to load. It is never "" for a zone made by NewFailed.
	Failed string

	// source is a self-contained master file text that parses back into
	// this zone's records (see Source).
	source []byte
	// fromFile is set when source is the file's own bytes (no $INCLUDE):
	// a reload that reads the same bytes may keep this zone (Unchanged).
	fromFile bool
	// precompiled is set once Precompile has run: a zone kept across a
	// reload is published already and is never written again.
	precompiled bool

	nodes map[string]*node
	apex  *node
	// negWire is the negative-answer SOA for the fast path.
	negWire NegativeSOA
}

// node holds the RRsets owned by one name. A node with no RRsets is an
// empty non-terminal: it exists, so its names answer NODATA, not NXDOMAIN.
type node struct {
	name   string
	rrsets []rrset // sorted by type
	cut    bool    // NS below the apex: a delegation point
	dname  *rrset
	cname  *rrset
	// templates are precompiled wire answers (see Precompile).
	templates []template
	// plain is set on names the fast path may answer: no delegation,
	// CNAME or DNAME here, every RRset precompiled.
	plain bool
	// wildChild is set when *.name exists.
	wildChild bool
	// steered is set on names whose address (or CNAME) records are
	// chosen per query by a Steering.
	steered bool
	// below is set on names at or under a delegation point or a DNAME other
	// than the cut itself: data there is glue or occluded, never answered.
	occluded bool
}

type rrset struct {
	rtype uint16
	rrs   []dns.RR
	pos   Pos
}

func (n *node) get(t uint16) []dns.RR {
	for i := range n.rrsets {
		if n.rrsets[i].rtype == t {
			return n.rrsets[i].rrs
		}
	}
	return nil
}

// Load reads the master file file (from fsys, or the local disk when fsys is
// nil) as the zone origin, checks it and indexes it. Errors and warnings come
// back as diag.Problems; the zone is nil when there are errors.
func Load(fsys fs.FS, origin, file string) (z *Zone, errs, warns diag.Problems) {
	data, err := readFile(fsys, file)
	if err != nil {
		errs.Add(file, 0, "%v", err)
		return nil, errs, nil
	}
	return Parse(fsys, origin, file, data)
}

var parseErrRe = regexp.MustCompile(`^(?:(.*): )?dns: (.*) at line: (\d+):(\d+)$`)

// NewFailed returns the stand-in for a zone that could not be loaded: it
// holds no data, and lookups answer SERVFAIL for every name in it (rather
// than REFUSED, or the answer of a parent zone that is served). reason is
// why it failed, for status and logs.
func NewFailed(origin, file, reason string) *Zone {
	if reason == "" {
		reason = "failed to load"
	}
	return &Zone{Origin: dns.CanonicalName(origin), File: file, Failed: reason, nodes: map[string]*node{}}
}

// Source returns a self-contained master file text that parses (with
// Parse, for the same origin) back into this zone's records: the file as
// read when it has no $INCLUDE, else the loaded records written out one
// per line. It is what a last good copy of the zone is kept as. It is nil
// for a failed zone, and must not be modified.
func (z *Zone) Source() []byte { return z.source }

// ReadFile reads a zone file as Load does.
func ReadFile(fsys fs.FS, file string) ([]byte, error) { return readFile(fsys, file) }

// Unchanged reports whether z was loaded from file and data is its very
// bytes, so that a reload may keep z instead of parsing data again. A zone
// with $INCLUDE is never unchanged: its included files may differ.
func (z *Zone) Unchanged(file string, data []byte) bool {
	return z != nil && z.Failed == "" && z.fromFile && z.File == file && bytes.Equal(z.source, data)
}

// Parse is Load with the file's contents already read. The zone keeps
// data (see Source): the caller must not modify it afterwards.
func Parse(fsys fs.FS, origin, file string, data []byte) (z *Zone, errs, warns diag.Problems) {
	origin = dns.CanonicalName(origin)
	zp := dns.NewZoneParser(bytes.NewReader(data), origin, file)
	zp.SetIncludeAllowed(true)
	if fsys != nil {
		zp.SetIncludeFS(fsys)
	}
	z = &Zone{Origin: origin, File: file, nodes: map[string]*node{}}
	type entry struct {
		rr  dns.RR
		pos Pos
	}
	var entries []entry
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		entries = append(entries, entry{rr: rr, pos: Pos{File: file}})
	}
	if err := zp.Err(); err == nil {
		// Only a file that parsed gets its records' lines, and only as
		// many as the parser returned: the scan never does more work
		// than the parse did.
		for i, p := range recordPositions(fsys, file, data, 0, len(entries)) {
			entries[i].pos = p
		}
	}
	if err := zp.Err(); err != nil {
		if m := parseErrRe.FindStringSubmatch(err.Error()); m != nil {
			f := m[1]
			if f == "" {
				f = file
			}
			n, _ := strconv.Atoi(m[3])
			errs.Add(f, n, "%s", m[2])
		} else {
			errs.Add(file, 0, "%v", err)
		}
		return nil, errs, warns
	}

	// Group records into RRsets per owner, checking each as it comes.
	type key struct {
		name  string
		rtype uint16
	}
	sets := map[key]*rrset{}
	seen := map[string]bool{}
	var order []key
	for _, e := range entries {
		h := e.rr.Header()
		owner := dns.CanonicalName(h.Name)
		h.Name = owner
		if !dns.IsSubDomain(origin, owner) {
			errs.Add(e.pos.File, e.pos.Line, "%s is outside the zone %s", owner, origin)
			continue
		}
		if h.Class != dns.ClassINET {
			errs.Add(e.pos.File, e.pos.Line, "%s: class %s is not served (only IN)", owner, dns.ClassToString[h.Class])
			continue
		}
		switch h.Rrtype {
		case dns.TypeSOA:
			if owner != origin {
				errs.Add(e.pos.File, e.pos.Line, "SOA record for %s is not at the zone apex %s", owner, origin)
				continue
			}
		case dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY:
			errs.Add(e.pos.File, e.pos.Line, "%s records cannot be served from a zone", dns.TypeToString[h.Rrtype])
			continue
		}
		k := key{owner, h.Rrtype}
		s := sets[k]
		if s == nil {
			s = &rrset{rtype: h.Rrtype, pos: e.pos}
			sets[k] = s
			order = append(order, k)
		}
		// Duplicates (RFC 2181 §5: an RRset has no two equal records) are
		// found by their text with the TTL left out, in constant time.
		ttl := h.Ttl
		h.Ttl = 0
		text := e.rr.String()
		h.Ttl = ttl
		if seen[text] {
			warns.Add(e.pos.File, e.pos.Line, "duplicate record ignored: %s", e.rr.String())
			continue
		}
		seen[text] = true
		s.rrs = append(s.rrs, e.rr)
		z.Records++
	}

	for _, k := range order {
		s := sets[k]
		// RFC 2181 §5.2: one TTL per RRset; use the smallest.
		minTTL, differ := s.rrs[0].Header().Ttl, false
		for _, rr := range s.rrs[1:] {
			if rr.Header().Ttl != minTTL {
				differ = true
				minTTL = min(minTTL, rr.Header().Ttl)
			}
		}
		if differ {
			warns.Add(s.pos.File, s.pos.Line, "%s %s: records have different TTLs; all get %d (RFC 2181 §5.2)",
				k.name, dns.TypeToString[k.rtype], minTTL)
		}
		for _, rr := range s.rrs {
			rr.Header().Ttl = minTTL
		}
		if (k.rtype == dns.TypeCNAME || k.rtype == dns.TypeDNAME || k.rtype == dns.TypeSOA) && len(s.rrs) > 1 {
			errs.Add(s.pos.File, s.pos.Line, "%s has %d %s records; only one is allowed", k.name, len(s.rrs), dns.TypeToString[k.rtype])
		}
		n := z.ensure(k.name)
		n.rrsets = append(n.rrsets, *s)
	}

	z.apex = z.nodes[origin]
	if z.apex == nil || z.apex.get(dns.TypeSOA) == nil {
		errs.Add(file, 0, "zone %s has no SOA record at its apex", origin)
	} else {
		z.SOA = z.apex.get(dns.TypeSOA)[0].(*dns.SOA)
		neg := dns.Copy(z.SOA).(*dns.SOA)
		neg.Hdr.Ttl = min(z.SOA.Hdr.Ttl, z.SOA.Minttl)
		z.NegSOA = neg
	}
	if z.apex == nil || z.apex.get(dns.TypeNS) == nil {
		errs.Add(file, 0, "zone %s has no NS records at its apex", origin)
	}

	// Per-node checks and flags.
	names := make([]string, 0, len(z.nodes))
	for name := range z.nodes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return dns.CountLabel(names[i]) < dns.CountLabel(names[j]) })
	for _, name := range names {
		n := z.nodes[name]
		sort.Slice(n.rrsets, func(i, j int) bool { return n.rrsets[i].rtype < n.rrsets[j].rtype })
		for i := range n.rrsets {
			s := &n.rrsets[i]
			switch s.rtype {
			case dns.TypeCNAME:
				n.cname = s
			case dns.TypeDNAME:
				n.dname = s
			case dns.TypeNS:
				if name != origin {
					n.cut = true
				}
			}
		}
		if n.cname != nil {
			for _, s := range n.rrsets {
				if s.rtype != dns.TypeCNAME && s.rtype != dns.TypeRRSIG && s.rtype != dns.TypeNSEC {
					errs.Add(n.cname.pos.File, n.cname.pos.Line, "%s has a CNAME and other data (%s at line %d); a CNAME must stand alone (RFC 1034 §3.6.2)",
						name, dns.TypeToString[s.rtype], s.pos.Line)
					break
				}
			}
		}
		if n.dname != nil && n.cut {
			errs.Add(n.dname.pos.File, n.dname.pos.Line, "%s has both a DNAME and a delegation (NS)", name)
		}
		// Anything below a delegation point or a DNAME is occluded.
		for p := parent(name, origin); p != ""; p = parent(p, origin) {
			pn := z.nodes[p]
			if pn == nil || (!pn.cut && pn.dname == nil) {
				continue
			}
			n.occluded = true
			for _, s := range n.rrsets {
				if pn.cut && (s.rtype == dns.TypeA || s.rtype == dns.TypeAAAA) {
					continue // glue
				}
				what := "delegation"
				if !pn.cut {
					what = "DNAME"
				}
				warns.Add(s.pos.File, s.pos.Line, "%s %s is below the %s at %s and will never be answered",
					name, dns.TypeToString[s.rtype], what, p)
			}
			break
		}
	}
	if len(errs) > 0 {
		return nil, errs, warns
	}
	z.source = data
	z.fromFile = true
	if hasInclude(data) {
		z.fromFile = false
		// The text alone would read its includes again, which may be the
		// very files that break later: keep the records instead.
		z.source = z.flatten()
	}
	return z, nil, warns
}

// hasInclude reports whether data may hold an $INCLUDE directive (a
// mention in a comment or a string counts too, which only costs a
// flattened Source).
func hasInclude(data []byte) bool {
	return bytes.Contains(bytes.ToUpper(data), []byte("$INCLUDE"))
}

// flatten writes the zone's records as a master file with absolute names,
// one record per line, names in canonical order and RRsets by type.
func (z *Zone) flatten() []byte {
	names := make([]string, 0, len(z.nodes))
	for name, n := range z.nodes {
		if len(n.rrsets) > 0 {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return canonicalLess(names[i], names[j]) })
	var b bytes.Buffer
	fmt.Fprintf(&b, "; zone %s as loaded from %s (which includes other files), written out by steer\n", z.Origin, z.File)
	for _, name := range names {
		for _, s := range z.nodes[name].rrsets {
			for _, rr := range s.rrs {
				b.WriteString(rr.String())
				b.WriteByte('\n')
			}
		}
	}
	return b.Bytes()
}

// canonicalLess orders names by their labels from the root down.
func canonicalLess(a, b string) bool {
	la, lb := dns.SplitDomainName(a), dns.SplitDomainName(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if la[i] != lb[j] {
			return la[i] < lb[j]
		}
	}
	return len(la) < len(lb)
}

// MarkSteered makes name (canonical, inside the zone) a steered name: its
// records of type rtype (A, which covers A and AAAA, or CNAME) come from a
// Steering at query time. It must be called before the zone is published,
// and fails when the zone's own data at name would conflict.
func (z *Zone) MarkSteered(name string, rtype uint16) error {
	if z.Failed != "" {
		return fmt.Errorf("zone %s failed to load (%s)", z.Origin, z.Failed)
	}
	if !dns.IsSubDomain(z.Origin, name) {
		return fmt.Errorf("%s is not in zone %s", name, z.Origin)
	}
	for p := parent(name, z.Origin); p != ""; p = parent(p, z.Origin) {
		if pn := z.nodes[p]; pn != nil && (pn.cut || pn.dname != nil) {
			return fmt.Errorf("%s is below the delegation or DNAME at %s, so it cannot be answered", name, p)
		}
	}
	if n := z.nodes[name]; n != nil {
		if n.cut {
			return fmt.Errorf("%s is a delegation point in %s", name, z.File)
		}
		for _, s := range n.rrsets {
			conflict := s.rtype == dns.TypeCNAME || s.rtype == dns.TypeDNAME
			switch rtype {
			case dns.TypeCNAME:
				conflict = true // a CNAME stands alone
			default:
				conflict = conflict || s.rtype == dns.TypeA || s.rtype == dns.TypeAAAA
			}
			if conflict {
				return fmt.Errorf("%s already has %s records at %s:%d; a steered name's records come from its pools", name, dns.TypeToString[s.rtype], s.pos.File, s.pos.Line)
			}
		}
	}
	z.ensure(name).steered = true
	return nil
}

// ensure returns the node for name, creating it and every missing ancestor up
// to the origin as empty non-terminals.
func (z *Zone) ensure(name string) *node {
	if n := z.nodes[name]; n != nil {
		return n
	}
	n := &node{name: name}
	z.nodes[name] = n
	if p := parent(name, z.Origin); p != "" {
		z.ensure(p)
	}
	return n
}

// parent returns the name one label up from name, or "" at or above origin.
func parent(name, origin string) string {
	if name == origin || len(name) <= len(origin) {
		return ""
	}
	off, end := dns.NextLabel(name, 0)
	if end {
		return ""
	}
	return name[off:]
}

// Serial returns the zone's SOA serial (0 for a failed zone).
func (z *Zone) Serial() uint32 {
	if z.SOA == nil {
		return 0
	}
	return z.SOA.Serial
}

// String describes the zone for logs.
func (z *Zone) String() string {
	if z.Failed != "" {
		return fmt.Sprintf("%s (failed: %s; answered SERVFAIL, from %s)", z.Origin, z.Failed, z.File)
	}
	return fmt.Sprintf("%s (serial %d, %d records, from %s)", z.Origin, z.SOA.Serial, z.Records, z.File)
}
