package policy

import (
	"net/netip"
	"slices"
	"unsafe"
)

// trie is a compiled partition of one address family: a binary trie whose
// leaves hold an outcome index. Sibling leaves with the same outcome are
// merged when built, so a leaf's depth is the widest prefix around an
// address over which the outcome is the same: the ECS scope.
//
// Nodes live in one flat slice; the query path only reads it.
type trie struct {
	nodes []uint32 // pairs: nodes[2n] is the 0 child of node n, nodes[2n+1] the 1 child
	root  uint32
	// table indexes the first strideBits bits when the trie is large, so a
	// walk starts 16 levels down.
	table []uint32
	depth []uint8 // depth of a leaf entry in table, strideBits for inner nodes
	bits  int     // 32 or 128
}

const (
	leafBit    = 1 << 31
	strideBits = 16
	// tableMinNodes is the size above which a trie gets a first-level table.
	tableMinNodes = 1024
	// hugePageSize is the size of a transparent huge page on the
	// platforms steer serves from (x86-64, arm64 with 4 KiB pages): the
	// nodes of a trie that fill one are put on huge pages
	// (backWithHugePages).
	hugePageSize = 2 << 20
)

func isLeaf(ref uint32) bool { return ref&leafBit != 0 }

// Leaf positions (lookup's pos): the index in nodes of the child reference
// that holds the leaf; tablePos|i for a leaf the first-level table entry i
// holds (not walked to, so its position costs no memory read); noPos when
// the root is a leaf.
const (
	tablePos = 1 << 31
	noPos    = ^uint32(0)
)

// lookup returns the outcome index for addr, the position of its leaf and
// the leaf's depth.
func (t *trie) lookup(addr netip.Addr) (outcome, pos uint32, depth int) {
	var b [16]byte
	if t.bits == 32 {
		a4 := addr.As4()
		copy(b[:], a4[:])
	} else {
		b = addr.As16()
	}
	ref, d := t.root, 0
	pos = noPos
	if t.table != nil {
		i := uint32(b[0])<<8 | uint32(b[1])
		ref, d = t.table[i], strideBits
		if ref&leafBit != 0 {
			// Only a leaf's depth needs reading: an inner node is
			// strideBits down (finish), and a lookup on a busy server
			// misses the cache for each of the two arrays it reads.
			d = int(t.depth[i])
		}
		pos = tablePos | i
	}
	for ref&leafBit == 0 {
		bit := uint32(b[d>>3]>>(7-uint(d&7))) & 1
		pos = 2*ref + bit
		ref = t.nodes[pos]
		d++
	}
	return ref &^ leafBit, pos, d
}

// trieBuilder grows a trie.
type trieBuilder struct {
	t trie
}

func (b *trieBuilder) leaf(outcome uint32) uint32 { return outcome | leafBit }

// node returns a reference to an inner node with children zero and one, or
// the shared leaf when both children are the same leaf.
func (b *trieBuilder) node(zero, one uint32) uint32 {
	if zero == one && isLeaf(zero) {
		return zero
	}
	n := uint32(len(b.t.nodes) / 2)
	b.t.nodes = append(b.t.nodes, zero, one)
	return n
}

func (b *trieBuilder) finish(root uint32, bits int) trie {
	t := b.t
	if cap(t.nodes) > 2*len(t.nodes)+64 {
		t.nodes = slices.Clip(append([]uint32(nil), t.nodes...)) // give back what the estimate over-made
	}
	t.root, t.bits = root, bits
	if len(t.nodes)/2 >= tableMinNodes {
		t.table = make([]uint32, 1<<strideBits)
		t.depth = make([]uint8, 1<<strideBits)
		for i := range t.table {
			ref, d := t.root, 0
			for d < strideBits && !isLeaf(ref) {
				bit := uint32(i>>(strideBits-1-d)) & 1
				ref = t.nodes[2*ref+bit]
				d++
			}
			t.table[i], t.depth[i] = ref, uint8(d)
		}
	}
	t.nodes = t.nodes[:len(t.nodes):len(t.nodes)]
	if 4*len(t.nodes) >= hugePageSize {
		backWithHugePages(unsafe.Pointer(&t.nodes[0]), 4*len(t.nodes))
	}
	return t
}

// size returns the number of inner nodes and the bytes the trie holds.
func (t *trie) size() (nodes, bytes int) {
	return len(t.nodes) / 2, 4*len(t.nodes) + 5*len(t.table)
}
