package geo

import (
	"fmt"
	"sync"
	"sync/atomic"

	maxminddb "github.com/oschwald/maxminddb-golang/v2"
	"net/netip"
	"sort"
)

// Partition is a Set compiled once: the address space split into the
// networks over which every database's answer is the same, each with its
// Info. Compiling several policies against a Set looks their clients up
// here (a binary search) instead of walking and decoding the databases
// once per policy: the databases are walked once per build.
type Partition struct {
	v4    []leaf4 // sorted by start
	v6    []leaf6
	infos []Info
	index map[infoKey]uint32 // while building
	// v4in6: IPv6 addresses in ::/96 are answered from the IPv4 leaves
	// (an IPv6 database keeps IPv4 there), their bits counted from ::.
	v4in6 bool
}

type leaf4 struct {
	start uint32
	info  uint32
	bits  uint8
}

type leaf6 struct {
	hi, lo uint64
	info   uint32
	bits   uint8
}

// infoKey is Info without Networks, to deduplicate infos.
type infoKey struct {
	country, continent, subdivision string
	city                            string
	asn                             uint32
	lat, lon                        float64
	hasLoc, centroid                bool
}

// Partition compiles s (a walk over every database). skip names IPv6
// space never looked up (it is left as one leaf). The result is not kept
// by s: a build that compiles several policies makes one and drops it, so
// it costs memory only while compiling. It runs on up to workers
// goroutines.
func (s *Set) Partition(skip func(netip.Prefix) bool, workers int) (*Partition, error) {
	if len(s.DBs) == 1 {
		// One database: its own list of networks, in one pass, instead of
		// a lookup per prefix of the walk; read from its tree, else with
		// the reader.
		d := s.DBs[0]
		if sharing.Load() {
			if p, ok := shared.Load(d.Sum); ok {
				return p.(*Partition), nil
			}
		}
		p, ok, err := d.treePartition(workers)
		if err == nil && !ok {
			p, ok, err = d.networksPartition()
		}
		if err != nil {
			return nil, err
		}
		if ok {
			if sharing.Load() {
				shared.Store(d.Sum, p)
			}
			return p, nil
		}
	}
	return s.buildPartition(skip)
}

var (
	sharing atomic.Bool
	shared  sync.Map // a database's Sum -> its *Partition
)

// SharePartitions makes Partition keep the partition of each single
// database it compiles, by the database's bytes (Sum), and return it to
// every later build against the same bytes, for the rest of the process.
// For test processes that start many nodes against one database (the
// partition of the embedded one is 0.15 s of CPU, 0.8 s under the race
// detector): a server keeps the default, a partition held only while a
// build compiles. A Partition is immutable once built, so builds may
// share one.
func SharePartitions() { sharing.Store(true) }

// intern returns the index of info in p, adding it when new.
func (p *Partition) intern(info *Info) uint32 {
	k := infoKey{info.Country, info.Continent, info.Subdivision, info.City, info.ASN, info.Lat, info.Lon, info.HasLocation, info.LocationIsCentroid}
	if i, ok := p.index[k]; ok {
		return i
	}
	i := uint32(len(p.infos))
	p.infos = append(p.infos, Info{Country: info.Country, Continent: info.Continent, Subdivision: info.Subdivision, City: info.City,
		ASN: info.ASN, Lat: info.Lat, Lon: info.Lon, HasLocation: info.HasLocation, LocationIsCentroid: info.LocationIsCentroid})
	p.index[k] = i
	return i
}

func (p *Partition) leaf(a netip.Addr, info uint32, bits int) {
	if a.Is4() {
		b := a.As4()
		p.v4 = append(p.v4, leaf4{start: uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), info: info, bits: uint8(bits)})
		return
	}
	hi, lo := split16(a.As16())
	p.v6 = append(p.v6, leaf6{hi: hi, lo: lo, info: info, bits: uint8(bits)})
}

// countNodes is the largest database whose networks are counted before
// they are listed (see networksPartition).
const countNodes = 2 << 20

// networksPartition lists d's networks, with and without data, aliases
// included, in address order: the same facts and uniform prefix lengths
// as lookups give. ok is false when the tree is not of the expected shape
// (then the caller walks instead).
func (d *Database) networksPartition() (p *Partition, ok bool, err error) {
	p = &Partition{index: map[infoKey]uint32{}, v4in6: d.IPVersion == 6}
	var empty Info
	empty.finish()
	emptyIdx := p.intern(&empty)
	// A database of up to countNodes nodes is counted first, so that the
	// lists are made once at their size: grown by appends, a list of a
	// million networks holds its old copies too, which was a third of
	// the start-up peak of a one-policy configuration on the embedded
	// database (94 MiB). A larger one is not: the count is a second walk
	// of the tree (0.6 s for 3 M networks), and the copies are a small
	// part of what such a database costs anyway.
	if d.r.Metadata.NodeCount <= countNodes {
		n4, n6 := 0, 0
		for res := range d.r.Networks(maxminddb.IncludeNetworksWithoutData(), maxminddb.IncludeAliasedNetworks()) {
			if res.Err() != nil {
				break // the pass below reports it
			}
			if res.Prefix().Addr().Is4() {
				n4++
			} else {
				n6++
			}
		}
		p.v4, p.v6 = make([]leaf4, 0, n4), make([]leaf6, 0, n6+1)
	}
	byOffset := map[uintptr]uint32{} // a record's offset -> its info's index
	for res := range d.r.Networks(maxminddb.IncludeNetworksWithoutData(), maxminddb.IncludeAliasedNetworks()) {
		if err := res.Err(); err != nil {
			return nil, false, fmt.Errorf("%s: %w", d.Name, err)
		}
		pfx := res.Prefix()
		if !pfx.IsValid() {
			return nil, false, nil
		}
		idx := emptyIdx
		if res.Found() {
			var ok bool
			if idx, ok = byOffset[res.Offset()]; !ok {
				rec, err := d.decode(res)
				if err != nil {
					return nil, false, fmt.Errorf("%s: %w", d.Name, err)
				}
				var info Info
				info.add(&rec)
				info.finish()
				idx = p.intern(&info)
				byOffset[res.Offset()] = idx
			}
		}
		p.leaf(pfx.Addr(), idx, pfx.Bits())
	}
	if d.IPVersion == 4 {
		p.v6 = []leaf6{{info: p.intern(&empty)}} // an IPv4 database knows nothing of IPv6
	}
	p.index = nil
	return p, p.ordered(), nil
}

// ordered reports whether p's lists cover their families from the first
// address, in order; IPv6 from ::1:0:0 when ::/96 holds IPv4.
func (p *Partition) ordered() bool {
	first6 := leaf6{}
	if p.v4in6 {
		first6.lo = 1 << 32
	}
	if len(p.v4) == 0 || p.v4[0].start != 0 || len(p.v6) == 0 || p.v6[0].hi != first6.hi || p.v6[0].lo != first6.lo {
		return false
	}
	for i := 1; i < len(p.v4); i++ {
		if p.v4[i].start <= p.v4[i-1].start {
			return false
		}
	}
	for i := 1; i < len(p.v6); i++ {
		a, b := p.v6[i-1], p.v6[i]
		if b.hi < a.hi || b.hi == a.hi && b.lo <= a.lo {
			return false
		}
	}
	return true
}

func (s *Set) buildPartition(skip func(netip.Prefix) bool) (*Partition, error) {
	p := &Partition{index: map[infoKey]uint32{}}
	var walk func(pfx netip.Prefix) error
	walk = func(pfx netip.Prefix) error {
		info, uniform, err := s.LookupInfo(pfx.Addr())
		if err != nil {
			return err
		}
		if pfx.Addr().Is6() && skip != nil && skip(pfx) {
			// Never looked up inside, but its first address is the first
			// of every prefix above it that starts there: answer that
			// address as the databases do.
			p.leaf(pfx.Addr(), p.intern(&info), uniform)
			return nil
		}
		if uniform <= pfx.Bits() || pfx.Bits() == pfx.Addr().BitLen() {
			p.leaf(pfx.Addr(), p.intern(&info), uniform)
			return nil
		}
		lo, hi := Halves(pfx)
		if err := walk(lo); err != nil {
			return err
		}
		return walk(hi)
	}
	if err := walk(netip.PrefixFrom(netip.IPv4Unspecified(), 0)); err != nil {
		return nil, err
	}
	if err := walk(netip.PrefixFrom(netip.IPv6Unspecified(), 0)); err != nil {
		return nil, err
	}
	p.index = nil
	return p, nil
}

func split16(b [16]byte) (hi, lo uint64) {
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return hi, lo
}

// Halves splits p into its two children (p must be shorter than a host
// prefix): the walks over the address space here and in policy use it.
func Halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits)
	i := p.Bits()
	// Arrays, not AsSlice: a compile's walk splits a prefix at every
	// inner node, and a slice would be allocated each time.
	if p.Addr().Is4() {
		b := p.Addr().As4()
		b[i/8] |= 0x80 >> (i % 8)
		return lo, netip.PrefixFrom(netip.AddrFrom4(b), bits)
	}
	b := p.Addr().As16()
	b[i/8] |= 0x80 >> (i % 8)
	return lo, netip.PrefixFrom(netip.AddrFrom16(b), bits)
}

// LookupInfo is Set.LookupInfo answered from the partition: the same Info
// and uniform prefix length for every address the walk covered.
func (p *Partition) LookupInfo(addr netip.Addr) (Info, int) {
	addr = addr.Unmap()
	if addr.Is4() {
		b := addr.As4()
		a := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		i := sort.Search(len(p.v4), func(i int) bool { return p.v4[i].start > a }) - 1
		l := p.v4[i]
		return p.infos[l.info], int(l.bits)
	}
	hi, lo := split16(addr.As16())
	if p.v4in6 && hi == 0 && lo < 1<<32 {
		info, bits := p.LookupInfo(netip.AddrFrom4([4]byte{byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)}))
		return info, bits + 96
	}
	i := sort.Search(len(p.v6), func(i int) bool {
		l := &p.v6[i]
		return l.hi > hi || l.hi == hi && l.lo > lo
	}) - 1
	l := p.v6[i]
	return p.infos[l.info], int(l.bits)
}

// Leaves returns the number of networks of each family.
func (p *Partition) Leaves() (v4, v6 int) { return len(p.v4), len(p.v6) }

// Cursor looks addresses up in a Partition in ascending order, as a
// compile's walk visits them: each lookup moves forward from the last one
// (a lookup below it starts over with a binary search).
type Cursor struct {
	p      *Partition
	i4, i6 int
}

// Cursor returns a new cursor at the start of the partition.
func (p *Partition) Cursor() *Cursor { return &Cursor{p: p} }

// Infos returns the number of distinct infos (the range of Lookup's index).
func (p *Partition) Infos() int { return len(p.infos) }

// Lookup is LookupInfo with the info's index in the partition (equal
// indexes, equal infos); the Info must not be modified.
func (c *Cursor) Lookup(addr netip.Addr) (*Info, uint32, int) {
	addr = addr.Unmap()
	if addr.Is4() {
		b := addr.As4()
		return c.Lookup4(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	}
	return c.Lookup6(split16(addr.As16()))
}

// Lookup4 is Lookup of the IPv4 address a.
func (c *Cursor) Lookup4(a uint32) (*Info, uint32, int) {
	p := c.p
	if p.v4[c.i4].start > a {
		c.i4 = sort.Search(len(p.v4), func(i int) bool { return p.v4[i].start > a }) - 1
	}
	for c.i4+1 < len(p.v4) && p.v4[c.i4+1].start <= a {
		c.i4++
	}
	l := &p.v4[c.i4]
	return &p.infos[l.info], l.info, int(l.bits)
}

// Lookup6 is Lookup of the IPv6 address whose high and low 64 bits are
// hi and lo (an IPv4-mapped one is not unmapped).
func (c *Cursor) Lookup6(hi, lo uint64) (*Info, uint32, int) {
	p := c.p
	if p.v4in6 && hi == 0 && lo < 1<<32 {
		info, idx, bits := c.Lookup4(uint32(lo))
		return info, idx, bits + 96
	}
	after := func(l *leaf6) bool { return l.hi > hi || l.hi == hi && l.lo > lo }
	if after(&p.v6[c.i6]) {
		c.i6 = sort.Search(len(p.v6), func(i int) bool { return after(&p.v6[i]) }) - 1
	}
	for c.i6+1 < len(p.v6) && !after(&p.v6[c.i6+1]) {
		c.i6++
	}
	l := &p.v6[c.i6]
	return &p.infos[l.info], l.info, int(l.bits)
}
