package policy

import (
	"net/netip"
	"unsafe"
)

// Ahead is the walk of a record's partition for a client, made ahead of
// the decision one memory read at a time, so that the reads the
// decision's lookup makes are in cache when it comes.
//
// The UDP reader starts one for each of the next few datagrams of a batch
// while it answers the current one, and steps each once per datagram
// answered: under load the partition (with the 1 M-network database, a
// 256 KiB first-level table and 3 MB of nodes) is not in cache when a
// steered query comes, since the kernel's work between batches evicts
// it, and waiting for those reads was the largest single cost of a
// steered answer in user space (perf on bench/run.sh's pinned server).
// A step reads only what the previous one asked the processor to fetch,
// so it seldom waits; a wrong guess (another record, another client)
// costs a few useless fetches, nothing else.
type Ahead struct {
	t   *trie
	ref uint32 // the table index (d < 0), else the node whose children were fetched
	d   int
	b   [16]byte
}

// Ahead starts the walk of r's partition for client (a guess: the bytes
// of its address past the ECS source length may be zero): it asks for
// the first-level table's entry. A partition small enough to have no
// table is left alone.
func (r *Record) Ahead(client netip.Addr) Ahead {
	var a Ahead
	t := &r.v4
	switch {
	case client.Is4():
		a4 := client.As4()
		copy(a.b[:], a4[:])
	case client.Is6():
		t = &r.v6
		a.b = client.As16()
	default:
		return a
	}
	if t.table == nil {
		return a
	}
	i := uint32(a.b[0])<<8 | uint32(a.b[1])
	a.t, a.ref, a.d = t, i, -1
	prefetch(unsafe.Pointer(&t.table[i]))
	prefetch(unsafe.Pointer(&t.depth[i]))
	return a
}

// Step reads what the previous step fetched (the table entry, or the
// node it led to) and asks for the next node on the client's path; at a
// leaf, or when a has nothing to walk, it does nothing.
func (a *Ahead) Step() {
	t := a.t
	if t == nil {
		return
	}
	if a.d < 0 {
		i := a.ref
		a.ref, a.d = t.table[i], int(t.depth[i])
	} else {
		bit := uint32(a.b[a.d>>3]>>(7-uint(a.d&7))) & 1
		a.ref = t.nodes[2*a.ref+bit]
		a.d++
	}
	if a.ref&leafBit != 0 || a.d >= t.bits {
		a.t = nil // done
		return
	}
	prefetch(unsafe.Pointer(&t.nodes[2*a.ref])) // both children: one aligned pair
}
