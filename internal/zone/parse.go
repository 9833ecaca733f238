package zone

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

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
	// Now is when a pre-signed zone's signatures must be valid (zero:
	// the current time); see presigned.go.
	Now time.Time
}

// minSplit is the smallest file cut into parts for parallel parsing.
const minSplit = 1 << 20

// nodeSlab is how many nodes are allocated together, at most.
const nodeSlab = 1024

// nextBlock is the size of a builder's next block of some kind, the last
// one having had capacity last: each block twice the last, from first up
// to most, and at least need. A zone's blocks so grow with it: a zone of
// ten records takes blocks of tens of bytes, not of kilobytes (a host of
// 100,000 small zones would otherwise hold mostly empty blocks), and a
// large zone reaches the largest blocks after a few.
func nextBlock(last, first, most, need int) int {
	n := first
	if last > 0 {
		n = min(2*last, most)
	}
	return max(n, need)
}

// ParseWith is Parse with options.
func ParseWith(fsys fs.FS, origin, file string, data []byte, opts ParseOptions) (z *Zone, errs, warns diag.Problems) {
	origin = dns.CanonicalName(origin)
	prev := opts.Previous
	if prev != nil && (prev.Failed != "" || prev.Origin != origin || !prev.fromFile || hasInclude(data)) {
		// Nothing to share, or lines that must stay those of the files
		// included (a shared RRset keeps those of its first load).
		prev = nil
	}
	if prev != nil && prev.chunks != nil && len(data) >= minChunked {
		if z, errs, warns, ok := parseChanged(origin, file, data, prev); ok {
			return z, errs, warns
		}
	}
	text := svcbKeys(data) // data, unless SVCB keys are written as the parser refuses
	var spans []chunkSpan
	src := readRecords(fsys, origin, file, text, opts.Workers, &spans)
	// Sized for three names in four records (a host often has two or
	// more): a table that grows leaves its old slots to the collector.
	// A small zone's names are fewer (its apex holds SOA, NS, MX, TXT
	// and more): half its records, 8 slots and not 16 for ten records.
	expect := src.pos.len()
	hint := expect * 3 / 4
	if expect <= 64 {
		hint = expect / 2
	}
	z = &Zone{Origin: origin, File: file, nodes: newNodeTable(hint), files: src.pos.files}
	b := builder{z: z, prev: prev, rec: newSlabs(), fast: src.fast && prev == nil}
	if spans != nil {
		b.chunks = &chunkOf{spans: spans}
		b.spread = map[string][]uint32{}
		z.chunks = chunkIndexOf(spans)
	}
	count := b.group(src.next, src.pos.at, &errs, &warns)
	b.finish()
	if err := src.err(count); err != nil {
		if err == errParts {
			opts.Workers = 0
			return ParseWith(fsys, origin, file, data, opts)
		}
		if m := parseErrRe.FindStringSubmatch(err.Error()); m != nil {
			f := m[1]
			if f == "" {
				f = file
			}
			n, _ := strconv.Atoi(m[3])
			msg := m[2]
			if f == file && strings.HasPrefix(msg, "bad SVCB key") {
				msg = svcbKeyError(text, n, msg)
			}
			msg = unknownType(msg)
			errs.Add(f, n, "%s", msg)
		} else {
			errs.Add(file, 0, "%v", err)
		}
		return nil, errs, warns
	}
	if z.chunks != nil {
		z.chunks.spread = b.spread
		if count != src.pos.len() || b.tooSpread {
			z.chunks = nil // the scan and the parser disagree (no chunk is known for sure), or see maxSpread
		}
	}
	b.dups = nil
	src = nil
	return b.complete(data, opts.Now, opts.Workers, nil, errs, warns)
}

// group adds the records next yields to the zone's nodes, the i-th (from
// 0) at posOf(i) and in chunk chunkID(i), and returns how many it read.
func (b *builder) group(next func() (dns.RR, bool), posOf func(int) (uint16, int32), errs, warns *diag.Problems) int {
	z, origin := b.z, b.z.Origin
	for i := 0; ; i++ {
		rr, ok := next()
		if !ok {
			return i
		}
		h := rr.Header()
		owner := dns.CanonicalName(h.Name)
		h.Name = owner
		if !isSubDomain(origin, owner) || h.Class != dns.ClassINET ||
			h.Rrtype == dns.TypeSOA && owner != origin ||
			h.Rrtype == dns.TypeOPT || h.Rrtype == dns.TypeTSIG || h.Rrtype == dns.TypeTKEY {
			fi, line := posOf(i)
			f, l := z.files[fi], int(line)
			switch {
			case !isSubDomain(origin, owner):
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
		if b.conflict {
			return i // n may share the served zone's RRsets: not one more write
		}
		h.Name = n.name // one copy of the name for the node and its records
		if b.chunks != nil || b.removed != nil {
			id := b.chunkID
			if b.chunks != nil {
				id = b.chunks.id(i)
			}
			if len(n.rrsets) == 0 {
				n.chunk = id
			} else if n.chunk != id {
				b.spreadTo(n.name, n.chunk, id)
			}
		}
		s := n.set(h.Rrtype)
		if s == nil {
			fi, line := posOf(i)
			set := rrset{rtype: h.Rrtype, file: fi, line: line}
			if n.rrsets == nil {
				n.rrsets = b.sets.one(set)
			} else {
				n.rrsets = append(n.rrsets, set)
			}
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
		} else {
			rr = b.compact(rr)
		}
		if s.list() == nil {
			s.setList(b.rrs.one(rr))
		} else {
			s.setList(append(s.list(), rr))
		}
		z.Records++
	}
}

// spreadTo notes that name has records in the chunks a and b.
func (b *builder) spreadTo(name string, ids ...uint32) {
	l, ok := b.spread[name]
	if !ok && len(b.spread) >= maxSpread {
		b.tooSpread = true // see maxSpread
		return
	}
	for _, id := range ids {
		if !slices.Contains(l, id) {
			l = append(l, id)
		}
	}
	b.spread[name] = l
}

// complete checks and finishes the zone the builder grouped: the RRsets'
// TTLs, the names that may hold one record of a type, CNAMEs that do not
// stand alone, the data below delegations and DNAMEs, the SOA and the
// NS at the apex; then what is shared with the served zone. It looks at
// the nodes the parse made (b.order) and the ones it borrowed. cuts are
// the zone's delegation points and DNAMEs when the caller knows them (a
// reload of the changed chunks), else they are found among those nodes.
func (b *builder) complete(data []byte, now time.Time, workers int, cuts map[string]bool, errs, warns diag.Problems) (z *Zone, _, _ diag.Problems) {
	z, prev, origin, file := b.z, b.prev, b.z.Origin, b.z.File

	for _, n := range b.order {
		var pn *node
		if prev != nil && len(n.rrsets) > 0 {
			pn = prev.nodes.get(n.name)
		}
		for i := range n.rrsets {
			s := &n.rrsets[i]
			// RFC 2181 §5.2: one TTL per RRset; use the smallest.
			minTTL, differ := s.list()[0].Header().Ttl, false
			for _, rr := range s.list()[1:] {
				if rr.Header().Ttl != minTTL {
					differ = true
					minTTL = min(minTTL, rr.Header().Ttl)
				}
			}
			if differ && s.rtype == dns.TypeRRSIG {
				// Each RRSIG has the TTL of the RRset it covers (RFC
				// 4034 §3): not one RRset of its own.
				differ = false
			}
			if differ {
				warns.Add(z.files[s.file], int(s.line), "%s %s: records have different TTLs; all get %d (RFC 2181 §5.2)",
					n.name, dns.TypeToString[s.rtype], minTTL)
				for j, rr := range s.list() {
					if rr.Header().Ttl != minTTL {
						if prev != nil {
							rr = dns.Copy(rr) // it may be the previous zone's
							s.list()[j] = rr
						}
						rr.Header().Ttl = minTTL
					}
				}
			}
			if (s.rtype == dns.TypeCNAME || s.rtype == dns.TypeDNAME || s.rtype == dns.TypeSOA) && len(s.list()) > 1 {
				errs.Add(z.files[s.file], int(s.line), "%s has %d %s records; only one is allowed", n.name, len(s.list()), dns.TypeToString[s.rtype])
			}
			if !b.shareSet(pn, s) {
				// Into blocks that hold only what the zone keeps: the
				// blocks the parse grouped into also hold the first
				// element of every slice an append then moved.
				kept := &b.keptRRs
				if direct[s.rtype] {
					// Most of these end in wire form (store.go): in
					// blocks of their own, which are then garbage
					// whole, not kept for the other types' sake.
					kept = &b.keptDirect
				}
				s.setList(append(kept.many(len(s.list()))[:0], s.list()...))
			}
		}
		if len(n.rrsets) > 0 {
			n.rrsets = append(b.keptSets.many(len(n.rrsets))[:0], n.rrsets...)
		}
		sortSets(n.rrsets)
	}

	z.apex = z.nodes.get(origin)
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
	for _, n := range b.order {
		for i := range n.rrsets {
			switch n.rrsets[i].rtype {
			case dns.TypeCNAME:
				n.hasCNAME = true
			case dns.TypeDNAME:
				n.hasDNAME = true
			case dns.TypeNS:
				n.cut = n.name != origin
			}
		}
	}
	// cuts holds the names below which data is occluded: delegation
	// points (true) and DNAME owners (false). Zones hold few.
	if cuts == nil {
		cuts = map[string]bool{}
		for _, l := range [][]*node{b.order, b.borrowed} {
			for _, n := range l {
				if (n.cut || n.hasDNAME) && z.nodes.get(n.name) == n {
					cuts[n.name] = cuts[n.name] || n.cut
				}
			}
		}
	}
	// A borrowed node is checked already (its records are the same); only
	// what depends on its ancestors may differ, and then it gets a copy.
	for _, pn := range b.borrowed {
		if z.nodes.get(pn.name) != pn || len(cuts) == 0 && !pn.occluded {
			continue
		}
		p, cut := occluder(z, cuts, pn.name)
		if (p != "") != pn.occluded {
			c := z.own(pn)
			c.occluded = p != ""
		}
		occludedWarnings(&warns, z, pn, p, cut)
	}
	for _, n := range b.order {
		name := n.name
		if z.nodes.get(name) != n {
			continue // borrowed after all
		}
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
		if len(cuts) > 0 {
			p, cut := occluder(z, cuts, name)
			n.occluded = p != ""
			occludedWarnings(&warns, z, n, p, cut)
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
		// A node equal to the served zone's in all a parse decides is
		// that very node, read-only here: MarkSteered and Precompile copy
		// it before they would change it (see borrowed). Its own copy is
		// garbage once its whole block of nodes is.
		for _, n := range b.order {
			if z.nodes.get(n.name) != n {
				continue // replaced: borrowed, or materialized again
			}
			if pn := prev.nodes.get(n.name); pn != nil && sameNode(n, pn) {
				z.nodes.put(pn)
			}
		}
		z.apex = z.nodes.get(origin)
	}
	z.prev, z.workers = prev, int32(min(workers, 1<<30))
	z.source, z.sourceSize = data, len(data)
	z.fromFile = true
	if hasInclude(data) {
		z.fromFile = false
		// The text alone would read its includes again, which may be the
		// very files that break later: keep the records instead.
		z.source = z.flatten()
	}
	if z.apex.set(dns.TypeRRSIG) != nil {
		// Signed elsewhere: served as signed, once its chain and
		// signatures are checked.
		if now.IsZero() {
			now = time.Now()
		}
		z.loadPresigned(now, &errs, &warns)
		if len(errs) > 0 {
			return nil, errs, warns
		}
		if hasInclude(data) {
			z.source = z.flatten() // with the NSEC3 records, now out of the nodes
		}
	}
	return z, nil, warns
}

// occluder returns the nearest ancestor of name in cuts (the delegation
// points, true, and DNAME owners, false), or "".
func occluder(z *Zone, cuts map[string]bool, name string) (p string, cut bool) {
	if len(cuts) == 0 {
		return "", false
	}
	for p := parent(name, z.Origin); p != ""; p = parent(p, z.Origin) {
		if c, ok := cuts[p]; ok {
			return p, c
		}
	}
	return "", false
}

// occludedWarnings says which of n's RRsets the occluder p hides.
func occludedWarnings(warns *diag.Problems, z *Zone, n *node, p string, cut bool) {
	if p == "" {
		return
	}
	for _, s := range n.rrsets {
		if cut && (s.rtype == dns.TypeA || s.rtype == dns.TypeAAAA) {
			continue // glue
		}
		what := "delegation"
		if !cut {
			what = "DNAME"
		}
		warns.Add(z.files[s.file], int(s.line), "%s %s is below the %s at %s and will never be answered",
			n.name, dns.TypeToString[s.rtype], what, p)
	}
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
	order []*node // every node made, in order
	// borrowed are the served zone's nodes taken as they are (some may
	// have been materialized since: the zone's map says which hold).
	borrowed []*node
	// last is the node of the previous record, lastPrev the previous
	// zone's node of that name.
	last, lastPrev *node
	ips            []byte // the block ip and ip4 cut addresses from
	names          []byte // the block str cuts names from
	sets           slab[rrset]
	rrs            slab[dns.RR]
	// keptSets and keptRRs hold the final copies of what sets and rrs
	// held while the records were grouped (see complete).
	keptSets   slab[rrset]
	keptRRs    slab[dns.RR]
	keptDirect slab[dns.RR]
	text       slab[string]
	rec        slabs
	// dups holds, for RRsets too large to compare record by record, the
	// text (TTL left out) of the records they hold.
	dups map[*rrset]map[string]bool
	// chunks says which chunk each record is in (a whole parse of a file
	// cut into chunks), or, when nil, chunkID does (a reload of changed
	// chunks, one at a time); spread gets the names with records in
	// more than one.
	chunks  *chunkOf
	chunkID uint32
	spread  map[string][]uint32
	// removed are, on a reload of changed chunks, the names of the
	// served zone taken out of the new one. conflict is set when a name
	// of the chunks parsed has records in a chunk that was not.
	removed  map[string]bool
	conflict bool
	// tooSpread is set when more than maxSpread names have records in
	// several chunks.
	tooSpread bool
	// fast: the records are fastParse's, in blocks that hold records
	// only, nearly all of which the zone keeps (all but duplicates):
	// compact leaves them where they are and copies only their names
	// and data.
	fast bool
}

// maxSpread is the most names with records in several chunks a zone
// keeps track of. A file that lists each name's records in many places
// (sorted by type, say) is not worth the map: it is parsed whole on
// every reload.
const maxSpread = 1 << 14

// node returns the node for owner, making it and its missing ancestors.
// On a reload, a name whose records so far are all the served zone's is
// that zone's node (see finish); when more records come for it, it
// becomes this zone's own (materialize).
func (b *builder) node(owner string) *node {
	if b.last != nil && b.last.name == owner {
		return b.last // the records of a name mostly come together
	}
	b.finish()
	b.last, b.lastPrev = b.z.nodes.get(owner), nil
	if b.prev != nil {
		b.lastPrev = b.prev.nodes.get(owner)
	}
	if b.last != nil {
		if b.removed != nil && b.lastPrev != nil && len(b.last.rrsets) > 0 && !b.removed[owner] {
			b.conflict = true // its other records are in a chunk not parsed
			return b.last
		}
		if b.last == b.lastPrev {
			b.last = b.materialize(b.last)
		}
		return b.last
	}
	if b.lastPrev != nil {
		owner = b.lastPrev.name // one copy of the name for both zones
	} else {
		owner = b.str(owner)
	}
	b.ancestors(owner)
	b.last = b.newNode(owner)
	return b.last
}

// ancestors makes the missing names between owner and the origin: empty
// non-terminals, which are the served zone's own nodes when it has them
// empty too.
func (b *builder) ancestors(owner string) {
	p := parent(owner, b.z.Origin)
	if p == "" || b.z.nodes.get(p) != nil {
		return
	}
	b.ancestors(p)
	if b.prev != nil {
		if pn := b.prev.nodes.get(p); pn != nil && len(pn.rrsets) == 0 && !pn.steered {
			b.z.nodes.put(pn)
			b.borrowed = append(b.borrowed, pn)
			return
		}
	}
	b.newNode(p)
}

func (b *builder) newNode(owner string) *node {
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]node, 0, nextBlock(cap(b.slab), 4, nodeSlab, 1))
	}
	b.slab = append(b.slab, node{name: owner})
	n := &b.slab[len(b.slab)-1]
	b.z.nodes.put(n)
	b.order = append(b.order, n)
	return n
}

// finish ends the run of records of the last name. When they are exactly
// the served zone's for that name, the zone takes the served node itself,
// and the node, RRsets and record slices just made for it go back to
// their blocks, so an unchanged name costs a reload nothing it keeps.
func (b *builder) finish() {
	n, pn := b.last, b.lastPrev
	b.last, b.lastPrev = nil, nil
	if n == nil || pn == nil || n == pn || pn.steered || n.chunk != pn.chunk || !sameRecords(n, pn) {
		return
	}
	b.z.nodes.put(pn)
	b.borrowed = append(b.borrowed, pn)
	k := len(b.order) - 1
	if k < 0 || b.order[k] != n {
		return // made earlier, so what it holds is not at the ends of the blocks
	}
	b.order = b.order[:k]
	for i := len(n.rrsets) - 1; i >= 0; i-- {
		if rrs := n.rrsets[i].list(); cap(rrs) == 1 {
			b.rrs.pop(&rrs[0])
		}
	}
	if len(n.rrsets) == 1 {
		b.sets.pop(&n.rrsets[0])
	}
	slabPop(&b.slab, n)
}

// sameRecords reports whether n holds exactly pn's records, RRset by
// RRset (pn's are sorted by type, n's not yet).
func sameRecords(n, pn *node) bool {
	if len(n.rrsets) != len(pn.rrsets) {
		return false
	}
	for i := range pn.rrsets {
		ps := &pn.rrsets[i]
		s := n.set(ps.rtype)
		if s == nil || len(s.list()) != ps.count() {
			return false
		}
		if ps.inWire() {
			if !equalToWire(n.name, s.list(), ps.wireBytes()) {
				return false
			}
			continue
		}
		for j, rr := range ps.list() {
			if s.list()[j] != rr {
				return false
			}
		}
	}
	return true
}

// materialize makes this zone's own copy of the served node pn, which
// more records are coming for: its RRsets copied so that appending never
// writes into the served zone's.
func (b *builder) materialize(pn *node) *node {
	n := b.newNode(pn.name)
	n.rrsets = make([]rrset, len(pn.rrsets))
	for i, s := range pn.rrsets {
		s.setList(slices.Clip(s.records(pn.name)))
		n.rrsets[i] = s
	}
	n.cut, n.hasCNAME, n.hasDNAME, n.chunk = pn.cut, pn.hasCNAME, pn.hasDNAME, pn.chunk
	return n
}

// The records and the slices a zone keeps are copied into blocks of many
// (slabs) rather than left where the parser made them, among its
// garbage: a block holds only what the zone keeps, so once the parse's
// garbage is collected whole spans of it go back to the system instead
// of staying in use for one small live object each. It also saves the
// allocator's per-object rounding.

// slab hands out values from blocks of up to slabBlock (nextBlock).
type slab[T any] struct {
	buf []T
	// first is the size of the first block (0: 4). The slabs of
	// records of one type start at one: most small zones hold one or
	// two records of most types.
	first int
}

func (s *slab[T]) firstBlock() int {
	if s.first > 0 {
		return s.first
	}
	return 4
}

const slabBlock = 1024

// one returns a one-element slice (capacity one: appending copies it
// out) holding v.
func (s *slab[T]) one(v T) []T {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]T, 0, nextBlock(cap(s.buf), s.firstBlock(), slabBlock, 1))
	}
	s.buf = append(s.buf, v)
	i := len(s.buf) - 1
	return s.buf[i : i+1 : i+1]
}

// many returns n zero values from the slab, with capacity n.
func (s *slab[T]) many(n int) []T {
	if n > slabBlock/4 {
		return make([]T, n)
	}
	if len(s.buf)+n > cap(s.buf) {
		s.buf = make([]T, 0, nextBlock(cap(s.buf), s.firstBlock(), slabBlock, n))
	}
	i := len(s.buf)
	s.buf = s.buf[:i+n]
	return s.buf[i : i+n : i+n]
}

// pop gives back the slab's last value when it is *v.
func (s *slab[T]) pop(v *T) {
	if k := len(s.buf) - 1; k >= 0 && &s.buf[k] == v {
		var zero T
		s.buf[k] = zero
		s.buf = s.buf[:k]
	}
}

// slabPop gives back the last node of a block when it is n.
func slabPop(buf *[]node, n *node) {
	if k := len(*buf) - 1; k >= 0 && &(*buf)[k] == n {
		(*buf)[k] = node{}
		*buf = (*buf)[:k]
	}
}

// ptr returns a pointer to a copy of *v in the slab.
func (s *slab[T]) ptr(v *T) *T { return &s.one(*v)[0] }

// newSlabs returns the record slabs, each starting at one record.
func newSlabs() slabs {
	var s slabs
	s.a.first, s.aaaa.first, s.cname.first, s.txt.first = 1, 1, 1, 1
	s.mx.first, s.ns.first, s.ptr.first, s.srv.first = 1, 1, 1, 1
	return s
}

// slabs holds a slab for each type of record most zones are made of.
type slabs struct {
	a     slab[dns.A]
	aaaa  slab[dns.AAAA]
	cname slab[dns.CNAME]
	txt   slab[dns.TXT]
	mx    slab[dns.MX]
	ns    slab[dns.NS]
	ptr   slab[dns.PTR]
	srv   slab[dns.SRV]
}

// compact returns rr copied into the builder's blocks: the record, its
// address, its name.
func (b *builder) compact(rr dns.RR) dns.RR {
	switch r := rr.(type) {
	case *dns.A:
		r.A = b.ip4(r.A)
		if b.fast {
			return r
		}
		return b.rec.a.ptr(r)
	case *dns.AAAA:
		r.AAAA = b.ip(r.AAAA)
		if b.fast {
			return r
		}
		return b.rec.aaaa.ptr(r)
	case *dns.CNAME:
		r.Target = b.name(r.Target)
		if b.fast {
			return r
		}
		return b.rec.cname.ptr(r)
	case *dns.TXT:
		r.Txt = b.strs(r.Txt)
		if b.fast {
			return r
		}
		return b.rec.txt.ptr(r)
	case *dns.MX:
		r.Mx = b.name(r.Mx)
		if b.fast {
			return r
		}
		return b.rec.mx.ptr(r)
	case *dns.NS:
		r.Ns = b.name(r.Ns)
		if b.fast {
			return r
		}
		return b.rec.ns.ptr(r)
	case *dns.PTR:
		r.Ptr = b.name(r.Ptr)
		if b.fast {
			return r
		}
		return b.rec.ptr.ptr(r)
	case *dns.SRV:
		r.Target = b.name(r.Target)
		if b.fast {
			return r
		}
		return b.rec.srv.ptr(r)
	}
	return rr
}

// str returns s copied into the builder's block of names.
func (b *builder) str(s string) string {
	if s == "" {
		return "" // an empty TXT string, say: nothing to copy
	}
	if len(s) > 256 {
		return strings.Clone(s)
	}
	if len(b.names)+len(s) > cap(b.names) {
		b.names = make([]byte, 0, nextBlock(cap(b.names), 256, 64<<10, len(s)))
	}
	start := len(b.names)
	b.names = append(b.names, s...)
	// The block is only ever appended to: the bytes of a name handed
	// out are never written again.
	return unsafe.String(&b.names[start], len(s))
}

// name returns the domain name s, the target of a record, as the string
// of the zone's node of that name when there is one (a host's MX naming
// itself, a CNAME to a host of the zone), else copied into the block.
func (b *builder) name(s string) string {
	if n := b.z.nodes.get(s); n != nil {
		return n.name
	}
	return b.str(s)
}

// strs returns the strings ss, and the slice, copied into the builder's
// blocks.
func (b *builder) strs(ss []string) []string {
	out := b.text.many(len(ss))
	for i, x := range ss {
		out[i] = b.str(x)
	}
	return out
}

// ip returns ip copied into the builder's block of addresses.
func (b *builder) ip(ip net.IP) net.IP {
	if len(b.ips)+len(ip) > cap(b.ips) {
		b.ips = make([]byte, 0, nextBlock(cap(b.ips), 32, 4096, len(ip)))
	}
	start := len(b.ips)
	b.ips = append(b.ips, ip...)
	return net.IP(b.ips[start:len(b.ips):len(b.ips)])
}

// ip4 returns ip in its 4-byte form, cut from a shared block: the parser
// gives every IPv4 address 16 bytes of its own.
func (b *builder) ip4(ip net.IP) net.IP {
	v4 := ip.To4()
	if v4 == nil {
		return ip
	}
	if len(b.ips)+4 > cap(b.ips) {
		b.ips = make([]byte, 0, nextBlock(cap(b.ips), 32, 4096, 4))
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
	if len(s.list()) < linearDups {
		for _, o := range s.list() {
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
		seen = make(map[string]bool, len(s.list())*2)
		for _, o := range s.list() {
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
	ps := pn.set(h.Rrtype)
	if ps == nil || ps.inWire() {
		return rr // none, or kept in wire form: compared as a whole (shareSet)
	}
	for _, o := range ps.list() {
		if o.Header().Ttl == h.Ttl && dns.IsDuplicate(o, rr) {
			return o
		}
	}
	return rr
}

// shareSet makes s hold the previous zone's very slice when it has the
// same records in the same order, so that Precompile may keep its answer,
// and reports whether it does.
func (b *builder) shareSet(pn *node, s *rrset) bool {
	if pn == nil {
		return false
	}
	ps := pn.set(s.rtype)
	if ps == nil {
		return false
	}
	if ps.inWire() || ps.list() == nil {
		if !ps.inWire() || !equalToWire(pn.name, s.list(), ps.wireBytes()) {
			return false
		}
		s.setWire(ps.wireP()) // its answer, which it is kept as
		return true
	}
	old := ps.list()
	if len(old) != len(s.list()) || len(old) == 0 {
		return false
	}
	for i := range old {
		if old[i] != s.list()[i] {
			return false
		}
	}
	s.setList(old)
	return true
}

// shareSets makes n hold the previous zone's RRsets slice when it has the
// same RRsets, each the very same records.
func (b *builder) shareSets(n *node) {
	pn := b.prev.nodes.get(n.name)
	if pn == nil || len(pn.rrsets) != len(n.rrsets) || len(n.rrsets) == 0 {
		return
	}
	for i := range n.rrsets {
		if pn.rrsets[i].rtype != n.rrsets[i].rtype || !sameSet(&pn.rrsets[i], &n.rrsets[i]) {
			return
		}
	}
	n.rrsets = pn.rrsets
}

// sameNode reports whether the parse made n just as the served zone's
// pn: the same RRsets (the very slice, so the very records), the same
// flags, and pn not steered (MarkSteered decides that anew).
func sameNode(n, pn *node) bool {
	if len(n.rrsets) != len(pn.rrsets) || len(n.rrsets) > 0 && &n.rrsets[0] != &pn.rrsets[0] {
		return false
	}
	return n.cut == pn.cut && n.hasCNAME == pn.hasCNAME && n.hasDNAME == pn.hasDNAME &&
		n.occluded == pn.occluded && !pn.steered && n.chunk == pn.chunk
}

// records yields a master file's records in file order, with the
// position of each.
type records struct {
	pos *lines
	// parts deliver the records of a file cut into parts, each parsed
	// on its own goroutine, in batches, in order.
	parts []chan []dns.RR
	batch []dns.RR
	i     int
	fails []error         // of each part, read once its channel is closed
	zp    *dns.ZoneParser // or the parser of the whole file, read as it goes
	// fast: batch is fastParse's, whose records are in blocks of
	// records only.
	fast bool
}

// errParts says a part did not parse alone: the whole file is parsed
// again by one parser, so that errors read as they do without parts.
var errParts = errors.New("a part of the file did not parse alone")

func (r *records) next() (dns.RR, bool) {
	if r.zp != nil {
		return r.zp.Next()
	}
	for r.i >= len(r.batch) {
		if len(r.parts) == 0 {
			return nil, false
		}
		b, ok := <-r.parts[0]
		if !ok {
			r.parts = r.parts[1:]
			continue
		}
		r.batch, r.i = b, 0
	}
	rr := r.batch[r.i]
	r.batch[r.i] = nil // let the grouping own it
	r.i++
	return rr, true
}

// err is the parse's error once next has returned false; count is how
// many records next gave.
func (r *records) err(count int) error {
	if r.zp != nil {
		return r.zp.Err()
	}
	for _, err := range r.fails {
		if err != nil {
			return errParts
		}
	}
	if count != r.pos.len() {
		return errParts // the scan and the parser disagree: trust neither
	}
	return nil
}

// readRecords reads data's records. A file of at least minSplit bytes
// with no $INCLUDE or $GENERATE is cut into workers parts parsed at once
// while the records of the first are grouped; any error there is found
// again by one parse of the whole file (see errParts), so that errors
// read the same either way. The one parser hands records over as it
// reads them, so that on a reload a record equal to the served zone's is
// garbage at once rather than held with all the others.
//
// A file of at least minSplit bytes is cut into chunks too (spans, nil
// when it cannot be; see chunks.go), so that a reload can parse only the
// chunks that changed. A smaller one is read by fastParse when it can
// vouch for every line (see fastparse.go), else by the ZoneParser.
func readRecords(fsys fs.FS, origin, file string, data []byte, workers int, spans *[]chunkSpan) *records {
	if workers > 1 && len(data) >= minSplit {
		if parts, pos, ok := split(origin, file, data, workers, spans); ok {
			return parseParts(origin, file, data, parts, pos)
		}
	}
	if len(data) >= minChunked {
		*spans, _ = cutChunks(origin, data)
	} else if rrs, at, ok := fastParse(origin, data); ok {
		return &records{pos: &lines{files: []string{file}, line: at}, batch: rrs, fast: true}
	}
	zp := dns.NewZoneParser(bytes.NewReader(data), origin, file)
	zp.SetIncludeAllowed(true)
	if fsys != nil {
		zp.SetIncludeFS(fsys)
	}
	return &records{pos: recordLines(fsys, file, data), zp: zp}
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
func split(origin, file string, data []byte, n int, spans *[]chunkSpan) (parts []part, positions *lines, ok bool) {
	ok = true
	cur, ttl := origin, ""
	c := newChunker(origin)
	next := len(data) / n
	parts = []part{{origin: origin}}
	positions = &lines{files: []string{file}, line: make([]int32, 0, bytes.Count(data, []byte{'\n'}))}
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
			cur, ok = nextOrigin(cur, e.tok2)
			return ok
		}
		c.entry(e, len(positions.line), cur, ttl)
		if e.owner && ttl != "" && e.off >= next && len(parts) < n {
			parts[len(parts)-1].end = e.off
			parts = append(parts, part{off: e.off, origin: cur, ttl: ttl})
			next = e.off + len(data)/n
		}
		positions.line = append(positions.line, int32(e.line))
		return true
	})
	if !ok || len(parts) < 2 {
		return nil, nil, false
	}
	parts[len(parts)-1].end = len(data)
	*spans = c.done(data)
	return parts, positions, true
}

// partBatch is how many records a part hands over at a time.
const partBatch = 4096

// parseParts starts a parser for each part.
func parseParts(origin, file string, data []byte, parts []part, pos *lines) *records {
	r := &records{pos: pos, parts: make([]chan []dns.RR, len(parts)), fails: make([]error, len(parts))}
	for i, p := range parts {
		c := make(chan []dns.RR, 64)
		r.parts[i] = c
		go func() {
			defer close(c)
			var rd io.Reader = bytes.NewReader(data[p.off:p.end])
			o := origin
			if p.off > 0 {
				// The part starts where these are in force; the
				// header adds lines, so only a clean parse is used.
				rd = io.MultiReader(strings.NewReader("$TTL "+p.ttl+"\n"), rd)
				o = p.origin
			}
			zp := dns.NewZoneParser(rd, o, file)
			zp.SetIncludeAllowed(false)
			batch := make([]dns.RR, 0, partBatch)
			for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
				batch = append(batch, rr)
				if len(batch) == partBatch {
					c <- batch
					batch = make([]dns.RR, 0, partBatch)
				}
			}
			if len(batch) > 0 {
				c <- batch
			}
			r.fails[i] = zp.Err() // read after the channel is closed
		}()
	}
	return r
}

// notTTL is miekg/dns's error for a record whose type it does not know:
// it takes the word for a TTL, having found no type.
// Where the TTL and class come first it says so itself.
var notTTL = regexp.MustCompile(`^(?:not a TTL|unknown RR type): "([A-Za-z][A-Za-z0-9-]*)"$`)

// unknownType says what an error about a type mnemonic miekg/dns does not
// know (ALIAS, a server's own; WALLET, newer than it) means, and how to
// write the record anyway; other messages are returned as they are.
func unknownType(msg string) string {
	m := notTTL.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	return fmt.Sprintf("unknown record type %q: write a type steer does not know by number, as TYPEnnn with \\# data (RFC 3597 §5)", m[1])
}
