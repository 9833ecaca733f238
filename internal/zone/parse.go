package zone

import (
	"bytes"
	"io"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
)

// This file reads a master file into a zone's nodes. The text is parsed by
// miekg/dns's ZoneParser; what steer adds is the cost around it: a large
// file is cut at entry boundaries and its parts parsed at once (start-up
// only), records are grouped into nodes in one pass with no per-record
// index, and on a reload records equal to ones the previous zone holds are
// shared with it instead of kept twice.

// ParseOptions tune ParseWith.
type ParseOptions struct {
	// Workers is how many parts of a large file are parsed at once; 0 or
	// 1 parses in the calling goroutine. A reload should use 1 so that
	// answering keeps the other cores.
	Workers int
	// Previous is the zone served until now for the same origin, if any.
	// Records and RRsets equal to its ones are shared with it, and so
	// are the wire answers Precompile made for them: a reload that
	// changes a few records of a large zone holds little more than one
	// copy. Previous must be a published zone; it is only read.
	Previous *Zone
}

// minSplit is the smallest file cut into parts for parallel parsing.
const minSplit = 1 << 20

// nodeSlab is how many nodes are allocated together.
const nodeSlab = 1024

// ParseWith is Parse with options.
func ParseWith(fsys fs.FS, origin, file string, data []byte, opts ParseOptions) (z *Zone, errs, warns diag.Problems) {
	origin = dns.CanonicalName(origin)
	prev := opts.Previous
	if prev != nil && (prev.Failed != "" || prev.Origin != origin || !prev.fromFile || hasInclude(data)) {
		// Nothing to share, or lines that must stay those of the files
		// included (a shared RRset keeps those of its first load).
		prev = nil
	}
	rrs, positions, err := readRecords(fsys, origin, file, data, opts.Workers)
	if err != nil {
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
	// Sized for a name per record and some empty non-terminals: a map
	// that grows while it fills holds its old tables too.
	z = &Zone{Origin: origin, File: file, nodes: make(map[string]*node, len(rrs)+len(rrs)/8+1), files: []string{file}}
	b := builder{z: z, prev: prev}
	fileIdx := map[string]uint16{file: 0}
	posOf := func(i int) (uint16, int32) {
		if i >= len(positions) {
			return 0, 0
		}
		p := positions[i]
		fi, ok := fileIdx[p.File]
		if !ok {
			fi = uint16(len(z.files))
			fileIdx[p.File] = fi
			z.files = append(z.files, p.File)
		}
		return fi, int32(p.Line)
	}
	for i, rr := range rrs {
		h := rr.Header()
		owner := dns.CanonicalName(h.Name)
		h.Name = owner
		if !dns.IsSubDomain(origin, owner) || h.Class != dns.ClassINET ||
			h.Rrtype == dns.TypeSOA && owner != origin ||
			h.Rrtype == dns.TypeOPT || h.Rrtype == dns.TypeTSIG || h.Rrtype == dns.TypeTKEY {
			fi, line := posOf(i)
			f, l := z.files[fi], int(line)
			switch {
			case !dns.IsSubDomain(origin, owner):
				errs.Add(f, l, "%s is outside the zone %s", owner, origin)
			case h.Class != dns.ClassINET:
				errs.Add(f, l, "%s: class %s is not served (only IN)", owner, dns.ClassToString[h.Class])
			case h.Rrtype == dns.TypeSOA:
				errs.Add(f, l, "SOA record for %s is not at the zone apex %s", owner, origin)
			default:
				errs.Add(f, l, "%s records cannot be served from a zone", dns.TypeToString[h.Rrtype])
			}
			continue
		}
		n := b.node(owner)
		s := n.set(h.Rrtype)
		if s == nil {
			fi, line := posOf(i)
			n.rrsets = append(n.rrsets, rrset{rtype: h.Rrtype, file: fi, line: line})
			s = &n.rrsets[len(n.rrsets)-1]
		}
		// Duplicates (RFC 2181 §5: an RRset has no two equal records)
		// are compared with the TTL left out.
		if b.duplicate(s, rr) {
			fi, line := posOf(i)
			warns.Add(z.files[fi], int(line), "duplicate record ignored: %s", rr.String())
			continue
		}
		if sr := b.shared(n, rr); sr != rr {
			rr = sr
		} else if a, ok := rr.(*dns.A); ok {
			a.A = b.ip4(a.A)
		}
		s.rrs = append(s.rrs, rr)
		z.Records++
	}
	b.dups = nil
	positions, rrs = nil, nil

	for _, n := range b.order {
		var pn *node
		if prev != nil && len(n.rrsets) > 0 {
			pn = prev.nodes[n.name]
		}
		for i := range n.rrsets {
			s := &n.rrsets[i]
			// RFC 2181 §5.2: one TTL per RRset; use the smallest.
			minTTL, differ := s.rrs[0].Header().Ttl, false
			for _, rr := range s.rrs[1:] {
				if rr.Header().Ttl != minTTL {
					differ = true
					minTTL = min(minTTL, rr.Header().Ttl)
				}
			}
			if differ {
				warns.Add(z.files[s.file], int(s.line), "%s %s: records have different TTLs; all get %d (RFC 2181 §5.2)",
					n.name, dns.TypeToString[s.rtype], minTTL)
				for j, rr := range s.rrs {
					if rr.Header().Ttl != minTTL {
						if prev != nil {
							rr = dns.Copy(rr) // it may be the previous zone's
							s.rrs[j] = rr
						}
						rr.Header().Ttl = minTTL
					}
				}
			}
			if (s.rtype == dns.TypeCNAME || s.rtype == dns.TypeDNAME || s.rtype == dns.TypeSOA) && len(s.rrs) > 1 {
				errs.Add(z.files[s.file], int(s.line), "%s has %d %s records; only one is allowed", n.name, len(s.rrs), dns.TypeToString[s.rtype])
			}
			b.shareSet(pn, s)
		}
		sortSets(n.rrsets)
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

	// Per-node flags first, then the checks that look at ancestors.
	cuts := 0
	for _, n := range b.order {
		for i := range n.rrsets {
			s := &n.rrsets[i]
			switch s.rtype {
			case dns.TypeCNAME:
				n.hasCNAME = true
			case dns.TypeDNAME:
				n.hasDNAME = true
				cuts++
			case dns.TypeNS:
				if n.name != origin {
					n.cut = true
					cuts++
				}
			}
		}
	}
	for _, n := range b.order {
		name := n.name
		if n.hasCNAME {
			for _, s := range n.rrsets {
				if s.rtype != dns.TypeCNAME && s.rtype != dns.TypeRRSIG && s.rtype != dns.TypeNSEC {
					errs.Add(z.files[n.set(dns.TypeCNAME).file], int(n.set(dns.TypeCNAME).line), "%s has a CNAME and other data (%s at line %d); a CNAME must stand alone (RFC 1034 §3.6.2)",
						name, dns.TypeToString[s.rtype], s.line)
					break
				}
			}
		}
		if n.hasDNAME && n.cut {
			errs.Add(z.files[n.set(dns.TypeDNAME).file], int(n.set(dns.TypeDNAME).line), "%s has both a DNAME and a delegation (NS)", name)
		}
		// Anything below a delegation point or a DNAME is occluded.
		for p := parent(name, origin); p != "" && cuts > 0; p = parent(p, origin) {
			pn := z.nodes[p]
			if pn == nil || (!pn.cut && !pn.hasDNAME) {
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
				warns.Add(z.files[s.file], int(s.line), "%s %s is below the %s at %s and will never be answered",
					name, dns.TypeToString[s.rtype], what, p)
			}
			break
		}
	}
	if len(errs) > 0 {
		return nil, errs, warns
	}
	if prev != nil {
		// Every message that cites a line is out: a node whose RRsets
		// are all the previous zone's may now hold its very slice (with
		// the lines of that load; see Zone.line).
		for _, n := range b.order {
			b.shareSets(n)
		}
		z.shares = true
	}
	z.prev, z.workers = prev, opts.Workers
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

// sortSets orders a node's RRsets by type (insertion sort: nodes hold few).
func sortSets(s []rrset) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].rtype < s[j-1].rtype; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// builder groups a zone's records into nodes.
type builder struct {
	z     *Zone
	prev  *Zone
	slab  []node
	order []*node // every node, in the order it was made
	// last is the node of the previous record, lastPrev the previous
	// zone's node of that name.
	last, lastPrev *node
	ips            []byte // the block ip4 cuts addresses from
	// dups holds, for RRsets too large to compare record by record, the
	// text (TTL left out) of the records they hold.
	dups map[*rrset]map[string]bool
}

// node returns the node for owner, making it and its missing ancestors.
func (b *builder) node(owner string) *node {
	if b.last != nil && b.last.name == owner {
		return b.last // the records of a name mostly come together
	}
	b.last, b.lastPrev = b.z.nodes[owner], nil
	if b.prev != nil {
		b.lastPrev = b.prev.nodes[owner]
	}
	if b.last != nil {
		return b.last
	}
	if b.lastPrev != nil {
		owner = b.lastPrev.name // one copy of the name for both zones
	}
	b.last = b.newNode(owner)
	return b.last
}

func (b *builder) newNode(owner string) *node {
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]node, 0, nodeSlab)
	}
	b.slab = append(b.slab, node{name: owner})
	n := &b.slab[len(b.slab)-1]
	b.z.nodes[owner] = n
	b.order = append(b.order, n)
	if p := parent(owner, b.z.Origin); p != "" && b.z.nodes[p] == nil {
		b.newNode(p)
	}
	return n
}

// ip4 returns ip in its 4-byte form, cut from a shared block: the parser
// gives every IPv4 address 16 bytes of its own.
func (b *builder) ip4(ip net.IP) net.IP {
	v4 := ip.To4()
	if v4 == nil {
		return ip
	}
	if len(b.ips)+4 > cap(b.ips) {
		b.ips = make([]byte, 0, 4096)
	}
	b.ips = append(b.ips, v4...)
	return net.IP(b.ips[len(b.ips)-4 : len(b.ips) : len(b.ips)])
}

// set returns the node's RRset of type t, or nil.
func (n *node) set(t uint16) *rrset {
	for i := range n.rrsets {
		if n.rrsets[i].rtype == t {
			return &n.rrsets[i]
		}
	}
	return nil
}

// linearDups is the RRset size up to which duplicates are found by
// comparing records pairwise.
const linearDups = 32

func (b *builder) duplicate(s *rrset, rr dns.RR) bool {
	if len(s.rrs) < linearDups {
		for _, o := range s.rrs {
			if dns.IsDuplicate(o, rr) {
				return true
			}
		}
		return false
	}
	if b.dups == nil {
		b.dups = map[*rrset]map[string]bool{}
	}
	seen := b.dups[s]
	if seen == nil {
		seen = make(map[string]bool, len(s.rrs)*2)
		for _, o := range s.rrs {
			seen[noTTL(o)] = true
		}
		b.dups[s] = seen
	}
	text := noTTL(rr)
	if seen[text] {
		return true
	}
	seen[text] = true
	return false
}

// noTTL is rr's text with the TTL left out.
func noTTL(rr dns.RR) string {
	h := rr.Header()
	ttl := h.Ttl
	h.Ttl = 0
	text := rr.String()
	h.Ttl = ttl
	return text
}

// shared returns the previous zone's record equal to rr (TTL included),
// or rr itself.
func (b *builder) shared(n *node, rr dns.RR) dns.RR {
	pn := b.lastPrev
	if b.prev == nil || b.last != n || pn == nil {
		return rr
	}
	h := rr.Header()
	for _, o := range pn.get(h.Rrtype) {
		if o.Header().Ttl == h.Ttl && dns.IsDuplicate(o, rr) {
			return o
		}
	}
	return rr
}

// shareSet makes s hold the previous zone's very slice when it has the
// same records in the same order, so that Precompile may keep its answer.
func (b *builder) shareSet(pn *node, s *rrset) {
	if pn == nil {
		return
	}
	old := pn.get(s.rtype)
	if len(old) != len(s.rrs) {
		return
	}
	for i := range old {
		if old[i] != s.rrs[i] {
			return
		}
	}
	s.rrs = old
}

// shareSets makes n hold the previous zone's RRsets slice when it has the
// same RRsets, each the very same records.
func (b *builder) shareSets(n *node) {
	pn := b.prev.nodes[n.name]
	if pn == nil || len(pn.rrsets) != len(n.rrsets) || len(n.rrsets) == 0 {
		return
	}
	for i := range n.rrsets {
		if pn.rrsets[i].rtype != n.rrsets[i].rtype || !sameSlice(pn.rrsets[i].rrs, n.rrsets[i].rrs) {
			return
		}
	}
	n.rrsets = pn.rrsets
}

// readRecords parses data into its records, in file order, with the
// position of each. A file of at least minSplit bytes with no $INCLUDE
// or $GENERATE is cut into workers parts parsed at once; any error there
// is found again by one parse of the whole file, so that errors read the
// same either way.
func readRecords(fsys fs.FS, origin, file string, data []byte, workers int) ([]dns.RR, []Pos, error) {
	if workers > 1 && len(data) >= minSplit {
		if parts, positions, ok := split(origin, file, data, workers); ok {
			rrs, err := parseParts(origin, file, data, parts)
			if err == nil && len(rrs) == len(positions) {
				return rrs, positions, nil
			}
		}
	}
	zp := dns.NewZoneParser(bytes.NewReader(data), origin, file)
	zp.SetIncludeAllowed(true)
	if fsys != nil {
		zp.SetIncludeFS(fsys)
	}
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, nil, err
	}
	// Only a file that parsed gets its records' lines, and only as many
	// as the parser returned: the scan never does more work than the
	// parse did.
	return rrs, recordPositions(fsys, file, data, 0, len(rrs)), nil
}

// part is a run of a master file parsed on its own: the text from off to
// end, read with the $ORIGIN and $TTL in force where it starts.
type part struct {
	off, end int
	origin   string
	ttl      string // the last $TTL value before off, as written
}

// split cuts data into about n parts at entries that name their owner
// after a $TTL directive (so no part depends on the previous record's
// owner or TTL), and returns every record's position. It gives up (ok
// false) on $INCLUDE, $GENERATE or an $ORIGIN it cannot resolve, which
// the one parser of the whole file handles.
func split(origin, file string, data []byte, n int) (parts []part, positions []Pos, ok bool) {
	ok = true
	cur, ttl := origin, ""
	next := len(data) / n
	parts = []part{{origin: origin}}
	positions = make([]Pos, 0, bytes.Count(data, []byte{'\n'}))
	scanEntries(data, func(e entry) bool {
		switch directive(e.tok1) {
		case "$INCLUDE", "$GENERATE":
			ok = false
			return false
		case "$TTL":
			if e.tok2 == nil {
				ok = false
				return false
			}
			ttl = string(e.tok2)
			return true
		case "$ORIGIN":
			if e.tok2 == nil || bytes.ContainsAny(e.tok2, "\\\"") {
				ok = false
				return false
			}
			o := string(e.tok2)
			switch {
			case o == "@":
				o = cur
			case !strings.HasSuffix(o, "."):
				if cur == "." {
					o += "."
				} else {
					o += "." + cur
				}
			}
			cur = o
			return true
		}
		if e.owner && ttl != "" && e.off >= next && len(parts) < n {
			parts[len(parts)-1].end = e.off
			parts = append(parts, part{off: e.off, origin: cur, ttl: ttl})
			next = e.off + len(data)/n
		}
		positions = append(positions, Pos{File: file, Line: e.line})
		return true
	})
	if !ok || len(parts) < 2 {
		return nil, nil, false
	}
	parts[len(parts)-1].end = len(data)
	return parts, positions, true
}

// parseParts parses the parts at once and joins their records in order.
func parseParts(origin, file string, data []byte, parts []part) ([]dns.RR, error) {
	out := make([][]dns.RR, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			var r io.Reader = bytes.NewReader(data[p.off:p.end])
			o := origin
			if p.off > 0 {
				// The part starts where these are in force; the
				// header adds lines, so only a clean parse is used.
				r = io.MultiReader(strings.NewReader("$TTL "+p.ttl+"\n"), r)
				o = p.origin
			}
			zp := dns.NewZoneParser(r, o, file)
			zp.SetIncludeAllowed(false)
			var rrs []dns.RR
			if i > 0 {
				rrs = make([]dns.RR, 0, bytes.Count(data[p.off:p.end], []byte{'\n'}))
			}
			for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
				rrs = append(rrs, rr)
			}
			out[i], errs[i] = rrs, zp.Err()
		})
	}
	wg.Wait()
	total := 0
	for i := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		total += len(out[i])
	}
	rrs := make([]dns.RR, 0, total)
	for _, o := range out {
		rrs = append(rrs, o...)
	}
	return rrs, nil
}
