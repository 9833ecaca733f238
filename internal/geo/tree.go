package geo

import (
	"bytes"
	"fmt"
	"sync"
)

// A database's search tree read directly, as the MaxMind DB format
// describes it: NodeCount nodes of two records of RecordSize bits each; a
// record below NodeCount is a node, equal to it no data, above it a
// pointer into the data section (after a 16-byte separator). Listing a
// partition this way instead of with the reader's Networks iterator
// (which computes and maps an address and prefix for every network, and
// is walked twice: a count, then the list) was most of a one-policy
// start-up's CPU; and the IPv4 and IPv6 halves of the tree are listed at
// once, on two cores.
type tree struct {
	buf       []byte
	nodeCount uint
	size      uint // bits a record: 24, 28 or 32
	dataSize  uint // bytes of the data section
}

// metadataMarker starts the metadata section, at the end of the file.
var metadataMarker = []byte("\xAB\xCD\xEFMaxMind.com")

// tree returns d's search tree, or false when d's bytes are not at hand
// or its shape is not one read here.
func (d *Database) tree() (*tree, bool) {
	md := &d.r.Metadata
	if d.raw == nil || md.NodeCount == 0 || md.RecordSize != 24 && md.RecordSize != 28 && md.RecordSize != 32 {
		return nil, false
	}
	end := bytes.LastIndex(d.raw, metadataMarker)
	start := md.NodeCount*md.RecordSize/4 + 16
	if end < 0 || uint(end) < start {
		return nil, false
	}
	return &tree{buf: d.raw, nodeCount: md.NodeCount, size: md.RecordSize, dataSize: uint(end) - start}, true
}

// children returns node n's two records (n < nodeCount, which the file's
// size bounds: OpenBytes checked it).
func (t *tree) children(n uint) (uint, uint) {
	b := t.buf
	switch t.size {
	case 24:
		o := n * 6
		b = b[o : o+6]
		return uint(b[0])<<16 | uint(b[1])<<8 | uint(b[2]), uint(b[3])<<16 | uint(b[4])<<8 | uint(b[5])
	case 28:
		o := n * 7
		b = b[o : o+7]
		return uint(b[3]&0xF0)<<20 | uint(b[0])<<16 | uint(b[1])<<8 | uint(b[2]),
			uint(b[3]&0x0F)<<24 | uint(b[4])<<16 | uint(b[5])<<8 | uint(b[6])
	default:
		o := n * 8
		b = b[o : o+8]
		return uint(b[0])<<24 | uint(b[1])<<16 | uint(b[2])<<8 | uint(b[3]), uint(b[4])<<24 | uint(b[5])<<16 | uint(b[6])<<8 | uint(b[7])
	}
}

// lister lists the networks of part of a tree in address order. A leaf's
// info is, while listing, 0 for no data, else 1 + the index in offs of
// its record's data offset (offs in order of first appearance), so that
// the records are decoded and interned afterwards in the order a
// sequential listing meets them, whichever lister ran first.
type lister struct {
	t        *tree
	counting bool // count the leaves only
	n        int
	v4       []leaf4
	v6       []leaf6
	offs     []uint
	ids      map[uint]uint32
	lastOff  uint
	lastID   uint32
	bad      bool // not as expected: the caller lists with the reader
}

// record returns the listing's info for a leaf record rec.
func (l *lister) record(rec uint) uint32 {
	t := l.t
	if rec == t.nodeCount {
		return 0
	}
	if rec < t.nodeCount+16 || rec-t.nodeCount-16 >= t.dataSize {
		l.bad = true // a pointer outside the data section
		return 0
	}
	if l.counting {
		return 0
	}
	off := rec - t.nodeCount - 16
	if l.lastID != 0 && off == l.lastOff { // neighbours often share a record
		return l.lastID
	}
	id, ok := l.ids[off]
	if !ok {
		l.offs = append(l.offs, off)
		id = uint32(len(l.offs))
		l.ids[off] = id
	}
	l.lastOff, l.lastID = off, id
	return id
}

// walk4 lists the IPv4 subtree below record rec, at depth bits from the
// subtree's root and address a.
func (l *lister) walk4(rec uint, depth int, a uint32) {
	if l.bad {
		return
	}
	if rec < l.t.nodeCount {
		if depth == 32 {
			l.bad = true // deeper than an address
			return
		}
		x, y := l.t.children(rec)
		l.walk4(x, depth+1, a)
		l.walk4(y, depth+1, a|1<<(31-depth))
		return
	}
	id := l.record(rec)
	if l.counting {
		l.n++
		return
	}
	l.v4 = append(l.v4, leaf4{start: a, info: id, bits: uint8(depth)})
}

// walk6 lists the IPv6 tree below record rec at depth and address
// (hi, lo), but for ::/96, the IPv4 subtree (walk4's).
func (l *lister) walk6(rec uint, depth int, hi, lo uint64) {
	if l.bad || depth == 96 && hi == 0 && lo == 0 {
		return
	}
	if rec < l.t.nodeCount {
		if depth == 128 {
			l.bad = true
			return
		}
		x, y := l.t.children(rec)
		l.walk6(x, depth+1, hi, lo)
		if depth < 64 {
			hi |= 1 << (63 - depth)
		} else {
			lo |= 1 << (127 - depth)
		}
		l.walk6(y, depth+1, hi, lo)
		return
	}
	id := l.record(rec)
	if l.counting {
		l.n++
		return
	}
	l.v6 = append(l.v6, leaf6{hi: hi, lo: lo, info: id, bits: uint8(depth)})
}

// treePartition is networksPartition read from d's tree directly: the
// same leaves, infos and info indexes (TestTreePartitionIsTheListing).
// ok is false when the tree is not of the shape read here (an IPv6
// database without an IPv4 subtree at ::/96, a record size other than 24,
// 28 or 32, a pointer outside the data section, a tree deeper than an
// address): then the caller lists with the reader, which says what is
// wrong. workers above one lists IPv4 and IPv6 at once.
func (d *Database) treePartition(workers int) (p *Partition, ok bool, err error) {
	t, ok := d.tree()
	if !ok {
		return nil, false, nil
	}
	root4 := uint(0) // an IPv4 database's root
	if d.IPVersion == 6 {
		for range 96 { // the IPv4 subtree: ::/96
			if root4 >= t.nodeCount {
				return nil, false, nil
			}
			root4, _ = t.children(root4)
		}
		if root4 >= t.nodeCount {
			return nil, false, nil
		}
	}
	l4 := &lister{t: t, ids: map[uint]uint32{}}
	l6 := &lister{t: t, ids: map[uint]uint32{}}
	// Each list is counted first and made once at its size: grown by
	// appends, a list of a million networks would hold its old copies
	// too (the start-up's peak). The count is a walk of the tree without
	// the records, a small part of the listing.
	list4 := func() {
		l4.counting = true
		l4.walk4(root4, 0, 0)
		l4.counting = false
		l4.v4 = make([]leaf4, 0, l4.n)
		l4.walk4(root4, 0, 0)
	}
	list6 := func() {
		if d.IPVersion != 6 {
			return
		}
		l6.counting = true
		l6.walk6(0, 0, 0, 0)
		l6.counting = false
		l6.v6 = make([]leaf6, 0, l6.n)
		l6.walk6(0, 0, 0, 0)
	}
	if workers > 1 && d.IPVersion == 6 {
		var wg sync.WaitGroup
		wg.Go(list4)
		list6()
		wg.Wait()
	} else {
		list4()
		list6()
	}
	if l4.bad || l6.bad {
		return nil, false, nil
	}
	p = &Partition{index: map[infoKey]uint32{}, v4in6: d.IPVersion == 6}
	var empty Info
	empty.finish()
	emptyIdx := p.intern(&empty)
	// The records in the order a sequential listing meets them: IPv4's,
	// then IPv6's, each in address order.
	byOffset := map[uint]uint32{}
	infos := func(l *lister) ([]uint32, error) {
		m := make([]uint32, len(l.offs)+1)
		m[0] = emptyIdx
		for i, off := range l.offs {
			idx, ok := byOffset[off]
			if !ok {
				rec, err := d.decode(d.r.LookupOffset(uintptr(off)))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", d.Name, err)
				}
				var info Info
				info.add(&rec)
				info.finish()
				idx = p.intern(&info)
				byOffset[off] = idx
			}
			m[i+1] = idx
		}
		return m, nil
	}
	m4, err := infos(l4)
	if err != nil {
		return nil, false, err
	}
	m6, err := infos(l6)
	if err != nil {
		return nil, false, err
	}
	for i := range l4.v4 {
		l4.v4[i].info = m4[l4.v4[i].info]
	}
	for i := range l6.v6 {
		l6.v6[i].info = m6[l6.v6[i].info]
	}
	p.v4, p.v6 = l4.v4, l6.v6
	if d.IPVersion == 4 {
		p.v6 = []leaf6{{info: emptyIdx}} // an IPv4 database knows nothing of IPv6
	}
	p.index = nil
	return p, p.ordered(), nil
}
