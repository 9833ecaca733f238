package zone

import (
	"net"
	"unsafe"

	"github.com/miekg/dns"
)

// A hosting provider's small zones are parsed one after another, and what
// each keeps (its nodes, RRsets, records and names, a few small blocks a
// zone) was allocated among the much larger garbage of its parse: the
// lexer's tokens, the records of the types kept in wire form, the blocks
// a grouping outgrew. Once that garbage was collected, the spans that
// held it stayed in use for the few live objects each: at 10,000 zones of
// ten records the heap in use was 61 MiB for 44 MiB live, 1.7 KB a zone
// beside the 2.7 KB it holds. Precompile therefore copies what a small
// zone keeps into blocks it shares with the other small zones of the same
// Precompile (compactor), so that the parse's blocks are garbage whole
// and go back to the system, and a zone's parts lie together. The copy
// is also exact: no block's unused tail (a 256-byte block of names for
// a zone's 60 bytes of them).
//
// Like the templates' blocks (see Precompile), a block lives while any
// zone copied into it does: a reload that replaces some of the zones
// holds their old copies until their neighbours are replaced too, at
// most one old copy of each zone (those of a reload share the reload's
// blocks, let go with the next change).

// compactor holds the blocks small zones are copied into.
type compactor struct {
	nodes slab[node]
	sets  slab[rrset]
	rrs   slab[dns.RR]
	slots slab[*node]
	strs  slab[string]
	bytes []byte
	soa   slab[dns.SOA]
	ns    slab[dns.NS]
	mx    slab[dns.MX]
	cname slab[dns.CNAME]
	a     slab[dns.A]
	aaaa  slab[dns.AAAA]
	txt   slab[dns.TXT]
	ptr   slab[dns.PTR]
	srv   slab[dns.SRV]
}

// compactable reports whether z is a zone compact copies: a small,
// unsigned zone precompiled whole (not one sharing its base's nodes).
func (z *Zone) compactable() bool {
	return z.Failed == "" && z.signer == nil && z.pre == nil && z.steerSigner == nil &&
		z.chunks == nil && z.base == nil && z.apex != nil && z.nodes.len() <= smallZoneNodes
}

// zone copies the nodes of z, and everything they hold but their
// templates (in shared blocks already), into the compactor's blocks, and
// makes them z's. It must run once z is precompiled, before it is
// published.
func (c *compactor) zone(z *Zone) {
	// Names longest first: the name of a node often ends another's (an
	// apex, a host's parent), and is then that one's tail.
	var olds, news [smallZoneNodes]*node
	order := olds[:0]
	for _, n := range z.nodes.slots {
		if n != nil {
			order = append(order, n)
		}
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && len(order[j].name) > len(order[j-1].name); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var names [smallZoneNodes]string
	for i, n := range order {
		names[i] = c.name(n.name, names[:i])
	}
	// The old node of each copy: copied[i] is the copy of order[i].
	copied := news[:len(order)]
	for i, n := range order {
		nn := &c.nodes.one(*n)[0]
		nn.name = names[i]
		if len(n.rrsets) > 0 {
			nn.rrsets = c.sets.many(len(n.rrsets))
			for k := range n.rrsets {
				nn.rrsets[k] = c.set(n.rrsets[k], nn.name, names[:len(order)])
			}
		}
		copied[i] = nn
	}
	copyOf := func(n *node) *node {
		for i, o := range order {
			if o == n {
				return copied[i]
			}
		}
		return nil
	}
	slots := c.slots.many(len(z.nodes.slots))
	for i, n := range z.nodes.slots {
		if n != nil {
			slots[i] = copyOf(n)
		}
	}
	z.nodes.slots = slots
	z.apex = copyOf(z.apex)
	if s := z.apex.set(dns.TypeSOA); s != nil && !s.inWire() && len(s.list()) == 1 {
		if soa, ok := s.list()[0].(*dns.SOA); ok {
			z.SOA = soa
		}
	}
	if z.NegSOA != nil {
		neg := c.soa.ptr(z.NegSOA)
		neg.Hdr.Name, neg.Ns, neg.Mbox = z.SOA.Hdr.Name, z.SOA.Ns, z.SOA.Mbox
		z.NegSOA = neg
		z.negWire = negativeSOA(z)
	}
	if len(z.files) == 1 && z.files[0] == z.File {
		z.files = c.strs.one(z.File)
	}
}

// name returns s copied into the compactor's bytes, or the tail of one
// of done (names copied already) that ends with it.
func (c *compactor) name(s string, done []string) string {
	for _, d := range done {
		if len(d) >= len(s) && d[len(d)-len(s):] == s && (len(d) == len(s) || d[len(d)-len(s)-1] == '.') {
			return d[len(d)-len(s):]
		}
	}
	return c.str(s)
}

// target returns the domain name s as one of a zone's node names (names,
// copied already) when it is one, else copied.
func (c *compactor) target(s string, names []string) string {
	for _, d := range names {
		if d == s {
			return d
		}
	}
	return c.name(s, names)
}

// str returns s copied into the compactor's bytes.
func (c *compactor) str(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > 256 {
		return string(append([]byte(nil), s...))
	}
	if len(c.bytes)+len(s) > cap(c.bytes) {
		c.bytes = make([]byte, 0, nextBlock(cap(c.bytes), 512, 64<<10, len(s)))
	}
	start := len(c.bytes)
	c.bytes = append(c.bytes, s...)
	// The block is only ever appended to: the bytes of a string handed
	// out are never written again.
	return unsafe.String(&c.bytes[start], len(s))
}

// ip returns ip copied into the compactor's bytes (4 bytes for IPv4).
func (c *compactor) ip(ip net.IP) net.IP {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	if len(ip) == 0 {
		return ip
	}
	s := c.str(string(ip))
	return net.IP(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// set returns s with its records, when it holds a slice of them, copied
// (each named owner); an RRset kept in wire form points into the
// templates' blocks, shared already.
func (c *compactor) set(s rrset, owner string, names []string) rrset {
	l := s.list()
	if l == nil {
		return s
	}
	out := c.rrs.many(len(l))
	for i, rr := range l {
		out[i] = c.record(rr, owner, names)
	}
	s.setList(out)
	return s
}

// record returns a copy of rr in the compactor's blocks, for the types
// small zones are made of; another type's record is kept as it is.
func (c *compactor) record(rr dns.RR, owner string, names []string) dns.RR {
	var h *dns.RR_Header
	switch r := rr.(type) {
	case *dns.SOA:
		n := c.soa.ptr(r)
		n.Ns, n.Mbox = c.target(r.Ns, names), c.target(r.Mbox, names)
		rr, h = n, &n.Hdr
	case *dns.NS:
		n := c.ns.ptr(r)
		n.Ns = c.target(r.Ns, names)
		rr, h = n, &n.Hdr
	case *dns.MX:
		n := c.mx.ptr(r)
		n.Mx = c.target(r.Mx, names)
		rr, h = n, &n.Hdr
	case *dns.CNAME:
		n := c.cname.ptr(r)
		n.Target = c.target(r.Target, names)
		rr, h = n, &n.Hdr
	case *dns.PTR:
		n := c.ptr.ptr(r)
		n.Ptr = c.target(r.Ptr, names)
		rr, h = n, &n.Hdr
	case *dns.SRV:
		n := c.srv.ptr(r)
		n.Target = c.target(r.Target, names)
		rr, h = n, &n.Hdr
	case *dns.A:
		n := c.a.ptr(r)
		n.A = c.ip(r.A)
		rr, h = n, &n.Hdr
	case *dns.AAAA:
		n := c.aaaa.ptr(r)
		n.AAAA = c.ip(r.AAAA)
		rr, h = n, &n.Hdr
	case *dns.TXT:
		n := c.txt.ptr(r)
		n.Txt = c.strs.many(len(r.Txt))
		for i, t := range r.Txt {
			n.Txt[i] = c.str(t)
		}
		rr, h = n, &n.Hdr
	default:
		return rr
	}
	if h.Name == owner || dns.CanonicalName(h.Name) == owner {
		h.Name = owner
	}
	return rr
}
