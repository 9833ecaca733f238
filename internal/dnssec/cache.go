package dnssec

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/miekg/dns"
)

// CacheKey names what a cached signature covers: an owner name (canonical),
// a type, and a digest of the data (an NSEC's type bitmap, an answer
// set's addresses).
type CacheKey struct {
	Name string
	Type uint16
	Sum  uint64
}

// Entry is one cached signed RRset: the records and their RRSIGs, and, for
// the fast path, the RRSIGs' RDATA in wire form.
type Entry struct {
	Key CacheKey
	// RRs is the RRset signed (an NSEC, say); nil when the caller holds it.
	RRs  []dns.RR
	Sigs []dns.RR
	// Wire is each RRSIG's RDATA, uncompressed, in Sigs' order.
	Wire [][]byte
	// Refresh is when (Unix seconds) the entry stops being served.
	Refresh uint32
}

// Cache is a fixed-size, direct-mapped cache of signatures made on
// demand: a lookup is a hash, one atomic load and a comparison, with no
// lock and no allocation; an insert replaces whatever held its slot. It
// is safe for concurrent use.
type Cache struct {
	slots []atomic.Pointer[Entry]
	mask  uint64
	seed  maphash.Seed

	hits, misses, inserts atomic.Uint64
}

// DefaultCacheSize is the number of slots of a cache made with size 0.
const DefaultCacheSize = 1 << 16

// NewCache returns a cache of size slots (rounded up to a power of two).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	n := 1
	for n < size {
		n <<= 1
	}
	return &Cache{slots: make([]atomic.Pointer[Entry], n), mask: uint64(n - 1), seed: maphash.MakeSeed()}
}

func (c *Cache) slot(k *CacheKey) *atomic.Pointer[Entry] {
	h := foldHash(c.seed, k.Name) ^ (k.Sum * 0x9E3779B97F4A7C15) ^ uint64(k.Type)<<48
	h ^= h >> 29
	return &c.slots[h&c.mask]
}

// foldHash is the maphash of name lower-cased (ASCII), computed without
// allocating: names of queries come in mixed case (resolvers' 0x20
// randomisation) and share the entries of their canonical form.
func foldHash(seed maphash.Seed, name string) uint64 {
	i := 0
	for i < len(name) && (name[i] < 'A' || name[i] > 'Z') {
		i++
	}
	if i == len(name) {
		return maphash.String(seed, name)
	}
	if len(name) <= 256 {
		var buf [256]byte
		n := copy(buf[:], name)
		lowerASCII(buf[i:n])
		return maphash.Bytes(seed, buf[:n])
	}
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(name[:i])
	var buf [64]byte
	for i < len(name) {
		n := copy(buf[:], name[i:])
		lowerASCII(buf[:n])
		h.Write(buf[:n])
		i += n
	}
	return h.Sum64()
}

func lowerASCII(b []byte) {
	for j, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[j] = c + 'a' - 'A'
		}
	}
}

// foldEqual reports whether a and b are equal but for ASCII case.
func foldEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Get returns the entry for k when it is cached and not due for refresh
// at now (Unix seconds), else nil. Names compare without regard to ASCII
// case: the entry of "www.example.com." serves "WwW.example.COM.".
func (c *Cache) Get(k CacheKey, now uint32) *Entry {
	e := c.slot(&k).Load()
	if e == nil || e.Key.Type != k.Type || e.Key.Sum != k.Sum || !foldEqual(e.Key.Name, k.Name) || now >= e.Refresh {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	return e
}

// Put caches e, replacing the entry that held its slot.
func (c *Cache) Put(e *Entry) {
	c.slot(&e.Key).Store(e)
	c.inserts.Add(1)
}

// Stats returns the cache's hits, misses and inserts so far.
func (c *Cache) Stats() (hits, misses, inserts uint64) {
	return c.hits.Load(), c.misses.Load(), c.inserts.Load()
}
