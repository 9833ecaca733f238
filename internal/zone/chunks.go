package zone

import (
	"bytes"
	"hash/maphash"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
)

// A reload of a large zone whose file changed in a few places parses only
// those places. The file is cut into chunks: runs of entries, each cut
// before an entry that names its owner (not the previous entry's) and
// whose owner text hashes to 0 modulo chunkEvery, so that where the cuts
// fall depends on the text around them only, and an edit moves no cut
// outside the chunks it touches. A chunk is known by a 128-bit hash of its
// text and the $ORIGIN and $TTL in force where it starts (it parses the
// same wherever it is). Each node notes the chunk of its first record
// (node.chunk, 32 bits of that hash). A reload hashes the new file's
// chunks; the chunks of the old file no longer there, and those of the new
// one not there before, are the change. The new zone is the served one's
// index with the names of the old chunks taken out and the new chunks'
// records parsed in, every other node shared as it is: no record of an
// unchanged chunk is parsed again. Where that cannot give what a whole
// parse gives (a delegation or DNAME added or removed, a name's records
// spread over an unchanged chunk and a changed one, a parse error, a
// signed zone), the reload parses the whole file.

// chunkEvery is how many entries with an owner of their own a chunk holds
// on average: a one-record change parses about this many records.
// minChunked is the smallest file cut into chunks: a smaller one is
// parsed whole on every reload, which takes little longer. Tests lower
// both.
var (
	chunkEvery uint64 = 64
	minChunked        = minSplit
)

// chunkSeeds key the chunk hashes: random per process, as the hashes are
// only compared with others of this process.
var chunkSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

type chunkSum [2]uint64

// id is the 32 bits of the sum a node keeps.
func (s chunkSum) id() uint32 { return uint32(s[0]) }

// cutHash is FNV-1a of an owner's text: where the cuts fall is the same
// in every process (the sums, compared only within one, are keyed).
func cutHash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// chunkSpan is one chunk of a master file.
type chunkSpan struct {
	off, end int // its bytes
	rec      int // the index of its first record in the file
	line     int // the line its first byte is on
	// origin and ttl are the $ORIGIN and $TTL in force where it starts
	// ("" before any $TTL: only the first chunk).
	origin, ttl string
	sum         chunkSum
}

// chunkIndex is what a zone keeps of its file's chunks.
type chunkIndex struct {
	sums []chunkSum // in file order
	// spread lists the chunks (by id) of each name whose records are
	// in more than one chunk.
	spread map[string][]uint32
}

// chunker cuts a master file into chunks as its entries are scanned.
type chunker struct {
	spans     []chunkSpan
	lastOwner []byte
}

func newChunker(origin string) *chunker {
	return &chunker{spans: []chunkSpan{{origin: origin, line: 1}}}
}

// entry sees the entry e, the rec-th record when it is one (rec < 0 for
// a directive), with origin and ttl in force before it.
func (c *chunker) entry(e entry, rec int, origin, ttl string) {
	if rec < 0 || !e.owner {
		return
	}
	same := bytes.Equal(e.tok1, c.lastOwner)
	c.lastOwner = e.tok1
	if same || ttl == "" || cutHash(e.tok1)%chunkEvery != 0 {
		return
	}
	c.spans[len(c.spans)-1].end = e.off
	c.spans = append(c.spans, chunkSpan{off: e.off, rec: rec, line: e.line, origin: origin, ttl: ttl})
}

// done closes the last chunk at end and hashes every chunk of data.
func (c *chunker) done(data []byte) []chunkSpan {
	c.spans[len(c.spans)-1].end = len(data)
	for i := range c.spans {
		s := &c.spans[i]
		for k := range s.sum {
			var h maphash.Hash
			h.SetSeed(chunkSeeds[k])
			h.WriteString(s.origin)
			h.WriteByte(0)
			h.WriteString(s.ttl)
			h.WriteByte(0)
			h.Write(data[s.off:s.end])
			s.sum[k] = h.Sum64()
		}
	}
	return c.spans
}

// cutChunks cuts data, a master file for origin, into chunks. ok is false
// for a file with $INCLUDE or $GENERATE, or an $ORIGIN it cannot resolve:
// such a file is always parsed whole.
func cutChunks(origin string, data []byte) (spans []chunkSpan, ok bool) {
	c := newChunker(origin)
	ok = true
	cur, ttl, rec := origin, "", 0
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
			if cur, ok = nextOrigin(cur, e.tok2); !ok {
				return false
			}
			return true
		}
		c.entry(e, rec, cur, ttl)
		rec++
		return true
	})
	if !ok {
		return nil, false
	}
	return c.done(data), true
}

// nextOrigin is the $ORIGIN an $ORIGIN directive with argument arg sets
// after cur; ok is false when steer does not resolve it as the parser
// does (escapes, quotes, no argument).
func nextOrigin(cur string, arg []byte) (string, bool) {
	if arg == nil || bytes.ContainsAny(arg, "\\\"") {
		return "", false
	}
	o := string(arg)
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
	return o, true
}

// index is what a zone keeps of spans (spread is filled by the parse).
func chunkIndexOf(spans []chunkSpan) *chunkIndex {
	ix := &chunkIndex{sums: make([]chunkSum, len(spans))}
	for i, s := range spans {
		ix.sums[i] = s.sum
	}
	return ix
}

// chunkOf walks the records of a file in order and says which chunk each
// is in.
type chunkOf struct {
	spans []chunkSpan
	i     int
}

// id returns the chunk id of record rec; records come in order.
func (c *chunkOf) id(rec int) uint32 {
	for c.i+1 < len(c.spans) && c.spans[c.i+1].rec <= rec {
		c.i++
	}
	return c.spans[c.i].sum.id()
}

// parseChanged builds the zone of data, the file prev was loaded from as
// it is now, from prev and the chunks of data that prev's file did not
// have (see the top of this file). ok is false when it cannot tell what
// a whole parse would give: the caller then parses the whole file.
func parseChanged(origin, file string, data []byte, prev *Zone) (z *Zone, errs, warns diag.Problems, ok bool) {
	if prev.signer != nil || prev.steerSigner != nil || prev.pre != nil || prev.apex == nil {
		return nil, nil, nil, false // signatures to keep in step: parsed whole
	}
	if text := svcbKeys(data); len(text) != len(data) || len(data) > 0 && &text[0] != &data[0] {
		return nil, nil, nil, false // SVCB keys rewritten: parsed whole
	}
	spans, ok := cutChunks(origin, data)
	if !ok || len(spans) < 2 {
		return nil, nil, nil, false
	}
	old := make(map[chunkSum]int, len(prev.chunks.sums))
	for _, sum := range prev.chunks.sums {
		old[sum]++
	}
	reparse := make([]bool, len(spans))
	for i, sp := range spans {
		if old[sp.sum] > 0 {
			old[sp.sum]--
		} else {
			reparse[i] = true
		}
	}
	// ids are the chunks whose names are taken out of the new zone: the
	// old chunks gone and the new ones, then, until none is added, every
	// new chunk of such an id (ids are 32 bits: two chunks may share one)
	// and every chunk of a name with records in one of them.
	ids := map[uint32]bool{}
	for sum, c := range old {
		if c > 0 {
			ids[sum.id()] = true
		}
	}
	for i, sp := range spans {
		if reparse[i] {
			ids[sp.sum.id()] = true
		}
	}
	if len(ids) == 0 {
		return nil, nil, nil, false // the same chunks (Unchanged keeps such a zone)
	}
	for grew := true; grew; {
		grew = false
		for i, sp := range spans {
			if !reparse[i] && ids[sp.sum.id()] {
				reparse[i], grew = true, true
			}
		}
		for _, l := range prev.chunks.spread {
			if slices.ContainsFunc(l, func(id uint32) bool { return ids[id] }) {
				for _, id := range l {
					if !ids[id] {
						ids[id], grew = true, true
					}
				}
			}
		}
	}
	size := 0
	for i, sp := range spans {
		if reparse[i] {
			size += sp.end - sp.off
		}
	}
	if size > len(data)/4 {
		return nil, nil, nil, false // as cheap to parse it all
	}

	// The served zone's index, less the names of those chunks, and less
	// what MarkSteered made of it (it marks the new zone again).
	z = &Zone{Origin: origin, File: file, nodes: prev.nodes.clone(), files: []string{file}, Records: prev.Records, incremental: true}
	b := builder{z: z, prev: prev, rec: newSlabs(), removed: map[string]bool{}, spread: map[string][]uint32{}}
	cuts := map[string]bool{}
	var taken []string
	for name, n := range prev.nodes.all {
		if n.cut || n.hasDNAME {
			cuts[name] = cuts[name] || n.cut
		}
		switch {
		case len(n.rrsets) > 0 && ids[n.chunk]:
			if n.cut || n.hasDNAME {
				return nil, nil, nil, false // what is occluded below it may change
			}
			z.nodes.del(name)
			b.removed[name] = true
			taken = append(taken, name)
			for _, s := range n.rrsets {
				z.Records -= s.count()
			}
		case n.steered && len(n.rrsets) == 0:
			z.nodes.del(name)
			taken = append(taken, name)
		case n.steered:
			c := *n
			c.steered, c.steerType, c.steerNoV4, c.steerNoV6 = false, 0, false, false
			c.setTemplates(nil)
			c.sig, c.plain, c.wildChild = nil, false, false
			z.nodes.put(&c)
		}
	}

	// The records of the chunks, parsed in file order, each chunk alone
	// with the $ORIGIN and $TTL in force where it starts.
	for i, sp := range spans {
		if !reparse[i] {
			continue
		}
		text := data[sp.off:sp.end]
		var rd io.Reader = bytes.NewReader(text)
		if sp.ttl != "" {
			rd = io.MultiReader(strings.NewReader("$TTL "+sp.ttl+"\n"), rd)
		}
		zp := dns.NewZoneParser(rd, sp.origin, file)
		zp.SetIncludeAllowed(false)
		pos := recordLines(nil, file, text)
		b.chunkID = sp.sum.id()
		count := b.group(zp.Next, func(k int) (uint16, int32) {
			_, l := pos.at(k)
			return 0, l + int32(sp.line-1)
		}, &errs, &warns)
		if b.conflict || b.tooSpread || zp.Err() != nil || count != pos.len() || len(errs) > 0 {
			return nil, nil, nil, false // errors are reported by a whole parse, in its words
		}
	}
	b.finish()
	for _, n := range b.order {
		for _, s := range n.rrsets {
			if s.rtype == dns.TypeDNAME || s.rtype == dns.TypeNS && n.name != origin ||
				s.rtype == dns.TypeRRSIG && n.name == origin {
				return nil, nil, nil, false // a new delegation or DNAME, or signed elsewhere now
			}
		}
	}

	// Empty non-terminals: a name taken out and not parsed again may
	// still have names below it, and the empty names above one taken out
	// may have no other.
	cand := map[string]bool{}
	for _, name := range taken {
		for p := name; p != "" && !cand[p]; p = parent(p, origin) {
			if n := z.nodes.get(p); n != nil && len(n.rrsets) > 0 {
				break
			}
			cand[p] = true
		}
	}
	alive := map[string]bool{}
	if len(cand) > 0 {
		for _, n := range z.nodes.all {
			if len(n.rrsets) == 0 {
				continue
			}
			for p := parent(n.name, origin); p != "" && !alive[p]; p = parent(p, origin) {
				if cand[p] {
					alive[p] = true
				}
			}
		}
	}
	for p := range cand {
		n := z.nodes.get(p)
		switch {
		case alive[p] && n == nil:
			if pn := prev.nodes.get(p); pn != nil && len(pn.rrsets) == 0 && !pn.steered {
				z.nodes.put(pn)
				b.borrowed = append(b.borrowed, pn)
			} else {
				b.newNode(p)
			}
		case !alive[p] && n != nil:
			z.nodes.del(p)
		}
	}
	for p := range cand {
		if z.nodes.get(p) == nil && prev.nodes.get(p) != nil {
			z.gone = append(z.gone, p)
		}
	}

	z.chunks = chunkIndexOf(spans)
	for name, l := range prev.chunks.spread {
		if !slices.ContainsFunc(l, func(id uint32) bool { return ids[id] }) {
			b.spread[name] = l
		}
	}
	z.chunks.spread = b.spread
	b.dups = nil
	z, errs, warns = b.complete(data, time.Time{}, 1, cuts, errs, warns)
	if len(errs) > 0 {
		return nil, nil, nil, false
	}
	return z, nil, warns, true
}
