package zone

import "hash/maphash"

// nodeTable is a zone's index of nodes by owner name: an open-addressing
// hash table (linear probing) of node pointers, the key being the node's
// own name. A Go map from name to node holds each name's string header
// beside the pointer and is sized in powers of two of 1,024-slot tables:
// for a 1 M-record zone (740,000 names) it took 49 MiB, this 8 MiB, and
// the collector scans one pointer per slot instead of two. A lookup does
// not allocate. The zero table is empty and ready to use; it is not safe
// for concurrent writes, and a published zone's is only read.
type nodeTable struct {
	slots []*node // nil or a power of two long; a nil slot is empty
	n     int
}

// tableSeed is the hash seed of every table (one per process).
var tableSeed = maphash.MakeSeed()

func newNodeTable(hint int) nodeTable {
	var t nodeTable
	if hint > 0 {
		t.slots = make([]*node, tableSize(hint))
	}
	return t
}

// tableSize is the number of slots that holds n nodes at most 3/4 full.
func tableSize(n int) int {
	size := 8
	for size*3/4 < n {
		size *= 2
	}
	return size
}

// get returns the node named name, or nil.
func (t *nodeTable) get(name string) *node {
	if len(t.slots) == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(tableSeed, name) & mask; ; i = (i + 1) & mask {
		n := t.slots[i]
		if n == nil || n.name == name {
			return n
		}
	}
}

// put adds n under its name, replacing the node of that name if any.
func (t *nodeTable) put(n *node) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(tableSeed, n.name) & mask; ; i = (i + 1) & mask {
		o := t.slots[i]
		if o == nil {
			t.slots[i] = n
			t.n++
			return
		}
		if o.name == n.name {
			t.slots[i] = n
			return
		}
	}
}

// del removes the node named name, if any. The entries after it in its
// probe run move back so that no lookup stops short of them.
func (t *nodeTable) del(name string) {
	if len(t.slots) == 0 {
		return
	}
	mask := uint64(len(t.slots) - 1)
	i := maphash.String(tableSeed, name) & mask
	for ; ; i = (i + 1) & mask {
		o := t.slots[i]
		if o == nil {
			return
		}
		if o.name == name {
			break
		}
	}
	t.slots[i] = nil
	t.n--
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		home := maphash.String(tableSeed, t.slots[j].name) & mask
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i], t.slots[j] = t.slots[j], nil
			i = j
		}
	}
}

func (t *nodeTable) grow() {
	old := t.slots
	t.slots = make([]*node, max(8, 2*len(old)))
	t.n = 0
	for _, n := range old {
		if n != nil {
			t.put(n)
		}
	}
}

// len returns the number of nodes.
func (t *nodeTable) len() int { return t.n }

// all yields every node with its name, in no fixed order. The loop may
// replace a node by put (the same name), but not add or delete one.
func (t *nodeTable) all(yield func(string, *node) bool) {
	for _, n := range t.slots {
		if n != nil && !yield(n.name, n) {
			return
		}
	}
}

// clone returns a copy of t that may be changed without changing t.
func (t *nodeTable) clone() nodeTable {
	return nodeTable{slots: append([]*node(nil), t.slots...), n: t.n}
}
