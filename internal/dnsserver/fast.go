package dnsserver

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/ecs"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/rrl"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/zone"
)

// The fast path answers the queries that make up nearly all traffic (one
// question, class IN, at most an OPT, a name that exists plainly, is
// steered, or does not exist) without allocating: it parses only what an
// authoritative answer needs, copies precompiled wire answers, and writes
// steered records and negative answers directly. It produces exactly the
// bytes the general path produces (a test compares them); anything it is
// not sure of it leaves to the general path by returning nil.

// maxFastLabels bounds the names the fast path handles (its compression
// table lives on the stack).
const maxFastLabels = 16

// fastQuery is a query as the fast path parsed it: the name and its
// labels, which parseFast writes before anything reads them, and the
// rest (fastFields), which it expects zero.
type fastQuery struct {
	name   [256]byte            // lower-case presentation form, "www.example.com."
	labels [maxFastLabels]uint8 // offset of each label in name (and in the wire question)
	fastFields
}

type fastFields struct {
	nameLen int
	nlabels int
	qend    int // offset just past QTYPE and QCLASS in the request
	qtype   uint16
	rd, cd  bool

	opt     bool
	udpSize uint16
	do      bool
	co      bool // Compact Answers OK (RFC 9824): echoed
	// opts lists the options steer answers, in request order (the general
	// path answers them in that order).
	opts   [2]uint16
	nopts  int
	ecs    []byte
	cookie []byte // the COOKIE option's data
}

// plainLower maps a label byte to its lower-case form, or to 0 for a
// byte the general path writes with an escape (control characters,
// space, DEL and above, and . ( ) ; @ " \): one load per byte of the
// name instead of a chain of comparisons.
var plainLower = func() (t [256]byte) {
	for c := 0x21; c < 0x7F; c++ {
		t[c] = byte(c)
		if c >= 'A' && c <= 'Z' {
			t[c] = byte(c) + 'a' - 'A'
		}
	}
	for _, c := range ".();@\"\\" {
		t[c] = 0
	}
	return t
}()

// parseFast reads req for the fast path; ok is false when the general path
// must take it (or reject it).
func parseFast(req []byte, q *fastQuery) bool {
	if len(req) < headerLen+5 || req[2]&0xF8 != 0 || // QR=0, opcode QUERY (TC ignored, as the general path does)
		binary.BigEndian.Uint16(req[4:]) != 1 || binary.BigEndian.Uint16(req[6:]) != 0 ||
		binary.BigEndian.Uint16(req[8:]) != 0 || binary.BigEndian.Uint16(req[10:]) > 1 {
		return false
	}
	q.rd = req[2]&0x01 != 0
	q.cd = req[3]&0x10 != 0
	off := headerLen
	n := 0
	for {
		l := int(req[off])
		if l == 0 {
			off++
			break
		}
		if l > 63 || q.nlabels == maxFastLabels || off+1+l >= len(req) || n+l+1 > 254 {
			return false
		}
		q.labels[q.nlabels] = uint8(n)
		q.nlabels++
		dst := q.name[n : n+l]
		for i, c := range req[off+1 : off+1+l] {
			lc := plainLower[c]
			if lc == 0 {
				return false // written with escapes by the general path
			}
			dst[i] = lc
		}
		n += l
		q.name[n] = '.'
		n++
		off += 1 + l
	}
	if n == 0 || off+4 > len(req) {
		return false // the root, or a truncated question
	}
	q.nameLen = n
	q.qtype = binary.BigEndian.Uint16(req[off:])
	if binary.BigEndian.Uint16(req[off+2:]) != dns.ClassINET {
		return false
	}
	off += 4
	q.qend = off
	if binary.BigEndian.Uint16(req[10:]) == 1 {
		// The OPT: root owner, type 41, version 0, exact option framing.
		if off+11 > len(req) || req[off] != 0 || binary.BigEndian.Uint16(req[off+1:]) != dns.TypeOPT || req[off+6] != 0 {
			return false
		}
		q.opt = true
		q.udpSize = binary.BigEndian.Uint16(req[off+3:])
		q.do = req[off+7]&0x80 != 0
		q.co = req[off+7]&0x40 != 0
		rdlen := int(binary.BigEndian.Uint16(req[off+9:]))
		off += 11
		if off+rdlen != len(req) {
			return false
		}
		rd := req[off : off+rdlen]
		for len(rd) > 0 {
			if len(rd) < 4 {
				return false
			}
			code := binary.BigEndian.Uint16(rd)
			l := int(binary.BigEndian.Uint16(rd[2:]))
			if 4+l > len(rd) {
				return false
			}
			switch code {
			case dns.EDNS0NSID, dns.EDNS0TCPKEEPALIVE:
				if q.nopts == len(q.opts) || (q.nopts == 1 && q.opts[0] == code) {
					return false
				}
				q.opts[q.nopts] = code
				q.nopts++
			case dns.EDNS0SUBNET:
				if q.ecs != nil {
					return false
				}
				q.ecs = rd[4 : 4+l : 4+l]
			case dns.EDNS0COOKIE:
				if q.cookie != nil {
					return false
				}
				q.cookie = rd[4 : 4+l : 4+l]
			}
			rd = rd[4+l:]
		}
		off += rdlen
	}
	return off == len(req)
}

// steerQuery is the query a steered name is decided for, on both paths:
// the client is the ECS subnet when the query carried a usable one, else
// the resolver's address (from).
func steerQuery(subnet *ecs.Subnet, hasECS bool, from netip.Addr) policy.Query {
	var q policy.Query
	setSteerQuery(&q, subnet, hasECS, from)
	return q
}

// setSteerQuery writes steerQuery's query into q, which it zeroes first:
// the fast path's, in place (a 136-byte Query returned by value was
// copied on every steered answer).
func setSteerQuery(q *policy.Query, subnet *ecs.Subnet, hasECS bool, from netip.Addr) {
	*q = policy.Query{Resolver: from.Unmap()}
	var bySubnet bool
	q.Client, q.ClientBits, bySubnet = ecs.Client(subnet, hasECS, from)
	q.NoECS = !bySubnet
}

// fast answers req when it can, into buf; nil means "use the general path".
func (h *Handler) fast(snap *snapshot.Snapshot, req []byte, t Transport, from netip.Addr, buf []byte, st *stats) []byte {
	// A batch's datagrams reuse one fastQuery: zeroing its name for
	// every query was a tenth of the fast path's own time.
	var q *fastQuery
	if st.batch != nil {
		q = &st.batch.q
		q.fastFields = fastFields{}
	} else {
		q = new(fastQuery)
	}
	if !parseFast(req, q) {
		return nil
	}
	switch q.qtype {
	case dns.TypeANY, dns.TypeDS, dns.TypeAXFR, dns.TypeIXFR, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeMAILA, dns.TypeMAILB, dns.TypeNXNAME:
		return nil
	}
	var gd guarded
	h.startGuard(&gd, q.cookie, t, from, st.at())
	if gd.ck.Status == cookie.Malformed {
		return nil // the general path answers FORMERR
	}
	var subnet ecs.Subnet
	hasECS := q.ecs != nil && snap.ECS
	if hasECS && ecs.ParseInto(&subnet, q.ecs, snap.MaxSourceV4, snap.MaxSourceV6) != nil {
		return nil
	}
	name := unsafeString(q.name[:q.nameLen])
	kind, z, node, rec := st.batch.classify(snap, name)
	// A DO query to a signed zone gets RRSIGs: precompiled (static data),
	// pre-signed (steered answers), or, for denial, the general path's.
	signed := q.do && z != nil && z.Signed()

	out := buf[:0]
	scope := -1
	class := rrl.Positive // for rate limiting; the key is the query name
	limitName := name
	switch kind {
	case zone.FastNode:
		if node.Steered() && (q.qtype == dns.TypeA || q.qtype == dns.TypeAAAA) {
			if rec == nil || rec.Type != dns.TypeA {
				return nil
			}
			var pq policy.Query
			setSteerQuery(&pq, &subnet, hasECS, from)
			if !pq.Client.IsValid() {
				return nil
			}
			pq.Qtype = q.qtype
			now := h.timeAt(st.at()).Unix()
			var st policy.Steered
			snap.Live.DecideInto(&st, rec, &pq, now) // as Steerer.Steer
			if st.ServFail {
				return nil
			}
			if st.NoData {
				if signed {
					return nil // denial: the general path
				}
				if st.Rule >= 0 {
					scope = st.Scope
				}
				out = h.negative(out, req, q, z, dns.RcodeSuccess)
				class = rrl.NoData
				break
			}
			scope = st.Scope
			out = header(out, req, q, dns.RcodeSuccess)
			var n int
			var ok bool
			start := len(out)
			if out, n, ok = rec.AppendWire(out, &st.Decision, q.qtype, st.Addrs, st.TTL); !ok {
				return nil
			}
			if signed {
				var sigs int
				if out, sigs = appendSteeredSigs(out, start, snap, rec, q.qtype, st.TTL); sigs == 0 {
					return nil // not signed ahead: the general path signs or truncates
				}
				n += sigs
			}
			binary.BigEndian.PutUint16(out[6:], uint16(n))
			break
		}
		tpl := node.Template(q.qtype)
		if signed {
			tpl = node.TemplateDO(q.qtype)
		}
		if tpl != nil {
			out = append(out, tpl[:headerLen]...)
			out = append(out, req[headerLen:q.qend]...) // the question as sent
			out = append(out, tpl[headerLen:]...)
			binary.BigEndian.PutUint16(out[0:], binary.BigEndian.Uint16(req[0:]))
			out[2] = out[2]&^0x01 | req[2]&0x01 // RD
			out[3] = out[3]&^0x10 | req[3]&0x10 // CD
			if binary.BigEndian.Uint16(tpl[6:]) == 0 {
				class = rrl.NoData
			}
			break
		}
		if signed {
			return nil // denial, or an RRset without a DO template
		}
		out = h.negative(out, req, q, z, dns.RcodeSuccess)
		class = rrl.NoData
	case zone.FastNXDomain:
		if signed {
			return nil // denial: the general path
		}
		out = h.negative(out, req, q, z, dns.RcodeNameError)
		class, limitName = rrl.NXDomain, z.Origin
	default:
		return nil
	}
	if out == nil {
		return nil
	}
	limit := maxTCPSize
	optStart := -1
	if q.opt {
		if hasECS {
			scope = subnet.Scope(scope) // from the decision's to the option's
		}
		optStart = len(out)
		out = appendOPT(out, snap, q, t, gd.reply(), hasECS, &subnet, scope)
	}
	if t == UDP {
		limit = gd.udpLimit(q.opt, q.udpSize)
	}
	if len(out) > limit {
		return nil // the general path truncates
	}
	// Decided last: nothing after it sends the query the general way,
	// which would ask the limiter a second time.
	var ecsAddr netip.Addr
	optScope := 0
	if hasECS {
		ecsAddr, optScope = subnet.Addr, scope
	}
	switch gd.limit(t, from, class, limitName, q.qtype, ecsAddr, optScope, st) {
	case rrl.Drop:
		st.qtype, st.cookie, st.guarded, st.reqLen = q.qtype, gd.ck.Status, true, len(req)
		return buf[:0:0] // not nil: that would mean "use the general path"
	case rrl.Slip:
		out = slipWire(out, q.qend, optStart, gd.clientCookie())
	}
	st.cookie, st.guarded, st.reqLen = gd.ck.Status, true, len(req)
	st.qtype = q.qtype
	if hasECS {
		st.noteECS(q.ecs, &subnet, nil)
		st.scope = scope
	} else {
		st.noteECS(nil, nil, nil) // none, or ECS turned off: ignored
	}
	return out
}

// appendSteeredSigs writes, after the steered records AppendWire wrote at
// out[start:], the RRSIGs snap pre-signed over that set (found by the sum
// of the records' RdataSums), owner compressed to the question and with
// the TTL the records carry, as the general path packs them. It returns 0
// signatures when the set was not signed ahead. It does not allocate.
func appendSteeredSigs(out []byte, start int, snap *snapshot.Snapshot, rec *policy.Record, qtype uint16, ttl uint32) ([]byte, int) {
	var sum uint64
	for off := start; off+12 <= len(out); {
		l := int(binary.BigEndian.Uint16(out[off+10:]))
		sum += dnssec.RdataSum(out[off+12 : off+12+l])
		off += 12 + l
	}
	e := snap.Presigned.LookupRecord(rec, qtype, sum)
	if e == nil {
		return out, 0
	}
	for _, w := range e.Wire {
		out = append(out, 0xC0, 0x0C, 0, byte(dns.TypeRRSIG), 0, 1,
			byte(ttl>>24), byte(ttl>>16), byte(ttl>>8), byte(ttl), byte(len(w)>>8), byte(len(w)))
		out = append(out, w...)
	}
	return out, len(e.Wire)
}

// header starts a response: the request's ID, QR, AA, RD and CD copied,
// the question as sent, and counts for one question.
func header(out, req []byte, q *fastQuery, rcode int) []byte {
	out = append(out, req[0], req[1], 0x80|0x04|req[2]&0x01, req[3]&0x10|byte(rcode), 0, 1, 0, 0, 0, 0, 0, 0)
	return append(out, req[headerLen:q.qend]...)
}

// negative writes a NODATA or NXDOMAIN answer: the zone's SOA in the
// authority section, with names compressed exactly as miekg/dns does it
// for the general path (longest suffix already written, first occurrence).
func (h *Handler) negative(out, req []byte, q *fastQuery, z *zone.Zone, rcode int) []byte {
	neg := z.Negative()
	if !neg.OK {
		return nil
	}
	out = header(out, req, q, rcode)
	out[9] = 1 // NSCOUNT
	var ct compTable
	for i := 0; i < q.nlabels; i++ {
		ct.start[i], ct.qoff[i] = int(q.labels[i]), headerLen+int(q.labels[i])
	}
	ct.nq = q.nlabels
	qname := q.name[:q.nameLen]
	out = ct.appendName(out, qname, neg.Apex)
	out = append(out, 0, byte(dns.TypeSOA), 0, 1, byte(neg.TTL>>24), byte(neg.TTL>>16), byte(neg.TTL>>8), byte(neg.TTL), 0, 0)
	rdStart := len(out)
	out = ct.appendName(out, qname, neg.Mname)
	out = ct.appendName(out, qname, neg.Rname)
	out = append(out, neg.Tail[:]...)
	binary.BigEndian.PutUint16(out[rdStart-2:], uint16(len(out)-rdStart))
	if ct.overflow {
		return nil
	}
	return out
}

// appendOPT writes the response OPT as the general path does: our UDP
// size, version 0, DO and CO echoed, NSID and TCP keepalive in request order,
// the cookie (when ck is not empty), then ECS with sc, the scope as the
// option carries it.
func appendOPT(out []byte, snap *snapshot.Snapshot, q *fastQuery, t Transport, ck []byte, hasECS bool, s *ecs.Subnet, sc int) []byte {
	arcount := binary.BigEndian.Uint16(out[10:])
	binary.BigEndian.PutUint16(out[10:], arcount+1)
	var flags byte
	if q.do {
		flags = 0x80
	}
	if q.co {
		flags |= 0x40
	}
	out = append(out, 0, 0, byte(dns.TypeOPT), byte(AdvertisedUDPSize>>8), byte(AdvertisedUDPSize&0xFF), 0, 0, flags, 0, 0, 0)
	rdStart := len(out)
	for _, code := range q.opts[:q.nopts] {
		switch code {
		case dns.EDNS0NSID:
			if id := snap.Identity; id != "" {
				out = append(out, 0, byte(dns.EDNS0NSID), byte(len(id)>>8), byte(len(id)))
				out = append(out, id...)
			}
		case dns.EDNS0TCPKEEPALIVE:
			if t == TCP {
				v := uint16(min(snap.TCPIdleTimeout.Milliseconds()/100, 0xFFFF))
				out = append(out, 0, byte(dns.EDNS0TCPKEEPALIVE), 0, 2, byte(v>>8), byte(v))
			}
		}
	}
	if len(ck) > 0 {
		out = append(out, 0, byte(dns.EDNS0COOKIE), byte(len(ck)>>8), byte(len(ck)))
		out = append(out, ck...)
	}
	if hasECS {
		n := (s.SourceBits + 7) / 8
		out = append(out, 0, byte(dns.EDNS0SUBNET), byte((4+n)>>8), byte(4+n), byte(s.Family>>8), byte(s.Family), byte(s.SourceBits), byte(sc))
		switch s.Family {
		case ecs.FamilyIPv4:
			a := s.Addr.As4()
			out = append(out, a[:n]...)
		case ecs.FamilyIPv6:
			a := s.Addr.As16()
			out = append(out, a[:n]...)
		}
	}
	binary.BigEndian.PutUint16(out[rdStart-2:], uint16(len(out)-rdStart))
	return out
}

// compTable is miekg/dns's name compression map for the few names of a
// negative answer, on the stack. An entry is a suffix of the question name
// (q.name[start:]) or a string from the zone.
type compTable struct {
	start    [maxFastLabels]int // question suffixes
	qoff     [maxFastLabels]int
	nq       int
	names    [8]string // names written after the question
	offs     [8]int
	n        int
	overflow bool
}

func (t *compTable) find(qname []byte, s string) (int, bool) {
	for i := 0; i < t.nq; i++ {
		if string(qname[t.start[i]:]) == s {
			return t.qoff[i], true
		}
	}
	for i := 0; i < t.n; i++ {
		if t.names[i] == s {
			return t.offs[i], true
		}
	}
	return 0, false
}

// appendName packs the presentation name s (absolute, no escapes) the way
// miekg/dns's packDomainName does with compression on: at each label, a
// pointer to an earlier occurrence of the rest of the name, or the label
// written and the rest remembered.
func (t *compTable) appendName(out []byte, qname []byte, s string) []byte {
	if s == "." {
		return append(out, 0)
	}
	begin := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		if p, ok := t.find(qname, s[begin:]); ok {
			return append(out, byte(0xC0|p>>8), byte(p))
		}
		if len(out) < 1<<14 {
			if t.n == len(t.names) {
				t.overflow = true
			} else {
				t.names[t.n], t.offs[t.n] = s[begin:], len(out)
				t.n++
			}
		}
		out = append(out, byte(i-begin))
		out = append(out, s[begin:i]...)
		begin = i + 1
	}
	return append(out, 0)
}

// unsafeString views b as a string without copying; b must not change
// while the string is in use (the fast path's stack buffers do not).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// nameMemo is the last name a batch's fast path classified, with what
// the snapshot says of it: the datagrams of a batch mostly ask for the
// same few names (a benchmark's all for one), and comparing a name costs
// less than hashing it into the zone's and the policies' tables. It
// holds the snapshot only until the batch ends (batch.start clears it).
type nameMemo struct {
	snap *snapshot.Snapshot
	name [256]byte
	n    int
	kind zone.FastKind
	z    *zone.Zone
	node *zone.Node
	rec  *policy.Record // node's steered record (nil: none or not steered)
}

// classify is snap.Zones.Classify(name) and, for a steered node, its
// record, remembered for the next query of the batch b (nil: no batch).
func (b *batch) classify(snap *snapshot.Snapshot, name string) (zone.FastKind, *zone.Zone, *zone.Node, *policy.Record) {
	if b != nil && b.memo.snap == snap && string(b.memo.name[:b.memo.n]) == name {
		return b.memo.kind, b.memo.z, b.memo.node, b.memo.rec
	}
	kind, z, node := snap.Zones.Classify(name)
	var rec *policy.Record
	if kind == zone.FastNode && node.Steered() {
		rec = snap.Policies.Get(node.Name())
	}
	if b != nil {
		m := &b.memo
		m.snap, m.n, m.kind, m.z, m.node, m.rec = snap, copy(m.name[:], name), kind, z, node, rec
	}
	return kind, z, node, rec
}
