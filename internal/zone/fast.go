package zone

import (
	"strings"

	"github.com/miekg/dns"
)

// This file serves the query fast path: a lookup that neither allocates
// nor follows chains, and answers precompiled to wire format. Whatever it
// cannot answer exactly (CNAME and DNAME chains, wildcards, referrals,
// ANY, DS) it leaves to Lookup.

// Node is a name in a zone, as the fast path sees it.
type Node = node

// FastKind says how the fast path may answer a name.
type FastKind uint8

// The outcomes of Classify.
const (
	// FastNone: only the general lookup answers this name exactly.
	FastNone FastKind = iota
	// FastNode: the name exists as a plain node (no delegation, CNAME or
	// DNAME on the way); see Node.Template and Node.Steered.
	FastNode
	// FastNXDomain: the name does not exist and no wildcard covers it.
	FastNXDomain
)

// Classify finds name (lower case, absolute, presentation form without
// escapes) for the fast path. It does not allocate.
func (s *Set) Classify(name string) (FastKind, *Zone, *Node) {
	z := s.Find(name)
	// A failed zone has no apex: the general path answers its SERVFAIL.
	if z == nil || z.apex == nil || z.Origin == "." {
		return FastNone, nil, nil
	}
	cur := z.apex
	// name[:rest] holds the labels below cur, each followed by its dot.
	for rest := len(name) - len(z.Origin); rest > 0; {
		if cur != z.apex && cur.cut || cur.dname != nil {
			return FastNone, z, nil
		}
		j := strings.LastIndexByte(name[:rest-1], '.') + 1
		n := z.nodes[name[j:]]
		if n == nil {
			if cur.wildChild {
				return FastNone, z, nil // RFC 4592 synthesis: the general path
			}
			return FastNXDomain, z, nil
		}
		cur, rest = n, j
	}
	if !cur.plain {
		return FastNone, z, nil
	}
	return FastNode, z, cur
}

// Steered reports whether the node's address records come from steering.
func (n *node) Steered() bool { return n.steered }

// Name returns the node's owner name (canonical).
func (n *node) Name() string { return n.name }

// Template returns the precompiled positive answer for qtype at this node:
// a whole DNS message (header, question in lower case, answer, authority
// and additional sections, no OPT) as the general path packs it; nil when
// the node has no RRset of that type or the answer is not precompiled.
func (n *node) Template(qtype uint16) []byte {
	for i := range n.templates {
		if n.templates[i].qtype == qtype {
			return n.templates[i].wire
		}
	}
	return nil
}

type template struct {
	qtype uint16
	wire  []byte
}

// NegativeSOA is the SOA of negative answers, split for the fast path,
// which writes it with the same name compression as the general path.
type NegativeSOA struct {
	Apex, Mname, Rname string // presentation form
	TTL                uint32
	// Tail is the SOA's serial, refresh, retry, expire and minimum.
	Tail [20]byte
	// OK is false when a name needs escapes, which the fast path does not
	// write: negative answers for the zone then take the general path.
	OK bool
}

// Negative returns the zone's negative-answer SOA for the fast path.
func (z *Zone) Negative() *NegativeSOA { return &z.negWire }

// Precompile packs every plain RRset of every zone of the set into a wire
// template, as the general path would answer it. It must run before the
// set is published (after MarkSteered).
func (s *Set) Precompile() {
	for _, z := range s.list {
		if z.Failed != "" || z.precompiled {
			continue // no data to compile (SERVFAIL), or kept from a reload and published
		}
		z.precompiled = true
		z.negWire = negativeSOA(z)
		for _, n := range z.nodes {
			if strings.HasPrefix(n.name, "*.") {
				if p := z.nodes[n.name[2:]]; p != nil {
					p.wildChild = true
				}
			}
		}
		for _, n := range z.nodes {
			n.templates = nil
			n.plain = !(n.cut || n.occluded || n.cname != nil || n.dname != nil)
			if !n.plain {
				continue
			}
			for _, rs := range n.rrsets {
				if n.steered && (rs.rtype == dns.TypeA || rs.rtype == dns.TypeAAAA) {
					continue
				}
				if rs.rtype == dns.TypeDS {
					continue // DS may be answered from a parent zone
				}
				a := s.Lookup(n.name, rs.rtype)
				m := &dns.Msg{
					MsgHdr:   dns.MsgHdr{Response: true, Authoritative: a.Authoritative, Rcode: a.Rcode},
					Compress: true,
					Question: []dns.Question{{Name: n.name, Qtype: rs.rtype, Qclass: dns.ClassINET}},
					Answer:   a.Answer, Ns: a.Ns, Extra: a.Extra,
				}
				wire, err := m.Pack()
				if err != nil || a.Referral || len(a.Answer) == 0 {
					n.plain = false // answer it the general way
					continue
				}
				n.templates = append(n.templates, template{rs.rtype, wire})
			}
		}
	}
}

func negativeSOA(z *Zone) NegativeSOA {
	soa := z.NegSOA
	if soa == nil {
		return NegativeSOA{}
	}
	ns := NegativeSOA{Apex: z.Origin, Mname: soa.Ns, Rname: soa.Mbox, TTL: soa.Hdr.Ttl}
	t := ns.Tail[:0]
	for _, v := range []uint32{soa.Serial, soa.Refresh, soa.Retry, soa.Expire, soa.Minttl} {
		t = append(t, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	ns.OK = plainName(ns.Apex) && plainName(ns.Mname) && plainName(ns.Rname)
	return ns
}

// plainName reports whether a presentation name has no escapes.
func plainName(s string) bool {
	return !strings.ContainsRune(s, '\\') && dns.IsFqdn(s)
}
